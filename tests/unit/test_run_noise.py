"""The gate calibrated on unchanged pairs (analysis/run_noise.py): each measurement's floor,
what stands in where a mode or device has no pairs, the decision with one run a side, the runs
a side that would judge a smaller change, and step time judged once, as its throughput."""

import dataclasses
import json
import math

import pytest

from benchbench.analysis import regression, run_noise
from benchbench.compare import align, comparison, sides
from benchbench.reports import compare_md
from tests.unit.test_compare import make_run, row

RES = "resnet50/throughput/batch_size=16,image_size=224,precision=fp32"


def table(rows, device="cpu", mode="quick"):
    return run_noise.parse({"calibrations": {device: {mode: run_noise.calibrate(rows)}}})


def test_a_floor_is_z_times_the_rms_or_the_largest_change_seen():
    quiet = run_noise.calibrate({"x": [0.01, -0.02, 0.015, -0.01]})["x"]
    c = run_noise.Calibration(quiet["rms"], quiet["largest"], quiet["pairs"])
    assert c.floor == pytest.approx(run_noise.Z * math.sqrt((1e-4 + 4e-4 + 2.25e-4 + 1e-4) / 4))
    tail = run_noise.Calibration(0.01, 0.09, 30)  # one pair far out: its change is the floor
    assert tail.floor == 0.09


def test_the_floor_is_looked_up_by_measurement_then_family_then_stand_ins():
    t = run_noise.parse({"calibrations": {"cpu": {
        "quick": run_noise.calibrate({RES: [0.02, -0.02], "matmul/flops/dtype=fp32,size=256":
                                      [0.05], "matmul/flops/dtype=fp32,size=512": [0.01]})}}})
    key = {"device": "cpu", "precision": "fp32", "image_size": 224, "batch_size": 16}
    own = run_noise.floor(t, "cpu", "quick", "resnet50", "throughput", key)
    assert own is not None and own.log == pytest.approx(run_noise.Z * 0.02)
    assert own.source == "--quick runs on this kind of machine"
    # a size the pairs did not run: its family's widest
    other = run_noise.floor(t, "cpu", "quick", "matmul", "flops", {"dtype": "fp32", "size": 64})
    assert other is not None and other.log == pytest.approx(max(run_noise.Z * 0.05, 0.05))
    assert "the widest of matmul flops" in other.source
    # a default run and a GPU run borrow the CPU's --quick pairs, and say so
    dflt = run_noise.floor(t, "cpu", "default", "resnet50", "throughput", key)
    assert dflt is not None and "(standing in for default runs on a CPU" in dflt.source
    gpu = run_noise.floor(t, "cuda", "quick", "resnet50", "throughput", key)
    assert gpu is not None and "a CPU VM (standing in for --quick runs on a GPU" in gpu.source
    assert run_noise.floor(t, "cpu", "quick", "storage", "read_bandwidth", {}) is None
    assert run_noise.floor({}, "cpu", "quick", "resnet50", "throughput", key) is None


def test_a_change_under_the_floor_is_inconclusive_and_says_how_many_runs_would_judge_it():
    base, cand = [20.0, 20.1], [18.6, 18.5]  # −7.3%: beyond its rounds, under the pairs' 12%
    fam = regression.family_of("resnet50 throughput", [(base, cand)], True)
    bare = regression.decide(base, cand, True, family=fam)
    assert bare.outcome == regression.REGRESSED  # what its rounds alone would call
    floor = run_noise.Floor(math.log1p(0.12), 0.03, 30, "--quick runs on this kind of machine")
    d = regression.decide(base, cand, True, family=fam, floor=floor)
    assert d.outcome == regression.INCONCLUSIVE
    assert d.noise_pct == pytest.approx(12.0)
    n = run_noise.runs_needed(math.log(18.55 / 20.05), floor, regression.DEFAULT_ALPHA)
    assert n is not None and 2 <= n <= 20
    assert (f"one run a side: with nothing changed, --quick runs on this kind of machine "
            f"differ by up to 12% in it (30 unchanged pairs); {n} runs a side, pooled, would "
            "judge a change of this size") in d.reason
    # a larger change needs fewer runs; one beyond the floor is called
    assert run_noise.runs_needed(math.log(0.85), floor, 0.01) <= n
    worse = regression.decide(base, [15.0, 15.1], True, floor=floor, family=regression.family_of(
        "resnet50 throughput", [(base, [15.0, 15.1])], True))
    assert worse.outcome == regression.REGRESSED
    assert "beyond the −11% that unchanged pairs of --quick runs" in worse.reason
    # compare's noise column gives the bar each way, as the reason gives it for a slowdown
    wide = regression.decide(base, [15.0, 15.1], True, family=fam, floor=run_noise.Floor(
        math.log1p(0.32), 0.08, 30, "--quick runs on this kind of machine"))
    assert "beyond the −24% that" in wide.reason and compare_md._noise(wide) == "−24% / +32%"
    assert compare_md._noise(d) == "−11% / +12%"
    assert compare_md._noise(dataclasses.replace(d, noise_pct=2.0)) == "±2%"


