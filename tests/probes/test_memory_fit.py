"""memory_fit: the closed-form estimate, the search by real steps on this CPU, and its planning on
the simulated H200 and H100 node, whose memory model answers "fits?" per size."""

import pytest
from helpers import cpu_facts, resolved

from benchbench.analysis import memory_fit as mf
from benchbench.analysis.memory_fit import LADDER, estimate
from benchbench.core.units import iec


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
    # The peak: weights and moments (12 B), then the larger end of the backward, the
    # forward's saved tensors (bf16 weight copies and activations) or every fp32 gradient.
    p, acts = s.params(), sum(e.activations.values())
    assert acts > 2 * p  # plain at seq 2048: the start of the backward is the peak
    assert e.total == pytest.approx(12 * p + 2 * p + acts)
    assert c.total == pytest.approx(16 * p)  # checkpointed: the end is


# The H200 runs (docs/results/2026-12-04-h200*): torch's allocator peak of two AdamW steps at
# seq 2048, bf16 autocast, 7B's width at 32-43 layers, the same on all three boxes (39L only on
# the third, whose bisection reached it).
H200_PEAKS = [("plain", 32, 109.452143616e9), ("plain", 37, 125.874748416e9),
              ("plain", 38, 129.159269376e9), ("plain", 39, 132.36934144e9),
              ("checkpointing", 32, 107.917528064e9), ("checkpointing", 43, 143.537033216e9)]


@pytest.mark.parametrize("mode, layers, measured", H200_PEAKS)
def test_the_estimate_meets_the_h200s_measured_peaks(mode, layers, measured):
    """Summing every part (18 B a parameter and every activation) overstated these peaks by
    14-25% (ratios 0.80 and 0.87-0.88); the peak at the larger end of the backward is within
    1% of each."""
    shape = mf.deeper(LADDER["7b"], layers)
    e = estimate(shape, 2048, 1, "amp_bf16", mode == "checkpointing")
    assert measured / e.total == pytest.approx(1.0, abs=0.01)
    assert measured / (e.states + sum(e.activations.values())) < 0.9


def test_derived_lines_say_they_are_derived_and_answer_the_guide():
    lines = mf.derived_lines(2048, "amp_bf16", 1.0, 141e9, 1)
    # in GiB, as every other memory figure of the report
    assert lines[0].startswith("a 7B model (6.7B) needs 102 GiB plain and 100 GiB with "
                               "activation checkpointing at seq 2048 (derived")
    # 70B's states over 8 GPUs are 155 GB each: 34B is the largest, as practice finds.
    zero3 = [ln for ln in lines if ln.startswith("ZeRO-3 over")]
    assert zero3 == [ln for ln in zero3 if "not measured" in ln] and len(zero3) == 1
    assert zero3[0].startswith("ZeRO-3 over 8 such GPUs would fully fine-tune up to 34B")
    assert len([ln for ln in mf.derived_lines(2048, "amp_bf16", 1.0, 141e9, 4)
                if ln.startswith("ZeRO-3 over")]) == 2  # this machine's 4 and a node's 8
    assert any(ln.startswith("LoRA on one such GPU would fit up to") for ln in lines)
    (guide,) = [ln for ln in lines if ln.startswith("the guide says")]
    # Between the rungs, as memory_fit bisects on a GPU: 3B's width at more layers; the card
    # as nvidia-smi and torch give it (at 80 GiB, plain reached 39 layers).
    assert ("an H100 80GB (79.6 GiB, nvidia-smi's 81,559 MiB, 79.2 GiB of it usable by torch) "
            "fully fine-tunes up to 4.9B (3B's width at 38 layers, between the ladder's rungs) "
            "plain and 5.3B (3B's width at 41 layers") in guide


# An H200 as CUDA reports it (143,771 MiB), and a measured ratio under 1: the estimate
# over-counts what this allocator kept.
H200_B, UNDER_ONE = 150.75e9, 0.9


