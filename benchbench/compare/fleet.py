"""Many nodes, one run each: the nodes grouped by hardware, every headline figure scored
against its group (analysis/outliers.py), and each outlier's evidence against the group's
median node (evidence.py).

A node is a run, or one of the `nodes` a multi-node run gathered (rank 0's run is the first;
its distributed probes, measured across all nodes at once, are no node's own and are left
out). Nodes compare only within their group: the same GPU model and count and the same CPU
model, and the same conditions where the group's nodes differ in those of their headline
figures (--quick, an image size: compare/conditions.py), so that a quick node is never held
against full runs. A figure measured per GPU counts for its node as the median of the node's
GPUs, and each GPU is also held against its node's median GPU (with the spread of every node's GPUs
about theirs), so the slowest GPU of an 8-GPU node stands out where its node's figure does not
move. The fleet's alpha is shared over every call it makes (_Budget): 90% to the nodes, times
the effective number of measurements, and 10% to the GPUs.
Where earlier runs of the nodes are given (`before`), each node's figure is also taken as its
change since its own earlier run, and those changes are held against each other by the same
rule, paid from the nodes' share: a node's own level (its silicon, cooling and slots), which is
most of a fleet's spread and hides a node 15% slow in one 32-node fleet of seven, drops out of
its change, so a node that got slower stands out against the others' changes.
Which runs are which nodes, and each node's earlier run, is fleet_nodes.py's: several runs of
one machine (compare/identity.py) among the nodes' runs are one node, its latest run, the
others its earlier runs as if given with --before.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from benchbench.analysis import change_points as cp
from benchbench.analysis import max_t, outliers
from benchbench.compare import evidence, fleet_nodes, series
from benchbench.compare.fleet_nodes import Node
from benchbench.compare.sides import (
    CompareError,
    interrupted_note,
    paths_of,
    results_file,
    unfinished_note,
)
from benchbench.core import interruption
from benchbench.core.results import RunResult

GPU_SHARE = 0.1  # of alpha, for the GPUs inside their nodes (their spread is measured tight)


@dataclass
class Entity:
    """One node's (or one GPU's) figure of one measurement, scored against its group (or, for
    a GPU, against the other GPUs of its node)."""

    node: int  # index into Fleet.nodes
    device: str | None  # the GPU the figure stands for (a node's: its median GPU)
    figure: series.Figure
    score: outliers.Score
    within_node: bool = False  # a GPU scored against its node's GPUs
    evidence: list[evidence.Evidence] = field(default_factory=list)
    against: Entity | None = None  # what the evidence was held against
    # scored as its change since its node's earlier run (figure: now; earlier: then; the
    # score's value: now / then), held against the other nodes' changes
    earlier: series.Figure | None = None

    @property
    def change(self) -> bool:
        return self.earlier is not None


@dataclass
class Measure:
    group: str
    name: str
    key: series.Key  # without the device
    unit: str
    higher_is_better: bool
    median: float
    # the spread of the nodes that are no outliers, in percent of the median; None (unknown)
    # where it is 0: they all read the same, as copies of one run do (timed figures of
    # separate runs are not equal to the last digit)
    sigma_pct: float | None
    bar: float  # how far from `center` a node not yet seen would be an outlier
    entities: list[Entity]  # one per node
    gpus: list[Entity] = field(default_factory=list)  # per GPU, within its node
    # the smallest deviation from `center` this group's spread lets the rule see, percent
    bar_pct: float = 0.0
    pooled: bool = False  # the rounds' noise joined the spread
    center: float = 0.0  # what the nodes are held against: the mean of those no outliers
    # each node's change since its earlier run (now / then), against the others' changes
    changes: list[Entity] = field(default_factory=list)
    since: outliers.Group | None = None  # the changes' group: median, center, spread, bar

    @property
    def outliers(self) -> list[Entity]:
        return [e for e in self.entities + self.gpus + self.changes if e.score.outlier]

    @property
    def low(self) -> list[Entity]:
        return [e for e in self.entities + self.gpus + self.changes if e.score.low]

    @property
    def worst(self) -> Entity:
        return min(self.entities, key=lambda e: e.score.deviation_pct)


@dataclass
class Fleet:
    nodes: list[Node]
    groups: dict[str, list[int]]  # hardware (and conditions: Node.place) -> node indices
    measures: list[Measure]
    unscored: dict[str, list[int]]  # the groups too small to score
    notes: list[str] = field(default_factory=list)
    alpha: float = outliers.DEFAULT_ALPHA  # the chance a healthy fleet shows a low outlier
    node_tests: float = 0.0  # nodes × effective measurements, over the groups (changes too)
    gpu_tests: float = 0.0
    # where the nodes' earlier runs came from: "--before", the older runs among those given
    # (fleet_nodes.latest_of_each), or both
    earlier_from: str = "--before"
    # the hardware groups whose nodes ran under different conditions: (the hardware, each
    # conditions in words and its count of nodes, most first)
    split: list[tuple[str, list[tuple[str, int]]]] = field(default_factory=list)

    @property
    def earlier(self) -> int:
        """The nodes held against their own earlier run too."""
        return sum(n.earlier is not None for n in self.nodes)

    @property
    def change_tests(self) -> bool:
        return any(m.changes for m in self.measures)

    @property
    def low(self) -> list[tuple[Measure, Entity]]:
        return [(m, e) for m in self.measures for e in m.low]


@dataclass(frozen=True)
class _Budget:
    """What each call is paid for: the fleet's alpha shared over every node and GPU test."""

    alpha: float
    node_tests: float
    gpu_tests: float

    def share(self, gpu: bool) -> tuple[float, float]:
        """(the alpha, the tests) for a node's call or a GPU's."""
        if not self.gpu_tests:
            return self.alpha, self.node_tests
        return ((GPU_SHARE * self.alpha, self.gpu_tests) if gpu else
                ((1 - GPU_SHARE) * self.alpha, self.node_tests))


