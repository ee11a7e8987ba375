"""Which runs are the fleet's nodes: the nodes a multi-node run gathered, the hardware group of
each and the conditions it ran under (compare/conditions.py), one node per machine (its
latest run; the older ones its earlier runs, as with --before), and each node's own earlier
run matched by machine and conditions (compare/identity.py). compare/fleet.py scores what this
module hands it; nothing here is a statistic.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from benchbench.compare import conditions, identity, series
from benchbench.compare.environment import env_value
from benchbench.compare.history import started
from benchbench.compare.sides import CompareError, load
from benchbench.core import interruption, results
from benchbench.core.names import first_of
from benchbench.core.results import RunResult

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
    # the conditions its run recorded, read before _lighten drops an older run's probes
    recorded: conditions.Recorded = field(default_factory=dict)
    # its conditions where its hardware group's nodes differ in them ('--quick'), else ""
    conditions: str = ""

    @property
    def place(self) -> str:
        """The group it is scored in: its hardware, and its conditions where they split it."""
        return f"{self.group} · {self.conditions}" if self.conditions else self.group


def conditions_of(n: Node, fields: set[conditions.Field], rec: conditions.Recorded | None = None
                  ) -> conditions.Signature:
    """The conditions among `fields` that the node's headline figures ran under, as `rec`
    recorded them (its own run's, unless given)."""
    return conditions.of_figures(n.recorded if rec is None else rec, fields,
                                 [(f.probe, f.fields) for f in series.figures(n.run)])


def set_conditions(nodes: list[Node]) -> list[tuple[str, list[tuple[str, int]]]]:
    """Node.conditions of each node, where the nodes of its hardware group differ in the
    conditions of their headline figures; (the hardware, each conditions and its count of
    nodes, most first) of each group they split."""
    by_hardware: dict[str, list[Node]] = {}
    for n in nodes:
        by_hardware.setdefault(n.group, []).append(n)
    out = []
    for hardware, members in by_hardware.items():
        fields = conditions.differing(n.recorded for n in members)
        if not fields:
            continue
        counts: dict[str, int] = {}
        for n in members:
            # "": none of its headline figures ran under one of them; it stays in the group
            n.conditions = conditions.words(conditions_of(n, fields))
            told = n.conditions or "none of these conditions"
            counts[told] = counts.get(told, 0) + 1
        if len(counts) > 1:
            out.append((hardware, sorted(counts.items(), key=lambda kv: -kv[1])))
        else:  # they differ only in what no headline figure ran under
            for n in members:
                n.conditions = ""
    return out


def hardware(env: dict[str, Any]) -> str:
    gpus = env_value(env, "GPUs")
    cpu = env_value(env, "CPU") or "unknown CPU"
    return f"{gpus} · {cpu}" if gpus else f"no GPU · {cpu}"


def _node_run(run: RunResult, rec: dict[str, Any], source: str) -> RunResult:
    data = {"schema_version": run.schema_version, "tool": run.tool, "label": None,
            "started_at": run.started_at, "finished_at": run.finished_at,
            "environment": rec.get("environment") or {},
            "config": run.config, "argv": [], "probes": rec.get("probes") or []}
    if isinstance(rec.get("telemetry"), dict):
        data["telemetry"] = rec["telemetry"]
    if interruption.KEY in run.extra:  # a signal that stopped the run stopped every node
        data[interruption.KEY] = run.extra[interruption.KEY]
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


def read_nodes(paths: Sequence[str], read: Callable[[], None] = lambda: None, whole: int = 0,
               include_interrupted: bool = False) -> list[Node]:
    """The nodes of these runs (a multi-node run holds several); read() after each run is
    read. With `whole`, only the latest `whole` runs of each machine keep their measurements
    (_lighten). An interrupted run is refused unless `include_interrupted`."""
    made: list[Node] = []
    for i, path in enumerate(paths, 1):
        run_of_path = load(path, include_interrupted)
        read()
        for source, run in nodes_of(run_of_path, path):
            env = run.environment or {}
            ident = identity.of(env)
            made.append(Node(str(ident.hostname or "node"), source, run, ident, hardware(env),
                             recorded=conditions.recorded(run)))
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


def latest_of_each(made: list[Node], allow_same: bool, notes: list[str]
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


def apart(nodes: list[Node]) -> str | None:
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
    shown = first_of([f"{label} ({t.date()})" for t, label in old])
    return (f"{len(old)} of {len(nodes)} nodes ran more than {APART_DAYS} days before the "
            f"fleet's latest run ({latest.date()}): {shown}; each is held against the others "
            "as it was then, and what changed on the others since (a driver, a kernel) can "
            "make it look slow")


def match_earlier(nodes: list[Node], before: list[Node], older: list[Node], notes: list[str]
                  ) -> None:
    """Each node's own earlier run (Node.earlier): the latest of `before` (the runs given with
    --before) and `older` (the older runs of the nodes given among the fleet's, by
    latest_of_each) that is the same machine (compare/identity.py) and of the same hardware
    group, under the same conditions. One given with --before that is the same machine but not
    older is a mistake in the arguments, refused, as is a --before whose runs are of no node."""
    earlier = older + before
    used: set[int] = set()
    changed, unlike = [], []
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
        fields = conditions.differing([n.recorded, e.recorded])
        now_under, then_under = (conditions_of(n, fields, rec)
                                 for rec in (n.recorded, e.recorded))
        if now_under != then_under:
            unlike.append(f"{n.label} ({conditions.words(then_under)} then, "
                          f"{conditions.words(now_under)} now)")
            continue
        n.earlier = e
    if before and not any(n.earlier for n in nodes):
        raise CompareError(
            f"none of the {len(before)} run(s) given with --before is an earlier run of a node "
            "of this fleet with the same hardware (the same DMI serial, GPU UUIDs, or host name "
            "and CPU model)" + (f"; hardware changed on {', '.join(changed)}" if changed else "")
            + (f"; the conditions changed on {', '.join(unlike)}" if unlike else ""))
    alone = [n.label for n in nodes if n.earlier is None]
    if alone and any(n.earlier for n in nodes):
        where = ("" if before and older else " among --before" if before else
                 " among the runs given")
        shown = first_of(alone)
        notes.append(f"{len(alone)} of {len(nodes)} nodes have no earlier run of the same "
                     f"hardware{where} ({shown}): held against their group only")
    if changed:
        notes.append(f"hardware changed since the earlier run on {', '.join(changed)}: not "
                     "held against it")
    if unlike:
        notes.append(f"the conditions changed since the earlier run on {', '.join(unlike)}: "
                     "not held against it, not like for like")
    spare = [e.source for k, e in enumerate(earlier) if k >= len(older) and k not in used]
    if spare:
        notes.append(f"{len(spare)} run(s) given with --before are of no node of this fleet: "
                     + first_of([f"`{x}`" for x in spare], 3))
