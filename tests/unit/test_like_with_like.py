"""Like with like in history and fleet (#70): runs under different conditions (--quick, a
probe's parameter: compare/conditions.py) are separate series in history and separate groups
in fleet, never one level, one change point search, one gate or one outlier test across them.
Each test holds the same runs recorded under one condition against the same runs under two, so
that it fails where the conditions are not kept apart."""

import dataclasses
import math
import random

import pytest
from junitparser import JUnitXml
from synthetic_runs import cpu_run, environment

from benchbench import cli
from benchbench.compare import conditions, fleet, history
from benchbench.core import results
from benchbench.reports import fleet_md, history_md

FULL_LOADER = 918 / 520  # a full run's data loader against a --quick one's, as a user saw


def day(i):
    return f"2026-{10 + i // 28:02d}-{i % 28 + 1:02d}T02:00:00+00:00"


def save(root, name, run):
    d = root / name
    d.mkdir(parents=True)
    results.save(run, d / "results.json")
    return d


def run_of(i, full, recorded=None, base=1.0, host="vm", params=None):
    """A CPU run; a full one's data loader at FULL_LOADER; `recorded`: the mode it records
    (its own, unless told: the same runs with their conditions not kept apart)."""
    rng = random.Random(i)
    run = cpu_run(day(i), base=base * math.exp(rng.gauss(0, 0.02)),
                  rounds=tuple(math.exp(rng.gauss(0, 0.01)) for _ in range(2)),
                  factors={"dataloader": FULL_LOADER} if full else None,
                  env=environment(host=host))
    for p in run.probes:
        p.params = dict((params or {}).get(p.name, {}))
    quick = not full if recorded is None else recorded
    return dataclasses.replace(run, config={**run.config, "quick": quick})


def named(h, name):
    return next(s for s in h.series if s.name == name)


# --- history ----------------------------------------------------------------------------------

def test_interleaved_quick_and_full_runs_are_separate_series_without_a_change_point(tmp_path):
    """24 runs, every third full: recorded as one mode, the data loader is one level through
    520 and 918 images/s with no change point (what a user saw); kept apart, each mode is a
    level of its own."""
    for i in range(24):
        full = i % 3 == 2
        save(tmp_path / "mixed", f"r{i:03d}", run_of(i, full))
        save(tmp_path / "one", f"r{i:03d}", run_of(i, full, recorded=True))
    one = history.build([str(tmp_path / "one" / "r*")])
    loader = named(one, "dataloader best 224px")
    assert len(loader.runs) == 24 and len(loader.segments) == 1 and not one.split
    assert min(loader.values) < 540 and max(loader.values) > 900

    h = history.build([str(tmp_path / "mixed" / "r*")])
    quick, full = (named(h, f"dataloader best 224px [{m}]") for m in ("--quick", "full"))
    assert len(quick.runs) == 16 and len(full.runs) == 8
    assert set(quick.runs).isdisjoint(full.runs)
    assert quick.segments[-1].level == pytest.approx(520, rel=0.03)
    assert full.segments[-1].level == pytest.approx(918, rel=0.03)
    assert all(not s.shifts and not s.outliers for s in h.series)
    # the latest run (24, index 23) is full: its series are judged, the --quick ones are not
    assert full.judged and full.gate is not None and not quick.judged and quick.gate is None
    assert [(x.title, x.runs, x.latest) for x in h.split] == [
        ("mode", [("--quick", 16), ("full", 8)], "full")]
    assert h.run(24).conditions == "full" and h.run(1).conditions == "--quick"
    md = history_md.render(h)
    assert ("**Kept apart**: runs under different conditions are separate series, never one "
            "level or one change point search: 16 --quick runs and 8 full runs. The gate "
            "judges each figure's latest run (full)") in md
    assert "| dataloader best 224px [--quick] | 16 |" in md
    assert "not judged: other conditions than the latest run" in md
    assert "| run | started | label | conditions | source |" in md
    # the machine as a whole: one index per mode, never one across them
    assert {s.name for s in h.series if s.probe == "all"} == {
        "all 7 headline figures (weighted) [--quick]", "all 7 headline figures (weighted) [full]"}


def test_a_switch_to_quick_runs_is_no_regression_but_the_gate_judges_their_own(tmp_path,
                                                                              capsys):
    """12 full runs, then 8 --quick ones: recorded as one mode the data loader fell 43% (exit
    3); kept apart, nothing regressed. A real 15% drop within the --quick runs still fails,
    judged against the --quick runs before it, and not once a full run is the latest."""
    for i in range(20):
        full = i < 12
        save(tmp_path / "one", f"r{i:03d}", run_of(i, full, recorded=False))
        save(tmp_path / "mixed", f"r{i:03d}", run_of(i, full))
    one = history.build([str(tmp_path / "one" / "r*")])
    assert "dataloader best 224px" in {s.name for s in one.regressions}

    h = history.build([str(tmp_path / "mixed" / "r*")])
    assert h.regressions == [] and all(not s.shifts for s in h.series)
    assert named(h, "dataloader best 224px [--quick]").judged
    assert not named(h, "dataloader best 224px [full]").judged

    # 24 --quick runs with 6 full ones among them, the last 6 --quick ones 15% slower
    slow = tmp_path / "slow"
    quick_runs = 0
    for i in range(30):
        full = i % 5 == 2
        quick_runs += not full
        save(slow, f"r{i:03d}", run_of(i, full, base=0.85 if quick_runs > 18 else 1.0))
    h = history.build([str(slow / "r*")])
    assert h.runs[-1].conditions == "--quick"
    regressed = {s.name for s in h.regressions}
    assert "matmul peak fp32 [--quick]" in regressed
    assert not any("[full]" in name for name in regressed)
    code = cli.main(["history", str(slow / "r*"), "--out", str(tmp_path / "out"),
                     "--junit", str(tmp_path / "h.xml")])
    capsys.readouterr()
    assert code == 3
    cases = {c.name: c for suite in JUnitXml.fromfile(str(tmp_path / "h.xml")) for c in suite}
    assert "not judged" in cases["matmul peak fp32 [full]"].result[0].message
    # the same runs and a full one after them: the latest run is full, its runs are level
    save(slow, "r030", run_of(30, True))
    h = history.build([str(slow / "r*")])
    assert h.regressions == [] and not named(h, "matmul peak fp32 [--quick]").judged


