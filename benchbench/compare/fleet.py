"""Many nodes, one run each: the nodes grouped by hardware, every headline figure scored
against its group (analysis/outliers.py), and each outlier's evidence against the group's
median node (evidence.py).

A node is a run, or one of the `nodes` a multi-node run gathered (rank 0's run is the first;
its distributed probes, measured across all nodes at once, are no node's own and are left
out). Nodes compare only within their group: the same GPU model and count and the same CPU
model. A figure measured per GPU counts for its node as the median of the node's GPUs, and
each GPU is also held against the other GPUs of its node, so the slowest GPU of an 8-GPU node
stands out where its node's figure does not move.
Two runs of one machine (compare/identity.py) are refused as two nodes unless the caller
accepts them.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from benchbench.analysis import outliers
from benchbench.compare import evidence, identity, series
from benchbench.compare.environment import env_value
from benchbench.compare.sides import CompareError, load, paths_of
from benchbench.core import results
from benchbench.core.results import RunResult


@dataclass
class Node:
    label: str
    source: str
    run: RunResult  # the node's own environment, per-node probes and telemetry
    identity: identity.Identity
    group: str  # its hardware


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


@dataclass
class Measure:
    group: str
    name: str
    key: series.Key  # without the device
    unit: str
    higher_is_better: bool
    median: float
    # the group's robust spread, in percent of its median; None (unknown) where it is 0: half
    # the nodes or more read exactly the median, as copies of one run do (timed figures of
    # separate runs are not equal to the last digit)
    sigma_pct: float | None
    bar: float  # how far from the median an outlier lies (outliers.Group.bar)
    entities: list[Entity]  # one per node
    gpus: list[Entity] = field(default_factory=list)  # per GPU, within its node

    @property
    def outliers(self) -> list[Entity]:
        return [e for e in self.entities + self.gpus if e.score.outlier]

    @property
    def low(self) -> list[Entity]:
        return [e for e in self.entities + self.gpus if e.score.low]

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


def _nodes(args: Sequence[str], allow_same: bool, notes: list[str]) -> list[Node]:
    made: list[Node] = []
    for path in paths_of(args):
        for source, run in nodes_of(load(path), path):
            env = run.environment or {}
            ident = identity.of(env)
            made.append(Node(str(ident.hostname or "node"), source, run, ident, hardware(env)))
    for i, a in enumerate(made):
        for b in made[:i]:
            if not identity.same_machine(a.identity, b.identity):
                continue
            why = identity.why_same(a.identity, b.identity)
            if not allow_same:
                raise CompareError(
                    f"{b.source} and {a.source} are one machine ({why}); a fleet takes one run "
                    "per node: leave one out, or accept both with --allow-same-machine")
            notes.append(f"{b.source} and {a.source} are one machine ({why}), counted as two "
                         "nodes (--allow-same-machine)")
    seen: dict[str, int] = {}
    for n in made:
        seen[n.label] = seen.get(n.label, 0) + 1
        if seen[n.label] > 1:
            n.label = f"{n.label} #{seen[n.label]}"
    return made


def _scored(nodes: list[Node], found: list[tuple[int, series.Figure]], probe: str,
            within_node: bool) -> tuple[outliers.Group, list[Entity]]:
    """The figures scored against each other, each outlier with its evidence against the
    entity closest to the median (the median node, or the node's median GPU)."""
    scored = outliers.score([f.value for _, f in found], found[0][1].higher_is_better)
    entities = [Entity(i, f.device, f, s, within_node)
                for (i, f), s in zip(found, scored.scores, strict=True)]
    calm = [e for e in entities if not e.score.outlier]
    mid = min(calm, key=lambda e: abs(e.figure.value - scored.median)) if calm else None
    for e in entities:
        if e.score.outlier and mid is not None:
            e.against = mid
            e.evidence = evidence.against(nodes[e.node].run, nodes[mid.node].run, probe,
                                          e.figure.gpu_device, mid.figure.gpu_device)
    return scored, entities


def _measure(group: str, nodes: list[Node], found: list[tuple[int, series.Figure]],
             key: series.Key, name: str) -> Measure:
    """A node's figure is the median of its GPUs' (one slow GPU does not move it: the check
    inside the node finds that one), standing for the GPU closest to it."""
    per_node: dict[int, list[series.Figure]] = {}
    for i, f in found:
        per_node.setdefault(i, []).append(f)
    node_figures = []
    for i, figs in per_node.items():
        mid = statistics.median(f.value for f in figs)
        rep = min(figs, key=lambda f: abs(f.value - mid))
        node_figures.append((i, replace(rep, value=float(mid))))
    first = found[0][1]
    scored, entities = _scored(nodes, node_figures, first.probe, False)
    gpus = [e for i, figs in per_node.items() if len(figs) >= outliers.MIN_GROUP
            for e in _scored(nodes, [(i, f) for f in figs], first.probe, True)[1]]
    return Measure(group, name, key, first.unit, first.higher_is_better, scored.median,
                   scored.sigma_pct if scored.sigma > 0 else None, scored.bar, entities, gpus)


def build(args: Sequence[str], *, allow_same_machine: bool = False) -> Fleet:
    """The fleet of the runs the arguments name (paths, run folders, quoted globs)."""
    notes: list[str] = []
    nodes = _nodes(args, allow_same_machine, notes)
    if len(nodes) < outliers.MIN_GROUP:
        have = f"got {len(nodes)}" + (": compare two with `benchbench compare A B`"
                                       if len(nodes) == 2 else "")
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
    measures = []
    for group, members in scored.items():
        rows: dict[series.Key, list[tuple[int, series.Figure]]] = {}
        for i in members:
            for f in series.figures(nodes[i].run):
                rows.setdefault(series.without_device(f.key), []).append((i, f))
        names = series.unique_names({k: series.name_of(k) for k in rows})
        measures += [_measure(group, nodes, found, k, names[k]) for k, found in rows.items()
                     if len({i for i, _ in found}) >= outliers.MIN_GROUP]
    return Fleet(nodes, groups, measures,
                 {g: m for g, m in groups.items() if g not in scored}, notes)
