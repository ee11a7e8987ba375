"""Render a Fleet as Markdown (printed, and fleet.md) and as fleet.csv: the outliers with their
evidence, every measurement's group statistics, with --before the nodes' changes since their
earlier runs, the groups and the nodes."""

from __future__ import annotations

from typing import Any

from benchbench.analysis.change_points import change_pct
from benchbench.analysis.outliers import MIN_GROUP, TINY_PCT
from benchbench.compare.fleet import Entity, Fleet, Measure
from benchbench.core import names
from benchbench.core import units as fmt
from benchbench.reports.csv import table_text
from benchbench.reports.fleet_plots import entity_label
from benchbench.reports.history_text import evidence_text, noise_text, pct, tally_text, value

# The outlier rule (analysis/outliers.py) in words, as fleet.md's header and fleet.html's
# banner state it.
OUTLIER_RULE = ("beyond Student's t at the fleet's alpha shared over every test (nodes × the "
                "effective number of measurements, Bonferroni) times the spread of what it is "
                f"held against, and never within {TINY_PCT:g}% of it")


def z_text(e: Entity) -> str:
    return "z = —" if e.score.z is None else f"z = {e.score.z:+.1f}".replace("-", "−")


def since_text(f: Fleet, e: Entity) -> str:
    """'its earlier run (2026-11-01)'"""
    then = f.nodes[e.node].earlier
    return "its earlier run" + (f" ({then.run.started_at[:10]})" if then else "")


def median_change(m: Measure) -> float:
    """The group's median change since the earlier runs, percent, + better."""
    return (m.since.median - 1) * 100 * (1 if m.higher_is_better else -1) if m.since else 0.0


def _change_text(f: Fleet, m: Measure, e: Entity) -> str:
    """'node17: matmul peak bf16 −9.1% since its earlier run (2026-11-01), −9.3% against the
    group's median change of +0.2% (z = −12.5); driver 560.35.03 where its earlier run has
    550.54.15'"""
    assert e.earlier is not None
    ref = since_text(f, e)
    head = (f"{entity_label(f, e)}: {m.name} "
            f"{pct(change_pct(e.earlier.value, e.figure.value, m.higher_is_better))} since "
            f"{ref}, {pct(e.score.deviation_pct)} against the group's median change of "
            f"{pct(median_change(m))} ({z_text(e)})")
    if not e.score.outlier:
        return head
    told = [evidence_text(x, "its earlier run") for x in e.evidence]
    return "; ".join([head, *told] if told else
                     [head, "its run records nothing that its earlier run does not"])


def outlier_text(f: Fleet, m: Measure, e: Entity) -> str:
    """'node17: matmul peak bf16 −14.0% vs the group median (z = −6.2); PCIe link under load
    Gen4 x8 (capable Gen5 x16) where the median node (node03) has Gen5 x16'"""
    if e.change:
        return _change_text(f, m, e)
    median, told = _held(f, e)
    head = f"{entity_label(f, e)}: {m.name} {pct(e.score.deviation_pct)} vs {median} " \
           f"({z_text(e)})"
    return "; ".join([head, *told])


def _held(f: Fleet, e: Entity) -> tuple[str, list[str]]:
    """(what a node's or a GPU's level is held against, its evidence against the entity
    closest to that: what its run records that the other's does not)."""
    median = "its node's median GPU" if e.within_node else "the group median"
    if e.against is None:
        return median, []
    ref = _median_words(e.within_node, [entity_label(f, e.against)])
    return median, ([evidence_text(x, ref) for x in e.evidence]
                    or [f"its run records nothing that {ref} does not"])


def _median_words(within_node: bool, labels: list[str]) -> str:
    """'the median node (node03)', 'its node's median GPUs (node05 cuda:2 and node05 cuda:4)':
    what an outlier's evidence is held against."""
    many = "s" if len(labels) > 1 else ""
    return (f"its node's median GPU{many}" if within_node else f"the median node{many}") \
        + f" ({names.listed(labels)})"


def on_nodes(pairs: list[tuple[Measure, Entity]]) -> str:
    """' on 2 nodes' (or ' on 1 node'): how many nodes these outliers fall on, themselves, a
    GPU of theirs or their change."""
    n = len({e.node for _, e in pairs})
    return f" on {n} node{'s' if n != 1 else ''}"