def _rounds_noise(figures: Sequence[series.Figure]) -> max_t.Rounds:
    """change_points.rounds_noise of the figures' rounds (those with every round above 0)."""
    return cp.rounds_noise([f.rounds for f in figures if f.rounds and min(f.rounds) > 0])


def _scored(nodes: list[Node], found: list[tuple[int, series.Figure]], probe: str,
            within_node: bool, budget: _Budget,
            spread: tuple[float, int] | None = None) -> tuple[outliers.Group, list[Entity]]:
    """The figures scored against each other, each outlier with its evidence against the
    entity closest to the median (the median node, or the node's median GPU)."""
    alpha, tests = budget.share(within_node)
    values = [f.value for _, f in found]
    rounds = None
    if not within_node:
        noise = _rounds_noise([f for _, f in found])
        med = statistics.median(values)
        rounds = (noise.run_var * med**2, noise.df) if noise.df else None
    if spread is not None:
        spread = (spread[0] * abs(statistics.median(values)), spread[1])
    scored = outliers.score(values, found[0][1].higher_is_better, tests, alpha, rounds,
                            spread)
    entities = [Entity(i, f.device, f, s, within_node)
                for (i, f), s in zip(found, scored.scores, strict=True)]
    calm = [e for e in entities if not e.score.outlier]
    mid = min(calm, key=lambda e: abs(e.figure.value - scored.median)) if calm else None
    for e in entities:
        if e.score.outlier and mid is not None:
            e.against = mid
            e.evidence = evidence.clocked(e.figure.clock, mid.figure.clock) + evidence.against(
                nodes[e.node].run, nodes[mid.node].run, probe, e.figure.gpu_device,
                mid.figure.gpu_device)
    return scored, entities


Pairs = list[tuple[int, series.Figure, series.Figure]]  # (node, its figure now, then)


