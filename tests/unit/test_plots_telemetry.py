"""The telemetry timeline drawn from run.extra["telemetry"] in the exact shape the sampler
stores: interval_s once at the top, per-probe times that restart at zero."""

import pytest

from benchbench.core.results import RunResult
from benchbench.reports import plots, plots_telemetry

PNG = b"\x89PNG\r\n\x1a\n"

pytest.importorskip("matplotlib")


def probe(n: int, util: float) -> dict:
    """One probe's entry as telemetry.store() writes it; no interval_s in here."""
    return {"t": [round(0.1 * (i + 1), 3) for i in range(n)],  # restarts for every probe
            "cpu_util": [0.4] * n, "cpu_util_per_core": [[0.3, 0.5]] * n,
            "disk_read_Bps": [0] + [1.5e8] * (n - 1), "host_memory_used_B": [8e9] * n,
            "gpus": {"0": {"util": [util] * n, "sm_clock_Hz": [1.98e9] * n,
                           "power_W": [300.0 + i for i in range(n)], "temp_degC": [55.0] * n,
                           "throttle": [[]] * (n - 1) + [["power cap"]]}},
            "downsampled_by": 1, "samples": n}


def stored(interval_s: float = 0.1) -> dict:
    return {"interval_s": interval_s,
            "probes": {"matmul": probe(20, 0.95), "resnet50": probe(15, 0.8)},
            "flags": {"matmul": ["GPU 0 power-capped during 5% of the probe"]},
            "source": {"cpu": "psutil", "gpu": "NVML", "disks": ["nvme0n1"]}}


def test_the_stored_shape_draws_the_telemetry_png():
    assert plots_telemetry.telemetry(stored()).startswith(PNG)
    run = RunResult(tool={"name": "benchbench", "version": "0.1.0"}, started_at="2026-11-30",
                    environment={}, config={}, argv=[], probes=[],
                    extra={"telemetry": stored()})
    problems: list[str] = []
    figs = plots.make(run, None, problems)
    assert problems == []
    assert list(figs) == ["telemetry"] and figs["telemetry"].startswith(PNG)


def test_probes_are_laid_end_to_end_a_run_wide_interval_apart(monkeypatch):
    gaps = []
    timeline = plots_telemetry._timeline

    def spy(probes, gap):
        gaps.append(gap)
        return timeline(probes, gap)

    monkeypatch.setattr(plots_telemetry, "_timeline", spy)
    assert plots_telemetry.telemetry(stored(interval_s=0.25)).startswith(PNG)
    assert gaps == [0.25]  # from the top level, where the sampler stores it
    (first, x1, _), (second, x2, _) = timeline(stored()["probes"], 0.25)
    assert (first, second) == ("matmul", "resnet50")
    assert x1[0] == 0.0 and x2[0] == pytest.approx(x1[-1] + 0.25)  # each from its own start


def test_every_entry_is_drawn_where_it_ran_on_the_runs_clock():
    """With t0_monotonic (what the runner stores) each entry lies where it ran, the gaps
    between probes kept, in the order they ran; a later round's entry, under its probe's name
    and round, after the first rounds."""
    tel = stored()
    tel["probes"]["matmul"]["t0_monotonic"] = 100.0
    tel["probes"]["resnet50"]["t0_monotonic"] = 105.0
    tel["probes"]["matmul (round 2)"] = {**probe(10, 0.9), "t0_monotonic": 120.0}
    line = plots_telemetry._timeline(tel["probes"], 0.1)
    assert [(name, x[0]) for name, x, _ in line] == [
        ("matmul", pytest.approx(0.1)), ("resnet50", pytest.approx(5.1)),
        ("matmul (round 2)", pytest.approx(20.1))]
    fig = plots_telemetry.telemetry_figure(tel)
    assert [t.get_text() for t in fig.axes[0].texts] == [
        "matrix multiply", "ResNet50 training", "matrix multiply (round 2)"]
    assert fig.axes[1].get_xlim()[1] == pytest.approx(21.0)


def test_nothing_to_draw_gives_no_png():
    assert plots_telemetry.telemetry(None) is None
    assert plots_telemetry.telemetry({"interval_s": 0.1, "probes": {}, "flags": {},
                                      "source": {}}) is None
    empty = {"t": [0.1, 0.2], "gpus": {}, "downsampled_by": 1, "samples": 2}
    assert plots_telemetry.telemetry({"interval_s": 0.1, "probes": {"x": empty}}) is None
