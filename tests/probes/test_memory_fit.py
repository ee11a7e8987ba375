"""memory_fit: the closed-form estimate, the search by real steps on this CPU, and its planning on
the simulated H200 and H100 node, whose memory model answers "fits?" per size."""

import pytest
from helpers import cpu_facts, resolved

from benchbench.analysis import memory_fit as mf
from benchbench.analysis.memory_fit import LADDER, estimate


def test_the_ladder_holds_the_published_sizes():
    # Llama 2's 7B, 13B and 70B as their released configs count them (untied head, 32k vocab).
    assert LADDER["7b"].params() == 6_738_415_616
    assert LADDER["13b"].params() == 13_015_864_320
    assert abs(LADDER["70b"].params() - 68.98e9) < 0.01e9
    sizes = [s.params() for s in LADDER.values()]
    assert sizes == sorted(sizes) and sizes[0] < 140e6


def test_the_estimate_counts_each_part():
    s = LADDER["7b"]
    e = estimate(s, 2048, 1, "amp_bf16", checkpointing=False)
    assert e.per_param == {"weights": 4, "gradients": 4, "optimizer": 8, "working_copy": 2}
    assert e.states == 18 * s.params()
    # Checkpointing keeps each layer's input (fp32) and one layer's activations: far fewer.
    c = estimate(s, 2048, 1, "amp_bf16", checkpointing=True)
    assert c.activations["layers"] < e.activations["layers"] / 8
    assert c.activations["head"] == e.activations["head"]
    assert estimate(s, 2048, 1, "fp32", False).states == 16 * s.params()  # no working copy
    # Activations grow with the tokens, the states do not.
    twice = estimate(s, 4096, 1, "amp_bf16", False)
    assert twice.activations["layers"] == pytest.approx(2 * e.activations["layers"])


def test_derived_lines_say_they_are_derived_and_answer_the_guide():
    lines = mf.derived_lines(2048, "amp_bf16", 1.0, 141e9, 1)
    assert lines[0].startswith("a 7B model (6.7B) needs 137 GB plain and 124 GB with activation "
                               "checkpointing at seq 2048 (derived")
    # 70B's states over 8 GPUs are 155 GB each: 34B is the largest, as practice finds.
    zero3 = [ln for ln in lines if ln.startswith("ZeRO-3 over")]
    assert zero3 == [ln for ln in zero3 if "not measured" in ln] and len(zero3) == 1
    assert zero3[0].startswith("ZeRO-3 over 8 such GPUs would fully fine-tune up to 34B")
    assert len([ln for ln in mf.derived_lines(2048, "amp_bf16", 1.0, 141e9, 4)
                if ln.startswith("ZeRO-3 over")]) == 2  # this machine's 4 and a node's 8
    assert any(ln.startswith("LoRA on one such GPU would fit up to") for ln in lines)
    (guide,) = [ln for ln in lines if ln.startswith("the guide says")]
    assert "80 GB fully fine-tunes up to 3B (3.4B) plain and 3B (3.4B) with checkpointing" in guide


def test_cpu_search_measures_the_small_end_and_checks_the_estimate_against_rss():
    pytest.importorskip("torch")
    from benchbench.core.sampling import Budget, RepeatPolicy
    from benchbench.probes.api import ProbeContext
    from benchbench.workloads.memory_fit import run as memory_fit

    ctx = ProbeContext(device="cpu", policy=RepeatPolicy(), budget=Budget(30.0),
                       facts=cpu_facts())
    cfg = resolved("memory_fit", ladder=("125m", "70b"), seq_len=32)
    out = memory_fit.run(ctx, cfg)
    peaks = [m for m in out.measurements if m.metric == "step_peak_memory"]
    assert {m.key["mode"] for m in peaks} == {"plain", "checkpointing"}
    for m in peaks:
        assert m.unit == "B" and m.key["rung"] == "125m"
        assert m.context["memory_source"].startswith("the process's peak resident memory")
        # The estimate is right within a factor: the estimators' error, shown, not hidden.
        assert 0.7 < m.context["ratio"] < 1.5, m.context["ratio"]
        assert len(m.context["step_s"]) == 2
    (largest,) = [m for m in out.measurements if m.metric == "largest_model"
                  and m.key["mode"] == "plain"]
    assert largest.unit == "count" and largest.value == LADDER["125m"].params()
    # 70B's estimate is over half the free RAM: not tried (the OOM killer would end the run).
    assert largest.context["next_up"]["outcome"].startswith("skipped, because its estimate of ")
    assert largest.context["bounded_by"] == "free RAM"
    assert any(n.startswith("70b plain skipped, because its estimate of") for n in out.notes)


def test_cpu_free_ram_refusal_judges_the_runs_precision(monkeypatch):
    """The free-RAM refusal weighs the estimate the run reports: amp_bf16's on a CPU run in
    amp_bf16 (its working copy makes 125m's larger than fp32's), not fp32's."""
    pytest.importorskip("torch")
    from types import SimpleNamespace

    from benchbench.core.sampling import Budget, RepeatPolicy
    from benchbench.probes.api import ProbeContext
    from benchbench.workloads.memory_fit import run as memory_fit

    bf16, fp32 = (estimate(LADDER["125m"], 32, 1, p, False).total for p in ("amp_bf16", "fp32"))
    free = fp32 + bf16  # half of it lies between the two estimates
    assert fp32 < 0.5 * free < bf16
    monkeypatch.setattr(memory_fit.psutil, "virtual_memory",
                        lambda: SimpleNamespace(available=free, total=4 * free))
    ctx = ProbeContext(device="cpu", policy=RepeatPolicy(), budget=Budget(30.0),
                       facts=cpu_facts())
    cfg = resolved("memory_fit", ladder=("125m",), seq_len=32, modes=("plain",),
                   precision="amp_bf16", ram_share=0.5)
    out = memory_fit.run(ctx, cfg)
    assert not [m for m in out.measurements if m.metric == "step_peak_memory"]
    assert (f"125m plain skipped, because its estimate of {bf16 / 1e9:,.1f} GB is over 50% of "
            f"the {free / 1e9:,.1f} GB of free RAM") in "; ".join(out.notes)


@pytest.mark.parametrize("profile, plain, ckpt", [("h200", "7b", "7b"), ("8xh100", "3b", "3b")])
def test_planning_on_the_simulated_gpus(profile, plain, ckpt):
    pytest.importorskip("torch")
    from benchbench.engine import simulate

    p = simulate.PROFILES[profile]
    spec_budget = 60.0
    sim = simulate.simulate_probe(p, "memory_fit", False, spec_budget)
    largest = {m.key["mode"]: m for m in sim.measurements if m.metric == "largest_model"}
    assert largest["plain"].context["rung"] == plain
    assert largest["checkpointing"].context["rung"] == ckpt
    for m in largest.values():  # bounded by memory: the next size up ran out of it
        assert m.context["bounded_by"] == "memory"
        assert m.context["next_up"]["outcome"] == "out of memory"
    # A binary search: a handful of real attempts, far beyond sizes never tried.
    tried = [t for m in largest.values() for t in m.context["tried"] if t["fits"] is not None]
    assert len(tried) <= 6
    assert sim.duration_s <= spec_budget