def _changes(nodes: list[Node], pairs: Pairs, probe: str, budget: _Budget
             ) -> tuple[outliers.Group | None, list[Entity]]:
    """Each node's change since its earlier run (now / then) held against the others' by the
    rule, the rounds' noise of both runs joined; an outlier's evidence is what its run records
    that its earlier run does not."""
    if len(pairs) < outliers.MIN_GROUP:
        return None, []
    alpha, tests = budget.share(False)
    ratios = [now.value / then.value for _, now, then in pairs]
    a = _rounds_noise([now for _, now, _ in pairs])
    b = _rounds_noise([then for _, _, then in pairs])
    med = statistics.median(ratios)
    rounds = ((a.run_var + b.run_var) * med**2, a.df + b.df) if a.df and b.df else None
    scored = outliers.score(ratios, pairs[0][1].higher_is_better, tests, alpha, rounds)
    entities = []
    for (i, now, then), s in zip(pairs, scored.scores, strict=True):
        e = Entity(i, now.device, now, s, earlier=then)
        earlier_run = nodes[i].earlier
        if s.outlier and earlier_run is not None:  # a pair's node has its earlier run
            e.evidence = evidence.against(nodes[i].run, earlier_run.run, probe,
                                          now.gpu_device, then.gpu_device)
        entities.append(e)
    return scored, entities


def _per_node(found: list[tuple[int, series.Figure]]) -> dict[int, list[series.Figure]]:
    per_node: dict[int, list[series.Figure]] = {}
    for i, f in found:
        per_node.setdefault(i, []).append(f)
    return per_node


def _node_figures(found: list[tuple[int, series.Figure]]) -> list[tuple[int, series.Figure]]:
    """A node's figure is the median of its GPUs' (one slow GPU does not move it: the check
    inside the node finds that one), standing for the GPU closest to it."""
    out = []
    for i, figs in _per_node(found).items():
        mid = statistics.median(f.value for f in figs)
        rep = min(figs, key=lambda f: abs(f.value - mid))
        out.append((i, replace(rep, value=float(mid))))
    return out


def _measure(group: str, nodes: list[Node], found: list[tuple[int, series.Figure]],
             node_figures: list[tuple[int, series.Figure]], key: series.Key, name: str,
             budget: _Budget, pairs: Pairs) -> Measure:
    """One measurement of a group: its nodes (`node_figures`, _node_figures of `found`)
    against each other, each node's GPUs against their node's median, and each node's change
    since its earlier run (`pairs`) against the others'."""
    per_node = _per_node(found)
    first = found[0][1]
    scored, entities = _scored(nodes, node_figures, first.probe, False, budget)
    inside = {i: figs for i, figs in per_node.items() if len(figs) >= outliers.MIN_GROUP}
    gpus: list[Entity] = []
    if inside:
        # every node's GPUs against their node's median: one spread for the group, from
        # hundreds of GPUs, where one node's 8 GPUs could not say how far is far
        devs = [f.value / statistics.median(g.value for g in figs) - 1
                for figs in inside.values() for f in figs]
        spread = outliers.relative_spread(devs)
        gpus = [e for i, figs in inside.items()
                for e in _scored(nodes, [(i, f) for f in figs], first.probe, True, budget,
                                 spread)[1]]
    since, changes = _changes(nodes, pairs, first.probe, budget)
    return Measure(group, name, key, first.unit, first.higher_is_better, scored.median,
                   scored.sigma_pct if scored.sigma > 0 else None, scored.bar, entities, gpus,
                   scored.bar_pct, scored.pooled, scored.center, changes, since)


Rows = dict[series.Key, list[tuple[int, series.Figure]]]  # a group's figures per measurement


def _sign(found: list[tuple[int, series.Figure]]) -> float:
    """1, or −1 where lower is better: lower is worse in every column of a count's table."""
    return 1.0 if found[0][1].higher_is_better else -1.0


def _table(columns: list[dict[Any, float]]) -> list[list[float]]:
    """One row per entity that every column has, one column per measurement."""
    common = set.intersection(*(set(c) for c in columns)) if columns else set()
    return [[c[e] for c in columns] for e in sorted(common, key=str)]


