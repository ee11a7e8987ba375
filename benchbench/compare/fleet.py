"""Many nodes, one run each: the nodes grouped by hardware, every headline figure scored
against its group (analysis/outliers.py), and each outlier's evidence against the group's
median node (evidence.py).

A node is a run, or one of the `nodes` a multi-node run gathered (rank 0's run is the first;
its distributed probes, measured across all nodes at once, are no node's own and are left
out). Nodes compare only within their group: the same GPU model and count and the same CPU
model. A figure measured per GPU counts for its node as the median of the node's GPUs, and
each GPU is also held against its node's median GPU (with the spread of every node's GPUs
about theirs), so the slowest GPU of an 8-GPU node stands out where its node's figure does not
move. The fleet's alpha is shared over every call it makes (_Budget): 90% to the nodes, times
the effective number of measurements, and 10% to the GPUs.
Where earlier runs of the nodes are given (`before`), each node's figure is also taken as its
change since its own earlier run, and those changes are held against each other by the same
rule, paid from the nodes' share: a node's own level (its silicon, cooling and slots), which is
most of a fleet's spread and hides a node 15% slow in one 32-node fleet of seven, drops out of
its change, so a node that got slower stands out against the others' changes.
Several runs of one machine (compare/identity.py) among the nodes' runs are one node: its
latest run, the others its earlier runs as if given with --before. Two of one start time are
refused, unless the caller accepts each run as a node.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from benchbench.analysis import change_points as cp
from benchbench.analysis import max_t, outliers
from benchbench.compare import evidence, identity, series
from benchbench.compare.environment import env_value
from benchbench.compare.history import started
from benchbench.compare.sides import CompareError, load, paths_of, results_file
from benchbench.core import results
from benchbench.core.results import RunResult

GPU_SHARE = 0.1  # of alpha, for the GPUs inside their nodes (their spread is measured tight)
LIGHTEN_EVERY = 64  # runs read between two _lighten passes
APART_DAYS = 7  # a node run this long before the fleet's latest is named in the notes


@dataclass
class Node:
    label: str
    source: str
    run: RunResult  # the node's own environment, per-node probes and telemetry
    identity: identity.Identity
    group: str  # its hardware
    earlier: Node | None = None  # its own earlier run (fleet --before), when given


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
    groups: dict[str, list[int]]  # hardware -> node indices
    measures: list[Measure]
    unscored: dict[str, list[int]]  # the groups too small to score
    notes: list[str] = field(default_factory=list)
    alpha: float = outliers.DEFAULT_ALPHA  # the chance a healthy fleet shows a low outlier
    node_tests: float = 0.0  # nodes × effective measurements, over the groups (changes too)
    gpu_tests: float = 0.0
    # where the nodes' earlier runs came from: "--before", the older runs among those given
    # (fleet.build's _latest_of_each), or both
    earlier_from: str = "--before"

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


def hardware(env: dict[str, Any]) -> str:
    gpus = env_value(env, "GPUs")
    cpu = env_value(env, "CPU") or "unknown CPU"
    return f"{gpus} · {cpu}" if gpus else f"no GPU · {cpu}"


def _node_run(run: RunResult, rec: dict[str, Any], source: str) -> RunResult:
    data = {"schema_version": run.schema_version, "tool": run.tool, "label": None,
            "started_at": run.started_at, "environment": rec.get("environment") or {},
            "config": run.config, "argv": [], "probes": rec.get("probes") or []}
    if isinstance(rec.get("telemetry"), dict):
        data["telemetry"] = rec["telemetry"]
    try:
        return RunResult.from_dict(data)
    except results.ResultsError as exc:
        raise CompareError(f"{source}: {exc}") from None


def nodes_of(run: RunResult, source: str) -> list[tuple[str, RunResult]]:
    """(source, the node's run) for the run and each node it gathered."""
    others = [r for r in run.extra.get("nodes") or [] if isinstance(r, dict)]
    if not others:
        return [(source, run)]
    per_node = {p.get("name") for r in others for p in r.get("probes") or []
                if isinstance(p, dict)}
    own = replace(run, probes=[p for p in run.probes if p.name in per_node])
    return [(f"{source} (node 0)", own)] + [
        (f"{source} (node {r.get('node_rank', i + 1)})",
         _node_run(run, r, f"{source} (node {r.get('node_rank', i + 1)})"))
        for i, r in enumerate(others)]


def _nodes(paths: Sequence[str], read: Callable[[], None] = lambda: None, whole: int = 0
           ) -> list[Node]:
    """The nodes of these runs (a multi-node run holds several); read() after each run is
    read. With `whole`, only the latest `whole` runs of each machine keep their measurements
    (_lighten)."""
    made: list[Node] = []
    for i, path in enumerate(paths, 1):
        run_of_path = load(path)
        read()
        for source, run in nodes_of(run_of_path, path):
            env = run.environment or {}
            ident = identity.of(env)
            made.append(Node(str(ident.hostname or "node"), source, run, ident, hardware(env)))
        if whole and (i % LIGHTEN_EVERY == 0 or i == len(paths)):
            _lighten(made, whole)
    return made


def _lighten(made: list[Node], whole: int) -> None:
    """Of each machine's runs, all but the latest `whole` lose their measurements: of an older
    run only its time, identity and hardware are asked, so an archive of many nights of the
    fleet is not held in memory at once."""
    for group in identity.machines([n.identity for n in made]):
        if len(group) <= whole:
            continue
        for k in sorted(group, key=lambda k: _when(made[k]))[:-whole]:
            run = made[k].run
            if run.probes or run.extra or run.verdict:
                made[k].run = replace(run, probes=[], verdict=None, extra={})


def _when(n: Node) -> datetime:
    return started(n.source, n.run.started_at)


def _latest_of_each(made: list[Node], allow_same: bool, notes: list[str]
                    ) -> tuple[list[Node], list[Node]]:
    """(the nodes, their older runs): of several runs of one machine (compare/identity.py) the
    latest is the node and the others are its earlier runs, as if given with --before; two of
    one time cannot be told apart and are refused. With allow_same, each run is a node. The
    nodes keep the order in which their machines first appear."""
    nodes: list[tuple[int, int]] = []  # (where the node's machine first appears, the node)
    older: list[Node] = []
    several = 0
    for group in identity.machines([n.identity for n in made]):
        if len(group) == 1 or allow_same:
            nodes += [(k, k) for k in group]
            notes += [f"{made[group[0]].source} and {made[k].source} are one machine "
                      f"({identity.why_same(made[group[0]].identity, made[k].identity)}), "
                      "counted as two nodes (--allow-same-machine)" for k in group[1:]]
            continue
        runs = sorted(group, key=lambda k: _when(made[k]))
        latest, before = runs[-1], runs[-2]
        if _when(made[before]) == _when(made[latest]):
            a, b = sorted((before, latest))
            raise CompareError(
                f"{made[a].source} and {made[b].source} are one machine "
                f"({identity.why_same(made[a].identity, made[b].identity)}) and started at the "
                f"same time ({made[b].run.started_at}); a fleet takes one run per node: leave "
                "one out, or accept both with --allow-same-machine")
        nodes.append((group[0], latest))
        older += [made[k] for k in runs[:-1]]
        several += 1
    if older:
        notes.append(f"{several} node(s) were given with more than one run: each is judged on "
                     "its latest run, and its change since the run before that is held against "
                     f"the other nodes' changes, as with --before ({len(older)} older run(s); "
                     "--allow-same-machine counts each run as a node)")
    kept = [made[k] for _, k in sorted(nodes)]
    seen: dict[str, int] = {}
    for n in kept:
        seen[n.label] = seen.get(n.label, 0) + 1
        if seen[n.label] > 1:
            n.label = f"{n.label} #{seen[n.label]}"
    return kept, older


def _listed(items: list[str], first: int = 6) -> str:
    """'a, b, c and 4 more': the first items, and how many are left out."""
    left = len(items) - first
    return ", ".join(items[:first]) + (f" and {left} more" if left > 0 else "")


def _apart(nodes: list[Node]) -> str | None:
    """A note naming the nodes run more than APART_DAYS before the fleet's latest (held against
    the others as they were then: a driver the rest got since can make them look slow); None
    where they ran within that, or their times cannot be read (not needed otherwise)."""
    try:
        when = [(_when(n), n.label) for n in nodes]
    except CompareError:
        return None
    if not when:
        return None
    latest = max(t for t, _ in when)
    old = sorted((t, label) for t, label in when if (latest - t).days > APART_DAYS)
    if not old:
        return None
    shown = _listed([f"{label} ({t.date()})" for t, label in old])
    return (f"{len(old)} of {len(nodes)} nodes ran more than {APART_DAYS} days before the "
            f"fleet's latest run ({latest.date()}): {shown}; each is held against the others "
            "as it was then, and what changed on the others since (a driver, a kernel) can "
            "make it look slow")


def _match(nodes: list[Node], before: list[Node], older: list[Node], notes: list[str]) -> None:
    """Each node's own earlier run (Node.earlier): the latest of `before` (the runs given with
    --before) and `older` (the older runs of the nodes given among the fleet's, by
    _latest_of_each) that is the same machine (compare/identity.py) and of the same hardware
    group. One given with --before that is the same machine but not older is a mistake in the
    arguments, refused, as is a --before whose runs are of no node."""
    earlier = older + before
    used: set[int] = set()
    changed = []
    for n in nodes:
        mine = [k for k, e in enumerate(earlier) if identity.same_machine(n.identity, e.identity)]
        if not mine:
            continue
        used.update(mine)
        now = _when(n)
        for k in mine:
            if _when(earlier[k]) >= now:
                raise CompareError(
                    f"{earlier[k].source} is {n.label}'s run of {earlier[k].run.started_at}, not "
                    f"before {n.source} ({n.run.started_at}): --before takes the nodes' earlier "
                    "runs")
        e = earlier[max(mine, key=lambda k: _when(earlier[k]))]
        if e.group != n.group:
            changed.append(f"{n.label} ({e.group} then)")
            continue
        n.earlier = e
    if before and not any(n.earlier for n in nodes):
        raise CompareError(
            f"none of the {len(before)} run(s) given with --before is an earlier run of a node "
            "of this fleet with the same hardware (the same DMI serial, GPU UUIDs, or host name "
            "and CPU model)" + (f"; hardware changed on {', '.join(changed)}" if changed else ""))
    alone = [n.label for n in nodes if n.earlier is None]
    if alone and any(n.earlier for n in nodes):
        where = ("" if before and older else " among --before" if before else
                 " among the runs given")
        shown = _listed(alone)
        notes.append(f"{len(alone)} of {len(nodes)} nodes have no earlier run of the same "
                     f"hardware{where} ({shown}): held against their group only")
    if changed:
        notes.append(f"hardware changed since the earlier run on {', '.join(changed)}: not "
                     "held against it")
    spare = [e.source for k, e in enumerate(earlier) if k >= len(older) and k not in used]
    if spare:
        notes.append(f"{len(spare)} run(s) given with --before are of no node of this fleet: "
                     + _listed([f"`{x}`" for x in spare], 3))


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


def _budget(rows_by_group: dict[str, Rows], node_figures: dict[str, Rows],
            pairs: dict[str, dict[series.Key, Pairs]], alpha: float) -> _Budget:
    """The tests of the whole fleet (outliers.paid_tests): per group, its nodes times the
    effective number of its measurements (how they vary together over the nodes, at the tail
    the bar sits in), the nodes held against their earlier runs times that of their changes,
    and its GPUs likewise (how a GPU's deviations from its node's median vary together)."""
    node_parts, gpu_parts = [], []
    for by_key in pairs.values():
        columns = []
        for p in by_key.values():
            if p:
                sign = _sign([(i, now) for i, now, _ in p])
                columns.append({i: sign * now.value / then.value for i, now, then in p})
        if columns:
            node_parts.append((len(set().union(*columns)), _table(columns), len(columns)))
    for group, rows in rows_by_group.items():
        found = node_figures[group]
        nodes = len(set().union(*({i for i, _ in f} for f in found.values()))) if found else 0
        node_parts.append((nodes, _table([{i: _sign(f) * fig.value for i, fig in f}
                                          for f in found.values()]), len(found)))
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
          progress: Callable[[int, int], None] | None = None) -> Fleet:
    """The fleet of the runs the arguments name (paths, run folders, quoted globs); `before`
    names earlier runs of its nodes, each node's change since its own held against the
    others'. progress(done, total) as the runs are read."""
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
    nodes, older = _latest_of_each(_nodes(now, read, 0 if allow_same_machine else 2),
                                   allow_same_machine, notes)
    apart = _apart(nodes)
    if apart:
        notes.append(apart)
    if len(nodes) < outliers.MIN_GROUP:
        have = f"got {len(nodes)}" + (
            f" ({len(nodes) + len(older)} runs: the runs of one machine are one node, its "
            "latest, unless --allow-same-machine counts each as a node)" if older else
            ": compare two with `benchbench compare A B`" if len(nodes) == 2 else "")
        raise CompareError(f"a fleet needs at least {outliers.MIN_GROUP} nodes to find an odd "
                           f"one; {have}")
    groups: dict[str, list[int]] = {}
    for i, n in enumerate(nodes):
        groups.setdefault(n.group, []).append(i)
    scored = {g: m for g, m in groups.items() if len(m) >= outliers.MIN_GROUP}
    if not scored:
        listing = "; ".join(f"{g}: {len(m)} node(s)" for g, m in groups.items())
        raise CompareError(f"mixed hardware: no {outliers.MIN_GROUP} nodes share their GPUs "
                           f"and CPU, so none can be held against a group ({listing})")
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
        _match(nodes, _nodes(then, read, 1), older, notes)
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
    budget = _budget(by_group, node_figures, pairs, alpha)
    measures = []
    for group, rows in by_group.items():
        names = series.unique_names({k: series.name_of(k) for k in rows})
        measures += [_measure(group, nodes, found, node_figures[group][k], k, names[k], budget,
                              pairs[group][k])
                     for k, found in rows.items()]
    return Fleet(nodes, groups, measures,
                 {g: m for g, m in groups.items() if g not in scored}, notes, alpha,
                 budget.node_tests, budget.gpu_tests, earlier_from)
