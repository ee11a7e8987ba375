"""Every plot is whole (issue 30; STYLE.md, "Pictures a person reads"). Each figure that run,
compare, history and fleet draw is built from fixtures (a quick CPU run as it was recorded, a
GPU run with every plot's data, the one-bar and the fewest-runs cases) and, after matplotlib
has laid it out, holds:

- every visible text (tick labels, axis labels, titles, legend entries, annotations) inside
  the picture, two pixels clear of its edge;
- no two texts overlapping (beyond a pixel);
- a text placed on the data inside its axes, every legend outside every axes (clear of data);
- integer axes (runs, nodes, loader workers) with integer ticks only;
- the telemetry's time axis over every probe, on the run's one clock.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from pathlib import Path
from typing import Any

import h100_like
import pytest
from synthetic_runs import cpu_run, environment, gpu_node

from benchbench.analysis import verdict as verdict_mod
from benchbench.analysis.verdict_types import Verdict
from benchbench.compare import align, comparison, fleet, history, sides
from benchbench.core import results
from benchbench.core.results import Measurement, ProbeResult, RunResult
from benchbench.reports import compare_plots, fleet_plots, history_plots, plots, plots_telemetry

pytest.importorskip("matplotlib")

FIXTURE = Path(__file__).parents[1] / "support" / "fixtures" / "results_quick_cpu_plots.json"
TOL = 1.0  # pixels, for overlaps
# A text must also keep clear of the picture's edge: one that touches it reads as cut.
MARGIN = 2.0  # pixels


# --- what the figure shows ----------------------------------------------------------------------

def _drawn_tick_labels(axis: Any) -> tuple[set[int], set[int]]:
    """(ids of every tick label the axis holds, ids of those it draws): matplotlib keeps tick
    objects beyond the view limits and for locations it no longer has, and draws neither."""
    every: set[int] = set()
    drawn: set[int] = set()
    lo, hi = sorted(axis.get_view_interval())
    eps = 1e-9 * max(abs(lo), abs(hi), 1e-300)
    for ticks, locs in ((axis.majorTicks, axis.get_majorticklocs()),
                        (axis.minorTicks, axis.get_minorticklocs())):
        for i, tick in enumerate(ticks):
            labels = (tick.label1, tick.label2)
            every |= {id(t) for t in labels}
            if i < len(locs) and lo - eps <= tick.get_loc() <= hi + eps and tick.get_visible():
                drawn |= {id(t) for t in labels}
    return every, drawn


def texts(fig: Any) -> list[tuple[str, Any]]:
    """(a name for messages, the Text) for every text the figure draws."""
    from matplotlib.text import Text

    fig.canvas.draw()  # lays the figure out, as saving it does
    hidden: set[int] = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            every, drawn = _drawn_tick_labels(axis)
            hidden |= every - (drawn if ax.axison and ax.get_visible() else set())
            if not (ax.axison and ax.get_visible()):
                hidden |= {id(axis.label), id(axis.get_offset_text())}
    out = []
    for t in fig.findobj(Text):
        if id(t) in hidden or not t.get_visible() or not t.get_text().strip():
            continue
        if t.get_alpha() == 0:
            continue
        out.append((repr(t.get_text()), t))
    return out


def extent(fig: Any, t: Any) -> Any:
    return t.get_window_extent(fig.canvas.get_renderer())


def overlap(a: Any, b: Any) -> float:
    """How far two boxes overlap, in pixels along the shorter of the two directions."""
    dx = min(a.x1, b.x1) - max(a.x0, b.x0)
    dy = min(a.y1, b.y1) - max(a.y0, b.y0)
    return min(dx, dy)


def outside(box: Any, frame: Any) -> float:
    """How far a box reaches out of a frame, in pixels."""
    return max(frame.x0 - box.x0, box.x1 - frame.x1, frame.y0 - box.y0, box.y1 - frame.y1)


def problems(fig: Any) -> list[str]:
    """What is cut, overlapping or on the data; [] for a whole picture."""
    found = []
    drawn = texts(fig)
    boxes = [(name, t, extent(fig, t)) for name, t in drawn]
    for name, _, box in boxes:
        if outside(box, fig.bbox) > -MARGIN:
            found.append(f"{name} is cut at the figure's edge ({box.x0:.0f}..{box.x1:.0f} x "
                         f"{box.y0:.0f}..{box.y1:.0f} in {fig.bbox.x1:.0f} x {fig.bbox.y1:.0f})")
    for (na, _, a), (nb, _, b) in itertools.combinations(boxes, 2):
        if overlap(a, b) > TOL:
            found.append(f"{na} overlaps {nb}")
    for ax in fig.axes:
        for t in ax.texts:
            if t.get_visible() and t.get_transform() == ax.transData and t.get_text().strip() \
                    and outside(extent(fig, t), ax.bbox) > TOL:
                found.append(f"{t.get_text()!r} is placed on the data but leaves its axes")
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend()] + list(fig.legends)
    for leg in legends:
        box = leg.get_window_extent(fig.canvas.get_renderer())
        for ax in fig.axes:
            if overlap(box, ax.bbox) > TOL:
                found.append(f"the legend {[t.get_text() for t in leg.get_texts()]} lies on "
                             "the data")
    return found


def integer_ticks(fig: Any) -> list[str]:
    """The drawn tick labels of an integer x axis that are not whole numbers."""
    fig.canvas.draw()  # tick labels get their text when drawn
    bad = []
    for ax in fig.axes:
        _, drawn = _drawn_tick_labels(ax.xaxis)
        for tick in ax.xaxis.majorTicks:
            if id(tick.label1) in drawn and tick.label1.get_text():
                if tick.get_loc() != round(tick.get_loc()) or "." in tick.label1.get_text():
                    bad.append(tick.label1.get_text())
    return bad


def assert_whole(figs: dict[str, Any]) -> None:
    found = [f"{name}: {p}" for name, fig in figs.items() if fig is not None
             for p in problems(fig)]
    assert not found, "\n".join(found)


def built(makers: dict[str, Any]) -> dict[str, Any]:
    return {name: make() for name, make in makers.items()}


# --- the runs -----------------------------------------------------------------------------------

def m(metric: str, key: dict[str, Any], value: float, unit: str, samples: list[float] | None = None,
      **context: Any) -> Measurement:
    return Measurement(metric=metric, key=key, value=value, unit=unit, statistic="median",
                       samples=samples or [value * 0.98, value, value * 1.01],
                       higher_is_better=True, context=context)


def telemetry(probes: dict[str, float], t0: float = 1000.0) -> dict[str, Any]:
    """Each probe's series as the runner stores them: its own times from 0, on the monotonic
    clock from t0_monotonic; the probes a few seconds apart, as worker start-up leaves them."""
    out, start = {}, t0
    for name, seconds in probes.items():
        n = max(2, round(seconds / 0.2))
        t = [round(0.2 * (i + 1), 3) for i in range(n)]
        out[name] = {"t": t, "cpu_util": [0.5 + 0.3 * math.sin(i / 5) for i in range(n)],
                     "disk_read_Bps": [1.5e8 * (i % 7) for i in range(n)],
                     "gpus": {str(g): {"util": [0.97] * n, "sm_clock_Hz": [1.755e9] * n,
                                       "power_W": [690.0 + g] * n, "temp_degC": [60.0 + g] * n}
                              for g in range(2)},
                     "downsampled_by": 2, "samples": 2 * n, "t0_monotonic": start}
        start += seconds + 4.0
    return {"interval_s": 0.1, "probes": out, "flags": {}, "source": {}}


def gpu_run(one_bar: bool = False, datasheet: bool = True) -> RunResult:
    """Every plot's data on an H100-like machine; with one_bar, one precision pair only;
    without datasheet, on a device that has no datasheet peaks (a CPU)."""
    gpu = {"gpu_name": "NVIDIA H100 80GB HBM3"} if datasheet else {}
    pairs = (("fp32", 420.0), ("amp_bf16", 1900.0)) if one_bar else (
        ("fp32", 900.0), ("tf32", 1500.0), ("amp_bf16", 3000.0))
    shapes = {"resnet50": ({"image_size": 224}, "samples/s", 1.0),
              "transformer": ({"preset": "gpt2-small", "seq_len": 1024}, "tokens/s", 90.0)}
    train = [ProbeResult(name=probe, status="ok", resource="gpu_compute", measurements=[
        m("throughput", {"device": "cuda:0", "precision": p, **key}, v * f, unit, **gpu)
        for p, v in pairs]) for probe, (key, unit, f) in shapes.items()
        if probe == "transformer" or not one_bar]
    sizes = [1 << s for s in range(10, 31, 2)]
    ar = ProbeResult(name="allreduce", status="ok", resource="interconnect",
                     params={"backend": "nccl", "world_size": 8}, measurements=[
                         m(metric, {"backend": "nccl", "world_size": 8, "size_bytes": s},
                           s / (1e-5 + s / 3e11) * f, "B/s")
                         for s in sizes for metric, f in (("algbw", 1.0), ("busbw", 1.75))])
    dl = ProbeResult(name="dataloader", status="ok", resource="cpu_dataloading",
                     params={"usable_cores": 48}, measurements=[
                         m("throughput", {"loader": ld, "workers": w, "batch_size": 64},
                           r * min(w + 1, 40), "samples/s")
                         for ld, r in (("torchvision", 150.0), ("dali_cpu", 300.0))
                         for w in (0, 1, 2, 4, 8, 16, 32, 48)])
    windows, tel = h100_like.stability_run([50, 51, 300], cause="brake", seconds=20.0)
    steady = ProbeResult(name="stability", status="ok", resource="gpu_compute", measurements=[
        Measurement(metric="sustained_flops", key={"device": "cuda:0", "dtype": "bf16",
                                                   "size": 8192},
                    value=7.6e14, unit="FLOP/s", statistic="median",
                    samples=[v for _, v in windows], higher_is_better=True,
                    context={"window_s": 0.1, "seconds": 20.0,
                             "window_starts_s": [t for t, _ in windows]})])
    stored = telemetry({"matmul": 6, "memory_bandwidth": 9, "host_device_copy": 5,
                        "stability": 20, "resnet50": 40, "transformer": 30, "allreduce": 12,
                        "dataloader": 25, "storage": 8})
    stored["probes"]["stability"].update(tel)
    return RunResult(tool={"name": "benchbench", "version": "0.1.0"}, started_at="2026-11-30",
                     environment={"host": {"hostname": "gpu-node"}}, config={}, argv=[],
                     probes=[*train, steady, ar, dl], extra={"telemetry": stored})


def unknowns_verdict() -> Verdict:
    """A verdict with a long reason for an unknown capacity and a second workload."""
    v = {"analysis_version": 3, "workload": "resnet50", "unit": "samples/s", "sample": "image",
         "limiting_resource": "host_device_link",
         "capacities": {"gpu_compute": 3000.0, "host_device_link": 1200.0, "storage": 2.1e5,
                        "host_memory": 1.1e6, "cpu_dataloading": 5200.0, "interconnect": None},
         "capacity_details": {"interconnect": {
             "value": None, "status": "unknown", "how": "",
             "missing": "the allreduce probe was skipped, because only one GPU is visible "
                        "to this run and NCCL needs two"}},
         "predicted_accelerator_utilisation": 0.4, "evidence": [], "advice": [],
         "unknown": [], "constraints": [], "first_epoch": None,
         "per_workload": {"transformer": {
             "analysis_version": 3, "workload": "transformer", "unit": "tokens/s",
             "sample": "token", "limiting_resource": "gpu_compute",
             "capacities": {"gpu_compute": 2.7e5, "storage": 9e8}, "evidence": [],
             "advice": [], "unknown": [], "constraints": [], "per_workload": {}}}}
    return Verdict.from_dict(v)


def run_figures(run: RunResult, verdict: Verdict | None) -> dict[str, Any]:
    return built(plots.figures(run, verdict))


# --- run ----------------------------------------------------------------------------------------

def test_every_plot_of_a_recorded_quick_cpu_run_is_whole():
    """The new user's run (issue 30): stability's ticks at ~200 GFLOP/s, the telemetry."""
    run = results.load(FIXTURE)
    figs = run_figures(run, verdict_mod.verdict(run))
    assert {"stability", "telemetry", "capacities"} <= {n for n, f in figs.items() if f}
    assert_whole(figs)


def test_every_plot_of_a_gpu_run_is_whole():
    run = gpu_run()
    figs = run_figures(run, verdict_mod.verdict(run))
    assert all(figs[n] is not None for n in plots.NAMES), figs
    assert_whole(figs)
    assert_whole({"capacities": plots.capacities_figure(unknowns_verdict())})
    assert integer_ticks(figs["loader_workers"]) == []


@pytest.mark.parametrize("datasheet", [True, False])
def test_one_bar_is_drawn_deliberately(datasheet):
    """One precision pair: one short row (measured, and the datasheet's ratio or that there is
    none), not a bar filling the plot; its label whole, in human names."""
    run = gpu_run(one_bar=True, datasheet=datasheet)
    fig = plots.precision_speedups_figure(run)
    assert_whole({"precision_speedups": fig})
    (ax,) = fig.axes
    bars = [p.get_window_extent() for p in ax.patches]
    assert len(bars) == 1 + datasheet and all(b.height <= 0.4 * ax.bbox.height for b in bars)
    (label,) = ax.get_yticklabels()
    assert label.get_text().startswith("transformer training\nbf16 mixed precision")


def test_the_telemetry_spans_every_probe_on_the_runs_clock():
    stored = telemetry({"matmul": 6, "resnet50": 40, "dataloader": 25})
    fig = plots_telemetry.telemetry_figure(stored)
    assert_whole({"telemetry": fig})
    strip, ax = fig.axes[:2]  # the probes' names, then the first series
    lo, hi = ax.get_xlim()
    # matmul from 0 to 6 s, resnet50 from 10 s to 50, the dataloader from 54 s to 79
    assert lo <= 0.0 and 79.0 <= hi <= 79.0 * 1.1
    starts = sorted(line.get_xdata()[0] for line in ax.lines if len(line.get_xdata()) > 2)
    assert starts == pytest.approx([0.2, 10.2, 54.2])
    assert [t.get_text() for t in strip.texts] == ["matrix multiply", "ResNet50 training",
                                                   "data loader"]


# --- compare, history, fleet --------------------------------------------------------------------

def compared(*runs: RunResult) -> comparison.Comparison:
    made = [sides.Side(label="", runs=[r], sources=[r.label or "?"]) for r in runs]
    made[0].baseline = True
    sides.assign_labels(made)
    for s in made:
        s.run = align.pooled_run(s.runs)
    return comparison.compare(made)


def scaled(run: RunResult, f: float, label: str) -> RunResult:
    out = RunResult.from_dict(run.to_dict())
    out.label = label
    for pr in out.probes:
        pr.measurements = [dataclasses.replace(x, value=x.value * f,
                                               samples=[v * f for v in x.samples])
                           for x in pr.measurements]
    return out


@pytest.mark.parametrize("sides_", [2, 4])
def test_every_comparison_plot_is_whole(sides_):
    base = gpu_run()
    base.label = "h100-node-a (driver 550.54.15, CUDA 12.4)"
    others = [scaled(base, 1 - 0.07 * i, f"h100-node-{'bcd'[i - 1]} after the upgrade")
              for i in range(1, sides_)]
    figs = built(compare_plots.figures(compared(base, *others)))
    assert all(figs[n] is not None for n in compare_plots.NAMES)
    assert_whole(figs)
    cpu = built(compare_plots.figures(compared(cpu_run("2026-11-01", label="before"),
                                               cpu_run("2026-11-02", 0.9, label="after"))))
    assert_whole(cpu)


def save_runs(root: Path, n: int, drop_at: int | None = None) -> list[str]:
    for i in range(n):
        d = root / f"r{i:03d}"
        d.mkdir()
        env = environment(driver="550.54.15" if drop_at is None or i < drop_at
                          else "560.28.03")
        base = 0.8 if drop_at is not None and i >= drop_at else 1.0
        results.save(cpu_run(f"2026-10-{i % 28 + 1:02d}T0{i // 28}:00:00+00:00", base=base,
                             rounds=(0.98, 1.0, 1.02), env=env), d / "results.json")
    return [str(root / "r*")]


@pytest.mark.parametrize("n, drop_at", [(3, None), (24, 12)])
def test_every_history_plot_is_whole_with_runs_on_integers(tmp_path, n, drop_at):
    h = history.build(save_runs(tmp_path, n, drop_at))
    figs = built(history_plots.figures(h))
    assert len(figs) >= 5
    assert {name: integer_ticks(f) for name, f in figs.items() if integer_ticks(f)} == {}
    assert_whole(figs)
    if drop_at is not None:  # the driver's change is named, hanging from the axes' top
        assert {name: covered(f) for name, f in figs.items() if covered(f)} == {}


def covered(fig: Any) -> list[str]:
    """The names hanging from the axes' top (the environment's changes) that come down to a
    point of the data, as laid out when saved."""
    import numpy as np

    fig.canvas.draw()
    ax = fig.axes[0]
    names = [t for t in ax.texts if t.get_transform() != ax.transData]
    assert names, "no change is named"
    xy = [c.get_offsets() for c in ax.collections if len(c.get_offsets())]
    xy += [line.get_xydata() for line in ax.lines if line.get_marker() not in (None, "None", "")]
    top = max(ax.transData.transform(np.asarray(p, dtype=float))[:, 1].max() for p in xy)
    return [f"{t.get_text()!r} comes down to {t.get_window_extent().y0:.1f} px, a point is at "
            f"{top:.1f} px" for t in names if t.get_window_extent().y0 < top + 1]


def test_every_fleet_plot_is_whole_with_nodes_on_integers(tmp_path):
    for i in range(6):
        host = f"gpu-node-{i:02d}.cluster.example.org"
        d = tmp_path / host
        d.mkdir()
        kw: dict[str, Any] = {"factor": 1 + 0.01 * ((i * 7) % 5 - 2)}
        if i == 4:
            kw = {"factor": 0.7, "sm_clock": dict.fromkeys(range(8), 1.41e9)}
        if i == 2:
            kw["per_gpu"] = {5: 0.75}
        results.save(gpu_node(host, **kw), d / "results.json")
    f = fleet.build([str(tmp_path / "*")])
    figs = built(fleet_plots.figures(f))
    assert figs and any(e.score.outlier for x in f.measures for e in x.entities)
    assert {name: integer_ticks(f) for name, f in figs.items() if integer_ticks(f)} == {}
    assert_whole(figs)