COMBINED = "all"  # the probe and key of a group's combined measurement


def _combined(by_key: Rows) -> list[tuple[int, series.Figure]]:
    """The group's nodes in one index of all their headline figures (outliers.combined): a node
    slow in several measurements, each within its own spread, stands out of the index where
    the noise that is each measurement's own averages down. One figure per node, a ratio to
    the median node's figures, higher better; none with fewer than two measurements that
    spread."""
    keys = list(by_key)
    return _index_figures(*outliers.combined(
        [{i: f.value for i, f in by_key[k]} for k in keys],
        [by_key[k][0][1].higher_is_better for k in keys]))


def _index_figures(index: dict[int, float], used: list[int]) -> list[tuple[int, series.Figure]]:
    """outliers.combined's index as one figure per node, keyed by how many figures it took."""
    key = (COMBINED, "index", (("series", len(used)),))
    return [(i, series.Figure(COMBINED, "index", key, "ratio", True, (v,), v))
            for i, v in index.items()]


def _combined_changes(by_key: dict[series.Key, Pairs]) -> Pairs:
    """The nodes' changes since their earlier runs in one index, as _combined makes their
    levels: each node's change (now / then) in every measurement both runs took, as a relative
    deviation from the group's median change, weighted by the inverse of that measurement's
    variance of changes. A node a little slower since in every figure stands out of it where
    each figure's own noise averages down. As pairs (node, the index now, 1 then), so that a
    node's change reads as the index itself; none with fewer than two measurements that
    spread."""
    keys = [k for k, p in by_key.items() if p]
    now = _index_figures(*outliers.combined(
        [{i: a.value / b.value for i, a, b in by_key[k]} for k in keys],
        [by_key[k][0][1].higher_is_better for k in keys]))
    if not now:
        return []
    then = replace(now[0][1], rounds=(1.0,), value=1.0)
    return [(i, f, then) for i, f in now]


def _combined_evidence(index: Measure, figures: list[Measure], nodes: list[Node]) -> None:
    """An outlier of the index, held against the median node: what its run records and that
    node's does not, over the probes of every figure the index took (each at the GPU it
    stands for), each fact once."""
    for e in index.entities:
        if not (e.score.outlier and e.against):
            continue
        seen: dict[str, evidence.Evidence] = {}
        for m in figures:
            mine = next((x for x in m.entities if x.node == e.node), None)
            theirs = next((x for x in m.entities if x.node == e.against.node), None)
            if mine is None or theirs is None:
                continue
            for x in evidence.clocked(mine.figure.clock, theirs.figure.clock) + evidence.against(
                    nodes[e.node].run, nodes[e.against.node].run, m.key[0],
                    mine.figure.gpu_device, theirs.figure.gpu_device):
                seen.setdefault(x.name if x.name != "flagged" else f"flagged {x.mine}", x)
        e.evidence = list(seen.values())


def combined_name(key: series.Key) -> str:
    return f"all {dict(key[2])['series']} headline figures (weighted)"


