"""The stability probe for real on the CPU, its place in a run's analysis and report, and its
planning at GPU speed."""

from itertools import pairwise

import pytest
from helpers import cpu_facts, render_md, resolved

torch = pytest.importorskip("torch")

from benchbench.analysis import stability  # noqa: E402
from benchbench.core.results import ProbeResult, RunResult  # noqa: E402
from benchbench.core.sampling import Budget, RepeatPolicy  # noqa: E402
from benchbench.engine import simulate  # noqa: E402
from benchbench.probes.api import ProbeContext, ProbeSkipped, RunInputs  # noqa: E402
from benchbench.probes.stability import run as probe  # noqa: E402


def ctx(budget=30.0, previous=None):
    return ProbeContext(device="cpu", policy=RepeatPolicy(min_repeats=1, max_repeats=1),
                        budget=Budget(budget), facts=cpu_facts(),
                        inputs=RunInputs(previous=previous or {}))


def test_a_real_cpu_run_keeps_every_window_and_its_shape():
    out = probe.run(ctx(), resolved("stability", duration_s=1.0, window_s=0.05, size=96))
    (m,) = out.measurements
    assert m.metric == "sustained_flops" and m.unit == "FLOP/s" and m.key["size"] == 96
    # Every window kept: one sample per start, the starts in order and reaching into the second
    # half of the run. How many fit depends on this VM's load (a busy CI neighbour stretches each
    # window, calibrated before), so the count is held to ten, the fewest the probe plans for.
    starts = m.context["window_starts_s"]
    assert len(m.samples) >= 10 and all(v > 0 for v in m.samples)
    assert len(starts) == len(m.samples) == m.context["n_windows"] and starts[0] == 0.0
    assert all(b > a for a, b in pairwise(starts)) and starts[-1] >= 0.5
    assert {"cv", "worst_1pct_ratio", "drift", "drops"} <= set(m.context)


def test_it_runs_the_size_where_matmul_peaked():
    previous = {"matmul": {"measurements": [
        {"metric": "peak_flops", "key": {"device": "cpu", "dtype": "fp32"},
         "context": {"best_size": 128}}]}}
    out = probe.run(ctx(previous=previous), resolved("stability", duration_s=1.2))
    assert out.params["size"] == 128
    assert out.measurements[0].context["size_chosen_by"] == "the matmul probe's best size"


def test_a_short_budget_shortens_it_and_too_short_a_budget_skips_it():
    out = probe.run(ctx(budget=2.0), resolved("stability", duration_s=20.0, size=64))
    assert out.notes and "time budget ran short" in out.notes[0]
    with pytest.raises(ProbeSkipped, match="too little"):
        probe.run(ctx(budget=0.5), resolved("stability", duration_s=20.0, size=64))


def test_the_run_lines_the_windows_up_with_the_telemetry_and_reports_them():
    # 48 windows of 25 ms: under a 2-core machine's other load a window can take several
    # times its length, and 24 of 50 ms once came to fewer than the ten a judgement needs.
    out = probe.run(ctx(), resolved("stability", duration_s=1.2, window_s=0.025, size=96))
    (m,) = out.measurements
    t0 = m.context["t0_monotonic"]
    n = len(m.samples)
    tel = {"t0_monotonic": t0 - 2.0, "t": [2.0 + 0.05 * i for i in range(n)],
           "cpu_util": [0.5] * n, "gpus": {}}
    run = RunResult(tool={}, started_at="t", environment={}, config={}, argv=[], probes=[
        ProbeResult(name="stability", status="ok", resource="cpu_compute",
                    measurements=[m])], extra={"telemetry": {"probes": {"stability": tel}}})
    windows, _ = stability.run_windows(run)
    assert windows[0][0] == pytest.approx(2.0)  # on the telemetry's axis
    j = stability.judge_run(run)
    assert j["judgement"] in ("stable", "noisy") and j["aligned"]
    text = render_md(run)
    assert "## Stability" in text and f"**{j['judgement']}**" in text


def test_at_gpu_speed_it_runs_its_minute_inside_its_budget():
    sim = simulate.simulate_probe(simulate.H200, "stability", quick=False, budget_s=75.0)
    (m,) = sim.measurements
    assert 55 <= sim.duration_s <= 75.0 and len(m.samples) >= 500
    quick = simulate.simulate_probe(simulate.H200, "stability", quick=True, budget_s=18.0)
    assert quick.duration_s <= 8.0
