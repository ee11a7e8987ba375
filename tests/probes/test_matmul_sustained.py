"""The matmul's sustained figure: the best size back to back for sustained_s, on the CPU and in
the GPU simulator, and the figure the analysis judges the run by."""

import pytest
from helpers import resolved

torch = pytest.importorskip("torch")

from benchbench.analysis import matmul_rates  # noqa: E402
from benchbench.core.results import ProbeResult, RunResult  # noqa: E402
from benchbench.core.sampling import Budget, RepeatPolicy  # noqa: E402
from benchbench.engine import simulate  # noqa: E402
from benchbench.engine.sim_device import H200  # noqa: E402
from benchbench.machine.environment import torch_facts  # noqa: E402
from benchbench.probes.api import ProbeContext  # noqa: E402
from benchbench.probes.matmul import run as matmul  # noqa: E402


def cpu_ctx(budget=5.0):
    return ProbeContext(device="cpu", policy=RepeatPolicy(min_repeats=3, max_repeats=6,
                                                          target_cv=0.5, warmup_s=0.0),
                        budget=Budget(budget), facts=torch_facts())


def as_run(out):
    return RunResult(tool={}, started_at="", environment={}, config={}, argv=[],
                     probes=[ProbeResult(name="matmul", status="ok", resource="cpu_compute",
                                         measurements=out.measurements)])


def test_the_best_size_runs_sustained_and_the_run_is_judged_by_it():
    cfg = resolved("matmul", sizes=(64, 128), dtypes=("fp32", "bf16"), min_sample_s=0.005,
                   sustained_s=0.3)
    out = matmul.run(cpu_ctx(), cfg)
    peaks = {m.key["dtype"]: m for m in out.measurements if m.metric == "peak_flops"}
    held = {m.key["dtype"]: m for m in out.measurements if m.metric == "sustained_flops"}
    assert set(held) == set(peaks) == {"fp32", "bf16"}
    for dt, m in held.items():
        assert m.key["size"] == peaks[dt].context["best_size"]  # the best size, sustained
        assert m.context["seconds"] >= 0.3 and m.context["window_s"] == matmul.WINDOW_S
        assert len(m.samples) >= 2 and m.unit == "FLOP/s"
        got = matmul_rates.rate(as_run(out), "cpu", dt)
        assert got is not None and got.sustained and got.value == m.value
        assert got.burst_peak == peaks[dt].value


def test_sustained_zero_leaves_it_out_and_the_bursts_median_stands_named_so():
    cfg = resolved("matmul", sizes=(64,), dtypes=("fp32",), min_sample_s=0.005, sustained_s=0.0)
    out = matmul.run(cpu_ctx(), cfg)
    assert not [m for m in out.measurements if m.metric == "sustained_flops"]
    got = matmul_rates.rate(as_run(out), "cpu", "fp32")
    assert got is not None and not got.sustained
    assert got.basis.endswith("bursts at n=64; not timed sustained in this run")


def test_a_sustained_run_the_budget_cannot_hold_is_a_note_not_a_failure():
    cfg = resolved("matmul", sizes=(64,), dtypes=("fp32",), min_sample_s=0.005,
                   sustained_s=30.0)
    out = matmul.run(cpu_ctx(budget=2.0), cfg)
    assert not [m for m in out.measurements if m.metric == "sustained_flops"]
    assert any("not sustained, because 30 s of it would not fit" in n for n in out.notes)


def test_the_simulated_h200_sustains_every_dtype_for_a_second_within_its_budget():
    est = simulate.estimate_run(H200, quick=True)
    p = next(p for p in est.probes if p.name == "matmul")
    held = {m.key["dtype"]: m for m in p.output.measurements if m.metric == "sustained_flops"}
    assert set(held) == {"bf16", "fp8", "fp16", "tf32", "fp32"} and not p.notes
    assert all(m.context["seconds"] >= 1.0 for m in held.values())
    assert p.duration_s <= p.budget_s

