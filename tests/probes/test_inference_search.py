"""inference: the server search over LoadGen runs (search.py), on runs whose verdict a test
decides; the bound that fits the device (scenarios.choose_bound)."""

import pytest

from benchbench.workloads.inference import search
from benchbench.workloads.inference.scenarios import buckets, choose_bound


class Runs:
    """Runs VALID up to `capacity`; `stalls` lists the run numbers (from 1) that fail anyway,
    as a stall of the machine fails a run, with one batch ten times the others to show it;
    each run costs `cost` seconds of the budget."""

    def __init__(self, capacity, stalls=(), budget=1e9, cost=1.0):
        self.capacity, self.stalls, self.left, self.cost = capacity, set(stalls), budget, cost
        self.made = []

    def __call__(self, rate, retry):
        self.made.append((rate, retry))
        self.left -= self.cost
        stalled = len(self.made) in self.stalls
        valid = rate <= self.capacity and not stalled
        s = search.Settings("Server", rate, 8, 1.0, 459, 0.015)
        batches = [(8, 0.004)] * 10 + ([(4, 0.04)] if stalled else [])
        return search.Outcome(s, valid, {"p99_s": 0.01 if valid else 0.05}, [0.01], 1, 459,
                              self.cost, retry=retry, service_s=batches)

    def search(self, start=100.0, ceiling=1e6):
        return search.search(self, start, ceiling, lambda rate: self.cost, lambda: self.left)


def test_the_search_climbs_then_bisects_between_the_last_pass_and_a_failure():
    runs = Runs(capacity=400.0)
    found = runs.search()
    # 100, 150, 225, 337.5 pass; 506.25 fails, without a stall: failed, not tried again.
    assert [r for r, _ in runs.made[:5]] == [100.0, 150.0, 225.0, 337.5, 506.25]
    # Two bisections: 421.875 fails, 379.6875 passes: the capacity (400) lies between them.
    assert [r for r, _ in runs.made[5:]] == [421.875, 379.6875]
    assert not any(retry for _, retry in runs.made)
    assert found.failed == 421.875 and found.stopped_by == "done"
    assert found.best.rate == 379.6875 and not found.lower_bound


def test_a_run_that_stalled_is_tried_again_and_only_such_a_run():
    steady = Runs(capacity=400.0).search()
    stalled = Runs(capacity=400.0, stalls={2})  # the first run at 150/s stalls
    found = stalled.search()
    assert found.runs[1].stalled and not found.runs[0].stalled
    assert stalled.made[1:3] == [(150.0, False), (150.0, True)]
    assert found.best.rate == steady.best.rate  # the retry passed: the same answer
    assert [o.valid for o in found.runs[1:3]] == [False, True] and found.runs[2].retry
    # A rate that fails twice, stalling both times, is failed.
    runs = Runs(capacity=400.0, stalls={2, 3})
    found = runs.search()
    assert runs.made[1:3] == [(150.0, False), (150.0, True)] and found.failed == 150.0


def test_a_first_rate_that_fails_steps_down_until_one_passes():
    runs = Runs(capacity=30.0)
    found = runs.search(start=100.0)
    rates = [r for r, _ in runs.made]
    assert rates[:2] == [100.0, 100.0 / 2.25]
    assert rates[2] == pytest.approx(100.0 / 2.25 ** 2)
    assert found.best is not None and found.best.rate <= 30.0
    assert found.failed is not None and found.failed < 100.0


def test_at_least_only_where_no_higher_rate_failed():
    runs = Runs(capacity=1e5, budget=3.0)  # three runs, all VALID
    found = runs.search()
    assert len(runs.made) == 3 and found.stopped_by == "budget"
    assert found.best.rate == 225.0 and found.lower_bound
    # A failure above the best ends the floor: the capacity lies below it.
    runs = Runs(capacity=200.0, budget=3.0)
    found = runs.search()
    assert [o.valid for o in found.runs] == [True, True, False]
    assert found.failed == 225.0 and not found.lower_bound
    # A run that stalled, whose retry the budget could not pay for, refutes nothing.
    runs = Runs(capacity=1e5, budget=3.0, stalls={3})
    found = runs.search()
    assert [o.valid for o in found.runs] == [True, True, False] and found.runs[2].stalled
    assert found.stopped_by == "budget" and found.lower_bound
    # No budget for one run: nothing tried, nothing claimed.
    found = Runs(capacity=200.0, budget=0.5).search()
    assert found.runs == [] and found.best is None and not found.lower_bound


def test_the_search_stops_at_the_offline_ceiling():
    runs = Runs(capacity=1e9)
    found = runs.search(start=100.0, ceiling=200.0)
    assert [r for r, _ in runs.made] == [100.0, 150.0, 200.0]
    assert found.stopped_by == "ceiling" and not found.lower_bound


def test_each_run_lasts_min_duration_and_at_least_the_early_stopping_queries():
    assert search.EARLY_STOPPING_QUERIES == 459  # LoadGen's own count at p99, none over
    assert search.run_s(1000.0, 1.0, 459, 0.015) == pytest.approx(1.0 + 0.015 + 0.05)
    assert search.run_s(100.0, 1.0, 459, 0.015) == pytest.approx(4.59 + 0.015 + 0.05)
    assert search.min_duration_s(12.0) == 2.0 and search.min_duration_s(0.1) == 0.25
    assert search.min_duration_s(1e5) == search.SUBMISSION_RUN_S


def test_the_bound_is_mlperfs_on_a_fast_gpu_and_five_single_latencies_elsewhere():
    bound, source = choose_bound(None, "cuda:0", 0.004)
    assert bound == 0.015 and source.startswith("MLPerf's 15 ms")
    # A CPU: 5 x 11.8 ms = 59 ms, rounded up to whole 10 ms: 60 ms, not MLPerf's.
    bound, source = choose_bound(None, "cpu", 0.0118)
    assert bound == 0.06 and source.startswith("not MLPerf's (on a CPU): 5x one image's "
                                              "measured 11.8 ms")
    assert choose_bound(None, "cpu", 0.014)[0] == 0.07  # exactly 70 ms stays 70 ms
    # A GPU too slow for 15 ms gets the same rule, and says why.
    bound, source = choose_bound(None, "cuda:0", 0.019)
    assert bound == 0.1 and "one image alone takes longer than 15 ms" in source
    assert choose_bound(0.015, "cpu", 0.02) == (0.015, "set by the user (latency_bound_s)")


def test_the_sut_pads_to_powers_of_two_and_the_sizes_asked_for():
    assert buckets(8) == [1, 2, 4, 8]
    assert buckets(6, 3) == [1, 2, 3, 4, 6]


def test_a_step_down_goes_no_lower_than_the_budget_still_pays_for():
    runs = Runs(capacity=60.0)
    found = search.search(runs, 100.0, 1e6, lambda rate: runs.cost, lambda: runs.left,
                          lambda: 70.0)  # the budget pays for no run below 70/s
    assert [r for r, _ in runs.made] == [100.0, 70.0]
    assert found.best is None and found.failed == 70.0
    runs = Runs(capacity=60.0)
    found = search.search(runs, 100.0, 1e6, lambda rate: runs.cost, lambda: runs.left,
                          lambda: 120.0)  # nothing lower than the failed rate is affordable
    assert len(runs.made) == 1 and found.stopped_by == "budget" and found.best is None