def _budget(rows_by_group: dict[str, Rows], node_figures: dict[str, Rows],
            pairs: dict[str, dict[series.Key, Pairs]], alpha: float,
            indices: dict[str, list[tuple[int, series.Figure]]],
            changes: dict[str, Pairs]) -> _Budget:
    """The tests of the whole fleet (outliers.paid_tests): per group, its nodes times the
    effective number of its measurements (how they vary together over the nodes, at the tail
    the bar sits in), the nodes held against their earlier runs times that of their changes,
    and its GPUs likewise (how a GPU's deviations from its node's median vary together)."""
    node_parts, gpu_parts = [], []
    for group, by_key in pairs.items():
        columns = []
        for p in [*by_key.values(), changes[group]]:  # the index of changes: one more test
            if p:
                sign = _sign([(i, now) for i, now, _ in p])
                columns.append({i: sign * now.value / then.value for i, now, then in p})
        if columns:
            node_parts.append((len(set().union(*columns)), _table(columns), len(columns)))
    for group, rows in rows_by_group.items():
        found = node_figures[group]
        nodes = len(set().union(*({i for i, _ in f} for f in found.values()))) if found else 0
        columns = [{i: _sign(f) * fig.value for i, fig in f} for f in found.values()]
        if indices[group]:  # one more test, as correlated with the rest as it is
            columns.append({i: fig.value for i, fig in indices[group]})
        node_parts.append((nodes, _table(columns), len(columns)))
        gpu_columns, gpu_count = [], 0
        for per_gpu in rows.values():
            inside = {i: figs for i, figs in _per_node(per_gpu).items()
                      if len(figs) >= outliers.MIN_GROUP}
            if not inside:
                continue
            gpu_columns.append({(i, f.device): _sign(per_gpu) * f.value / statistics.median(
                g.value for g in figs) for i, figs in inside.items() for f in figs})
            gpu_count = max(gpu_count, sum(len(figs) for figs in inside.values()))
        if gpu_count:
            gpu_parts.append((gpu_count, _table(gpu_columns), len(gpu_columns)))
    if not gpu_parts:
        return _Budget(alpha, outliers.paid_tests(node_parts, alpha), 0.0)
    return _Budget(alpha, outliers.paid_tests(node_parts, (1 - GPU_SHARE) * alpha),
                   outliers.paid_tests(gpu_parts, GPU_SHARE * alpha))


def _earlier_figures(run: RunResult) -> dict[series.Key, series.Figure]:
    """A run's node figures (the median of its GPUs'), by measurement."""
    rows: dict[series.Key, list[tuple[int, series.Figure]]] = {}
    for f in series.figures(run):
        rows.setdefault(series.without_device(f.key), []).append((0, f))
    return {k: _node_figures(found)[0][1] for k, found in rows.items()}


def _pairs(then_figures: dict[int, dict[series.Key, series.Figure]], key: series.Key,
           node_figures: list[tuple[int, series.Figure]]) -> Pairs:
    """(node, now, then) for the nodes with an earlier figure of the measurement `key`; none
    where fewer than MIN_GROUP have one."""
    out = []
    for i, now in node_figures:
        then = then_figures.get(i, {}).get(key)
        if then is not None and then.value > 0 and now.value > 0:
            out.append((i, now, then))
    return out if len(out) >= outliers.MIN_GROUP else []


