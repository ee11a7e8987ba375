"""history (#24): change points on synthetic series (planted steps at the right index, none on
pure noise of this VM's size), their attribution to the environment, the refusal of another
machine's runs, the exit codes and the files, JUnit included."""

import itertools
import math
import random
import re
import statistics

import pytest
from junitparser import JUnitXml
from synthetic_runs import CPU_FIGURES, cpu_run, environment, gpu_node

from benchbench import cli
from benchbench.analysis import change_points as cp
from benchbench.analysis import history_gate, max_t, two_cuts
from benchbench.compare import history, history_series
from benchbench.compare.series import without_device
from benchbench.compare.sides import CompareError
from benchbench.core import names, results
from benchbench.reports import history_csv, history_md, history_plots, history_text, ops_html


def series(n, steps=(), run_cv=0.0, round_cv=0.0, rounds=3, seed=0):
    """n runs of `rounds` values around 100, times each step's factor from its index on;
    lognormal noise per run (shared by its rounds) and per round."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        level = 100.0 * math.prod(f for at, f in steps if i >= at)
        run = level * math.exp(rng.gauss(0, run_cv))
        out.append([run * math.exp(rng.gauss(0, round_cv)) for _ in range(rounds)])
    return out


# --- the change points ------------------------------------------------------------------------

def test_planted_steps_are_found_at_their_index_with_levels_and_significance():
    pts = series(30, steps=((10, 0.85), (20, 1.10)), run_cv=0.02, round_cv=0.01, seed=1)
    shifts = cp.find(pts)
    assert [s.at for s in shifts] == [10, 20]
    down, up = shifts
    assert down.change_pct == pytest.approx(-15, abs=2.5) and down.p_value < 1e-6
    assert down.before == pytest.approx(100, rel=0.03) and down.after == pytest.approx(85, rel=0.03)
    assert up.change_pct == pytest.approx(10, abs=2.5) and up.runs == (10, 10)
    # the latest segment improved on the one before, but is still 7% below the first
    g = gate(pts)
    assert g.regressed and g.change_pct == pytest.approx(-6.5, abs=2.5) and g.steps == shifts


@pytest.mark.parametrize("seed", range(4))
def test_a_large_step_is_found_at_its_index_in_this_vms_noise(seed):
    """A 35% drop in 10% CV noise (this VM's run-to-run spread): found exactly where planted."""
    pts = series(40, steps=((25, 0.65),), run_cv=0.07, round_cv=0.07, seed=seed)
    (shift,) = cp.find(pts)
    assert shift.at == 25 and shift.change_pct < -25 and shift.p_value < cp.DEFAULT_ALPHA


@pytest.mark.parametrize("seed", range(12))
def test_no_change_point_on_pure_noise_of_this_vms_size(seed):
    """About 10% CV, half shared by a run's rounds, half per round: nothing to find."""
    pts = series(40, run_cv=0.07, round_cv=0.07, seed=100 + seed)
    assert 0.09 < math.expm1(math.hypot(0.07, 0.07)) < 0.11  # the CV of one value
    assert cp.find(pts) == []


def test_the_steps_of_a_staircase_pay_only_for_their_place_once_one_holds():
    """Four −4% steps over 30 runs at 1% noise, six runs a level: when each step also paid for
    its stretch among the series' others, 45 of the 64 steps of these 16 series were found;
    once a step holds in full, the others pay only for their place."""
    found = 0
    for seed in range(16):
        pts = series(30, steps=tuple((k * 6, 0.96) for k in range(1, 5)), run_cv=0.01,
                     round_cv=0.0025, seed=200 + seed)
        cuts = [s.at for s in cp.find(pts)]
        found += sum(any(abs(c - at) <= 1 for c in cuts) for at in (6, 12, 18, 24))
    assert found >= 48


def test_pure_noise_shows_a_change_point_only_where_one_held_paying_for_its_stretch(
        monkeypatch):
    """The second pass cannot give pure noise a change point that the first did not: at a loose
    alpha (so that noise does show some), the series with any change point are the same with
    and without it."""
    noise = [series(n, run_cv=0.03, round_cv=0.01, seed=300 + s)
             for n in (12, 30) for s in range(40)]
    any_cut = [bool(cp.find(pts, alpha=0.05)) for pts in noise]
    merge = cp._merge
    monkeypatch.setattr(cp, "_merge", lambda *a, **k: merge(*a, **{**k, "stretches": True}))
    first_pass = [bool(cp.find(pts, alpha=0.05)) for pts in noise]
    assert any_cut == first_pass and sum(any_cut) >= 2


def test_the_rounds_noise_joins_a_split_only_that_the_runs_own_spread_sees_at_a_hundredth():
    """Where the runs scatter more than their rounds say and the pre-test cannot tell (10
    degrees of freedom), pooling would make a split of p 0.0175 one of p 0.0008; a pooled
    split must also hold at POOLED_CHECK on the runs' own spread."""
    base = [0, 0.4, -0.5, 0.6, -0.3, 0.2, 0.1, 0.6, -0.3, 0.4, 0.0, 0.9]

    def split(step):
        y = [(v + (step if i >= 6 else 0)) * 0.01 for i, v in enumerate(base)]
        about = sum((v - statistics.mean(side)) ** 2 for side in (y[:6], y[6:]) for v in side)
        # three rounds a run whose variance says 0.8 of the runs' about the split: pooled by
        # the pre-test alone
        rounds = max_t.Rounds(0.8 * about / 10 * 3, 24, 3.0)
        assert max_t.agrees(about / 10, 10, rounds.run_var, rounds.df)
        return max_t.best_split(y, max_t.Rounds(0.0, 0, 1.0)), max_t.best_split(y, rounds)

    alone, both = split(0.8)
    assert 0.01 < alone.p < 0.02 and not both.pooled and both.p == alone.p
    alone, both = split(0.9)  # the runs alone see it at 0.0098: the rounds join in
    assert alone.p <= max_t.POOLED_CHECK and both.pooled and both.p < 0.001 < alone.p


def test_the_p_value_pays_for_the_best_split_exactly_not_by_bonferroni():
    """Pure noise's best split reaches p ≤ 1% in 1% of series (simulated): at 48 runs
    Bonferroni's factor would have said 2% or more, and Siegmund's approximation beyond the
    simulation agrees with it."""
    from scipy.stats import t as student


    for m in (12, 48):
        null = max_t._null(m, True)
        t01 = float(null[int(len(null) * 0.99)])  # the 1% point of the maximum t
        assert max_t.p_max(t01, m, m - 2) == pytest.approx(0.01, rel=0.1)
    assert 2 * student.sf(t01, 46) * (48 - 3) > 0.02
    assert max_t._siegmund(max_t._z_of(t01, 46), 48) == pytest.approx(0.01, rel=0.25)


@pytest.mark.parametrize("seed", range(6))
def test_a_single_bad_run_is_an_outlier_run_not_two_change_points(seed):
    """A run 25% slow in the middle of 30 runs at 2% noise: one outlier run, no change point,
    and the levels do not count it."""
    pts = series(30, run_cv=0.02, round_cv=0.005, seed=40 + seed)
    pts[15] = [v * 0.75 for v in pts[15]]
    found = cp.detect(pts)
    assert found.shifts == []
    (odd,) = found.outliers
    assert odd.at == 15 and not odd.latest and odd.change_pct == pytest.approx(-25, abs=5)
    assert [s.runs for s in found.segments] == [tuple(i for i in range(30) if i != 15)]


def test_the_latest_run_alone_far_off_is_an_outlier_run_that_the_gate_counts():
    pts = series(20, run_cv=0.02, round_cv=0.005, seed=5)
    pts[-1] = [v * 0.75 for v in pts[-1]]
    found = cp.detect(pts)
    assert found.shifts == [] and [(o.at, o.latest) for o in found.outliers] == [(19, True)]
    g = history_gate.judge(pts, found, True, 5.0, cp.DEFAULT_ALPHA)
    assert g.regressed and g.latest_what == "the latest run alone (run 20)"
    # two runs slow together are a new level: a change point, not an outlier run
    pts[-2] = [v * 0.75 for v in pts[-2]]
    found = cp.detect(pts)
    assert [s.at for s in found.shifts] == [18] and found.outliers == []


def test_the_latest_run_alone_is_held_by_students_prediction_test_not_a_normal_tail():
    """Six runs at 3% noise whose latest is 9.4% low: the robust noise of so few runs reads it
    6.4 noises off, which as a normal tail says p 2e-10 and exit 3. Against the mean and spread
    of the five before it (Student's prediction interval, 4 degrees of freedom) it is p 0.036:
    one healthy run in 28 reads that, and the gate does not exit."""
    from scipy.stats import norm
    from scipy.stats import t as student

    pts = series(6, run_cv=0.03, round_cv=0.0075, seed=1968)
    found = cp.detect(pts)
    (odd,) = found.outliers
    assert odd.latest and odd.z < -6 and 2 * norm.sf(abs(odd.z)) < 1e-9
    logs = cp.run_logs(pts)
    before = logs[:-1]
    t = (statistics.mean(before) - logs[-1]) / (statistics.stdev(before) * math.sqrt(1 + 1 / 5))
    g = history_gate.judge(pts, found, True, 5.0, cp.DEFAULT_ALPHA)
    assert g.latest_what == "the latest run alone (run 6)" and g.change_pct < -9
    assert g.p_value == pytest.approx(float(student.sf(t, 4))) and 0.03 < g.p_value < 0.04
    assert not g.regressed


def test_the_noise_of_a_few_runs_is_read_about_zero_not_about_the_differences_own_median():
    """The successive differences of a level lie about 0. About their own median, four runs
    (three differences, one of them its own median) read the least of the other two: 0.61 σ
    at the median and under σ / 10 in one series in ten, so six healthy runs at 3% whose latest
    is 6.5% low read it 11 noises off, an outlier run. About 0 they read σ."""
    rng = random.Random(4)
    reads = sorted(cp.noise([rng.gauss(0, 1) for _ in range(4)]) for _ in range(2000))
    assert 0.9 < statistics.median(reads) < 1.1
    assert sum(r < 0.1 for r in reads) < 40  # 2% (it was 9.7%)
    pts = series(6, run_cv=0.03, round_cv=0.0075, seed=244)
    assert 0.01 < cp.noise(cp.run_logs(pts)) < 0.03 and cp.detect(pts).outliers == []


def test_a_drifts_latest_run_off_its_segments_level_does_not_undo_the_drifts_verdict():
    """−10% over 12 runs at 1% noise: the latest run lies off its segment's one level, as an
    outlier run does, and held alone against that level, with the drift in its noise, it is
    p 0.029. The drift holds at p 1e-6 and exits 3. It exited 0 in 55 of 1,000 such histories
    (--gate) while the latest run alone replaced whatever level it was worse than."""
    levels = [100 * (1 - 0.1 * (i + 1) / 12) for i in range(12)]
    pts = series(12, steps=tuple((i, levels[i] / (levels[i - 1] if i else 100))
                                 for i in range(12)), run_cv=0.01, round_cv=0.0025, seed=255)
    found = cp.detect(pts)
    (odd,) = found.outliers
    assert odd.latest and not found.shifts
    assert 0.02 < history_gate._alone_p(pts, found.segments, odd.at) < 0.04
    g = history_gate.judge(pts, found, True, 5.0, cp.DEFAULT_ALPHA)
    assert g.latest_what.startswith("the latest segment's drift") and g.p_value < 1e-5
    assert g.regressed and g.change_pct == pytest.approx(-8.3, abs=0.1)


def test_identical_values_and_short_series_have_no_change_point():
    assert cp.find([[5.0, 5.0]] * 10) == []
    # beyond the simulated null (48 runs), Siegmund's approximation at a t of 0 divided by 0
    assert cp.find([[5.0, 5.0]] * 100) == [] and max_t.p_max(0.0, 100, 98) == 1.0
    assert cp.find([[5.0], [1.0]]) == []  # fewer than MIN_RUNS
    assert [s.at for s in cp.find([[5.0, 5.0]] * 5 + [[4.0, 4.0]] * 5)] == [5]


def test_two_steps_that_hold_only_at_once_are_one_change_point_at_the_best_split(monkeypatch):
    """Two −10% steps in 12 runs at 3% noise: no split holds alone (the best, at run 9, p
    0.0011), and the pair holds jointly (p 0.0003) but its first cut given the other does not
    (0.025): the series is no noise, so one change point, at the best split, held by the pair's
    p. Pure noise of 12 runs gains one in 400 series (alpha says 0.4)."""
    pts = series(12, steps=((4, 0.9), (8, 0.9)), run_cv=0.03, round_cv=0.01, seed=0)
    y, rounds = cp.run_logs(pts), cp.rounds_noise(pts)
    pair, split = two_cuts.best(y, rounds), max_t.best_split(y, rounds)
    assert pair.p <= 0.001 < split.p and max(pair.each) > 0.001 * two_cuts.each_given(pair)
    (x,) = cp.detect(pts).shifts
    assert x.at == split.at == 8 and x.p_value == pair.p and x.change_pct < -10
    noise = [series(12, run_cv=0.03, round_cv=0.03, seed=1000 + k) for k in range(400)]
    now = sum(len(cp.find(q)) for q in noise)
    monkeypatch.setattr(cp, "ONE_OF_PAIR", False)
    assert cp.detect(pts).shifts == []
    assert 0 <= now - sum(len(cp.find(q)) for q in noise) <= 2


def test_a_drop_and_its_recovery_are_both_found():
    """A single split sees a dip and its recovery as one stretch that moved little; PELT's
    candidates see both ends."""
    pts = series(30, steps=((10, 0.9), (20, 1 / 0.9)), run_cv=0.01, round_cv=0.003, seed=2)
    assert [s.at for s in cp.find(pts)] == [10, 20]



@pytest.mark.parametrize("seed", range(4))
def test_a_short_drop_of_four_runs_is_a_level_not_three_outlier_runs(seed):
    """A −10% drop over runs 4–7 of 12 at 1% noise, back after: each of its runs has five
    neighbours a side that are mostly of the level around it, but runs beside it that are off
    with it, so the drop is a level between two change points, and no run of it an outlier."""
    pts = series(12, steps=((4, 0.9), (8, 1 / 0.9)), run_cv=0.01, round_cv=0.0025, seed=seed)
    found = cp.detect(pts)
    assert found.outliers == []
    assert [s.at for s in found.shifts] == [4, 8]
    # one run off alone there is still an outlier run
    pts = series(12, run_cv=0.01, round_cv=0.0025, seed=seed)
    pts[5] = [v * 0.9 for v in pts[5]]
    assert [o.at for o in cp.detect(pts).outliers] == [5]


# --- recorded changes -------------------------------------------------------------------------

def test_a_step_at_a_recorded_change_is_tested_there_alone():
    """−10% in the middle of 12 runs at 3% noise: the best split of 12 runs must pass a t that
    noise passes once in a thousand series, and misses about half such steps; where the
    environment changed at the step, the place was given, and Student's t there holds it."""
    blind = recorded = 0
    for seed in range(40):
        pts = series(12, steps=((6, 0.9),), run_cv=0.03, round_cv=0.0075, seed=300 + seed)
        blind += any(abs(x.at - 6) <= 1 for x in cp.find(pts))
        recorded += any(x.at == 6 for x in cp.find(pts, changes=[6]))
    assert blind <= 28 and recorded >= 36  # measured: 19 and 38 of 40
    pts = series(12, steps=((6, 0.9),), run_cv=0.03, round_cv=0.0075, seed=300)
    assert cp.find(pts) == []
    (x,) = cp.find(pts, changes=[6])
    assert x.given and x.held_at == cp.AT_CHANGE * cp.DEFAULT_ALPHA
    assert cp.DEFAULT_ALPHA < x.p_value <= x.held_at
    g = history_gate.judge(pts, cp.detect(pts, changes=[6]), True, 5.0, cp.DEFAULT_ALPHA)
    assert g.regressed and g.held_at == x.held_at and g.steps == [x]
    assert not gate(pts).regressed  # nothing recorded: nothing to hold it


def test_the_newest_two_runs_are_tested_at_their_place_alone():
    """−5% in the last two of 12 runs at 1% noise: the best split of 12 runs finds about two
    in three; whether the newest runs are a new level is the question asked after every run,
    so their place is given, and Student's t there at alpha finds nearly all."""
    found = newest = 0
    for seed in range(60):
        pts = series(12, steps=((10, 0.95),), run_cv=0.01, round_cv=0.0025, seed=700 + seed)
        shifts = cp.find(pts)
        found += any(abs(x.at - 10) <= 1 for x in shifts)
        newest += any(x.at == 10 and x.given == cp.NEWEST for x in shifts)
    assert found >= 52 and newest >= 8, (found, newest)  # measured: 57 and 12 (before: 45)
    pts = next(p for p in (series(12, steps=((10, 0.95),), run_cv=0.01, round_cv=0.0025,
                                  seed=700 + seed) for seed in range(60))
               if [x.given for x in cp.find(p)] == [cp.NEWEST])
    (x,) = cp.find(pts)
    assert x.at == 10 and x.held_at == cp.DEFAULT_ALPHA and x.p_value <= x.held_at
    assert history_text.shift_p_text(x).endswith(
        ", tested at the newest two runs' place against 0.001")
    g = history_gate.judge(pts, cp.detect(pts), True, 3.0, cp.DEFAULT_ALPHA)
    assert g.regressed and g.steps == [x] and g.p_value == x.p_value
    # where a change was recorded at that place, the record's test holds it, at its level
    (y,) = cp.find(pts, changes=[10])
    assert y.given == cp.RECORDED and y.held_at == cp.at_change(cp.DEFAULT_ALPHA)


def test_the_newest_runs_place_costs_pure_noise_about_alpha():
    """Its test is Student's t at a place given before the data: on pure noise it holds in
    about alpha of series. At 0.05, to count them: 16 of 400 series of 12 runs at 3% noise
    (binomial: 20 at most, less where a chosen cut lies there); at the default, none of 400."""
    def newest(alpha):
        return sum(x.given == cp.NEWEST for seed in range(400) for x in cp.find(
            series(12, run_cv=0.03, round_cv=0.0075, seed=5000 + seed), alpha=alpha))
    assert 8 <= newest(0.05) <= 32 and newest(cp.DEFAULT_ALPHA) <= 2


def test_a_recorded_change_that_moved_nothing_is_rarely_a_change_point():
    """At 10 α, about one series in a hundred; the recorded changes of a series share it."""
    idle = sum(bool(cp.find(series(12, run_cv=0.03, round_cv=0.0075, seed=400 + s),
                            changes=[6])) for s in range(300))
    assert idle <= 9  # measured: 3 of 300
    # a clear step beside many recorded changes stays where the data put it
    pts = series(40, steps=((20, 0.9),), run_cv=0.02, round_cv=0.005, seed=5)
    (x,) = cp.find(pts, changes=range(3, 38, 4))
    assert x.at == 20 and x.p_value < cp.DEFAULT_ALPHA and not x.given
    # a −3% step that only its recorded change holds: alone, at 10 α; among nine, at a ninth
    weak = series(40, steps=((20, 0.97),), run_cv=0.02, round_cv=0.005, seed=8)
    assert cp.find(weak) == []
    (alone,) = cp.find(weak, changes=[20])
    (shared,) = cp.find(weak, changes=[*range(4, 20, 4), 20, *range(24, 37, 4)])
    assert alone.at == shared.at == 20 and alone.given and shared.given
    assert alone.held_at == cp.AT_CHANGE * cp.DEFAULT_ALPHA
    assert shared.held_at == pytest.approx(cp.AT_CHANGE * cp.DEFAULT_ALPHA / 9)
    # --alpha 0.2 would give 2: the changes never share more than a half
    assert cp.at_change(0.2) == 0.5
    assert all(x.held_at <= 0.5 for x in cp.find(weak, alpha=0.2, changes=[20]))


def test_the_two_runs_since_a_recorded_change_are_a_level_not_an_outlier_run():
    """A driver update two runs before the latest: the runs since are 10% and 28% slow, or 28%
    and 12%. Nothing recorded, the run far off is an outlier run (the latest, or the one whose
    successor is nearer the old level); with the update recorded, the two since it are a new
    level, found at the update."""
    flat = series(28, run_cv=0.01, round_cv=0.0025, seed=12)
    for tail, odd in (((90.0, 72.0), 29), ((72.0, 88.0), 28)):
        pts = flat + [[v] * 3 for v in tail]
        blind = cp.detect(pts)
        assert [o.at for o in blind.outliers] == [odd]
        recorded = cp.detect(pts, changes=[28])
        assert recorded.outliers == [] and [x.at for x in recorded.shifts] == [28]


def test_the_p_of_a_given_place_is_students_t_there_for_every_place_at_once():
    pts = series(20, steps=((8, 0.95),), run_cv=0.02, round_cv=0.005, seed=11)
    y, rounds = cp.run_logs(pts), cp.rounds_noise(pts)
    every = max_t.p_given_each(y, rounds)
    assert len(every) == 19 and every[0] == every[-1] == 1.0  # a side of one run
    for k in range(2, 19):
        split = max_t.split_at(y, k, rounds)
        assert every[k - 1] == pytest.approx(max_t.p_given(split.t, split.df))
        assert every[k - 1] <= split.p  # the chosen place pays for the choice


@pytest.mark.parametrize(("n", "given"), [(12, False), (12, True), (30, False), (30, True)])
def test_the_step_a_series_sees_is_found_about_half_the_time(n, given):
    """max_t.smallest_step: a slowdown of that size in the middle of n runs at 3% noise is found
    in about half of 150 seeded series (blind, or tested at its recorded change); one of twice
    the size nearly always, one of half the size seldom."""
    alpha = cp.DEFAULT_ALPHA
    step = max_t.smallest_step(n, 0.03, cp.at_change(alpha) if given else alpha, given=given)

    def found(factor):
        hits = 0
        for seed in range(150):
            rng = random.Random(seed)
            pts = [[100 * math.exp(-step * factor * (i >= n // 2) + rng.gauss(0, 0.03))] * 3
                   for i in range(n)]
            shifts = cp.detect(pts, True, alpha, [n // 2] if given else []).shifts
            hits += any(abs(x.at - n // 2) <= 3 for x in shifts)
        return hits / 150

    assert 0.35 <= found(1.0) <= 0.7
    assert found(2.0) >= 0.95 and found(0.5) <= 0.2
    assert max_t.smallest_step(3, 0.03, alpha) is None
    assert max_t.smallest_step(n, 0.0, alpha) is None


# --- the gate ---------------------------------------------------------------------------------

def gate(pts, **kw):
    return history_gate.judge(pts, cp.detect(pts), True, kw.pop("threshold", 5.0),
                              cp.DEFAULT_ALPHA, **kw)


@pytest.mark.parametrize("seed", range(6))
def test_a_staircase_of_small_steps_exits_on_its_sum(seed):
    """Four −4% steps over 100 runs at 1% noise: each passes a 5% threshold alone, their sum
    (−15%) does not."""
    pts = series(100, steps=tuple((k * 20, 0.96) for k in range(1, 5)), run_cv=0.01,
                 round_cv=0.003, seed=60 + seed)
    g = gate(pts)
    assert g.regressed and g.change_pct == pytest.approx(-15, abs=2.5)
    assert len(g.steps) >= 3 and g.reference_what.startswith("the best segment (runs 1–")


@pytest.mark.parametrize("seed", range(4))
def test_a_slow_drift_exits(seed):
    """−10% linearly over the last 30 of 60 runs at 1% noise."""
    rng = random.Random(70 + seed)
    pts = [[100 * (1 - 0.1 * max(0, i - 29) / 30) * math.exp(rng.gauss(0, 0.01))] * 2
           for i in range(60)]
    assert gate(pts).regressed


def drift(n, total, run_cv, seed):
    """n runs sliding linearly to `total` (the level at the last run against the start)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        run = 100 * (1 - (1 - total) * (i + 1) / n) * math.exp(rng.gauss(0, run_cv))
        out.append([run * math.exp(rng.gauss(0, run_cv / 4)) for _ in range(3)])
    return out


def test_a_drift_short_of_alpha_reads_beyond_the_threshold_not_held(monkeypatch):
    """−10% over 12 runs at 3% noise: its trend holds at alpha in about a third of histories.
    Where it holds only at ten times alpha (at_change), the gate reads the drift anyway, not
    regressed but beyond the threshold and not held ("more runs will tell"), where the latest
    segment's level alone read it as level: no exit changes, and pure noise reads so in about
    1% of series."""
    def kinds() -> list[str]:
        out = []
        for seed in range(60):
            g = gate(drift(12, 0.9, 0.03, seed))
            out.append("exit" if g.regressed else "unheld" if g.change_pct < -5 else "quiet")
        return out

    now = kinds()
    with monkeypatch.context() as m:
        m.setattr(history_gate, "at_change", lambda alpha: alpha)  # no note: as before
        before = kinds()
    assert [k == "exit" for k in now] == [k == "exit" for k in before]
    assert now.count("unheld") >= 20 and before.count("unheld") <= 2, (now, before)
    g = gate(drift(12, 0.9, 0.03, 6))
    assert not g.regressed and g.change_pct == pytest.approx(-10.2, abs=0.1)
    assert cp.DEFAULT_ALPHA < g.p_value <= cp.at_change(cp.DEFAULT_ALPHA)
    assert g.latest_what == "the latest segment's drift at its last run (−0.97% a run)"
    assert g.reference_what == "the latest segment's start (runs 1–12)"
    noise = [gate(series(12, run_cv=0.03, round_cv=0.0075, seed=1000 + seed))
             for seed in range(300)]
    assert sum(not g.regressed and g.change_pct < -5 for g in noise) <= 8


def late_drift(seed, n=100, span=30, run_cv=0.03):
    """n runs level, then −10% linearly over the last `span`; rounds at a quarter of the
    run's noise."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        run = 100 * (1 - 0.1 * max(0, i - (n - span - 1)) / span) * math.exp(rng.gauss(0, run_cv))
        out.append([run * math.exp(rng.gauss(0, run_cv / 4)) for _ in range(3)])
    return out


def test_a_drift_after_a_step_is_read_at_its_last_run(monkeypatch):
    """−10% over the last 30 of 100 runs at 3% noise: change points cut it into a level and
    a step, and the latest segment's level, its middle, read it as −6%, short of holding
    beyond the 5% threshold. Where the latest segment's own runs still drift (at
    DRIFT_AFTER_STEPS), the gate reads where that drift has taken them: 40 of 40 histories
    exit, 37 before. A −3% step is read so no more often than before: none exit."""
    def exits(make) -> list[bool]:
        return [gate(make(seed)).regressed for seed in range(40)]

    drifts = exits(late_drift)
    steps = exits(lambda seed: series(100, steps=((50, 0.97),), run_cv=0.03,
                                      round_cv=0.0075, seed=500 + seed))
    with monkeypatch.context() as m:
        m.setattr(history_gate, "DRIFT_AFTER_STEPS", 0.0)
        drifts_before = exits(late_drift)
        g_before = gate(late_drift(0))
    assert sum(drifts) == 40 and sum(drifts_before) == 37 and not any(steps)
    assert not g_before.regressed and g_before.latest_what.startswith("the latest segment (")
    assert g_before.change_pct == pytest.approx(-5.8, abs=0.1) and g_before.beyond_p > 0.05
    g = gate(late_drift(0))
    assert g.regressed and g.change_pct == pytest.approx(-9.3, abs=0.1)
    assert g.latest_what == "the latest segment's drift at its last run (−0.33% a run)"
    assert g.reference_what.startswith("the best segment (runs 1–")
    assert cp.DEFAULT_ALPHA < g.trend.p_value <= history_gate.DRIFT_AFTER_STEPS
    assert g.drift is g.trend  # the plot draws it


@pytest.mark.parametrize("seed", (13, 15, 16, 29))
def test_a_drift_cut_by_change_points_is_held_whole(seed):
    """−10% over 12 runs at 1% noise, cut into segments: the segments read −4% to −9%; the
    drift since the best segment's start reads it whole (−9.2% from run 1 to run 12)."""
    pts = drift(12, 0.9, 0.01, seed)
    found = cp.detect(pts)
    assert len([s for s in found.segments if s.runs]) > 1
    g = history_gate.judge(pts, found, True, 5.0, cp.DEFAULT_ALPHA)
    assert g.regressed and g.change_pct == pytest.approx(-9.2, abs=1.5)
    assert g.latest_what.startswith("the drift since run 1 at its last run (−0.")
    assert g.reference_what == "the drift's start (run 1)" and g.across


def named(h, name):
    return next(s for s in h.series if s.name == name)


def test_the_report_says_change_points_cut_the_drift(tmp_path):
    for i, run in enumerate(drift(12, 0.9, 0.01, 13)):
        d = tmp_path / f"r{i:03d}"
        d.mkdir()
        results.save(cpu_run(day(i), base=run[0] / 100, rounds=tuple(v / run[0] for v in run)),
                     d / "results.json")
    h = history.build([str(tmp_path / "r*")])
    text = history_text.gate_text(h, named(h, "matmul peak fp32"))
    assert text.startswith("matmul peak fp32 −1")
    assert ": the drift since run 1 at its last run (−0." in text
    assert text.endswith("a run) against the drift's start (run 1) (p < 0.001); change points "
                         "cut the drift at run 8 (2026-10-08)")
    # the plot draws the drift the gate read, from run 1 to run 12, not only the segments
    s = named(h, "matmul peak fp32")
    line, = [x for x in history_plots.series_figure(h, s).axes[0].lines
             if x.get_label() == "drift (the gate's latest level)"]
    assert list(line.get_xdata()) == [1, 12] and line.get_color() == history_plots.SHIFT
    assert list(line.get_ydata()) == [s.gate.trend.start, s.gate.trend.end] == [
        s.gate.reference, s.gate.latest]
    # a series whose gate reads a segment's level draws no drift
    flat = history_series.Series("flat", "p", "m", s.key, "B/s", True, True, runs=s.runs,
                                 points=s.points, values=s.values, segments=s.segments)
    assert not [x for x in history_plots.series_figure(h, flat).axes[0].lines
                if x.get_label().startswith("drift")]


def test_the_trend_takes_the_rounds_noise_in():
    """Runs that scatter as their rounds say: the rounds' degrees of freedom join the line's
    residuals, and more 12-run drifts (−10% at 3%) hold than on the runs' values alone."""
    from scipy.stats import linregress

    held = alone = 0
    for seed in range(60):
        rng = random.Random(seed)
        pts = [[100 * (1 - 0.1 * (i + 1) / 12) * math.exp(rng.gauss(0, 0.03 * math.sqrt(3)))
                for _ in range(3)] for i in range(12)]
        held += history_gate.trend(pts, range(12), True).p_value <= cp.DEFAULT_ALPHA
        fit = linregress(range(12), cp.run_logs(pts))
        alone += fit.pvalue / 2 <= cp.DEFAULT_ALPHA and fit.slope < 0
    assert held > alone + 3
    one = [[v[0]] for v in drift(12, 0.9, 0.03, 5)]  # one round a run: nothing to take in
    fit = linregress(range(12), cp.run_logs(one))
    assert history_gate.trend(one, range(12), True).p_value == pytest.approx(fit.pvalue / 2)


def test_the_gate_needs_the_threshold_and_a_baseline_moves_the_reference():
    pts = series(40, steps=((20, 0.96),), run_cv=0.005, round_cv=0.002, seed=8)
    assert not gate(pts).regressed  # −4% is within 5%
    assert gate(pts, threshold=3).regressed
    up = series(40, steps=((10, 0.8), (25, 1.25)), run_cv=0.005, round_cv=0.002, seed=9)
    assert not gate(up).regressed  # recovered: the latest segment is the best
    g = gate(pts, threshold=3, baseline=0)
    assert g.regressed and g.reference_what.startswith("run 1 (--baseline)")


@pytest.mark.parametrize("runs,lead", [(2, 1.10), (3, 1.25)])
def test_a_better_spell_of_a_few_runs_is_not_the_gates_reference(runs, lead):
    """Two nights 10% fast (three 25% fast) in the middle of 30 runs at 1% noise, back after:
    change points either side of them, but the machine is where it always was. Held against
    that spell, every run after it exited 3; the reference is the best level it held."""
    pts = series(30, steps=((15, lead), (15 + runs, 1 / lead)), run_cv=0.01, round_cv=0.003,
                 seed=31)
    found = cp.detect(pts)
    assert [x.at for x in found.shifts] == [15, 15 + runs]
    g = history_gate.judge(pts, found, True, 5.0, cp.DEFAULT_ALPHA)
    assert not g.regressed and abs(g.change_pct) < 2
    assert re.search(rf"^the best segment \(runs (1–15|{16 + runs}–30); runs 16–{15 + runs} "
                     rf"were better, but a spell of {runs} runs, not a level\)$",
                     g.reference_what)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(history_gate, "SPELL_RUNS", 0)  # as before: the spell was the reference
        assert history_gate.judge(pts, found, True, 5.0, cp.DEFAULT_ALPHA).regressed


def test_a_gain_held_for_longer_than_a_spell_and_lost_still_exits():
    """+10% held four runs and lost, and a spell followed by a real −10% step: both exit, the
    first against the gain, the second against the level held before the spell."""
    lost = gate(series(30, steps=((10, 1.1), (14, 1 / 1.1)), run_cv=0.01, round_cv=0.003,
                       seed=32))
    assert lost.regressed and lost.reference_what == "the best segment (runs 11–14)"
    after = gate(series(40, steps=((15, 1.1), (17, 1 / 1.1), (30, 0.9)), run_cv=0.01,
                        round_cv=0.003, seed=33))
    assert after.regressed and after.change_pct == pytest.approx(-10, abs=2)
    assert "; runs 16–17 were better, but a spell of 2 runs" in after.reference_what


@pytest.mark.parametrize("seed", range(10))
def test_pure_noise_is_quiet_and_passes_the_gate(seed):
    for n, cv in ((12, 0.03), (30, 0.05), (100, 0.10)):
        pts = series(n, run_cv=cv, round_cv=cv / 4, seed=200 + seed)
        assert cp.find(pts) == [] and not gate(pts).regressed


# --- history from files -----------------------------------------------------------------------

def day(i):
    return f"2026-{10 + i // 28:02d}-{i % 28 + 1:02d}T02:00:00+00:00"


def save_runs(root, n=24, drop_at=12, factor=0.85, env_of=None, name="r", seed=3, start=0,
              nights=None):
    """`nights`: {run index: factor}, single runs that every figure measured off."""
    rng = random.Random(seed)
    for i in range(n):
        base = ((factor if i >= drop_at else 1.0) * (nights or {}).get(i, 1.0)
                * math.exp(rng.gauss(0, 0.02)))
        rounds = tuple(math.exp(rng.gauss(0, 0.01)) for _ in range(2))
        env = env_of(i) if env_of else environment()
        d = root / f"{name}{i:03d}"
        d.mkdir()
        results.save(cpu_run(day(start + i), base=base, rounds=rounds, env=env),
                     d / "results.json")


def drivers(i):
    """550 until run 12 (index 11), 560 from run 13; a kernel update at run 19 that moved
    nothing."""
    return environment(driver="550.54.15" if i < 12 else "560.28.03",
                       kernel="6.8.0" if i < 18 else "6.8.12")


def test_the_drop_is_attributed_to_the_driver_between_the_runs_around_it(tmp_path):
    save_runs(tmp_path, env_of=drivers)
    h = history.build([str(tmp_path / "r*")])
    assert len(h.runs) == 24 and h.machine == "vm"
    assert {s.name for s in h.series} >= {"matmul peak fp32", "resnet50 fp32 64px",
                                          "storage seq1m", "dataloader best 224px"}
    for s in h.series:
        (x,) = s.shifts
        assert s.run_at(x.at) == 13 and s.regression is not None and s.regression.steps == [x]
        (cause,) = s.causes[0]
        assert (cause.field, cause.before, cause.after) == ("driver", "550.54.15", "560.28.03")
        assert cause.runs == (12, 13)
    assert [(c.field, c.runs) for c in h.changes] == [("driver", (12, 13)), ("kernel", (18, 19))]
    text = history_text.shift_text(h, named(h, "matmul peak fp32"), 0)
    assert text.startswith("run 13 (2026-10-13): matmul peak fp32 −")
    assert text.endswith("(p < 0.001); driver 550.54.15 → 560.28.03 between runs 12 and 13")


def test_a_small_drop_at_a_driver_update_is_tested_at_the_update(tmp_path):
    """−5% in 12 runs at 2% noise: found where the driver changed, and said to be tested
    there; the very same runs with nothing recorded changing show no change point. A drop of
    the threshold itself does not fail the gate: it is not held beyond it (issue 71)."""
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    save_runs(tmp_path / "a", n=12, drop_at=6, factor=0.95, seed=6, env_of=lambda i: environment(
        driver="550.54.15" if i < 6 else "560.28.03"))
    save_runs(tmp_path / "b", n=12, drop_at=6, factor=0.95, seed=6)
    h = history.build([str(tmp_path / "a" / "r*")])
    for s in h.series:
        (x,) = s.shifts
        assert s.run_at(x.at) == 7 and x.given and x.held_at == 10 * h.alpha
        assert s.gate is not None and s.gate.held_at == x.held_at and s.regression is None
        assert s.gate.beyond_p > history_gate.BEYOND_LEVEL
    text = history_text.shift_text(h, named(h, "matmul peak fp32"), 0)
    assert text.endswith("(p = 0.0033, tested at its recorded change against 0.01); driver "
                         "550.54.15 → 560.28.03 between runs 6 and 7")
    assert {r["p_held_at"] for r in history_csv.csv_rows(h)[1] if r["change_point"]} == {0.01}
    assert all(s.shifts == [] for s in history.build([str(tmp_path / "b" / "r*")]).series)


def test_the_summary_names_what_changed_at_each_step_in_run_order_the_quiet_ones_once(
        tmp_path, capsys):
    """Four −6% steps at runs 7, 13, 19 and 25 (the 10th step's run sorts before the 7th's as a
    string), a driver update at the third: one clause for it, one for the three where nothing
    recorded changed, in the order of their runs."""
    rng = random.Random(4)
    for i in range(30):
        d = tmp_path / f"r{i:03d}"
        d.mkdir()
        env = environment(driver="550.54.15" if i < 18 else "560.28.03")
        results.save(cpu_run(day(i), base=0.94 ** (i // 6) * math.exp(rng.gauss(0, 0.003)),
                             rounds=(0.999, 1.001), env=env), d / "results.json")
    assert cli.main(["history", str(tmp_path / "r*")]) == 3
    said = [line for line in capsys.readouterr().out.splitlines()
            if line.startswith("What changed around their steps")]
    assert said == ["What changed around their steps: driver 550.54.15 → 560.28.03 between "
                    "runs 18 and 19; nothing recorded changed between runs 6 and 7, 12 and 13, "
                    "and 24 and 25."]


def test_a_bad_night_in_every_series_is_one_outlier_row_that_the_index_measures(tmp_path):
    """Run 11 of 20 is 24% slow in all seven figures: one row, 'all 8 series' with the index,
    its value the index's, not eight rows saying the same."""
    save_runs(tmp_path, n=20, drop_at=99, nights={10: 0.76})
    h = history.build([str(tmp_path / "*")])
    assert all([s.run_at(o.at) for o in s.outliers] == [11] for s in h.series)
    odd = history_md.render(h).split("## Outlier runs")[1].split("## ")[0]
    rows = [x.split(" | ") for x in odd.splitlines() if x.startswith("| ")][1:]
    assert len(rows) == 1 and rows[0][:3] == ["| 11", "2026-10-11", "all 8 series"], odd
    assert re.fullmatch(r"−2\d\.\d%( to −2\d\.\d%)?", rows[0][3]) and re.fullmatch(
        r"all 7 headline figures \(weighted\): 7\d\.\d% against \d+\.\d%", rows[0][4]), rows
    # a row of one figure names it; of many, four and how many more
    one = history_text.figures_text(h, [[h.series[3]]])
    assert one == h.series[3].name
    six = history_text.figures_text(h, [[s] for s in h.series[1:7]])
    assert six == ", ".join(s.name for s in h.series[1:4]) + f", {h.series[4].name} and 2 " \
        "more figures", six


def test_a_regression_after_a_fast_spell_is_held_against_the_level_the_machine_held(tmp_path):
    """Runs 11–12 of 28 were 12% fast, and run 21 on is 12% slow: one summary line for every
    series, against the level before run 21, and the spell named there, not the reference."""
    save_runs(tmp_path, n=28, drop_at=20, factor=0.88, nights={10: 1.12, 11: 1.12}, seed=5)
    h = history.build([str(tmp_path / "*")])
    summary = history_md.render(h).split("## Summary")[1].split("## ")[0]
    (line,) = [x for x in summary.splitlines() if x.startswith("- all 8 series −")]
    assert ": the latest segment (runs 21–28) against the best segment (runs 13–20; runs 11–12 " \
        "were better, but a spell of 2 runs, not a level)" in line, line
    assert re.search(r"−1[0-3]\.\d%:", line) and len(h.regressions) == 8


def save_stolen(root, stolen, n=20, slow=0.88):
    """n CPU runs at 1% noise; those in `stolen` (indices) `slow` and each probe's telemetry
    reading CPU steal, a different share per probe (21%, 22%, …), the others none."""
    rng = random.Random(3)
    probes = sorted({f[0] for f in CPU_FIGURES})
    for i in range(n):
        base = (slow if i in stolen else 1.0) * math.exp(rng.gauss(0, 0.01))
        steal = {p: (0.21 + 0.01 * k if i in stolen else 0.0) for k, p in enumerate(probes)}
        d = root / f"r{i:03d}"
        d.mkdir()
        results.save(cpu_run(day(i), base=base, steal=steal,
                             rounds=tuple(math.exp(rng.gauss(0, 0.005)) for _ in range(2))),
                     d / "results.json")


def test_a_short_level_says_what_its_first_run_and_the_run_after_it_recorded(tmp_path):
    """Runs 9–11 of 20 are 12% slow, each probe's telemetry reading 21–26% CPU steal (another
    tenant for three nights): a change point down at run 9 and up at 12 in every series,
    nothing recorded changed in the environment, but each change point says what its run's
    own record shows against the run before it, each probe's steal spanned (the machine's
    index, which has no probe, reads its figures')."""
    save_stolen(tmp_path, stolen=range(8, 11))
    h = history.build([str(tmp_path / "*")])
    assert all([s.run_at(x.at) for x in s.shifts] == [9, 12] for s in h.series)
    rows = [x.split(" | ") for x in history_md.render(h).split("## Change points")[1]
            .split("## ")[0].splitlines() if x.startswith("| ")][1:]
    # every series moved alike at each: a row each, the index's levels standing for them all
    assert [r[:2] for r in rows] == [["| all 8 series", "9"], ["| all 8 series", "12"]], rows
    assert re.fullmatch(r"all 7 headline figures \(weighted\): 8\d\.\d%", rows[0][4]), rows[0]
    assert rows[0][-1] == ("nothing recorded changed between runs 8 and 9; run 9's own record: "
                           "CPU steal 21.0% to 26.0% where run 8 has 0.0% |"), rows[0]
    assert rows[1][-1] == ("nothing recorded changed between runs 11 and 12; run 12's own "
                           "record: CPU steal 0.0% where run 11 has 21.0% to 26.0% |"), rows[1]
    # the summary reads the two as one spell that came back, not two unrelated steps
    summary = history_md.render(h).split("## Summary")[1].split("## ")[0]
    back = [x for x in summary.splitlines() if x.startswith("- ")]
    assert len(back) == 1 and re.fullmatch(
        r"- runs 9–11 \(2026-10-09 to 2026-10-11\): all 8 series −1\d\.\d%, back at run 12 "
        r"\(−?\d\.\d% against before\); nothing recorded changed between runs 8 and 9; run 9's "
        r"own record: CPU steal 21\.0% to 26\.0% where run 8 has 0\.0%", back[0]), summary
    # the JUnit case names the run's own record beside the step
    resnet = named(h, "resnet50 fp32 64px")
    assert history_text.shift_text(h, resnet, 0).endswith(
        "nothing recorded changed between runs 8 and 9; run 9's own record: CPU steal 24.0% "
        "where run 8 has 0.0%")


@pytest.mark.parametrize("levels, higher, back", [
    ((100, 87, 100), True, [0]),  # a dip and its return
    ((100, 87, 100, 87, 100), True, [0, 2]),  # two dips, not a rise between them
    ((100, 85, 93), True, []),  # half the way back is a new level
    ((100, 90, 80), True, []),  # two steps down
    ((100, 120, 101), True, [0]),  # a spell of speed
    ((10, 13, 10.2), False, [0]),  # a latency's rise and return
    ((100, 94, 96.5), True, []),  # within the threshold, but not half the way back
    ((100, 80, 94), True, []),  # half the way back, but 6% off: past the threshold
])
def test_a_level_came_back_where_the_next_step_undoes_it(levels, higher, back):
    """came_back: the next shift goes the other way and leaves the series within the
    threshold and half the first change of where it stood before."""
    shifts = [cp.Shift(k + 1, a, b, cp.change_pct(a, b, higher), 1e-6, (3, 3))
              for k, (a, b) in enumerate(itertools.pairwise(levels))]
    s = history_series.Series("x", "p", "m", ("p", "m", ()), "u", higher, True, shifts=shifts)
    assert history_text.came_back(s, 5.0) == back


def test_a_record_of_many_facts_names_the_first_and_counts_the_rest():
    """Eight GPUs' flags from every probe of the index would fill a cell: the first
    FACTS_NAMED facts are named, then how many more; one fact of several figures, spanned."""
    from benchbench.compare.evidence import Evidence

    flags = [Evidence("flagged", f"GPU {i} power-capped during 40% of the probe", None)
             for i in range(8)]
    steal = [Evidence("CPU steal", x, 0.0, "ratio") for x in (0.21, 0.26)]
    text = history_text.evidence_words(steal + flags, "run 8")
    words = text.split("; ")
    assert words[0] == "CPU steal 21.0% to 26.0% where run 8 has 0.0%", words
    assert len(words) == history_text.FACTS_NAMED + 1 and words[-1] == "3 more (in results.json)"


def test_a_bad_night_whose_probes_read_different_steal_is_still_one_row(tmp_path):
    """Run 9 of 20 is 12% slow in every figure, each probe reading its own share of steal
    (21–26%): one row, the steal spanned, not a row per figure that one number tells apart."""
    save_stolen(tmp_path, stolen={8})
    h = history.build([str(tmp_path / "*")])
    odd = history_md.render(h).split("## Outlier runs")[1].split("## ")[0]
    rows = [x.split(" | ") for x in odd.splitlines() if x.startswith("| ")][1:]
    assert len(rows) == 1 and rows[0][:3] == ["| 9", "2026-10-09", "all 8 series"], odd
    assert rows[0][-1] == "CPU steal 21.0% to 26.0% where run 8 has 0.0% |", rows


def test_gpus_throttled_since_a_run_say_so_in_one_row_and_in_the_summary(tmp_path):
    """From run 9 all eight GPUs run 10% slow at a power cap, each at its own clock (1.60 to
    1.67 GHz): one change point row for both matmul figures' eight GPUs, its clocks spanned,
    and the summary's sentence on what changed around the step says it once."""
    rng = random.Random(5)
    for i in range(14):
        capped = i >= 8
        d = tmp_path / f"n{i:03d}"
        d.mkdir()
        results.save(gpu_node("gpu-a", per_gpu={g: math.exp(rng.gauss(0, 0.01))
                                                * (0.9 if capped else 1.0) for g in range(8)},
                              sm_clock={g: 1.60e9 + 0.01e9 * g for g in range(8)}
                              if capped else None, started=day(i)), d / "results.json")
    h = history.build([str(tmp_path / "*")])
    text = history_md.render(h)
    power = ("run 9's own record: SM clock under load 1.60 GHz to 1.67 GHz where run 8 has "
             "1.98 GHz, throttle reasons under load sw_power_cap where run 8 has none")
    rows = [x for x in text.split("## Change points")[1].split("## ")[0].splitlines()
            if x.startswith("| matmul peak")]
    assert len(rows) == 1 and rows[0].endswith(f"; {power} |"), rows
    assert rows[0].startswith("| matmul peak bf16 (cuda:0–7) and matmul peak fp16 (cuda:0–7) "
                              "| 9 |"), rows
    assert (f"What changed around their steps: nothing recorded changed between runs 8 and 9. "
            f"R{power[1:]}.") in text.split("## Summary")[1].split("## ")[0]


def test_each_series_says_the_smallest_step_its_noise_lets_it_see(tmp_path, capsys):
    """The Series table's "sees": blind / at a recorded change, from the series' own noise
    and runs; three runs, too few for two levels, see nothing."""
    save_runs(tmp_path, env_of=drivers)
    h = history.build([str(tmp_path / "r*")])
    s = named(h, "matmul peak fp32")
    sigma = math.log1p(s.noise_pct / 100)
    blind = -math.expm1(-max_t.smallest_step(24, sigma, h.alpha)) * 100
    assert s.sees_pct == pytest.approx(
        (blind, -math.expm1(-max_t.smallest_step(24, sigma, 10 * h.alpha, given=True)) * 100))
    assert s.sees_pct[1] < s.sees_pct[0] < 3 * s.noise_pct
    md = history_md.render(h)
    assert "| noise | sees | change points |" in md
    rows = {r["series"]: r for r in history_csv.csv_rows(h)[1]}
    assert (rows[s.name]["sees_pct"], rows[s.name]["sees_recorded_pct"]) == s.sees_pct
    assert f"| −{s.sees_pct[0]:.1f}% / −{s.sees_pct[1]:.1f}% |" in md
    three = tmp_path / "three"  # a noise, but too few runs for two levels of two
    three.mkdir()
    save_runs(three, n=3, drop_at=99)
    few = history.build([str(three / "r*")]).series
    assert all(x.noise_pct is not None and x.sees_pct is None for x in few)


def test_the_summary_says_when_the_runs_cannot_see_a_slowdown_of_the_threshold(tmp_path):
    """'No series regressed' must not read as 'no slowdown': six runs at 3% noise see −27% at
    best, and the summary says so; 24 runs at 2% see under 5% and say nothing more; three runs
    are too few for any change point."""
    for n, noise, said in ((6, 0.03, "These 6 runs are too few or too noisy to see a 5% "
                                      "slowdown where nothing recorded changed: the most "
                                      "sensitive series, "),
                           (24, 0.02, None),
                           (3, 0.03, "3 runs are too few for a change point: each level is at "
                                     "least 2 runs.")):
        root = tmp_path / str(n)
        root.mkdir()
        rng = random.Random(n)
        for i in range(n):
            d = root / f"r{i:03d}"
            d.mkdir()
            results.save(cpu_run(day(i), base=math.exp(rng.gauss(0, noise)),
                                 rounds=(0.99, 1.01)), d / "results.json")
        h = history.build([str(root / "r*")])
        summary = history_md.render(h).split("## The rule")[0]
        if said is None:
            assert "too few" not in summary
            continue
        assert said in summary
        if n == 6:
            least = min(s.sees_pct[0] for s in h.series if s.sees_pct)
            assert least > 5 and f"finds a slowdown of −{least:.1f}% in their middle" in summary


def test_the_summary_comes_first_and_the_rule_after_it(tmp_path):
    """What a reader wants first is the verdict; the rule that decided it follows."""
    save_runs(tmp_path, env_of=drivers)
    md = history_md.render(history.build([str(tmp_path / "r*")]))
    heads = [line for line in md.splitlines() if line.startswith("## ")]
    assert heads[:3] == ["## Summary", "## The rule", "## Change points"]
    assert md.split("## Summary")[0].count("\n") <= 5  # the title and the runs' span alone
    rule = md.split("## The rule")[1].split("## ")[0]
    assert "- **A run** counts once" in rule and "against the other GPUs" not in rule  # no GPUs
    # a list a reader can scan, a bolded term a line, not one paragraph of 250 words
    lines = [x for x in rule.splitlines() if x.strip()]
    assert len(lines) >= 8 and all(x.startswith("- **") for x in lines[:-1]), lines
    assert lines[-1] == "The method and its measured accuracy: docs/history-method.md."
    assert max(len(x.split()) for x in lines) < 90
    # the Series table's key the same way: a bolded term a line above the table
    key = [x for x in md.split("## Series")[1].split("\n| ")[0].splitlines() if x.strip()]
    assert [x.split("**")[1] for x in key] == ["Noise", "Sees", "The machine as a whole",
                                               "Plots"], key


def test_runs_are_ordered_by_start_time_not_by_name(tmp_path):
    save_runs(tmp_path, n=12, drop_at=6, name="b", start=0)
    # the same machine's older runs under names that sort last
    save_runs(tmp_path, n=6, drop_at=99, name="z", start=-10, seed=9)
    h = history.build([str(tmp_path / "*")])
    assert [r.source.rsplit("/", 1)[1][0] for r in h.runs] == ["z"] * 6 + ["b"] * 12
    assert [h.series[0].run_at(x.at) for x in h.series[0].shifts] == [13]


def test_a_folder_of_run_folders_is_the_history_of_the_runs_inside_it(tmp_path, capsys):
    """`history runs/`, where `run` writes its folders: the run folders directly inside it,
    as 'runs/*' names them, a folder of other files among them (a history --out) left out;
    a folder with no run in it is one line and exit 2."""
    runs = tmp_path / "runs"
    runs.mkdir()
    save_runs(runs, n=12, drop_at=6)
    (runs / "report").mkdir()
    (runs / "report" / "history.md").write_text("# an earlier history\n")
    (runs / "notes.txt").write_text("not a run\n")
    h = history.build([str(runs)])
    assert [r.source for r in h.runs] == [str(runs / f"r{i:03d}") for i in range(12)]
    glob = history.build([str(runs / "r*")])
    assert [s.values for s in h.series] == [s.values for s in glob.series]
    assert [h.series[0].run_at(x.at) for x in h.series[0].shifts] == [7]
    (tmp_path / "empty" / "deeper").mkdir(parents=True)
    assert cli.main(["history", str(tmp_path / "empty")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert "empty: no results.json in it or in the folders directly inside it" in err


def test_without_a_run_the_history_is_of_the_runs_folder_run_writes_to(tmp_path, capsys,
                                                                         monkeypatch):
    """`benchbench run` three times, then `benchbench history`: the runs in ./runs, said so;
    where there is no runs/ folder, one line and exit 2."""
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, "history")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "no run given, and no runs/ folder here (where run writes them)" in err
    (tmp_path / "runs").mkdir()
    save_runs(tmp_path / "runs", n=12, drop_at=6)
    code, out, err = run_cli(capsys, "history")
    assert code == 3 and "| 1 | 2026-10-01T02:00:00+00:00 | — | `runs/r000` |" in out
    assert "history of 12 runs (no RUN given: those in runs/, where run writes them)" in err


def test_another_machines_runs_are_refused_or_set_apart(tmp_path):
    save_runs(tmp_path, n=6, drop_at=99)
    save_runs(tmp_path, n=3, drop_at=99, name="o", env_of=lambda i: environment(host="other"))
    with pytest.raises(CompareError, match=r"^the runs are of 2 machines: vm \(6 run\(s\)\), "
                                           r"other \(3 run\(s\)\); give one machine's runs"):
        history.build([str(tmp_path / "*")])
    h = history.build([str(tmp_path / "*")], machine="vm")
    assert len(h.runs) == 6 and len(h.set_apart) == 3
    assert h.set_apart[0][1] == "another machine: other (by its host name)"
    with pytest.raises(CompareError, match="--machine nope: no run here is of it"):
        history.build([str(tmp_path / "*")], machine="nope")


def test_an_older_run_without_identity_joins_by_host_name_and_says_so(tmp_path):
    save_runs(tmp_path, n=5, drop_at=99,
              env_of=lambda i: environment(recorded=i > 1))
    h = history.build([str(tmp_path / "*")])
    assert len(h.runs) == 5
    assert h.notes == ["2 run(s) predate the recorded machine identity: their host name and "
                       "GPU UUIDs stand for it"]


def test_runs_without_their_finish_time_count_and_are_noted(tmp_path):
    """Tonight's run still running when history reads it, or a run killed before its end:
    what it measured counts, and a note names them."""
    save_runs(tmp_path, n=6, drop_at=99)
    for name in ("r004", "r005"):
        late = results.load(tmp_path / name / "results.json")
        late.finished_at = None
        results.save(late, tmp_path / name / "results.json")
    h = history.build([str(tmp_path / "*")])
    assert len(h.runs) == 6 and h.notes == [
        f"2 runs have no finish time (still running, or stopped before the end): what each "
        f"measured so far counts: `{tmp_path / 'r004'}`, `{tmp_path / 'r005'}`"], h.notes
    assert "## Notes" in history_md.render(h)


def test_a_plot_shows_a_step_of_a_few_percent_and_names_its_change(tmp_path):
    """A 15% drop at 2% noise, plotted from 0, was a flat band at the top: the axis spans the
    data (at least four thresholds about the median run), says it is cut, and each change
    point's line carries its change; a series that fell by more than half starts at 0."""
    save_runs(tmp_path, n=24, drop_at=12, factor=0.85)
    h = history.build([str(tmp_path / "*")])
    s = named(h, "resnet50 fp32 64px")
    ax = history_plots.series_figure(h, s).axes[0]
    lo, hi = ax.get_ylim()
    level = s.segments[0].level
    assert ax.get_ylabel() == "images/s, not from 0" and 0.7 * level < lo < 0.85 * level < \
        level < hi < 1.15 * level, (lo, hi, level)
    assert [x.get_text() for x in ax.texts if x.get_color() == history_plots.SHIFT] == [
        " " + history_text.pct(s.shifts[0].change_pct)]
    # copies of one value: the axis still spans four thresholds, the noise flat in it
    flat = history_series.Series("flat", "p", "m", s.key, "B/s", True, True, runs=s.runs,
                          points=[(1e9, 1e9 * 1.0001)] * len(s.runs),
                          values=[1e9] * len(s.runs))
    ax = history_plots.series_figure(h, flat).axes[0]
    assert ax.get_ylim()[0] == pytest.approx(0.9 * 1e9 - 0.06 * 0.2 * 1e9, rel=1e-3)
    half = history_series.Series("half", "p", "m", s.key, "B/s", True, True, runs=s.runs,
                          points=[(1e9 if i < 12 else 4e8,) for i in range(len(s.runs))],
                          values=[1e9 if i < 12 else 4e8 for i in range(len(s.runs))])
    ax = history_plots.series_figure(h, half).axes[0]
    assert ax.get_ylim()[0] == 0 and ax.get_ylabel() == "B/s"


def test_other_gpus_are_drawn_only_where_they_changed(tmp_path):
    save_runs(tmp_path, n=4, drop_at=99)
    h = history.build([str(tmp_path / "*")])
    first = h.series[0]
    other = history_series.Series("matmul peak fp32 (cuda:1)", "matmul", "peak_flops", first.key,
                           first.unit, True, False, runs=first.runs, points=first.points,
                           values=first.values)
    h.series.append(other)
    assert other not in history_plots.drawn(h)
    other.shifts = [cp.Shift(2, 1.0, 0.5, -50.0, 1e-9, (2, 2))]
    assert other in history_plots.drawn(h)


def save_gpu_runs(root, n=14, slowed=range(7), late=None, faster=None):
    """An 8-GPU node's nightly runs: a driver update before run 9 costs the GPUs in `slowed`
    10% (a GPU in `late` only from run 12), and run 5 is one bad night, 25% slow on every
    GPU's compute (its copies' link is not slowed); each GPU with its own 1% of noise."""
    rng = random.Random(5)
    for i in range(n):
        per_gpu = {g: math.exp(rng.gauss(0, 0.01))
                   * (0.9 if (g in slowed and i >= 8) or (g == late and i >= 11) else 1.0)
                   * (1.1 if g == faster and i >= 8 else 1.0)
                   * (0.75 if i == 4 else 1.0) for g in range(8)}
        d = root / f"n{i:03d}"
        d.mkdir()
        results.save(gpu_node("gpu-a", per_gpu=per_gpu, started=day(i),
                              driver="550.54.15" if i < 8 else "555.42.02"),
                     d / "results.json")


def test_devices_are_named_with_consecutive_gpus_as_a_range():
    assert names.devices([f"cuda:{i}" for i in range(8)]) == "cuda:0–7"
    assert names.devices(["cuda:0", "cuda:2", "cuda:3", "cuda:4", "cuda:7"]) == \
        "cuda:0, 2–4, 7"
    assert names.devices(["cuda:3", "cuda:4"]) == "cuda:3, 4"
    assert names.devices(["cpu", "cuda:1"]) == "cpu, cuda:1"


def test_what_eight_gpus_show_alike_is_one_line_and_a_gpu_that_differs_its_own(tmp_path,
                                                                              monkeypatch):
    save_gpu_runs(tmp_path, late=7)
    h = history.build([str(tmp_path / "*")])
    text = history_md.render(h)
    summary = text.split("## Summary")[1].split("## ")[0]
    lines = [x for x in summary.split("Of them")[0].splitlines() if x.startswith("- ")]
    # bf16 and fp16 on cuda:0–6 and ResNet50 (cuda:0) from run 9, alike: one line; cuda:7's
    # bf16 and fp16 from run 12, another
    assert len(h.regressions) == 17 and len(lines) == 2, summary
    # cuda:7's lead over the other GPUs for runs 9–11 (below) came back: a spell, one line
    back = [x for x in summary.split("Of them")[1].splitlines() if x.startswith("- ")]
    assert back == ["- runs 9–11 (2026-10-09 to 2026-10-11): matmul peak bf16 against the "
                    "other GPUs (cuda:7) and matmul peak fp16 against the other GPUs (cuda:7) "
                    "+11.6%, back at run 12 (level with before); driver 550.54.15 → 555.42.02 "
                    "between runs 8 and 9"], summary
    assert lines[0].startswith("- matmul peak bf16 (cuda:0–6), matmul peak fp16 (cuda:0–6) and "
                               "resnet50 amp_bf16 224px −1") and "(p < 0.001 each)" in \
        lines[0] and "since run 9 (" in lines[0], lines[0]
    assert lines[1].startswith("- matmul peak bf16 (cuda:7) and matmul peak fp16 (cuda:7) −") \
        and "since run 12 (" in lines[1], summary
    # the terminal's last line names them briefly, up to TERMINAL_NAMED groups
    brief = history_text.named_briefly(h, h.regressions)
    assert re.fullmatch(r"matmul peak bf16 \(cuda:0–6\), matmul peak fp16 \(cuda:0–6\) and "
                        r"resnet50 amp_bf16 224px −[\d.]+% to −[\d.]+% since run 9; "
                        r"matmul peak bf16 \(cuda:7\) and matmul peak fp16 \(cuda:7\) "
                        r"−[\d.]+%( to −[\d.]+%)? since run 12", brief), brief
    monkeypatch.setattr(names, "TERMINAL_NAMED", 1)
    assert history_text.named_briefly(h, h.regressions) == brief.split("; ")[0] + "; and 1 more"
    # run 5 is off in every figure but the copies; cuda:7 stayed 11% ahead of the others
    # for runs 9-11: three runs, a level of its bf16 and fp16 against the other GPUs (a change
    # point up at run 9 and down at 12), not three outlier runs; held against its first
    # segment, not that best one, it is level with them again, no regression
    assert ("21 change points in 50 series, at runs 9 and 12; 1 outlier run (run 5), "
            "off in 17 series") in summary, summary
    ahead = named(h, "matmul peak bf16 against the other GPUs (cuda:7)")
    assert [x.at for x in ahead.shifts] == [8, 11] and not ahead.gate.regressed
    assert ahead.gate.reference_what == "the first segment (runs 1–8)", ahead.gate
    assert ("above the levels either side of it); for a GPU against the other GPUs, its first "
            "segment.") in text.split("## The rule")[1]
    odd = text.split("## Outlier runs")[1].split("## ")[0]
    rows = [x.split(" | ") for x in odd.splitlines() if x.startswith("| 5 |")]
    # one row for the bad night: the figures it left alike named once, every GPU's as their
    # range, and the values in each unit against their levels
    assert len(rows) == 1 and rows[0][2] == ("matmul peak bf16 (cuda:0–7), matmul peak fp16 "
                                             "(cuda:0–7) and resnet50 amp_bf16 224px"), odd
    assert "% to −" in rows[0][3] and re.fullmatch(
        r"[\d.]+ TFLOP/s to [\d.]+ TFLOP/s against [\d.]+ TFLOP/s to [\d.]+ TFLOP/s; "
        r"[\d.]+ kimages/s against [\d.]+ kimages/s", rows[0][4]), rows[0]
    # cuda:7's runs 9-11 ahead of the others are a level, not rows here
    assert [x.split(" | ")[0] for x in odd.splitlines() if x.startswith("| ")][1:] == [
        "| 5"], odd
    table = text.split("## Series")[1].split("## ")[0]
    assert "| matmul peak bf16 (cuda:0–6) | 14 |" in table and "| 1 each |" in table
    assert "| host-device h2d pinned (cuda:0–7) | 14 |" in table
    assert "Its weights here: host-device h2d pinned (cuda:0–7)" in table, table
    # drawn: the first device's figures, and cuda:7's, whose step lies at another run, on its
    # own and against the other GPUs (its three runs ahead of them)
    assert [s.name for s in history_plots.drawn(h)] == [
        h.series[0].name, "matmul peak bf16", "matmul peak fp16", "matmul peak bf16 (cuda:7)",
        "matmul peak fp16 (cuda:7)", "host-device h2d pinned", "resnet50 amp_bf16 224px",
        "matmul peak bf16 against the other GPUs (cuda:7)",
        "matmul peak fp16 against the other GPUs (cuda:7)"]


def test_each_gpu_is_held_against_the_median_of_the_others_where_three_or_more_measure(
        tmp_path):
    """A series per GPU of each figure that 3 or more GPUs measure: each round over the median
    of the other GPUs' run values, the figure's GPUs sharing alpha. A two-GPU node has none."""
    save_gpu_runs(tmp_path, n=6)
    h = history.build([str(tmp_path / "*")])
    mine = next(s for s in h.series if s.name == "matmul peak bf16 (cuda:3)")
    theirs = [s for s in h.series if s.alpha is None and s is not mine
              and without_device(s.key) == without_device(mine.key)]
    behind = next(s for s in h.series if s.name == "matmul peak bf16 against the other GPUs "
                                                  "(cuda:3)")
    assert len(theirs) == 7 and behind.alpha == pytest.approx(cp.DEFAULT_ALPHA / 8)
    assert behind.unit == "ratio" and behind.runs == mine.runs and not behind.first_device
    for i in range(6):
        mid = statistics.median(s.values[i] for s in theirs)
        assert behind.points[i] == pytest.approx(tuple(v / mid for v in mine.points[i]))
    assert sum(s.alpha is not None for s in h.series) == 3 * 8  # bf16, fp16 and the copies
    fig = history_plots.series_figure(h, behind)
    assert fig.axes[0].get_ylabel() == "% of the other GPUs' median, not from 0"
    two = tmp_path / "two"
    two.mkdir()
    for i in range(4):
        (two / f"r{i}").mkdir()
        results.save(gpu_node("gpu-b", gpus=2, started=day(i)), two / f"r{i}" / "results.json")
    assert all(s.alpha is None for s in history.build([str(two / "r*")]).series)


def test_a_gpu_that_got_faster_where_the_others_slowed_is_a_row_of_its_own(tmp_path):
    save_gpu_runs(tmp_path, slowed=range(6), faster=7)
    text = history_md.render(history.build([str(tmp_path / "*")]))
    points = text.split("## Change points")[1].split("## ")[0]
    rows = [x.split(" | ") for x in points.splitlines() if x.startswith("| ")][1:]
    # the GPUs the driver slowed and ResNet50 one row, cuda:7 that it sped up (on its own and
    # against the others) another
    assert [r[:2] for r in rows] == [
        ["| matmul peak bf16 (cuda:0–5), matmul peak fp16 (cuda:0–5) and resnet50 amp_bf16 "
         "224px", "9"],
        ["| matmul peak bf16 (cuda:7), matmul peak fp16 (cuda:7), matmul peak bf16 against the "
         "other GPUs (cuda:6, 7) and matmul peak fp16 against the other GPUs (cuda:6, 7)", "9"]
    ], points
    assert re.fullmatch(r"7\d\d TFLOP/s to 7\d\d TFLOP/s; 3.01 kimages/s", rows[0][3]), rows[0]
    assert rows[1][5].startswith("+1") and rows[0][5].startswith("−1"), rows


# --- the verb ---------------------------------------------------------------------------------

def run_cli(capsys, *args):
    code = cli.main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_exit_3_files_and_junit_when_the_latest_segment_regressed(tmp_path, capsys):
    runs = tmp_path / "runs"
    runs.mkdir()
    save_runs(runs, env_of=drivers)
    out, xml = tmp_path / "out", tmp_path / "history.xml"
    code, md, err = run_cli(capsys, "history", runs / "*", "--out", out, "--junit", xml)
    assert code == 3, err
    # where a CI log ends: what regressed, named
    assert err.endswith(" s: 8 series regressed (all 8 series −15.8% since run 13), exit 3\n"), err
    # the seven figures of the runs and all of them at once, alike: one line, not eight
    assert "**8 series regressed** (exit 3)" in md
    assert ("\n- all 8 series −15.8%: the latest segment (runs 13–24) against the best "
            "segment (runs 1–12) (p < 0.001 each), since run 13 (2026-10-13)\n") in md
    assert "driver 550.54.15 → 560.28.03 between runs 12 and 13" in md
    assert sorted(p.name for p in out.iterdir()) == ["history.csv", "history.html",
                                                     "history.md"]
    html = (out / "history.html").read_text()
    assert html.count('<figure id="fig-series ') == 8 and "8 series regressed" in html
    csv = (out / "history.csv").read_text().splitlines()
    assert csv[0].startswith("run,started_at,source,label,series,probe,metric,key.")
    assert len(csv) == 1 + 24 * 8
    suite = JUnitXml.fromfile(str(xml))
    cases = [c for s in suite for c in s]
    assert len(cases) == 8 and all(not c.is_passed for c in cases)
    assert "560.28.03" in cases[0].result[0].message


def test_a_terminal_sees_the_runs_read_and_the_figures_drawn_and_a_log_neither(tmp_path, capsys,
                                                                               monkeypatch,
                                                                               log_stderr):
    runs = tmp_path / "runs"
    runs.mkdir()
    save_runs(runs, n=6, drop_at=99)
    seen = []
    history.build([str(runs / "*")], progress=lambda done, total: seen.append((done, total)))
    assert seen == [(i, 6) for i in range(1, 7)]
    code, _, err = run_cli(capsys, "history", runs / "*", "--out", tmp_path / "log")
    assert code == 0 and "reading" not in err and "drawing" not in err
    assert all(line.startswith(("written: ", "history of ")) for line in err.splitlines()), err
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich then draws as on a terminal
    code, _, err = run_cli(capsys, "history", runs / "*", "--out", tmp_path / "tty")
    assert code == 0 and "reading and analysing the runs" in err and "6/6" in err
    assert "drawing the figures" in err


def test_a_level_beyond_the_threshold_whose_test_did_not_hold_is_named_not_hidden(tmp_path,
                                                                                capsys):
    """Six runs whose latest is 10% slow alone, p 0.0077: exit 0, and the summary says which
    series lie beyond the threshold unheld instead of 'every latest level is within 5%'."""
    values = [math.exp(x) / 100 for x in cp.run_logs(series(6, steps=((5, 0.85),), run_cv=0.03,
                                                             round_cv=0.0075, seed=35))]
    for i, v in enumerate(values):
        run = cpu_run(day(i), factors={"matmul": v})
        (tmp_path / f"r{i}").mkdir()
        results.save(run, tmp_path / f"r{i}" / "results.json")
    code, md, err = run_cli(capsys, "history", tmp_path / "r*")
    summary = md.split("## Summary")[1].split("## Change points")[0]
    assert code == 0 and "every latest level is within" not in summary
    assert "but the test did not hold (more runs will tell)" in summary
    assert ("- matmul peak fp32 and matmul peak bf16 −10.0%: the latest run alone (run 6) "
            "against the latest segment (runs 1–5) (p ≤ 0.0077, not ≤ 0.001)") in summary
    assert "| −10.0% against its reference, not held |" in md
    html = ops_html.history(history.build([str(tmp_path / "r*")]), md, {})
    assert "exit 0: no latest level worse than the best segment by more than 5%" in html
    assert "2 series beyond 5% whose test did not hold (more runs will tell)" in html
    assert err.splitlines()[-1].endswith(
        "no series regressed; 2 beyond 5% but not held (matmul peak fp32 and matmul peak bf16 "
        "−10.0%), exit 0")
    # the JUnit cases pass, and say so rather than "within 5%"
    xml = tmp_path / "h.xml"
    assert run_cli(capsys, "history", tmp_path / "r*", "--junit", xml)[0] == 0
    said = {c.name: c.system_out for s in JUnitXml.fromfile(str(xml)) for c in s}
    assert all(c.is_passed for s in JUnitXml.fromfile(str(xml)) for c in s)
    assert said["matmul peak fp32"].startswith(
        "beyond 5% but not held (more runs will tell): matmul peak fp32 −10.0%: the latest "
        "run alone (run 6)"), said
    assert "within" in said["resnet50 fp32 64px"] or "one level" in said["resnet50 fp32 64px"]


def test_exit_0_when_the_machine_recovered_and_a_threshold_above_the_drop(tmp_path, capsys):
    save_runs(tmp_path, n=18, drop_at=9, factor=0.9)
    code, md, _ = run_cli(capsys, "history", tmp_path / "*", "--threshold", "15")
    assert code == 0 and "**No series regressed** (exit 0): every latest level is within 15%" in md
    code, _, _ = run_cli(capsys, "history", tmp_path / "*")
    assert code == 3
    xml = tmp_path / "h.xml"
    code, _, _ = run_cli(capsys, "history", tmp_path / "*", "--threshold", "15",
                         "--junit", xml)
    cases = [c for s in JUnitXml.fromfile(str(xml)) for c in s]
    assert code == 0 and cases and all(c.is_passed for c in cases)


def test_a_series_of_one_or_two_runs_has_unknown_noise_not_zero(tmp_path, capsys):
    import dataclasses

    from synthetic_runs import measurement

    def extra(run, presets):
        """The run with more headline figures: a transformer at each of `presets`."""
        ms = [measurement("throughput", {"device": "cpu", "precision": "fp32", "preset": p,
                                         "seq_len": 64, "batch_size": 4}, [900.0, 910.0],
                          "tokens/s") for p in presets]
        return dataclasses.replace(run, probes=[
            dataclasses.replace(p, measurements=[*p.measurements, *ms])
            if p.name == "transformer" else p for p in run.probes])

    # "tiny" in the last two runs, "micro" in the last one only.
    for i, presets in enumerate(((), (), ("tiny",), ("tiny", "micro"))):
        d = tmp_path / f"r{i}"
        d.mkdir()
        results.save(extra(cpu_run(day(i), base=(1.0, 1.03, 0.98, 1.01)[i]), presets),
                     d / "results.json")
    h = history.build([str(tmp_path / "r*")])
    short = [s for s in h.series if "tiny" in s.name or "micro" in s.name]
    assert sorted(len(s.runs) for s in short) == [1, 2]
    assert all(s.noise_pct is None for s in short)
    assert all(s.noise_pct is not None for s in h.series if s not in short)
    out = tmp_path / "out"
    _, md, _ = run_cli(capsys, "history", tmp_path / "r*", "--out", out)
    for s in short:
        row = next(ln for ln in md.splitlines() if ln.startswith(f"| {s.name} |"))
        assert "| unknown |" in row
    assert "±0.0%" not in md and "unknown for a series of fewer than 3 runs" in md
    assert "±0.0%" not in (out / "history.html").read_text()
    lines = (out / "history.csv").read_text().splitlines()
    col = lines[0].split(",").index("noise_pct")
    noise = {ln.split(",")[col] for ln in lines[1:] if "tiny" in ln or "micro" in ln}
    assert noise == {""}


def test_baseline_pins_the_reference_by_number_or_path_and_bad_ones_are_one_line(tmp_path,
                                                                               capsys):
    """A drop of 15% at run 13: held against run 3 it regressed; pinned to run 21 (the drop
    accepted as the new level) it passes; a bad --baseline is exit 2 and one line."""
    save_runs(tmp_path, n=24, drop_at=12, factor=0.85)
    code, md, _ = run_cli(capsys, "history", tmp_path / "r*", "--baseline", "3")
    assert code == 3 and "against run 3 (--baseline), in the segment of runs 1–12" in md
    code, md, _ = run_cli(capsys, "history", tmp_path / "r*", "--baseline", tmp_path / "r020")
    assert code == 0 and "No series regressed" in md
    for bad, said in (("99", "--baseline 99: this history has runs 1 to 24"),
                      (str(tmp_path / "nope"), "--baseline"),
                      ("0", "--baseline 0: this history has runs 1 to 24")):
        code, out, err = run_cli(capsys, "history", tmp_path / "r*", "--baseline", bad)
        assert code == 2 and out == "" and err.count("\n") == 1 and said in err, err
    code, _, err = run_cli(capsys, "history", tmp_path / "r*", "--window", "1")
    assert code == 2 and "--window 1: must be a number of runs, 2 or more" in err


# --- the machine as a whole: every headline figure in one index --------------------------------

def test_the_index_weighs_each_series_by_its_noise_and_orients_it():
    """Five series at 1% noise and a disk at 40%, each its own: weighted by the inverse of its
    variance, the index's noise is the five's together (1/√5 of 1%), where an equal-weight
    geometric mean would carry the disk's 40%/6. A figure where lower is better counts the other
    way: its rise is the machine getting slower."""
    rng = random.Random(4)
    n = 100
    calm = [[[100 * math.exp(rng.gauss(0, 0.01))] * 3 for _ in range(n)] for _ in range(5)]
    disk = [[1e9 * math.exp(rng.gauss(0, 0.4))] * 3 for _ in range(n)]
    index = history_series.index_points(calm + [disk], [True] * 6)
    assert len(index) == n and all(len(p) == 3 for p in index)
    noise = cp.noise(cp.run_logs(index))
    # 0.45% expected; 0.51% measured (the robust noise of 100 runs is itself ±12%)
    assert noise < 0.007 and statistics.median(v[0] for v in index) == pytest.approx(1, abs=0.01)
    equal = cp.noise([statistics.fmean(math.log(s[i][0]) for s in calm + [disk])
                      for i in range(n)])
    assert equal > 0.04
    # a quick run measures some probes twice and others once: round j holds the run's value
    # of a series without one, so the rounds' geometric mean is the index of the run values,
    # and the rounds spread as the measured ones do
    twice = [[(100.0, 121.0)] * 3, [(10.0,)] * 3]
    assert history_series.index_points(twice, [True, True]) == [
        (pytest.approx(1 / 1.1 ** 0.5), pytest.approx(1.1 ** 0.5))] * 3
    # run 2 10% up in both: in the first, the mean of its rounds (its first round, 110, alone
    # would read no change at all)
    twice[0][1], twice[1][1] = (110.0, 133.1), (11.0,)
    up = history_series.index_points(twice, [True, True])[1]
    assert math.prod(up) ** (1 / len(up)) == pytest.approx(1.1)
    # lower is better: seconds that grow by 10% from run 15 on pull the index down by 10%
    slower = [[[2.0 * (1.1 if i >= 15 else 1.0)] * 3 for i in range(n)]]
    down = history_series.index_points(calm + slower, [True] * 5 + [False])
    assert statistics.fmean(v[0] for v in down[15:]) / statistics.fmean(
        v[0] for v in down[:15]) < 0.95


def test_the_whole_machine_regresses_where_each_of_its_figures_alone_does_not(tmp_path):
    """12 runs drifting 10% down, each probe with 3% noise of its own a run: none of the seven
    series holds at alpha alone (seed 11), the index of all seven does, and the history exits
    3 on it."""
    from synthetic_runs import CPU_FIGURES

    probes = sorted({f[0] for f in CPU_FIGURES})
    rng = random.Random(11)
    for i in range(12):
        factors = {p: math.exp(rng.gauss(0, 0.03)) for p in probes}
        rounds = tuple(math.exp(rng.gauss(0, 0.0075)) for _ in range(3))
        d = tmp_path / f"r{i:03d}"
        d.mkdir()
        results.save(cpu_run(day(i), base=1 - 0.1 * (i + 1) / 12, rounds=rounds,
                             factors=factors), d / "results.json")
    h = history.build([str(tmp_path / "r*")])
    whole, *each = h.series
    assert whole.name == "all 7 headline figures (weighted)" and whole.unit == "ratio"
    assert [s.regression for s in each] == [None] * 7
    assert whole.regression is not None and whole.regression.change_pct < -5
    assert [s.name for s in h.regressions] == [whole.name]


def test_no_index_without_two_figures_that_every_run_measured(tmp_path):
    save_runs(tmp_path, n=6, drop_at=99)
    runs = history.build([str(tmp_path / "r*")])
    assert runs.series[0].name.startswith("all 7 headline")
    few = [s for s in runs.series[1:]]
    few[0].runs = few[0].runs[1:]  # one series misses a run: it is left out
    assert history_series.composite(few[:2], runs.runs) is None
    assert history_series.composite(few[1:3], runs.runs) is not None


# --- the clock at a change point ---------------------------------------------------------------

def clocked_history(root, n=12, at=6, clock_after=1.485e9, per_ghz_after=488e12):
    """n runs of one H200's bf16 matmul whose samples carry their SM clock: 1,755 MHz and 488
    TFLOP/s per GHz until run `at`, then the given clock and rate per GHz."""
    from synthetic_runs import clocked_env, timed_measurement

    from benchbench.core.results import ProbeResult, RunResult

    rng = random.Random(5)
    for i in range(n):
        hz, per = (1.755e9, 488e12) if i < at else (clock_after, per_ghz_after)
        run_hz = hz * math.exp(rng.gauss(0, 0.004))
        clocks = [run_hz * (1 + 0.002 * d) for d in (-1, 0, 1)]
        flops = timed_measurement("flops", {"device": "cuda:0", "dtype": "bf16", "size": 8192},
                                  [per * c / 1e9 for c in clocks], sm_clock_Hz=clocks)
        flops.context.update(round_values=[flops.value], rounds=1)
        peak = timed_measurement("peak_flops", {"device": "cuda:0", "dtype": "bf16"},
                                 [flops.value], statistic="max", best_size=8192)
        peak.context.update(round_values=[flops.value], rounds=1)
        run = RunResult(tool={"name": "benchbench", "version": "0.1.0"}, started_at=day(i),
                        environment={**environment(host="gpu1"), "gpus": clocked_env()["gpus"]},
                        config={"device_resolved": "cuda"}, argv=[], probes=[ProbeResult(
                            name="matmul", status="ok", resource="gpu_compute",
                            measurements=[flops, peak])])
        d = root / f"r{i:03d}"
        d.mkdir()
        results.save(run, d / "results.json")
    return history.build([str(root / "r*")])


def test_a_change_point_says_the_clock_fell_not_the_work_per_cycle(tmp_path):
    h = clocked_history(tmp_path)
    s = named(h, "matmul peak bf16")
    assert [x.at for x in s.shifts] == [6]
    text = history_md.render(h)
    row = next(ln for ln in text.splitlines() if ln.startswith("| matmul peak bf16 | 7 |"))
    assert "the clock it ran at" in text
    # each side's median run: 1,755 and 1,485 MHz planted, each run's clock within ±0.4%
    assert re.search(r"SM clock 1,7\d\d → 1,4\d\d MHz \(−1[45]\.\d%\) while the samples ran, "
                     r"per GHz of it [+−]0\.\d%: the clock moved, not the work per cycle \|$", row)


def test_a_change_point_says_the_work_per_cycle_fell_not_the_clock(tmp_path):
    h = clocked_history(tmp_path, clock_after=1.755e9, per_ghz_after=413e12)
    text = history_md.render(h)
    row = next(ln for ln in text.splitlines() if ln.startswith("| matmul peak bf16 | 7 |"))
    assert "per GHz of it −15." in row and ": the work per cycle moved, not the clock |" in row


def test_several_gpus_whose_clocks_fell_alike_read_as_one_span():
    """One figure's shift on two GPUs at one run: the spans of their clocks' and rates' moves,
    and the conclusion both draw; where one GPU read no clock, no conclusion for the group."""
    def gpu(i, clock_after):
        s = history_series.Series("matmul peak bf16", "matmul", "peak_flops",
                           ("matmul", "peak_flops", (("device", f"cuda:{i}"),)), "FLOP/s", True,
                           i == 0)
        s.shifts = [cp.Shift(6, 850e12, 720e12, -15.3, 1e-5, (6, 6))]
        s.clock_moves = [((1.755e9, 484e12), (clock_after, 484e12))]
        return s

    group = [(gpu(0, 1.485e9), 0), (gpu(1, 1.49e9), 0)]
    assert history_text.clock_text(group) == ("SM clock −15.4% to −15.1% while the samples ran, "
                                            "per GHz of it +0.0%: the clock moved, not the work "
                                            "per cycle")
    group[1][0].clock_moves = [None]
    assert history_text.clock_text(group) == ("SM clock −15.4% while the samples ran, per GHz of "
                                            "it +0.0%")
    group[0][0].clock_moves = [None]
    assert history_text.clock_text(group) == "—"


def _stepped(after: float, noise: float = 0.02, n: int = 12, seed: int = 4):
    """n runs of two rounds: the first half at 100, the second at `after`, each run × its own
    lognormal noise."""
    rng = random.Random(seed)
    return [[(100 if i < n // 2 else after) * math.exp(rng.gauss(0, noise)) * r
             for r in (0.995, 1.005)] for i in range(n)]


def test_the_gate_fails_a_change_only_where_it_holds_beyond_the_threshold():
    """Issue 71: a change must hold beyond the threshold (at 0.05), not only beyond no change.
    −5.5% read from 6 runs a side at 2% noise is beyond 5% but could be 3%: it passes, read as
    not held beyond; −12% exits."""
    for after, regressed in ((94.5, False), (88.0, True)):
        pts = _stepped(after)
        found = cp.detect(pts, alpha=cp.DEFAULT_ALPHA, changes=[6])
        g = history_gate.judge(pts, found, True, 5.0, cp.DEFAULT_ALPHA)
        assert g is not None and g.change_pct < -5.0 and g.p_value <= g.held_at, g
        assert g.regressed is regressed, g
        assert (g.beyond_p > history_gate.BEYOND_LEVEL) is not regressed, g
    # the test beyond the threshold: a change of exactly the threshold, read with no error,
    # is not beyond it; 1.5 errors past it is, at 0.05 with many df
    b = history_gate.Beyond(0.01, 1000)
    assert b.p(100, 95, True, 5.0) == pytest.approx(0.5)
    assert b.p(100, 95 * math.exp(-0.0165), True, 5.0) < 0.05 < b.p(100, 95 * math.exp(-0.016),
                                                                      True, 5.0)
    assert b.p(100, 105, False, 5.0) == pytest.approx(0.5, abs=0.02)  # lower is better
