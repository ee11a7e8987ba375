"""Pacing: a quick CPU run that falls behind leaves out later rounds to end within its minute."""

import time

import pytest
from fake_isolator import FakeIsolator

from benchbench.core import results
from benchbench.core.config import RunConfig
from benchbench.engine.catalog import default_registry
from benchbench.engine.pacing import END_RESERVE_S, Pacer, promise
from benchbench.engine.runner import Runner, probe_budget
from benchbench.reports import html, markdown
from benchbench.reports.markdown import pacing_note


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


# A quick CPU run's plan: 12 first rounds, then 5 second rounds (40 s of budgets in all).
PLAN = [(f"p{i}", 1, 2.5) for i in range(12)] + [(f"p{i}", 2, 2.0) for i in range(5)]


def simulate(start_up: float, slowness: float, wall: float | None):
    """Runs PLAN on a fake clock where each probe takes 0.6 s (its worker, its smallest unit)
    plus `slowness` times its budget; the pacer and when the probes end."""
    clock = Clock()
    clock.now = start_up
    pacer = Pacer(wall, 0.0, [b for _, _, b in PLAN], clock=clock)
    for i, (name, round_no, budget) in enumerate(PLAN):
        if pacer.keep(i, name, round_no):
            clock.now += 0.6 + slowness * budget
            pacer.finished(i)
    return pacer, clock.now


def test_a_run_on_its_usual_pace_runs_every_round():
    pacer, end = simulate(start_up=5.0, slowness=0.85, wall=60.0)
    assert pacer.left_out == [] and pacer.record() is None
    assert end == pytest.approx(5.0 + 17 * 0.6 + 0.85 * 40)


def test_a_slow_run_leaves_out_later_rounds_and_ends_in_time():
    unpaced = simulate(start_up=8.0, slowness=1.15, wall=None)[1]
    pacer, end = simulate(start_up=8.0, slowness=1.15, wall=60.0)
    assert unpaced > 60.0 - END_RESERVE_S  # without pacing the probes end too late
    assert end <= 60.0 - END_RESERVE_S < unpaced
    out = pacer.record()["left_out"]
    assert out and all(o["round"] == 2 and o["behind_s"] > 0 for o in out)
    assert len(out) < 5  # only as many rounds as the minute needs


def test_a_run_hopelessly_late_still_runs_every_first_round():
    pacer, _ = simulate(start_up=55.0, slowness=1.0, wall=60.0)
    assert [(o["probe"], o["round"]) for o in pacer.left_out] == [(f"p{i}", 2) for i in range(5)]


def test_only_a_run_with_a_promise_is_paced():
    assert promise(True, "cpu") == 60.0
    assert promise(False, "cpu") is None  # a default run's budgets are its measurement
    assert promise(True, "cuda") is None  # a GPU's timings are still the simulator's
    assert promise(True, "cpu", time_budget=3.0) is None  # the user pinned each probe's time
    assert promise(True, "cpu", launched=True) is None  # every rank needs the same budget


def test_the_runner_leaves_out_a_later_round_records_it_and_the_report_says_so(tmp_path):
    iso = FakeIsolator({})
    # as though start-up had taken 58 s of the minute already
    runner = Runner(default_registry(), RunConfig(quick=True, only=("matmul", "storage")),
                    tmp_path, ["run"], {"cuda_available": False, "no_gpu_reason": "no GPU"},
                    {}, iso, process_start=time.monotonic() - 58.0)
    runner.execute()
    weights = [s.budget_weight for s in runner.selected()]
    planned = [probe_budget(w, sum(weights), quick=True, time_budget=None) for w in weights]
    # matmul's first round and storage run, at their whole budgets; matmul's second does not
    assert [(j.name, j.budget_s) for j, _ in iso.jobs] == [
        ("matmul", pytest.approx(planned[0] / 2)), ("storage", pytest.approx(planned[1]))]
    run = results.load(tmp_path)
    assert [(o["probe"], o["round"]) for o in run.extra["pacing"]["left_out"]] == [("matmul", 2)]
    assert run.probe("matmul").measurements[0].context["rounds"] == 1
    note = pacing_note(run)
    assert note and "it left out round 2 of matrix multiply" in note and "its 60 s" in note
    text = markdown.render(run, runner.verdict, [])
    assert note in text
    # report.html carries report.md whole: the sentence once, where report.md has it
    assert html.render(run, runner.verdict, [], {}, text).count("slower than usual") == 1


def test_a_run_on_time_has_no_pacing_and_no_note(tmp_path):
    iso = FakeIsolator({})
    runner = Runner(default_registry(), RunConfig(quick=True, only=("matmul",)), tmp_path,
                    ["run"], {"cuda_available": False, "no_gpu_reason": "no GPU"}, {}, iso,
                    process_start=time.monotonic())
    runner.execute()
    run = results.load(tmp_path)
    assert "pacing" not in run.extra and pacing_note(run) is None