def test_lora_and_zero3_lines_take_the_plain_estimate_not_the_measured_ratio():
    """The ratio was measured on a full fine-tune on one GPU; applied to LoRA's frozen 2 B
    weights, or to ZeRO-3's partitioned states, a ratio under 1 turned 34B into 70B: 70B's
    frozen bf16 weights alone are 138 GB, 158 GB with adapters and activations."""
    seventy = mf.LADDER["70b"]
    assert mf.lora_needs(seventy, 2048, "amp_bf16", True) > H200_B  # it does not fit
    assert mf.zero3_needs(seventy, 2048, "amp_bf16", True, 8) > H200_B
    lines = mf.derived_lines(2048, "amp_bf16", UNDER_ONE, H200_B, 1)
    (lora,) = [ln for ln in lines if ln.startswith("LoRA")]
    (zero3,) = [ln for ln in lines if ln.startswith("ZeRO-3")]
    assert lora.startswith("LoRA on one such GPU would fit up to 34B (33.7B) (the plain "
                           "estimate, without the measured ratio")
    assert zero3.startswith("ZeRO-3 over 8 such GPUs would fully fine-tune up to 34B (33.7B) "
                            "with checkpointing (derived from the plain estimate")
    assert mf.zero3_largest(2048, "amp_bf16", UNDER_ONE, H200_B, 8) == "34b"  # the doctor's
    # The full fine-tune it was measured on keeps it: 7B's line is the estimate x 0.9.
    seven = mf.estimate(mf.LADDER["7b"], 2048, 1, "amp_bf16", False).total
    assert lines[0].startswith(f"a 7B model (6.7B) needs {iec(seven * UNDER_ONE)} plain")


def _plain_on_80(ratio):
    (guide,) = [ln for ln in mf.derived_lines(2048, "amp_bf16", ratio, H200_B, 1)
                if ln.startswith("the guide says")]
    return guide.split("fully fine-tunes up to ", 1)[1].split(" plain")[0]


def test_an_80_gb_card_gives_what_nvidia_smi_and_torch_show():
    """An H100 80GB shows 81,559 MiB in nvidia-smi and torch can use 81,082 MiB of it: neither
    80e9 B nor 80 GiB. A 3B fine-tune fits up to exactly what torch can use; one needing
    80 GiB, which the card's name seems to promise, does not."""
    assert mf.CARD_80GB_TOTAL_B == 81_559 * 2**20 == 85_520_809_984
    assert mf.CARD_80GB_USABLE_B == 81_082 * 2**20
    assert 80e9 < mf.CARD_80GB_USABLE_B < mf.CARD_80GB_TOTAL_B < 80 * 2**30
    three = mf.needs(mf.LADDER["3b"], 2048, "amp_bf16", False, 1.0)
    assert _plain_on_80(83e9 / three).startswith("3B (3.4B)")
    assert _plain_on_80(mf.CARD_80GB_USABLE_B / three).startswith("3B (3.4B)")  # just fits
    for over in (mf.CARD_80GB_USABLE_B + 1, 80 * 2**30):
        assert "1.3B's width" in _plain_on_80(over / three)  # 3B does not fit


def test_the_guide_judges_a_7b_against_what_an_80_gb_card_gives():
    """The guide's verdict: a 7B with checkpointing at 83e9 B (77.3 GiB) fits within the
    79.2 GiB torch can use of an 80 GB card; at 80 GiB it does not."""
    pytest.importorskip("torch")
    from benchbench.analysis import guide
    from benchbench.core.results import ProbeResult, RunResult
    from benchbench.engine import simulate

    sim = simulate.simulate_probe(simulate.H200, "memory_fit", False, 60.0)
    # the device's memory in GiB, as the report's environment table gives it
    assert sim.notes[0] == ("34b, 70b plain not tried, because their estimates are over 2x "
                            "the device's 141 GiB")
    ratio = 83e9 / estimate(LADDER["7b"], 2048, 1, "amp_bf16", True).total
    for m in sim.measurements:
        if m.metric == "step_peak_memory":
            m.context["ratio"] = ratio
    run = RunResult(tool={}, started_at="", environment={}, config={}, argv=[],
                    probes=[ProbeResult(name="memory_fit", status="ok", resource="gpu_memory",
                                        measurements=sim.measurements)])
    claim = guide.fine_tuning(run)
    assert claim.check == ("does not hold for a 7B model: with checkpointing it needs 77.3 GiB, "
                           "within an H100 80GB's 79.2 GiB usable")
    for m in sim.measurements:
        if m.metric == "step_peak_memory":
            m.context["ratio"] = ratio * 80 * 2**30 / 83e9
    assert guide.fine_tuning(run).check == (
        "holds: a 7B model's full fine-tune needs more than an H100 80GB's 79.2 GiB usable even "
        "with activation checkpointing (80 GiB at these bytes)")


