"""fp8: the matmul dtype and the transformer precision, skipped with their reasons where they
cannot run (this CPU, a GPU older than Ada, no torchao), planned on the simulated H200, and held
against the buyer's guide's "Transformer Engine saves over 40%"."""

import pytest
from helpers import cpu_facts, resolved

torch = pytest.importorskip("torch")

from benchbench.engine import simulate  # noqa: E402
from benchbench.probes.matmul import run as matmul  # noqa: E402
from benchbench.workloads import _training  # noqa: E402

H200 = simulate.facts_for(simulate.H200)


def test_fp8_on_this_cpu_is_skipped_with_its_reason():
    notes = []
    got = matmul.usable_dtypes("cpu", resolved("matmul").dtypes, notes, cpu_facts())
    assert "fp8" in resolved("matmul").dtypes and "fp8" not in got
    assert "fp8 on cpu skipped, because fp8 needs the tensor cores of a GPU of compute " \
           "capability 8.9 or later (Ada, Hopper)" in notes
    notes = []
    cfg = resolved("transformer", quick=False)
    assert "fp8" in cfg.precisions
    assert "fp8" not in _training.usable_precisions("cpu", cfg.precisions, notes, cpu_facts())
    assert any(n.startswith("fp8 on cpu skipped, because fp8 needs the tensor cores") for n in
               notes)


def test_fp8_on_an_a100_or_without_torchao_is_skipped_with_its_reason(monkeypatch):
    a100 = {**H200, "gpus": [{**H200["gpus"][0], "capability": "8.0"}]}
    notes = []
    assert matmul.usable_dtypes("cuda:0", ("bf16", "fp8"), notes, a100) == ["bf16"]
    assert notes == ["fp8 on cuda:0 skipped, because compute capability 8.0 has no fp8 tensor "
                     "cores (8.9 and later: Ada, Hopper)"]
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    notes = []
    no_torchao = {**H200, "torchao": None}
    assert _training.usable_precisions("cuda:0", ("amp_bf16", "fp8"), notes, no_torchao) == [
        "amp_bf16"]
    assert notes == ["fp8 on cuda:0 skipped, because torchao is not installed: pip install "
                     "'benchbench[fp8]' (torchao's float8 training)"]


def test_fp8_planning_on_the_simulated_h200():
    mm = simulate.simulate_probe(simulate.H200, "matmul", False, 37.5)
    peaks = {m.key["dtype"]: m.value for m in mm.measurements if m.metric == "peak_flops"}
    assert peaks["fp8"] / peaks["bf16"] == pytest.approx(1.77, rel=0.01)  # mamf-finder's H100
    tr = simulate.simulate_probe(simulate.H200, "transformer", False, 75.0)
    thr = {m.key["precision"]: m for m in tr.measurements if m.metric == "throughput"}
    assert {"amp_bf16", "fp8"} <= set(thr) and tr.duration_s <= 75.0
    assert not any(n.startswith("fp8") for n in tr.notes)


def test_the_guide_claim_reads_the_measured_saving():
    from benchbench.analysis import derive, guide
    from benchbench.core.results import ProbeResult, RunResult

    probes = []
    for name, budget in (("matmul", 37.5), ("transformer", 75.0)):
        sim = simulate.simulate_probe(simulate.H200, name, False, budget)
        probes.append(ProbeResult(name=name, status="ok", resource="gpu_compute",
                                  measurements=sim.measurements))
    run = RunResult(tool={}, started_at="", environment={}, config={}, argv=[], probes=probes)
    claim = guide.transformer_engine(run)
    # The profile's 1.15x end to end: 13% saved, against the guide's 40%.
    assert claim.measured.startswith("fp8 (torchao float8 training) saves 13% of the step "
                                     "time against amp_bf16")
    assert "the matmul alone: fp8 1.77x bf16" in claim.measured
    assert claim.check.startswith("does not hold here: 13% against the guide's 40%")
    speedups = {(r["model"], r["ratio"]) for r in derive.precision_speedups(run)}
    assert ("transformer", "fp8/amp_bf16") in speedups
