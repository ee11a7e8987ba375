"""scripts/history_accuracy.py's recheck, with a stand-in for Otava that finds every planted
step: it measures again only the step cells where benchbench found fewer, and a cell where
nothing was planted (pure noise, a spike) is never one of them. On this VM a recheck starts
after a 6.5-minute table, so a crash there is costly to find by running it."""

import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


SCRIPTS = str(ROOT / "scripts")
MODULES = ("history_accuracy", "_history_series", "_history_studies")


@pytest.fixture(scope="module")
def modules():
    """The script and the two modules beside it, imported as the script imports them (scripts/
    on the path), and taken out again after."""
    sys.path.insert(0, SCRIPTS)
    try:
        yield tuple(importlib.import_module(name) for name in MODULES)
    finally:
        sys.path.remove(SCRIPTS)
        for name in MODULES:
            sys.modules.pop(name, None)


@pytest.fixture(scope="module")
def script(modules):
    return modules[0]


@pytest.fixture(scope="module")
def series(modules):
    return modules[1]


@pytest.fixture(scope="module")
def studies(modules):
    return modules[2]


def _tally(script, series, planted, found):
    return script.Tally(series=series, planted=planted, found=found)


def test_short_of_is_never_true_where_nothing_was_planted(script):
    nothing, some = _tally(script, 3, 0, 0), _tally(script, 3, 3, 3)
    assert not script.short_of(nothing, some) and not script.short_of(some, nothing)
    assert not script.short_of(some, None)
    assert script.short_of(_tally(script, 3, 3, 1), some)
    assert not script.short_of(some, _tally(script, 3, 3, 1))


def test_recheck_measures_again_only_the_step_cells_where_otava_found_more(script, monkeypatch):
    planted = dict(script.families())
    behind, level = "step -20% middle n=12 cv=1", "step -10% middle n=12 cv=1"
    calls = []

    def otava(python, batch):  # finds every planted step, and nothing else
        calls.append(len(batch))
        return [[at for at, _ in planted[behind].steps] for _ in batch]

    monkeypatch.setattr(script, "otava", otava)
    results = {
        "noise n=12 cv=1": (_tally(script, 30, 0, 0), _tally(script, 30, 0, 0),
                            _tally(script, 30, 0, 0)),
        "spike n=12 cv=1": (_tally(script, 3, 0, 0), _tally(script, 3, 0, 0),
                            _tally(script, 3, 0, 0)),
        # behind on the blind judging alone: measured again
        behind: (_tally(script, 3, 3, 1), _tally(script, 3, 3, 3), _tally(script, 3, 3, 3)),
        # level with Otava in both judgings: not measured again
        level: (_tally(script, 3, 3, 3), _tally(script, 3, 3, 3), _tally(script, 3, 3, 3)),
    }
    seen = []
    lines = script.recheck(results, "run", 4, "otava-python", seen.append)
    assert calls == [4] and seen == [behind]
    # A −20% step in 1% noise: benchbench finds it in all 4 fresh series, as Otava does.
    assert lines[1] == f"  {behind}: 4 / 4 of 4 against Otava's 4 (at least as many)"
    steps = sum(name.startswith("step") for name in results)
    assert lines[-1].endswith(f"after this: {steps} / {steps} of {steps}")


def test_recheck_says_nothing_when_no_cell_is_behind(script, monkeypatch):
    monkeypatch.setattr(script, "otava", lambda python, batch: pytest.fail("Otava was run"))
    even = _tally(script, 3, 3, 3)
    results = {"noise n=12 cv=1": (_tally(script, 30, 0, 0),) * 3,
               "step -10% middle n=12 cv=1": (even, even, even)}
    assert script.recheck(results, "run", 4, "otava-python", lambda name: None) == []


def test_a_gpu_nodes_history_is_read_by_history_itself_and_its_plants_exit(studies):
    """--gpu-nodes writes an 8-GPU node's runs and judges them through history.build: a GPU
    10% slower from the middle run exits on its own series, a driver that cost every GPU 6%
    is a change point in every matmul series (and exits on some: 6% lies near the 5%
    threshold, and six runs a side at 1% hold it beyond the threshold about half the time),
    and a healthy node of 1% noise exits on none."""
    healthy, series = studies.gpu_node_history((12, 1, 0, "healthy", 0))[0::2]
    assert healthy == [] and series == 26 + 24  # and each GPU's three against the others
    one = studies.gpu_node_history((12, 1, 0, "one GPU", 0))[0]
    assert {"matmul peak bf16 (cuda:5)", "matmul peak fp16 (cuda:5)"} <= set(one)
    assert not any("(cuda:4)" in x for x in one), one
    driver, points, _ = studies.gpu_node_history((12, 1, 0, "driver", 0))
    assert points == 16 and sum(x.startswith("matmul peak") for x in driver) >= 4, driver


def test_the_latest_run_mode_gates_a_slow_latest_run_and_not_a_healthy_one(series, studies):
    """--latest plants a slow latest run and nothing else: 25% slow after 11 runs at 1% noise
    is called an outlier run and exits in each history, and pure noise at 3% in none of
    these."""
    assert studies.latest_cell((12, 1, 0.75, "run", 6)) == (6, 6, 6)
    assert studies.latest_cell((12, 3, 1.0, "run", 6)) == (0, 0, 6)
    p = series.Planted("latest", 5, 1, (), spike=4, spike_factor=0.75)
    assert [series.level_at(p, i) for i in range(5)] == [100] * 4 + [75]


