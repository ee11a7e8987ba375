"""Two steps in a short history, held at once (analysis/two_cuts.py), on seeded series."""

import dataclasses
import math
import random

from benchbench.analysis import change_points as cp
from benchbench.analysis import max_t, two_cuts


def runs(levels, cv, seed, rounds=3, mix="run"):
    """Runs of `rounds` values around each level: each run's noise shared by its rounds (the
    run mix), or each round's its own, a run's mean of CV cv (the rounds mix)."""
    rng = random.Random(seed)
    sd = math.log1p(cv / 100)
    run_sd, round_sd = (sd, sd / 4) if mix == "run" else (0.0, sd * math.sqrt(rounds))
    out = []
    for level in levels:
        run = level * math.exp(rng.gauss(0, run_sd))
        out.append([run * math.exp(rng.gauss(0, round_sd)) for _ in range(rounds)])
    return out


def test_two_steps_in_twelve_runs_are_both_found_where_one_split_at_a_time_finds_few(
        monkeypatch):
    """Two −10% steps at runs 4 and 8 of 12 in 2% noise: the split of the whole series carries
    the other step in its variance, and each segment test has 8 runs. Held at once, both."""
    levels = [100] * 4 + [90] * 4 + [81] * 4

    def pairs() -> list[list[int]]:
        return [[s.at for s in cp.detect(runs(levels, 2, seed)).shifts] for seed in range(40)]

    found = pairs()
    assert sum(f == [4, 8] for f in found) >= 25
    with monkeypatch.context() as m:
        m.setattr(two_cuts, "best", lambda y, rounds: None)
        assert sum(f == [4, 8] for f in pairs()) <= 8
    # a pair is held only where its joint test holds at alpha and each cut given the other at
    # EACH_GIVEN alpha on the runs' own spread, at alpha where the rounds' noise was pooled in
    pts = next(runs(levels, 2, seed) for seed, f in enumerate(found) if f == [4, 8])
    pair = two_cuts.best(cp.run_logs(pts))
    assert pair is not None and pair.at == (4, 8) and not pair.pooled
    assert pair.p <= cp.DEFAULT_ALPHA
    assert max(pair.each) <= two_cuts.each_given(pair) * cp.DEFAULT_ALPHA
    assert two_cuts.each_given(pair) == two_cuts.EACH_GIVEN == 5
    assert two_cuts.each_given(dataclasses.replace(pair, pooled=True)) == 1


def test_each_cut_given_the_other_trades_two_steps_found_for_rare_second_cuts(monkeypatch):
    """The pair's second test, each cut given the other, at EACH_GIVEN α instead of α: two −10%
    steps in 12 runs at 3% noise (the run mix) are found together far more often, and a series
    with one real −10% step gains a second cut from its noise rarely."""
    two = [100] * 4 + [90] * 4 + [81] * 4
    one = [100] * 6 + [90] * 6

    def tally(levels: list[int], seeds: range) -> list[int]:
        return [len(cp.detect(runs(levels, 3, seed)).shifts) for seed in seeds]

    wide = tally(two, range(100))
    with monkeypatch.context() as m:
        m.setattr(two_cuts, "EACH_GIVEN", 1)
        narrow = tally(two, range(100))
    assert sum(k == 2 for k in wide) >= sum(k == 2 for k in narrow) + 12, (wide, narrow)
    assert sum(k > 1 for k in tally(one, range(200))) <= 6  # about 1 in 100 is expected


def test_where_the_runs_scatter_as_their_rounds_say_the_pair_takes_the_rounds_noise_in(
        monkeypatch):
    """Two −10% steps in 12 runs at 3% noise that the rounds carry: the rounds' 24 degrees
    of freedom join the pair's 9, and more pairs hold than on the runs' spread alone."""
    levels = [100] * 4 + [90] * 4 + [81] * 4

    def both() -> int:
        return sum([s.at for s in cp.detect(runs(levels, 3, seed, mix="rounds")).shifts]
                   == [4, 8] for seed in range(60))

    pooled = both()
    alone = two_cuts.best
    with monkeypatch.context() as m:  # the same levels for each cut given the other: α
        m.setattr(two_cuts, "best", lambda y, rounds: alone(y))
        m.setattr(two_cuts, "EACH_GIVEN", 1)
        apart = both()
    assert pooled >= apart + 8, (pooled, apart)
    print(pooled, apart)


def test_the_pooled_joint_test_holds_its_level_on_pure_noise():
    """The pooled statistic, SS0 − SS2 over SS2 plus the rounds' sum of squares (24 degrees
    of freedom), is held against the simulated series each with its own chi-square: on pure
    noise, p ≤ 0.05 in about 5% of series and p ≤ 0.01 in about 1%."""
    rng = random.Random(7)
    ps = []
    for _ in range(1000):
        y = [rng.gauss(0, 1) for _ in range(12)]
        a, b = two_cuts.best(y).at
        ss2 = sum_squares(y[:a]) + sum_squares(y[a:b]) + sum_squares(y[b:])
        rounds = max_t.Rounds(sum(rng.gauss(0, 1) ** 2 for _ in range(24)) / 24, 24, 1.0)
        ps.append(two_cuts._p_pooled(sum_squares(y) - ss2, ss2, rounds, 12))
    assert 0.035 <= sum(p <= 0.05 for p in ps) / len(ps) <= 0.065
    assert 0.003 <= sum(p <= 0.01 for p in ps) / len(ps) <= 0.02


def sum_squares(part):
    mean = sum(part) / len(part)
    return sum((v - mean) ** 2 for v in part)


def test_pure_noise_passes_the_joint_test_as_often_as_its_level_says():
    """The joint test's p is that of the best pair among all of them: on pure noise, p ≤ 0.05
    in about 5% of series, not in the 40% a p of the chosen pair alone would give."""
    ps = []
    for seed in range(600):
        rng = random.Random(seed)
        ps.append(two_cuts.best([rng.gauss(0, 1) for _ in range(12)]).p)
    share = sum(p <= 0.05 for p in ps) / len(ps)
    assert 0.03 <= share <= 0.075, share


def test_one_step_gets_no_second_cut_from_its_noise():
    """A −20% step in the middle of 12 or 30 runs at 3% noise: one change point, at the step,
    in each of 40 seeded series, never a pair."""
    for n in (12, 30):
        levels = [100] * (n // 2) + [80] * (n - n // 2)
        for seed in range(40):
            assert [s.at for s in cp.detect(runs(levels, 3, seed)).shifts] == [n // 2], seed


def test_too_short_or_long_a_history_has_no_pair():
    assert two_cuts.best([0.0] * 5) is None
    assert two_cuts.best([0.0] * (two_cuts.MAX_RUNS + 1)) is None