def test_cpu_search_measures_the_small_end_and_checks_the_estimate_against_rss():
    pytest.importorskip("torch")
    from benchbench.core.sampling import Budget, RepeatPolicy
    from benchbench.probes.api import ProbeContext
    from benchbench.workloads.memory_fit import run as memory_fit

    # 120 s is a ceiling, not a cost: the climb ends at 70b's free-RAM refusal after two
    # 125m attempts; on a loaded 2-core VM one 125m attempt can take 15 s.
    ctx = ProbeContext(device="cpu", policy=RepeatPolicy(), budget=Budget(120.0),
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
    amp_bf16 (at seq 512 its working copy and activations outweigh the gradients, and make
    125m's larger than fp32's), not fp32's."""
    pytest.importorskip("torch")
    from types import SimpleNamespace

    from benchbench.core.sampling import Budget, RepeatPolicy
    from benchbench.probes.api import ProbeContext
    from benchbench.workloads.memory_fit import run as memory_fit

    bf16, fp32 = (estimate(LADDER["125m"], 512, 1, p, False).total
                  for p in ("amp_bf16", "fp32"))
    free = fp32 + bf16  # half of it lies between the two estimates
    assert fp32 < 0.5 * free < bf16
    monkeypatch.setattr(memory_fit.psutil, "virtual_memory",
                        lambda: SimpleNamespace(available=free, total=4 * free))
    ctx = ProbeContext(device="cpu", policy=RepeatPolicy(), budget=Budget(30.0),
                       facts=cpu_facts())
    cfg = resolved("memory_fit", ladder=("125m",), seq_len=512, modes=("plain",),
                   precision="amp_bf16", ram_share=0.5)
    out = memory_fit.run(ctx, cfg)
    assert not [m for m in out.measurements if m.metric == "step_peak_memory"]
    assert (f"125m plain skipped, because its estimate of {iec(bf16)} is over 50% of "
            f"the {iec(free)} of free RAM") in "; ".join(out.notes)


# --- the search on the simulated GPUs: the real run's attempt skeleton, the profile's memory --

def _largest(sim):
    return {m.key["mode"]: m for m in sim.measurements if m.metric == "largest_model"}


# An H100 80GB lends torch 81,082 MiB (79.2 GiB), not 80 GiB: checkpointed 3B fits 39 layers.
@pytest.mark.parametrize("profile, plain, ckpt", [("h200", "7b@38L", "7b@43L"),
                                                  ("8xh100", "3b@33L", "3b@39L")])
def test_planning_on_the_simulated_gpus(profile, plain, ckpt):
    """The ladder's 2x gaps, then a bisection between the last rung that fits and the first
    that does not: the largest is the lower rung's width at the most layers that fit, one
    layer under a measured out of memory (on the ladder alone: 7B on the H200, 3B on 80 GB).
    The real H200s fitted 7b@38L plain and 7b@43L checkpointed, 7b@44L out of memory."""
    pytest.importorskip("torch")
    from benchbench.engine import simulate

    p = simulate.PROFILES[profile]
    spec_budget = 60.0
    sim = simulate.simulate_probe(p, "memory_fit", False, spec_budget)
    largest = _largest(sim)
    assert largest["plain"].context["rung"] == plain
    assert largest["checkpointing"].context["rung"] == ckpt
    for mode, m in largest.items():  # bounded by memory: the next size up ran out of it
        assert m.context["bounded_by"] == "memory"
        assert m.context["next_up"]["outcome"] == "out of memory"
        rung, layers = m.context["rung"].split("@")
        assert m.value > LADDER[rung].params()  # more than the ladder's answer
        assert m.context["next_up"]["rung"] == f"{rung}@{int(layers[:-1]) + 1}L"  # tight
        # The profile's memory model: the estimate x the mode's reserved ratio within the
        # GPU's memory, and one layer more over it.
        def need(layers, mode=mode, rung=rung):
            shape = mf.deeper(LADDER[rung], layers)
            return (estimate(shape, 2048, 1, "amp_bf16", mode == "checkpointing").total
                    * p.memory_fit_ratio[mode])

        assert need(m.context["layers"]) <= p.memory_total < need(m.context["layers"] + 1)
        # The binary search over the ladder, then at most 3 sizes between two rungs.
        tried = [t for t in m.context["tried"] if t["fits"] is not None]
        assert len([t for t in tried if "@" not in t["rung"]]) <= 3
        assert len([t for t in tried if "@" in t["rung"]]) <= 3
    assert sim.duration_s <= spec_budget


def test_the_simulator_goes_through_the_real_attempt_and_its_cuda_rules():
    """The simulated H200 runs memory_fit's own attempt skeleton: CUDA initialised before the
    peak is reset (the SimMeter raises otherwise, as CUDA does: pytorch#49952), both peaks
    read, the build timed apart from the steps."""
    pytest.importorskip("torch")
    from benchbench.engine import simulate

    sim = simulate.simulate_probe(simulate.H200, "memory_fit", False, 60.0)
    peaks = [m for m in sim.measurements if m.metric == "step_peak_memory"]
    assert peaks
    for m in peaks:
        assert m.context["peak_reserved_B"] == m.value  # the simulated allocator's model
        assert m.context["build_s"] > 0 and len(m.context["step_s"]) == 2


def _sim_ctx(budget_s=60.0):
    from benchbench.core.sampling import Budget, RepeatPolicy
    from benchbench.engine.sim_device import FakeClock, SimMeter
    from benchbench.probes.api import ProbeContext

    clock = FakeClock()
    return ProbeContext(device="cuda", policy=RepeatPolicy(), facts={},
                        budget=Budget(budget_s, clock=clock), clock=clock,
                        meter=SimMeter(clock))


def test_an_attempt_initialises_cuda_and_turns_out_of_memory_into_a_point():
    from benchbench.engine.sim_device import SimMeter
    from benchbench.workloads.memory_fit import search

    ctx = _sim_ctx()
    with pytest.raises(RuntimeError, match="did you call init"):  # the rule it must keep
        SimMeter(ctx.clock).reset_peak_memory("cuda:0")
    est = search.estimator(2048, "amp_bf16")

    def two_steps(shape, mode):
        if shape.params() > 7e9:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        if shape.name == "125m":
            raise RuntimeError("mat1 and mat2 shapes cannot be multiplied")
        return search.Ran(0.5, [3.2, 0.2], peak_B=1e9, reserved_B=1.1e9)

    attempt = search.attempt_with(ctx, "cuda:0", est, two_steps)
    fits = attempt(LADDER["7b"], "plain")
    assert fits.fits and fits.step_s == [3.2, 0.2] and fits.build_s == 0.5
    assert (fits.peak_B, fits.reserved_B) == (1e9, 1.1e9)
    assert attempt(LADDER["13b"], "plain").fits is False
    with pytest.raises(RuntimeError, match="cannot be multiplied"):  # a real failure stays one
        attempt(LADDER["125m"], "plain")


def _search_on(capacity, ratio, steps, gpu=True):
    """The search against a device whose steps need the estimate x `ratio` (a number, or one
    per shape: ratio(shape)) and which holds `capacity` B; the search is told the device has
    `capacity` B."""
    from benchbench.workloads.memory_fit import search

    est = search.estimator(2048, "amp_bf16")

    def attempt(shape, mode):
        need = est(shape, mode).total * (ratio(shape) if callable(ratio) else ratio)
        point = search.Point(shape, mode, est(shape, mode), need <= capacity)
        if point.fits:
            point.peak_B = point.reserved_B = need
            point.build_s, point.step_s = 0.1, [1.0, 0.1]
        return point

    return search.search(list(LADDER.values()), "plain", attempt, lambda *a: None, 1, gpu,
                         capacity, est, steps)


def test_the_bisection_closes_the_gap_between_two_rungs():
    from benchbench.workloads.memory_fit import search

    est = search.estimator(2048, "amp_bf16")
    tried = _search_on(150e9, 1.05, 3)
    fitted = max((p for p in tried if p.fits), key=lambda p: p.estimate.params)
    assert fitted.shape.name.startswith("7b@")
    assert est(fitted.shape, "plain").total * 1.05 <= 150e9
    one_more = mf.deeper(LADDER["7b"], fitted.shape.layers + 1)
    assert est(one_more, "plain").total * 1.05 > 150e9
    assert [p.rung for p in tried if "@" in p.rung] == [fitted.rung, one_more.name]
    # No bisection asked: the ladder's answer.
    assert max((p for p in _search_on(150e9, 1.05, 0) if p.fits),
               key=lambda p: p.estimate.params).rung == "7b"


def test_the_third_size_walks_on_while_the_first_two_agree():
    """The first H200s, plain: 7B reserved 1.167x its estimate, so the guess was 7b@37L; it
    and 38L fitted, and the halving then tried 51L, out of memory, leaving 39-50L unknown and
    the answer a lower bound. Reserving 1.15x, as 38L did there, the walk tries 39L next: out
    of memory, and 38L is bounded one layer up."""
    tried = _search_on(150.75e9, lambda shape: 1.167 if shape.layers == 32 else 1.15, 3)
    assert [(p.rung, p.fits) for p in tried if "@" in p.rung] == [
        ("7b@37L", True), ("7b@38L", True), ("7b@39L", False)]


@pytest.mark.parametrize("growth, short_by", [(1.1, 0), (1.3, 2)])
def test_the_bisection_converges_where_the_ratio_grows_with_size(growth, short_by):
    """The ratio measured at the lower rung is 1.05, but each added layer needs `growth` x
    its estimate: the estimate's first guess overshoots and runs out of memory; its neighbour
    closes the gap (a little growth), or halves narrow it (more). What is reported always
    fitted, `short_by` layers at most under the true largest."""
    from benchbench.workloads.memory_fit import search

    est = search.estimator(2048, "amp_bf16")
    base = est(LADDER["7b"], "plain").total
    capacity = 140e9  # 7B plus 5-7 layers

    def need(shape):
        return 1.05 * (base + (est(shape, "plain").total - base) * growth)

    def attempt(shape, mode):
        point = search.Point(shape, mode, est(shape, mode), need(shape) <= capacity)
        if point.fits:
            point.peak_B = point.reserved_B = need(shape)
            point.build_s, point.step_s = 0.1, [1.0, 0.1]
        return point

    tried = search.search(list(LADDER.values()), "plain", attempt, lambda *a: None, 1, True,
                          capacity, est, 3)
    between = [p for p in tried if "@" in p.rung]
    assert between[0].fits is False and len(between) <= 3  # the estimate's guess overshot
    best = max((p for p in tried if p.fits), key=lambda p: p.estimate.params)
    truth = max(n for n in range(32, 64) if need(mf.deeper(LADDER["7b"], n)) <= capacity)
    assert truth - short_by <= best.shape.layers <= truth


def test_a_cpu_climb_is_not_bisected():
    """A CPU's climb ends at a refusal (time or free RAM), never at out of memory: no
    boundary to narrow, and a guess could wake the OOM killer."""
    tried = _search_on(150e9, 1.05, 3, gpu=False)
    assert not [p for p in tried if "@" in p.rung]


def test_time_refusal_prices_the_warm_step_not_the_first_steps_start_up():
    """The next size's time: the last build and warm step grown with the parameters, plus the
    first step's start-up once. A 10 s first step (lazy kernels, the optimizer's states) and
    0.3 s warm step do not make 13B a 40 s attempt."""
    from benchbench.workloads.memory_fit import search

    ctx = _sim_ctx(budget_s=30.0)
    est = search.estimator(2048, "amp_bf16")
    refuse = search.refusal(ctx, "cuda:0", est, 0.5)
    last = search.Point(LADDER["7b"], "plain", est(LADDER["7b"], "plain"), True,
                        peak_B=1.0, build_s=1.0, step_s=[10.0, 0.3])
    scale = LADDER["13b"].params() / LADDER["7b"].params()
    assert scale * (10.3 + 10.0) > 30.0  # the old price: the first step counted as a step
    assert refuse(LADDER["13b"], "plain", [last], 1) is None
    # A slow warm step still refuses, and says from what.
    slow = search.Point(LADDER["7b"], "plain", last.estimate, True, peak_B=1.0, build_s=1.0,
                        step_s=[10.3, 10.0])
    why, bound = search.refusal(ctx, "cuda:0", est, 0.5)(LADDER["13b"], "plain", [slow], 1)
    assert bound == "time"
    assert f"~{scale * (1.0 + 20.0) + 0.3:,.3g} s" in why and "10 s warm step" in why


def test_a_modes_first_size_is_priced_by_the_last_mode_and_refused_when_it_cannot_fit():
    """The checkpointing mode's first size was always tried, however little time was left:
    on 2 cores a quick run's memory_fit ran 50-70% over its budget. It is priced by the plain
    mode's point now, refused with that reason, and the mode says no size was tried, not
    that none fitted."""
    from benchbench.workloads.memory_fit import output, search

    est = search.estimator(64, "fp32")

    def modes(budget_s):
        ctx = _sim_ctx(budget_s)

        def attempt(shape, mode):  # 3 s: a 0.8 s build and two steps of 1.2 s and 1.0 s
            ctx.clock.advance(3.0)
            return search.Point(shape, mode, est(shape, mode), True, peak_B=1.0,
                                build_s=0.8, step_s=[1.2, 1.0])

        return search.search_modes(ctx, ["125m"], ["plain", "checkpointing"], attempt,
                                   search.refusal(ctx, "cpu", est, 1.0), "cpu", est, None)

    points = modes(4.0)
    plain, ckpt = points
    assert plain.fits and ckpt.fits is None and ckpt.bound == "time"
    assert "scaled from 125m plain's 0.8 s build and 1 s warm step" in ckpt.why
    assert "beyond the 1 s left for this mode" in ckpt.why
    notes = []
    out = output.output(points, "cpu", 64, "fp32", 24e9, notes, None)
    assert "checkpointing: no size tried" in notes
    assert not any("no size fitted" in n for n in notes)
    assert {m.key["mode"] for m in out.measurements if m.metric == "largest_model"} == \
        {"plain"}
    assert [p.fits for p in modes(60.0)] == [True, True]  # with time for both, both ran


def test_13b_is_reached_on_a_short_budget_and_runs_out_of_memory():
    """On the simulated H200 with 20 s, 7B's 3 s first step priced as a per-step cost put 13B
    at ~13 s, over the mode's share: refused for time, the out-of-memory answer never seen.
    Priced from the warm step, 13B is tried and runs out of memory."""
    pytest.importorskip("torch")
    from benchbench.engine import simulate

    sim = simulate.simulate_probe(simulate.H200, "memory_fit", False, 20.0,
                                  overrides={"bisect_steps": 0})
    for m in _largest(sim).values():
        assert m.context["rung"] == "7b" and m.context["bounded_by"] == "memory"
        assert m.context["next_up"] == {"rung": "13b", "params": LADDER["13b"].params(),
                                        "outcome": "out of memory"}


def test_bisect_steps_is_checked_and_defaults_by_device():
    from benchbench.core.config import ConfigError
    from benchbench.engine.sim_device import H200, facts_for

    assert resolved("memory_fit").bisect_steps == 0  # a CPU's climb has no boundary to bisect
    assert resolved("memory_fit", device="cuda", quick=False,
                    facts=facts_for(H200)).bisect_steps == 3
    with pytest.raises(ConfigError, match="bisect_steps must be 0 or more"):
        resolved("memory_fit", bisect_steps=-1)