def test_a_gpu_that_fell_behind_the_others_in_the_days_noise_exits_against_them(studies):
    """One GPU 10% slower from the middle of 12 runs, each GPU with 1% noise of its own and
    3% that the day gives them all: the GPU's own series does not hold it, its series against
    the other GPUs does (the day cancels), and no other GPU's does. A driver that cost them
    all 6% moves no GPU against the others."""
    one = studies.gpu_node_history((12, 1, 3, "one GPU", 1))[0]
    assert not any(x.startswith("matmul peak bf16 (") for x in one), one
    assert {"matmul peak bf16 against the other GPUs (cuda:5)",
            "matmul peak fp16 against the other GPUs (cuda:5)"} <= set(one)
    assert not any("against" in x and "(cuda:5)" not in x for x in one), one
    driver = studies.gpu_node_history((12, 1, 0, "driver", 0))[0]
    assert driver and not any("against" in x for x in driver), driver


def test_the_gate_mode_judges_the_full_runs_own_series(script, series, studies):
    """--gate draws each cell's series as the full run does (the same seeds): a −10% drift over
    12 runs at 1% noise exits in each of the first eight, pure noise in none of them."""
    cells = dict(script.families())
    assert studies.gate_cell(("drift n=12 cv=1", cells["drift n=12 cv=1"], "run", 8)) == (8, 0, 8)
    assert studies.gate_cell(("noise n=12 cv=1", cells["noise n=12 cv=1"], "run", 8)) == (0, 0, 8)
    # at 3% noise a −10% drift over 12 runs holds in some, and reads beyond 5% unheld in others
    exits, unheld, _ = studies.gate_cell(("drift n=12 cv=3", cells["drift n=12 cv=3"], "run", 8))
    assert exits and unheld and exits + unheld <= 8
    assert series.share(1, 3000) == "0.033%" and series.share(942, 1000) == "94.2%"


def test_the_tails_mode_gates_spells_as_history_does_and_as_before_it(series, studies):
    """--tails: two nights 10% fast and back in 30 runs at 1% noise exited in each of six
    histories with the spell the reference (before) and exits in none now; a gain held ten runs
    and lost exits both ways; heavy-tailed noise has unit variance, as the normal's."""
    cells = dict(studies.tails_cells())
    name = "+10% for 2 runs and back, n=30 cv=1"
    assert studies.tails_cell((name, cells[name], "run", 6, None)) == (0, 0, 6, 6, None)
    name = "+10% for 10 runs, then lost, n=30 cv=1"
    assert studies.tails_cell((name, cells[name], "run", 6, None))[1:4] == (6, 6, 6)
    rng = series.random.Random(5)
    draws = [series.unit(rng, 3) for _ in range(40_000)]
    assert series.statistics.pvariance(draws) == pytest.approx(1, abs=0.15)


def test_the_machines_mode_gates_whole_histories_of_three_series(series, studies):
    """--machines draws three series a history: a −10% drift over 12 runs at 1% noise exits on
    a series, on the index and so in the history, each of six times; pure noise in none."""
    drift = series.Planted("drift", 12, 1, (), drift=12, total=0.9)
    assert studies.machine_cell(("drift n=12 cv=1", drift, 0.5, 6)) == (6, 6, 6)
    noise = series.Planted("noise", 12, 1, ())
    assert studies.machine_cell(("noise n=12 cv=1", noise, 0.5, 6)) == (0, 0, 0)


def test_each_length_states_both_detectors_points_on_the_trade_off(script):
    """False change points per series: the mean over the noise cells of that length; steps
    found: over every planted single step of that length; Otava's only where it was judged."""
    T = script.Tally
    results = {
        "noise n=12 cv=1": (T(series=300, false=3), T(series=300), T(series=300, false=9)),
        "noise n=12 cv=3": (T(series=300, false=0), T(series=300), T(series=300, false=3)),
        "step -10% middle n=12 cv=3": (T(series=30, planted=30, found=18), T(series=30),
                                       T(series=30, planted=30, found=28)),
        "step -3% early n=12 cv=3": (T(series=30, planted=30, found=2), T(series=30),
                                     T(series=30, planted=30, found=4)),
        "two steps n=12 cv=3": (T(series=30, planted=60, found=0), T(series=30), None),
        "noise n=30 cv=1": (T(series=300, false=1), T(series=300), None),
        "step -10% middle n=30 cv=3": (T(series=30, planted=30, found=27), T(series=30), None),
    }
    assert script.operating_points(results) == [
        "n = 12, nothing recorded: benchbench 0.0050 false change points per series, 33.3% "
        "of the steps found; Otava 0.0200 false change points per series, 53.3% of the steps "
        "found",
        "n = 30, nothing recorded: benchbench 0.0033 false change points per series, 90.0% "
        "of the steps found"]


def test_the_alone_mode_holds_history_against_the_test_at_its_heart(script, studies):
    """--alone judges each series by history and by the maximum-t test alone: a −20% step in
    the middle of 12 runs at 1% noise is found by both in each of six series; pure noise shows
    neither a change point; the cell is judged on its own seeds, the same each time."""
    cells = dict(script.families())
    step = "step -20% middle n=12 cv=1"
    assert studies.alone_cell((step, cells[step], "run", 6)) == (6, 6)
    noise = "noise n=12 cv=1"
    assert studies.alone_cell((noise, cells[noise], "rounds", 6)) == (0, 0)
    small = "step -3% early n=12 cv=3"  # a step the size of the noise, early: seldom found
    once = studies.alone_cell((small, cells[small], "run", 6))
    assert once == studies.alone_cell((small, cells[small], "run", 6)) and max(once) < 6