def named_briefly(f: Fleet, pairs: list[tuple[Measure, Entity]]) -> str:
    """'node09 cuda:3 −20.2%; node05 −16.2%': the terminal's last line names the nodes (or
    GPUs) below their group, each at its largest deviation, the furthest off first, up to
    names.TERMINAL_NAMED, as history's and compare's last lines name what regressed."""
    worst: dict[str, float] = {}
    for _, e in pairs:
        label = entity_label(f, e) + (" (its change)" if e.change else "")
        worst[label] = min(worst.get(label, 0.0), e.score.deviation_pct)
    words = [f"{who} {pct(d)}" for who, d in sorted(worst.items(), key=lambda kv: kv[1])]
    return names.first_clauses(words)


def outlier_lines(f: Fleet, pairs: list[tuple[Measure, Entity]]) -> list[str]:
    """outlier_text of each, a node's (or a GPU's) measurements that are held against the same
    and show the same evidence in one line: 'node05: matmul peak bf16 −16.2% (z = −6.8) and
    matmul peak fp16 −16.2% (z = −6.8) vs the group median; its run records nothing that the
    median node (node09) does not'. The nodes furthest off first, each node's lines together;
    a change since an earlier run keeps a line of its own."""
    lines: dict[tuple[str, Any], list[tuple[Measure, Entity]]] = {}
    worst: dict[int, float] = {}  # by node: its largest deviation among these
    for k, (m, e) in enumerate(pairs):
        median, told = _held(f, e)
        # a run that records nothing against any median node shares one line whichever
        # node was the median of each measurement (_nothing_text names them all)
        same = k if e.change else (median, () if not e.evidence else tuple(told))
        lines.setdefault((entity_label(f, e), same), []).append((m, e))
        worst[e.node] = max(worst.get(e.node, 0.0), abs(e.score.deviation_pct))
    out = []
    for (who, same), members in sorted(lines.items(), key=lambda kv: (
            -worst[kv[1][0][1].node], kv[1][0][1].node)):
        if len(members) == 1:  # a change's line is always one (its key is its place)
            out.append(outlier_text(f, *members[0]))
            continue
        median, told = same
        what = [f"{m.name} {pct(e.score.deviation_pct)} ({z_text(e)})" for m, e in members]
        out.append("; ".join([f"{who}: {names.listed(what)} vs {median}",
                              *(told or _nothing_text(f, [e for _, e in members]))]))
    return out


def _nothing_text(f: Fleet, members: list[Entity]) -> list[str]:
    """'its run records nothing that the median nodes (node03 and node09) do not': for one
    line's measurements whose evidence is empty, each held against its own median node."""
    against = sorted({entity_label(f, e.against) for e in members if e.against is not None})
    if not against:
        return []
    return [f"its run records nothing that {_median_words(members[0].within_node, against)} "
            + ("does not" if len(against) == 1 else "do not")]


def _header(f: Fleet) -> list[str]:
    if not f.split:
        return [f"# benchbench fleet: {len(f.nodes)} nodes", "",
                f"{len(f.nodes)} nodes in {names.counted(len(f.groups), 'hardware group')} (the "
                "same GPU model "
                "and count and CPU model).", ""]
    told = "; ".join(("" if len(f.split) == 1 and len({n.group for n in f.nodes}) == 1
                      else f"of {hardware}, ") + tally_text(counts, "node")
                     for hardware, counts in f.split)
    alone = [f"{f.nodes[i].label} ({f.nodes[i].conditions})" for members in
             f.unscored.values() for i in members if f.nodes[i].conditions]
    return [f"# benchbench fleet: {len(f.nodes)} nodes", "",
            f"{len(f.nodes)} nodes in {names.counted(len(f.groups), 'group')} (the same GPU "
            "model and count "
            "and CPU model, and the same conditions).", "",
            "**Kept apart**: nodes run under different conditions are separate groups, never "
            f"held against each other: {told}."
            + (f" Not scored, in a group of fewer than {MIN_GROUP}: "
               f"{names.first_of(alone)}." if alone else ""), ""]