def test_a_floor_makes_the_noise_known_where_no_measurement_has_a_second_value():
    floor = run_noise.Floor(math.log1p(0.05), 0.0125, 30, "--quick runs on this kind of machine")
    d = regression.decide([100.0], [60.0], True, floor=floor)
    assert d.outcome == regression.REGRESSED and d.noise_known  # the pairs showed its noise
    bare = regression.decide([100.0], [60.0], True)
    assert bare.outcome == regression.INCONCLUSIVE and bare.noise_known is False


def _pair(factor, **kw):
    a, b = make_run("before", **kw), make_run("after", factor=factor, **kw)
    made = [sides.Side(label="", runs=[r], sources=[r.label]) for r in (a, b)]
    made[0].baseline = True
    sides.assign_labels(made)
    for s in made:
        s.run = align.pooled_run(s.runs)
    return made


def test_compare_takes_the_floor_of_the_baselines_mode_and_device():
    made = _pair(0.9)  # −10% everywhere, rounds ±1%: called without a calibration
    quiet = comparison.compare(made, noise={})
    assert row(quiet, "resnet50", "throughput").cells["after"].decision.outcome == \
        regression.REGRESSED
    noisy = table({RES: [0.04, -0.04, 0.03]})  # floor Z × 3.7%: 13% at Z = 3.5
    comp = comparison.compare(_pair(0.9), noise=noisy)
    d = row(comp, "resnet50", "throughput").cells["after"].decision
    assert d.outcome == regression.INCONCLUSIVE and "default runs on a CPU" in d.reason
    comp = comparison.compare(_pair(0.7), noise=noisy)
    assert row(comp, "resnet50", "throughput").cells["after"].decision.outcome == \
        regression.REGRESSED


def test_step_time_is_judged_once_as_its_throughput():
    made = _pair(0.8)
    for s in made:
        r = s.runs[0]
        thr = next(p for p in r.probes if p.name == "resnet50").measurements[0]
        step = type(thr)(metric="step_time", key=dict(thr.key), value=16 / thr.value, unit="s",
                         statistic="median", samples=[16 / x for x in thr.samples],
                         higher_is_better=False,
                         context={"round_values": [16 / x for x in
                                                   thr.context["round_values"]]})
        next(p for p in r.probes if p.name == "resnet50").measurements.append(step)
        s.run = align.pooled_run(s.runs)
    comp = comparison.compare(made, noise={})
    rate = row(comp, "resnet50", "throughput").cells["after"].decision
    step = row(comp, "resnet50", "step_time").cells["after"].decision
    assert rate.outcome == regression.REGRESSED
    assert step.outcome == regression.NOT_TESTED
    assert step.reason == "the same timings as its throughput, which is judged instead"
    assert step.ratio == pytest.approx(0.8)  # still shown: 1.25× the time is 0.8× as good
    assert len(comp.outcomes(regression.REGRESSED)) == 4  # matmul ×2, memory, resnet50 once


@pytest.mark.shipped_noise
def test_the_shipped_table_parses_and_every_floor_is_a_real_calibration():
    t = run_noise.shipped()
    for device, modes in t.items():
        assert device in ("cpu", "cuda")
        for mode, rows in modes.items():
            assert mode in run_noise.MODES and rows
            for rid, c in rows.items():
                assert rid.count("/") == 2 and c.pairs >= run_noise.MIN_PAIRS and c.rms > 0, rid
                assert c.largest <= c.floor