def test_a_probes_own_condition_splits_its_figures_alone_and_a_list_its_key_picks_does_not(
        tmp_path):
    """ResNet50 compiled in some runs: its series are split, the other figures' are not; the
    precisions listed differ too, but every run lists the one its figure is of."""
    for i in range(12):
        params = {"resnet50": {"compile": i % 2 == 0,
                               "precisions": ["fp32"] if i < 6 else ["fp32", "bf16"]}}
        save(tmp_path, f"r{i:03d}", run_of(i, False, params=params))
    h = history.build([str(tmp_path / "r*")])
    names = {s.name for s in h.series}
    assert {"resnet50 fp32 64px [torch.compile on]",
            "resnet50 fp32 64px [torch.compile off]", "matmul peak fp32"} <= names
    assert [x.title for x in h.split] == ["ResNet50 training: torch.compile"]
    assert "ResNet50 training: torch.compile on in 6 runs and off in 6" in history_md.render(h)


def test_a_figures_conditions_leave_out_what_its_key_settles():
    run = run_of(0, False, params={"resnet50": {"precisions": ["fp32", "bf16"],
                                                "image_size": 64, "compile": True}})
    rec = conditions.recorded(run)
    every = set(rec)
    key = {"device": "cpu", "precision": "fp32", "image_size": 64, "batch_size": 8}
    assert conditions.of_figure(rec, every, "resnet50", key) == (
        (None, "quick", "true"), (None, "time_budget", "null"),
        ("resnet50", "--set", "{}"), ("resnet50", "compile", "true"))
    assert conditions.of_figure(rec, every, None, {}) == (
        (None, "quick", "true"), (None, "time_budget", "null"))
    assert conditions.words(conditions.of_figure(rec, {(None, "quick"), ("resnet50", "compile")},
                                                 "resnet50", key), "resnet50") \
        == "--quick; torch.compile on"
    # a run that did not record a condition differs from none
    older = dict(rec)
    del older[(None, "quick")]
    assert conditions.differing([rec, older]) == set()
    assert conditions.differing([rec, {**rec, (None, "quick"): "false"}]) == {(None, "quick")}


# --- fleet ------------------------------------------------------------------------------------

def test_a_full_node_among_quick_nodes_is_set_apart_not_an_outlier(tmp_path):
    """Six --quick nodes and one full: recorded as one mode, the full node's data loader is an
    outlier (+76%) whose run records nothing the median node does not; kept apart, it is a
    group of its own, not scored, and the report says so."""
    for i in range(7):
        full = i == 6
        save(tmp_path / "one", f"node{i:02d}",
             run_of(i, full, recorded=True, host=f"node{i:02d}"))
        save(tmp_path / "mixed", f"node{i:02d}", run_of(i, full, host=f"node{i:02d}"))
    one = fleet.build([str(tmp_path / "one" / "*")])
    assert any(one.nodes[e.node].label == "node06" for m in one.measures for e in m.outliers)

    f = fleet.build([str(tmp_path / "mixed" / "*")])
    assert not any(m.outliers for m in f.measures)
    quick_group, full_group = "no GPU · AMD EPYC · --quick", "no GPU · AMD EPYC · full"
    assert f.groups == {quick_group: [0, 1, 2, 3, 4, 5], full_group: [6]}
    assert list(f.unscored) == [full_group] and {m.group for m in f.measures} == {quick_group}
    assert f.split == [("no GPU · AMD EPYC", [("--quick", 6), ("full", 1)])]
    md = fleet_md.render(f)
    assert ("**Kept apart**: nodes run under different conditions are separate groups, never "
            "held against each other: 6 --quick nodes and 1 full node. Not scored, in a group "
            "of fewer than 3: node06 (full).") in md
    assert f"| {full_group} | 1 | node06 | no: fewer than 3 nodes |" in md


def test_a_nodes_earlier_run_under_other_conditions_is_not_held_against_it(tmp_path):
    """Each node run twice; node03's earlier run was --quick, its latest full, as the others'
    both are: its change since then is no change of the machine."""
    for i in range(4):
        host = f"node{i:02d}"
        save(tmp_path, f"{host}-a", run_of(i, i != 3, host=host))
        save(tmp_path, f"{host}-b", run_of(i + 1, True, host=host))
    f = fleet.build([str(tmp_path / "*")])
    assert [n.earlier is not None for n in f.nodes] == [True, True, True, False]
    assert any("the conditions changed since the earlier run on node03 (--quick then, full "
               "now)" in n for n in f.notes)
    assert f.split == []