def _rule(f: Fleet) -> list[str]:
    """How the summary above was decided: after it, so that the verdict comes first."""
    tests = f"{f.node_tests:.0f} node tests" + (f", {f.gpu_tests:.0f} GPU tests"
                                                 if f.gpu_tests else "")
    gpus = bool(f.gpu_tests)  # a fleet of CPU boxes reads nothing of GPUs
    out = ["## The rule", "",
           "- **A node** is held against the rest of its group, in each headline figure."
           + (" A figure measured per GPU counts for its node as the median of its GPUs."
              if gpus else ""),
           "- **An outlier**: the node farthest from the others' mean is taken out and held "
           "against them, their mean and standard deviation (with the noise of their runs' "
           f"rounds where the nodes scatter no more than that). It is an outlier {OUTLIER_RULE}. "
           "Then the next, up to a fifth of the group; those taken out up to the last outlier "
           "are the outliers (Rosner's generalized ESD), so that a second slow node cannot "
           "hide the first. The bar pays for those later steps, which would otherwise call a "
           "healthy node of a small group low more often than the false alarms below say.",
           "- **All figures at once**: each node's headline figures also make one index, "
           "their mean deviation from each figure's median, each weighted by the inverse of "
           "its spread over the nodes, held against the other nodes' index by the same rule. "
           "A node a little slow in every figure stands out of the index, where the noise that "
           "is each figure's own averages down, though it lies within the spread of each.",
           "- **z** = (x − the mean of the nodes that are no outliers) / their standard "
           "deviation.",
           f"- **False alarms**: a healthy fleet shows a low outlier with a chance of "
           f"{f.alpha:g} in all ({tests}).",
           *(["- **A GPU** is also held against its node's median GPU, with the spread of all "
              "the group's GPUs about theirs."] if gpus else []),
           "- **The evidence** for an outlier is what its own run records that the group's "
           "median node" + (" (for a GPU: its node's median GPU)" if gpus else "") + " does not."]
    if f.change_tests:
        out.append(
            f"- **Its change**: {f.earlier} of the nodes were measured before "
            f"({f.earlier_from}). Each one's change since its own earlier run is also held "
            "against the other nodes' changes, by the same rule and paid from the same alpha "
            "(the node tests count them). A node's own level (its silicon, cooling and "
            "slots), which makes most of a fleet's spread, drops out of its change, so a node "
            "that got slower stands out where its level alone still lies within the group; "
            "its evidence is what its run records that its earlier run does not. The changes "
            "of a node's headline figures make one index too, weighted as its levels' is, "
            "and held against the other nodes' by the same rule.")
    return out + [""]


def _summary(f: Fleet) -> list[str]:
    low = f.low
    out = ["## Summary", ""]
    if low:
        out += [f"**{names.counted(len(low), 'outlier')} below their group{on_nodes(low)}** "
                "(exit 3):", ""]
        out += [f"- {line}" for line in outlier_lines(f, low)]
    else:
        out.append("**No outlier below its group** (exit 0).")
    high = [(m, e) for m in f.measures for e in m.outliers if not e.score.low]
    if high:
        out += ["", f"{names.counted(len(high), 'outlier')} above their group (faster: not a "
                    "failure, but not "
                    "like the others):", ""]
        out += [f"- {line}" for line in outlier_lines(f, high)]
    return out + [""]


def _groups(f: Fleet) -> list[str]:
    rows = [[g, str(len(members)), ", ".join(f.nodes[i].label for i in members),
             f"no: fewer than {MIN_GROUP} nodes" if g in f.unscored else "yes"]
            for g, members in f.groups.items()]
    return ["## Groups", ""] + fmt.table(
        ["hardware · conditions" if f.split else "hardware", "nodes", "which", "scored"], rows)


def _table(header: list[str], rows: list[list[str]], hardware: int, one: bool) -> list[str]:
    """A table whose column `hardware` names each row's hardware group: left out where the
    fleet has `one`, since every row would repeat what the Groups section says."""
    if not one:
        return fmt.table(header, rows)
    return fmt.table(header[:hardware] + header[hardware + 1:],
                     [r[:hardware] + r[hardware + 1:] for r in rows])


def _one_scored(f: Fleet) -> bool:
    """Every measurement is of one hardware group (the others, if any, too small to score)."""
    return len({m.group for m in f.measures}) == 1


def _measures(f: Fleet) -> list[str]:
    rows = [[m.name, m.group, str(len(m.entities)), value(m.median, m.unit),
             noise_text(m.sigma_pct) + (" (with its rounds)" if m.pooled else ""),
             f"±{m.bar_pct:.1f}%", f"{value(m.worst.figure.value, m.unit)} "
             f"({entity_label(f, m.worst)})",
             ", ".join(entity_label(f, e) for e in m.entities + m.gpus if e.score.outlier)
             or "none"]
            for m in f.measures]
    return ["## Measurements", "",
            "- **Spread**: the standard deviation of the nodes that are no outliers (see the "
            "rule) in percent of the group's median; unknown where it is 0 (they all read the "
            "same: copies of one run, not a measured spread).",
            "- **Sees**: the smallest deviation from their mean this fleet's spread lets the "
            "rule call; a node further off is an outlier.",
            "- **Plots**: each measurement is plotted in fleet.html.", ""] + \
        _table(["measurement", "group", "nodes", "median", "spread", "sees", "worst node",
                "outliers"], rows, 1, _one_scored(f))