def build(args: Sequence[str], *, before: Sequence[str] = (), allow_same_machine: bool = False,
          alpha: float = outliers.DEFAULT_ALPHA,
          progress: Callable[[int, int], None] | None = None,
          include_interrupted: bool = False) -> Fleet:
    """The fleet of the runs the arguments name (paths, run folders, quoted globs); `before`
    names earlier runs of its nodes, each node's change since its own held against the
    others'. progress(done, total) as the runs are read. An interrupted run is refused unless
    `include_interrupted`."""
    notes: list[str] = []
    now, then = paths_of(args), (paths_of(before) if before else [])
    done = 0

    def read() -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, len(now) + len(then))

    if then:
        both = {results_file(p) for p in now} & {results_file(p) for p in then}
        if both:
            raise CompareError(f"{sorted(both)[0]} is given both as a node and with --before: "
                               "--before takes the nodes' earlier runs")
    # a node's latest run and the one before it are all that is measured of its runs
    made = fleet_nodes.read_nodes(now, read, 0 if allow_same_machine else 2,
                                  include_interrupted)
    nodes, older = fleet_nodes.latest_of_each(made, allow_same_machine, notes)
    late = unfinished_note([n.source for n in nodes if n.run.finished_at is None])
    if late:
        notes.append(late)
    apart = fleet_nodes.apart(nodes)
    if apart:
        notes.append(apart)
    if len(nodes) < outliers.MIN_GROUP:
        have = f"got {len(nodes)}" + (
            f" ({len(nodes) + len(older)} runs: the runs of one machine are one node, its "
            "latest, unless --allow-same-machine counts each as a node)" if older else
            ": compare two with `benchbench compare A B`" if len(nodes) == 2 else "")
        raise CompareError(f"a fleet needs at least {outliers.MIN_GROUP} nodes to find an odd "
                           f"one; {have}")
    split = fleet_nodes.set_conditions(nodes)
    groups: dict[str, list[int]] = {}
    for i, n in enumerate(nodes):
        groups.setdefault(n.place, []).append(i)
    scored = {g: m for g, m in groups.items() if len(m) >= outliers.MIN_GROUP}
    if not scored:
        listing = "; ".join(f"{g}: {len(m)} node(s)" for g, m in groups.items())
        shared = "GPUs, CPU and conditions" if split else "GPUs and CPU"
        raise CompareError(f"mixed {'hardware or conditions' if split else 'hardware'}: no "
                           f"{outliers.MIN_GROUP} nodes share their {shared}, so none can be "
                           f"held against a group ({listing})")
    by_group: dict[str, Rows] = {}
    for group, members in scored.items():
        rows: Rows = {}
        for i in members:
            for f in series.figures(nodes[i].run):
                rows.setdefault(series.without_device(f.key), []).append((i, f))
        by_group[group] = {k: found for k, found in rows.items()
                           if len({i for i, _ in found}) >= outliers.MIN_GROUP}
    node_figures = {g: {k: _node_figures(found) for k, found in rows.items()}
                    for g, rows in by_group.items()}
    if then or older:
        fleet_nodes.match_earlier(nodes, fleet_nodes.read_nodes(then, read, 1,
                                                                include_interrupted),
                                  older, notes)
    cut = interrupted_note([(n.source, c) for node in nodes for n in (node, node.earlier)
                            if n is not None and (c := interruption.of(n.run)) is not None])
    if cut:
        notes.append(cut)
    mine = {id(o) for o in older}
    among_given = {id(n.earlier) in mine for n in nodes if n.earlier is not None}
    earlier_from = ("--before, and the older runs among those given" if len(among_given) == 2
                    else "the older runs among those given" if among_given == {True}
                    else "--before")
    then_figures = {i: _earlier_figures(n.earlier.run) for i, n in enumerate(nodes)
                    if n.earlier is not None}
    pairs = {g: {k: _pairs(then_figures, k, figs) for k, figs in by_key.items()}
             for g, by_key in node_figures.items()}
    if any(n.earlier for n in nodes) and not any(p for by_key in pairs.values()
                                                 for p in by_key.values()):
        notes.append(f"no measurement was taken by {outliers.MIN_GROUP} nodes or more both now "
                     "and in their earlier runs: no change is held against the others'")
    indices = {g: _combined(by_key) for g, by_key in node_figures.items()}
    # the index of changes stands beside the index of levels, of as many figures
    changes: dict[str, Pairs] = {g: [] for g in pairs}
    for g, by_key in pairs.items():
        moved = _combined_changes(by_key)
        if moved and indices[g] and moved[0][1].key == indices[g][0][1].key:
            changes[g] = moved
    budget = _budget(by_group, node_figures, pairs, alpha, indices, changes)
    measures = []
    for group, rows in by_group.items():
        names = series.unique_names({k: series.name_of(k) for k in rows})
        measures += [_measure(group, nodes, found, node_figures[group][k], k, names[k], budget,
                              pairs[group][k])
                     for k, found in rows.items()]
        if index := indices[group]:
            key = index[0][1].key
            whole = _measure(group, nodes, index, index, key, combined_name(key), budget,
                             changes[group])
            _combined_evidence(whole, [m for m in measures if m.group == group], nodes)
            measures.append(whole)
    return Fleet(nodes, groups, measures,
                 {g: m for g, m in groups.items() if g not in scored}, notes, alpha,
                 budget.node_tests, budget.gpu_tests, earlier_from, split)