def test_a_measurement_too_noisy_to_gate_is_never_called_with_one_run_a_side():
    """gloo's small all-reduces on a 2-core VM: unchanged pairs differed by up to 270%."""
    wild = run_noise.Floor(math.log1p(3.0), 0.6, 30, "--quick runs on this kind of machine")
    d = regression.decide([100.0, 101.0], [20.0, 21.0], True, floor=wild)
    assert d.outcome == regression.INCONCLUSIVE
    assert "differ by up to 300% in it (30 unchanged pairs)" in d.reason
    tame = run_noise.Floor(math.log1p(0.3), 0.07, 30, "--quick runs on this kind of machine")
    assert regression.decide([100.0, 101.0], [20.0, 21.0], True, floor=tame).outcome == \
        regression.REGRESSED


def test_your_own_table_replaces_the_shipped_one_and_a_bad_one_is_one_line(tmp_path, capsys,
                                                                          monkeypatch):
    from tests.unit.test_compare import run_cli, save

    own = tmp_path / "mine.json"
    own.write_text(json.dumps({"calibrations": {"cpu": {"quick": {
        RES: {"rms": 0.1, "largest": 0.2, "pairs": 12}}}}}))
    monkeypatch.setenv(run_noise.ENV, str(own))
    assert run_noise.shipped()["cpu"]["quick"][RES].pairs == 12
    a, b = save(tmp_path, "a", make_run("before")), save(tmp_path, "b", make_run("after", 0.8))
    code, out, _ = run_cli(capsys, "compare", a, b)
    assert code == 3  # matmul and memory are not in this table: their rounds judge them
    up_to = math.expm1(run_noise.Z * 0.1) * 100
    assert f"differ by up to {up_to:.0f}% in it (12 unchanged pairs)" in out
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2")
    monkeypatch.setenv(run_noise.ENV, str(bad))
    code, _, err = run_cli(capsys, "compare", a, b)
    assert code == 2 and err.count("\n") == 1
    assert f"{run_noise.ENV}={bad}: not a noise table" in err


def test_a_change_one_round_shows_and_another_does_not_is_not_called():
    """Unchanged quick pair 15 (2026-12-06): matmul fp32 512 read rounds of 108 and 188
    GFLOP/s against 196 and 197, −25% on the median, beyond the pairs' floor with every round
    below the other side's; its second round was within 5% of the baseline. The one-run rule
    calls a change only where every round of the run holds it beyond the threshold and the
    floor: fresh unchanged pair 1 (2026-12-06, judged by the floors of the 30 before it) read
    matmul bf16 256 −26% with rounds about 189 and 330 GFLOP/s against 350, its second round
    −6%, beyond the 5% threshold but not the pairs' floor (−24%), and was called."""
    floor = run_noise.Floor(math.log1p(0.20), 0.05, 30, "--quick runs on this kind of machine")
    d = regression.decide([196.4, 197.4], [107.6, 187.7], True, floor=floor,
                          values=(197.1, 140.0))
    assert d.outcome == regression.INCONCLUSIVE, d
    assert d.reason.startswith("not held: a round of it lies less than 17% below the baseline")
    held = regression.decide([196.4, 197.4], [107.6, 120.7], True, floor=floor)
    assert held.outcome == regression.REGRESSED, held
    assert held.reason.startswith("its change, −42%, is beyond the −17% that unchanged pairs")
    bf16 = run_noise.Floor(4 * 0.0698, 0.0698, 30, "--quick runs on this kind of machine")
    d = regression.decide([347.0, 353.0], [189.0, 330.0], True, floor=bf16,
                          values=(350.2, 258.3))
    assert d.outcome == regression.INCONCLUSIVE and d.change_pct < -26, d
    assert d.reason.startswith("not held: a round of it lies less than 24% below"), d.reason
    # one round a side (a sustained rate): its samples stand for rounds, and a sample at the
    # baseline's level keeps a −37% median from being called (unchanged default pair 1)
    d = regression.decide([193.2], [122.1], True, floor=floor,
                          samples=([188.5, 193.2, 197.9], [71.5, 122.1, 194.9]))
    assert d.outcome == regression.INCONCLUSIVE, d
    slow = regression.decide([193.2], [122.1], True, floor=floor,
                             samples=([188.5, 193.2, 197.9], [118.0, 122.1, 125.9]))
    assert slow.outcome == regression.REGRESSED, slow