def _since(f: Fleet) -> list[str]:
    """Each measurement's changes since the earlier runs: the group's median change, their
    spread and what it lets the rule see, the worst node and the outliers."""
    rows = []
    for m in f.measures:
        if m.since is None or not m.changes:
            continue
        worst = min(m.changes, key=lambda e: e.score.deviation_pct)
        worst_change = change_pct(worst.earlier.value, worst.figure.value,
                                  m.higher_is_better) if worst.earlier else 0.0
        rows.append([m.name, m.group, str(len(m.changes)), pct(median_change(m)),
                     noise_text(m.since.sigma_pct if m.since.sigma > 0 else None)
                     + (" (with its rounds)" if m.since.pooled else ""),
                     f"±{m.since.bar_pct:.1f}%",
                     f"{pct(worst_change)} ({entity_label(f, worst)})",
                     ", ".join(entity_label(f, e) for e in m.changes if e.score.outlier)
                     or "none"])
    if not rows:
        return []
    return ["## Since the earlier runs", "",
            f"Each node's change since its own earlier run ({f.earlier_from}), held against "
            "the other nodes' changes.", "",
            "- **Median change**: the group's, + better (a change of the whole group is no "
            "node's fault: `benchbench history` judges a machine over time).",
            "- **Spread**: the standard deviation of the changes of the nodes that are no "
            "outliers, in percent.",
            "- **Sees**: the smallest deviation from their mean change the rule can call.",
            ""] + _table(
        ["measurement", "group", "nodes", "median change", "spread", "sees", "worst node",
         "outliers"], rows, 1, _one_scored(f))


def _nodes(f: Fleet) -> list[str]:
    head = ["node", "run", "source", "hardware · conditions" if f.split else "hardware",
            "identified by"]
    rows = [[n.label, n.run.started_at[:10], f"`{n.source}`", n.place, n.identity.basis
             + ("" if n.identity.recorded else " (an older run: no recorded identity)")]
            for n in f.nodes]
    if f.earlier:
        head.append("earlier run")
        for row, n in zip(rows, f.nodes, strict=True):
            row.append(f"{n.earlier.run.started_at[:10]} `{n.earlier.source}`" if n.earlier
                       else "—")
    return ["## Nodes", ""] + _table(head, rows, 3, len(f.groups) == 1)


def render(f: Fleet) -> str:
    lines = _header(f) + _summary(f) + _rule(f) + _groups(f) + _measures(f) + _since(f) + _nodes(f)
    if f.notes:
        lines += ["## Notes", ""] + [f"- {n}" for n in f.notes] + [""]
    return "\n".join(lines).rstrip() + "\n"


# --- fleet.csv --------------------------------------------------------------------------------

def csv_rows(f: Fleet) -> tuple[list[str], list[dict[str, Any]]]:
    """One row per measurement and node (or GPU)."""
    keys: dict[str, None] = {}
    out = []
    for m in f.measures:
        fields = dict(m.key[2])
        keys.update(dict.fromkeys(fields))
        for e in m.entities + m.gpus + m.changes:
            spread = m.since.sigma_pct if e.change and m.since else m.sigma_pct
            out.append({"group": m.group, "measurement": m.name, "probe": m.key[0],
                        "metric": m.key[1], **{f"key.{k}": v for k, v in fields.items()},
                        "spread_pct": spread,
                        "node": f.nodes[e.node].label, "source": f.nodes[e.node].source,
                        "device": e.device,
                        "against": "earlier run" if e.change else
                        "node" if e.within_node else "group",
                        "unit": m.unit, "value": e.figure.value, "z": e.score.z,
                        "deviation_pct": e.score.deviation_pct, "outlier": e.score.outlier,
                        "below": e.score.low,
                        "evidence": outlier_text(f, m, e) if e.score.outlier else "",
                        "earlier_value": e.earlier.value if e.earlier else None})
    lead = ["group", "measurement", "probe", "metric"]
    tail = ["spread_pct", "node", "source", "device", "against", "unit", "value", "z",
            "deviation_pct", "outlier", "below", "evidence", "earlier_value"]
    return lead + [f"key.{k}" for k in keys] + tail, out


def csv_text(f: Fleet) -> str:
    return table_text(*csv_rows(f))
