import pytest

from benchbench.core.sampling import Budget, RepeatPolicy, collect
from benchbench.core.timing import calibrate_inner, wall_timer


def sampler(clock, durations):
    """A sample function that takes the given durations in turn on the fake clock."""
    it = iter(durations)

    def sample():
        d = next(it)
        clock.advance(d)
        return d

    return sample


def test_warmup_by_seconds_then_stops_at_target_cv(clock):
    policy = RepeatPolicy(min_repeats=3, max_repeats=50, target_cv=0.02, warmup_s=0.25)
    result = collect(sampler(clock, [0.1] * 100), policy, deadline=clock() + 100, clock=clock)
    assert result.warmup_runs == 3  # 0.1, 0.2, 0.3 s >= 0.25 s of warm-up
    assert result.samples == [0.1, 0.1, 0.1]
    assert result.stop == "target_cv"


def test_noisy_samples_continue_until_budget(clock):
    policy = RepeatPolicy(min_repeats=3, max_repeats=50, target_cv=0.01, warmup_s=0.0)
    noisy = [0.1, 0.2] * 50
    result = collect(sampler(clock, noisy), policy, deadline=clock() + 1.0, clock=clock)
    assert result.stop == "budget"
    assert 3 <= len(result.samples) <= 8


def test_min_repeats_taken_even_past_deadline(clock):
    policy = RepeatPolicy(min_repeats=5, max_repeats=50, target_cv=0.0, warmup_s=1.0)
    result = collect(sampler(clock, [1.0, 2.0] * 10), policy, deadline=clock(), clock=clock)
    assert result.warmup_runs == 1  # warm-up minimum despite the spent budget
    assert len(result.samples) == 5
    assert result.stop == "budget"


def test_max_repeats(clock):
    policy = RepeatPolicy(min_repeats=2, max_repeats=4, target_cv=0.0, warmup_s=0.0)
    result = collect(sampler(clock, [0.1, 0.3] * 10), policy, deadline=clock() + 1e9,
                     clock=clock)
    assert len(result.samples) == 4 and result.stop == "max_repeats"


def test_policy_validation():
    with pytest.raises(ValueError):
        RepeatPolicy(min_repeats=5, max_repeats=3)


def test_budget_shares_remaining_time(clock):
    b = Budget(10.0, clock=clock)
    assert b.deadline(4) == pytest.approx(clock() + 2.5)
    clock.advance(6.0)
    assert b.remaining() == pytest.approx(4.0)
    assert b.deadline(2) == pytest.approx(clock() + 2.0)
    clock.advance(10.0)
    assert b.remaining() == 0.0


def test_wall_timer_and_calibration(clock):
    calls = []

    def op():
        calls.append(1)
        clock.advance(0.001)

    timer = wall_timer(clock)
    assert timer(op, 5) == pytest.approx(0.005)
    inner = calibrate_inner(timer, op, min_sample_s=0.05)
    assert timer(op, inner) >= 0.05
    assert inner < 100  # did not overshoot wildly
