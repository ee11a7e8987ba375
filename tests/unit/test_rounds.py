"""Rounds: the schedule that spreads a probe's rounds over the run, and how a later round is
folded into the probe's result (benchbench/core/rounds.py)."""

import pytest

from benchbench.core import rounds
from benchbench.core.results import Measurement, ProbeResult
from benchbench.core.rounds import merge, round_values, schedule, start


def meas(value, samples, statistic="median", metric="flops", **context):
    return Measurement(metric=metric, key={"size": 64}, value=value, unit="FLOP/s",
                       statistic=statistic, samples=samples, higher_is_better=True,
                       context=context)


def result(*ms, status="ok", reason=None, duration=1.0):
    return ProbeResult(
        name="matmul",
        status=status,
        resource="cpu_compute",
        reason=reason,
        measurements=list(ms),
        duration_s=duration,
    )


def test_rounds_lie_apart_with_the_other_probes_between():
    got = schedule(["a", "b", "c"], [True, False, True], 3)
    assert got == [("a", 1), ("b", 1), ("c", 1), ("a", 2), ("c", 2), ("a", 3), ("c", 3)]
    assert schedule(["a"], [True], 1) == [("a", 1)]


def test_a_median_pools_the_rounds_samples_and_keeps_each_rounds_value():
    first = start(result(meas(10.0, [9.0, 10.0, 11.0])))
    both = merge(first, result(meas(20.0, [19.0, 20.0, 21.0])), 2)
    (m,) = both.measurements
    assert m.samples == [9.0, 10.0, 11.0, 19.0, 20.0, 21.0] and m.value == 15.0
    assert round_values(m) == [10.0, 20.0] and m.context["rounds"] == 2
    assert both.duration_s == 2.0


def test_a_total_over_time_stays_total_work_over_total_time():
    """Round 1: 2 steps at 10/s (0.2 s); round 2: 2 steps at 40/s (0.05 s): 4 steps of the same
    work in 0.25 s is 16/s, not the mean 25/s."""
    a = meas(10.0, [10.0, 10.0], "total_over_time", metric="throughput")
    b = meas(40.0, [40.0, 40.0], "total_over_time", metric="throughput")
    (m,) = merge(start(result(a)), result(b), 2).measurements
    assert m.value == pytest.approx(16.0) and round_values(m) == [10.0, 40.0]


def test_a_peak_keeps_the_better_rounds_peak():
    a = meas(5.0, [3.0, 5.0], "max", metric="peak_flops", best_size=512)
    b = meas(7.0, [2.0, 7.0], "max", metric="peak_flops", best_size=1024)
    (m,) = merge(start(result(a)), result(b), 2).measurements
    assert m.value == 7.0 and m.samples == [2.0, 7.0] and m.context["best_size"] == 1024
    assert round_values(m) == [5.0, 7.0]


def test_a_later_round_that_failed_leaves_the_figures_and_says_so():
    first = start(result(meas(10.0, [10.0])))
    got = merge(first, result(status="failed", reason="RuntimeError: boom"), 2)
    assert got.status == "ok" and round_values(got.measurements[0]) == [10.0]
    assert got.reason == "round 2 failed: RuntimeError: boom"


def test_a_later_rounds_notes_are_kept_once():
    first = start(result(meas(10.0, [10.0]), reason="bf16 skipped, because one step takes "
                                                    "~2.05 s"))
    got = merge(first, result(meas(11.0, [11.0]), reason="bf16 skipped, because one step "
                                                        "takes ~2.31 s; n=2048 skipped"), 2)
    assert got.reason == "bf16 skipped, because one step takes ~2.05 s; round 2: n=2048 skipped"


def test_a_note_a_later_round_does_not_repeat_says_which_rounds_it_held_in():
    """DALI skipped for time in round 1 and measured in round 2 was not skipped by the run."""
    skipped = "dali_cpu workers=2 skipped, because the time budget ran out"
    first = start(result(meas(10.0, [10.0]), reason=skipped))
    got = merge(first, result(meas(11.0, [11.0])), 2)
    assert got.reason == f"round 1: {skipped}"
    both = merge(first, result(meas(11.0, [11.0]), reason=skipped), 2)
    assert both.reason == skipped  # it held in every round: no mark
    third = merge(both, result(meas(12.0, [12.0]), reason="n=2048 skipped"), 3)
    assert third.reason == f"rounds 1 and 2: {skipped}; round 3: n=2048 skipped"
    assert merge(got, result(meas(12.0, [12.0])), 3).reason == got.reason  # marked once


def test_a_measurement_of_one_round_only_has_one_value():
    first = start(result(meas(10.0, [10.0])))
    other = Measurement(metric="flops", key={"size": 128}, value=3.0, unit="FLOP/s",
                        statistic="median", samples=[3.0], higher_is_better=True)
    got = merge(first, result(other), 2)
    assert [round_values(m) for m in got.measurements] == [[10.0], [3.0]]
    assert round_values(other) == [3.0]  # an older run without rounds: its value
    assert rounds.default_rounds(False, "cuda") == 3
    assert rounds.default_rounds(False, "cpu") == rounds.default_rounds(True, "cpu") == 2
    assert rounds.default_rounds(True, "cuda") == 1  # one pass, longer windows


def test_the_samples_clocks_follow_the_samples_when_rounds_join():
    """Each sample's SM clock joins the samples it belongs to; where one round read no clock,
    the joined list would no longer line up with the samples, and is left out."""
    a = meas(10.0, [9.0, 10.0, 11.0], sm_clock_Hz=[1.4e9, 1.5e9, None], sm_clock_read="NVML")
    b = meas(20.0, [19.0, 21.0], sm_clock_Hz=[1.9e9, 1.8e9], sm_clock_read="NVML")
    (m,) = merge(start(result(a)), result(b), 2).measurements
    assert m.context["sm_clock_Hz"] == [1.4e9, 1.5e9, None, 1.9e9, 1.8e9]
    assert len(m.context["sm_clock_Hz"]) == len(m.samples)
    (m,) = merge(start(result(a)), result(meas(20.0, [19.0, 21.0])), 2).measurements
    assert "sm_clock_Hz" not in m.context and "sm_clock_read" not in m.context
