"""Runs side by side: which runs stand for which side, the measurements that match, each side's
verdict, the environment that differs, and the regression decision per measurement.

Reads only RunResult JSON (results.load), so any old run can be compared without re-running.
No printing and no files here: reports/compare_md.py and compare_html.py render a Comparison,
commands.compare writes it.

Sides. Each positional RUN argument is one side; a glob (expanded here, for shells that do not)
matching several runs makes one side that pools their raw samples, because the day-to-day
variance of a shared machine (~4% on cloud GPUs) is larger than the spread within one run. The
--baseline arguments, all pooled, are the baseline side; without --baseline the first
positional side is. An unquoted glob that the shell expands becomes one side per run: quote it
to pool.

Matching. Two measurements match when their probe, metric and key match, except for the key
fields in INCIDENTAL: values the probe chose for itself, that say how it measured rather than
what. Where the runs differ in those, the row notes it.
"""

from __future__ import annotations

import glob
import json
import os
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from benchbench.analysis import regression
from benchbench.compare.environment import EnvRow, environment_diff, hardware_id
from benchbench.core import results, stats
from benchbench.core.results import Measurement, ProbeResult, RunResult
from benchbench.core.rounds import round_values

# Key fields that do not make two measurements different measurements, per probe ("*": any).
INCIDENTAL: dict[str, frozenset[str]] = {
    # Host lists name the machines a collective ran on, not what it measured.
    "*": frozenset({"hosts"}),
    # The buffer is auto-sized to at least 4x the last-level cache (L2 on a GPU) and grows with
    # --quick off: either way it measures DRAM/HBM, which is the figure compared.
    "memory_bandwidth": frozenset({"size_bytes"}),
    # The loader and worker count are chosen by the probe from the dataloader's best
    # (context loader_chosen_by): the figure is "the real pipeline at its best setting".
    "pipeline": frozenset({"loader", "workers"}),
    # fio's first engine that works here (io_uring, libaio, psync …) and the way the page cache
    # was bypassed are how the read was made; the job (size, depth, jobs) is what was read.
    "storage": frozenset({"engine", "cache_bypass"}),
}
GLOB_CHARS = frozenset("*?[")


class CompareError(Exception):
    """Bad input for compare: one line, exit code 2."""


def incidental(probe: str) -> frozenset[str]:
    return INCIDENTAL["*"] | INCIDENTAL.get(probe, frozenset())


def _freeze(v: Any) -> Any:
    return json.dumps(v, sort_keys=True, default=str) if isinstance(v, (list, dict)) else v


def match_key(probe: str, m: Measurement, full: bool = False) -> tuple:
    skip = frozenset() if full else incidental(probe)
    return (probe, m.metric, tuple((k, _freeze(v)) for k, v in m.key.items() if k not in skip))


# --- sides --------------------------------------------------------------------------------------

@dataclass
class Side:
    """One column of the comparison: one run, or several pooled."""

    label: str
    runs: list[RunResult]
    sources: list[str]
    baseline: bool = False
    pattern: str | None = None  # the glob or argument that named a pooled side
    run: RunResult | None = None  # the runs merged into one (the run itself when alone)
    verdict: dict[str, Any] | None = None

    @property
    def hardware(self) -> str:
        ids = sorted({hardware_id(r) for r in self.runs})
        return ids[0] if len(ids) == 1 else "mixed: " + "; ".join(ids)


def expand(arg: str) -> list[str]:
    """The paths an argument names: itself when it exists, else its glob matches, sorted. A
    glob skips folders without a results.json (a compare --out folder among the runs, say):
    the report lists every run it used."""
    if os.path.exists(arg) or not (GLOB_CHARS & set(arg)):
        return [arg]
    found = [p for p in sorted(glob.glob(arg))
             if not os.path.isdir(p) or os.path.isfile(os.path.join(p, "results.json"))]
    if not found:
        raise CompareError(f"{arg}: matches no results.json or run folder")
    return found


def _load(path: str) -> RunResult:
    try:
        return results.load(path)
    except results.ResultsError as exc:
        raise CompareError(str(exc)) from None


def load_side(args: Sequence[str], baseline: bool = False) -> Side:
    paths: list[str] = []
    for a in args:
        for p in expand(a):
            real = os.path.realpath(p if os.path.isfile(p) else os.path.join(p, "results.json"))
            if real not in {os.path.realpath(q if os.path.isfile(q) else
                                             os.path.join(q, "results.json")) for q in paths}:
                paths.append(p)
    runs = [_load(p) for p in paths]
    pattern = args[0] if len(args) == 1 and len(runs) > 1 else None
    return Side(label="", runs=runs, sources=paths, baseline=baseline, pattern=pattern)


def run_label(run: RunResult) -> str:
    return run.label or (run.environment.get("host") or {}).get("hostname") or "run"


def assign_labels(sides: list[Side]) -> None:
    """Each side's run label, else hostname; a pooled side's shared label, else its glob (or
    'baseline'); the start time added where two would collide, then a number."""
    for s in sides:
        names = {run_label(r) for r in s.runs}
        if len(names) == 1:
            s.label = names.pop()
        else:
            s.label = s.pattern or ("baseline" if s.baseline else "pooled")
    for precise in (False, True):  # to the minute first; the whole timestamp if that clashes
        clash = [sum(o.label == s.label for o in sides) > 1 for s in sides]
        for s, c in zip(sides, clash, strict=True):
            if c:
                start = min(r.started_at for r in s.runs)
                s.label = (f"{s.label.rsplit(' @ ', 1)[0]} @ "
                           f"{start if precise else start[:16].replace('T', ' ')}")
    seen: dict[str, int] = {}
    for s in sides:
        seen[s.label] = seen.get(s.label, 0) + 1
        if seen[s.label] > 1:
            s.label = f"{s.label} #{seen[s.label]}"


def make_sides(positional: Sequence[str], baselines: Sequence[str]) -> list[Side]:
    """The baseline side first, then the others, each loaded; refuses nothing to compare."""
    sides = [load_side([a]) for a in positional]
    if baselines:
        sides.insert(0, load_side(list(baselines), baseline=True))
    elif sides:
        sides[0].baseline = True
    if len(sides) < 2:
        n = sum(len(s.runs) for s in sides)
        have = f"{n} run(s) make one side" if n else "no run given"
        raise CompareError(f"nothing to compare: {have}; give two RUNs, or --baseline RUN "
                           "and a RUN")
    assign_labels(sides)
    for s in sides:
        s.run = pooled_run(s.runs)
    return sides


# --- pooling and alignment ----------------------------------------------------------------------

def _full_key_groups(runs: Sequence[RunResult]) -> set[tuple[str, str]]:
    """(probe, metric) pairs where ignoring the incidental fields would merge two measurements
    of one run: those keep their whole key."""
    out = set()
    for r in runs:
        for p in r.probes:
            seen = set()
            for m in p.measurements:
                k = match_key(p.name, m)
                if k in seen:
                    out.add((p.name, m.metric))
                seen.add(k)
    return out


def _key_of(probe: str, m: Measurement, full: set[tuple[str, str]]) -> tuple:
    return match_key(probe, m, full=(probe, m.metric) in full)


def side_value(ms: Sequence[Measurement]) -> float:
    """A side's figure for one row: the median of its values, one per round of each run (the
    units the decision compares); for a peak over sizes, the median of the runs' peaks."""
    if ms[0].statistic == "max":
        return statistics.median(m.value for m in ms)
    return statistics.median(u for m in ms for u in round_values(m))


def pooled_run(runs: Sequence[RunResult]) -> RunResult:
    """One RunResult standing for several: the newest run's environment and config, each
    measurement's samples pooled and its value the median of the runs' values (the median of
    the pooled samples for a median)."""
    runs = sorted(runs, key=lambda r: r.started_at)
    if len(runs) == 1:
        return runs[0]
    full = _full_key_groups(runs)
    newest = runs[-1]
    probes: dict[str, ProbeResult] = {}
    groups: dict[str, dict[tuple, list[Measurement]]] = {}
    for r in reversed(runs):  # newest first: its probe record and keys stand for the side
        for p in r.probes:
            probes.setdefault(p.name, p)
            for m in p.measurements:
                groups.setdefault(p.name, {}).setdefault(_key_of(p.name, m, full), []).append(m)
    merged = []
    for name, p in probes.items():
        ms = []
        for group in groups.get(name, {}).values():
            first = group[0]
            value = (stats.median([s for m in group for s in m.samples])
                     if first.statistic == "median"
                     else statistics.median(m.value for m in group))
            ms.append(replace(first, value=value,
                              samples=[s for m in group for s in m.samples]))
        merged.append(replace(p, measurements=ms))
    return replace(newest, probes=merged, verdict=None,
                   label=newest.label, extra=dict(newest.extra))


@dataclass
class Cell:
    """One side's view of one aligned row."""

    value: float
    samples: list[float]
    runs: int
    cv: float
    incidental: dict[str, list[Any]] = field(default_factory=dict)
    decision: regression.Decision | None = None  # None on the baseline side
    # The replication units the decision compares: each run's value in each round
    units: list[float] = field(default_factory=list)


@dataclass
class Row:
    probe: str
    metric: str
    key: dict[str, Any]  # the fields that matter
    unit: str
    statistic: str
    higher_is_better: bool
    cells: dict[str, Cell]  # side label -> cell, only the sides that have it

    def incidental_note(self) -> str:
        """'engine: io_uring (a) / psync (b)' where the sides differ in an incidental field."""
        names = sorted({k for c in self.cells.values() for k in c.incidental})
        out = []
        for k in names:
            vals = {lab: c.incidental.get(k, []) for lab, c in self.cells.items()}
            if len({json.dumps(v, default=str) for v in vals.values()}) > 1:
                out.append(f"{k}: " + " / ".join(
                    f"{'/'.join(map(str, v)) or '—'} ({lab})" for lab, v in vals.items()))
        return "; ".join(out)


def align(sides: list[Side]) -> list[Row]:
    """Every measurement any side has, in the order the baseline lists them, then the rest."""
    full = _full_key_groups([r for s in sides for r in s.runs])
    per_side: list[dict[tuple, list[tuple[str, Measurement]]]] = []
    order: dict[tuple, None] = {}
    for s in sides:
        found: dict[tuple, list[tuple[str, Measurement]]] = {}
        for r in sorted(s.runs, key=lambda r: r.started_at, reverse=True):
            for p in r.probes:
                for m in p.measurements:
                    k = _key_of(p.name, m, full)
                    found.setdefault(k, []).append((p.name, m))
                    order.setdefault(k)
        per_side.append(found)
    rows = []
    for k in order:
        cells: dict[str, Cell] = {}
        first: Measurement | None = None
        for s, found in zip(sides, per_side, strict=True):
            if k not in found:
                continue
            probe, ms = found[k][0][0], [m for _, m in found[k]]
            first = first or ms[0]
            inc: dict[str, list[Any]] = {}
            for m in ms:
                for f, v in m.key.items():
                    if f in incidental(probe) and v not in inc.setdefault(f, []):
                        inc[f].append(v)
            samples = [x for m in ms for x in m.samples]
            units = [u for m in ms for u in round_values(m)]
            cells[s.label] = Cell(side_value(ms), samples, len(ms), stats.cv(samples), inc,
                                  units=units)
        assert first is not None
        rows.append(Row(k[0], first.metric, dict(k[2]), first.unit, first.statistic,
                        first.higher_is_better, cells))
    return rows


# The headline figures, what a reader checks first, in this order, with their short names.
# Per-device rows keep the first device only (cuda:0, or the CPU): one bar per figure.
HEADLINE: dict[tuple[str, str], str] = {
    ("matmul", "peak_flops"): "matmul peak {dtype}",
    ("memory_bandwidth", "copy_bandwidth"): "memory bandwidth {memory}",
    ("host_device_copy", "peak_bandwidth"): "host-device {direction} {memory}",
    ("resnet50", "throughput"): "resnet50 {precision} {image_size}px",
    ("transformer", "throughput"): "transformer {preset} {precision}",
    ("pipeline", "total_throughput"): "pipeline {precision} {image_size}px",
    ("dataloader", "best_throughput"): "dataloader best {image_size}px",
    ("storage", "read_bandwidth"): "storage {job}",
    ("storage", "dataset_read_rate"): "storage dataset {access} reads",
    ("allreduce", "peak_busbw"): "all_reduce peak busbw {backend} ×{world_size}",
}


def headline(rows: Sequence[Row]) -> list[Row]:
    """The headline rows, in HEADLINE's order, that at least two sides have."""
    order = list(HEADLINE)
    picked = [r for r in rows if (r.probe, r.metric) in HEADLINE and len(r.cells) > 1
              and str(r.key.get("device", "cpu")) in ("cpu", "cuda:0")]
    return sorted(picked, key=lambda r: order.index((r.probe, r.metric)))


def short_name(row: Row) -> str:
    """A headline row's short name ('matmul peak fp32'), else its full name."""
    template = HEADLINE.get((row.probe, row.metric))
    if template is None:
        return row_name(row)

    class _Missing(dict):
        def __missing__(self, k: str) -> str:
            return "?"

    return template.format_map(_Missing(row.key))


def row_name(row: Row, with_metric: bool = True) -> str:
    """'matmul peak_flops dtype=fp32', without the fields every such row shares."""
    from benchbench.core.units import key_value

    key = " ".join(f"{k}={key_value(k, v)}" for k, v in row.key.items() if k != "device")
    return " ".join(x for x in (row.probe, row.metric if with_metric else "", key) if x)


# --- the whole comparison -----------------------------------------------------------------------

@dataclass
class Comparison:
    sides: list[Side]
    rows: list[Row]
    env: list[EnvRow]
    threshold_pct: float
    alpha: float
    workload: str | None
    different_hardware: list[str]  # labels of the sides whose hardware differs from the baseline
    cost: dict[str, Any] | None = None  # filled by compare_cost.section
    stopped: list[StoppedProbe] = field(default_factory=list)  # probes that no longer measured

    @property
    def baseline(self) -> Side:
        return next(s for s in self.sides if s.baseline)

    @property
    def matched(self) -> list[Row]:
        return [r for r in self.rows if len(r.cells) == len(self.sides)]

    @property
    def partial(self) -> list[Row]:
        return [r for r in self.rows if len(r.cells) < len(self.sides)]

    def outcomes(self, outcome: str) -> list[tuple[Row, str, regression.Decision]]:
        return [(r, lab, c.decision) for r in self.rows for lab, c in r.cells.items()
                if c.decision is not None and c.decision.outcome == outcome]

    @property
    def regressed(self) -> bool:
        return bool(self.outcomes(regression.REGRESSED) or self.stopped)


def compare(sides: list[Side], *, threshold_pct: float = regression.DEFAULT_THRESHOLD_PCT,
            alpha: float = regression.DEFAULT_ALPHA, workload: str | None = None) -> Comparison:
    """Align the sides, recompute each side's verdict from its measurements (the verdict cached
    in results.json is never trusted), and decide every row against the baseline."""
    from benchbench.analysis import verdict

    base = next(s for s in sides if s.baseline)
    for s in sides:
        try:
            s.verdict = verdict.verdict(s.run or pooled_run(s.runs), workload)
        except (KeyError, TypeError, ValueError, AttributeError, ZeroDivisionError) as exc:
            # A run whose measurements the analysis cannot read still compares, figure by
            # figure; its verdict says why it is missing instead of stopping the comparison.
            s.verdict = {"error": f"{type(exc).__name__}: {exc}"}
    rows = align(sides)
    other_hw = [s.label for s in sides if not s.baseline and
                (s.hardware != base.hardware or s.hardware.startswith("mixed"))]
    if base.hardware.startswith("mixed"):
        other_hw = [s.label for s in sides if not s.baseline]
    families = _families(rows, sides, base)
    for row in rows:
        b = row.cells.get(base.label)
        for lab, cell in row.cells.items():
            if b is None or lab == base.label:
                continue
            if row.unit == "count":
                cell.decision = regression.Decision(
                    regression.NOT_TESTED, None, None, None,
                    reason="a count that describes the workload, not a speed")
                continue
            side = next(s for s in sides if s.label == lab)
            d = regression.decide(b.units, cell.units, row.higher_is_better,
                                  statistic=row.statistic, threshold_pct=threshold_pct,
                                  alpha=alpha, values=(b.value, cell.value),
                                  samples=(b.samples, cell.samples),
                                  pooled=len(base.runs) > 1 or len(side.runs) > 1,
                                  family=families.get((_family_key(row), lab)))
            if lab in other_hw and d.outcome != regression.NOT_TESTED:
                d = replace(d, outcome=regression.NOT_TESTED, test=None, p_value=None,
                            reason="different hardware")
            cell.decision = d
    stopped = [] if base.hardware.startswith("mixed") else [
        x for s in sides if not s.baseline and s.label not in other_hw
        for x in probes_that_stopped(base, s)]
    return Comparison(sides, rows, environment_diff(sides), threshold_pct, alpha, workload,
                      other_hw, stopped=stopped)


def _family_key(row: Row) -> tuple[str, str, str, bool]:
    return row.probe, row.metric, row.unit, row.higher_is_better


def _families(rows: list[Row], sides: list[Side], base: Side
              ) -> dict[tuple[tuple[str, str, str, bool], str], regression.Family]:
    """Each (family, side): what the family's rows say against the baseline. A family is a
    probe's metric across its keys (matmul flops at every size and dtype)."""
    grouped: dict[tuple[str, str, str, bool], list[Row]] = {}
    for row in rows:
        if row.statistic != "max":
            grouped.setdefault(_family_key(row), []).append(row)
    out = {}
    for key, members in grouped.items():
        for s in sides:
            if s.baseline:
                continue
            pairs = [(r.cells[base.label].units, r.cells[s.label].units) for r in members
                     if base.label in r.cells and s.label in r.cells]
            out[(key, s.label)] = regression.family_of(f"{key[0]} {key[1]}", pairs, key[3])
    return out


@dataclass(frozen=True)
class StoppedProbe:
    """A probe that measured in every baseline run and did not in a run of another side."""

    side: str
    probe: str
    status: str  # "skipped" or "failed"
    reason: str


def probes_that_stopped(base: Side, side: Side) -> list[StoppedProbe]:
    """Regressions of whole probes: ok in every baseline run, skipped or failed in a run of
    `side` (a slower machine runs out of budget, a driver breaks a kernel). A probe the side
    did not run at all is not one: it was not asked for."""
    ok_in_base = {p.name for p in base.runs[0].probes if p.status == "ok"}
    for r in base.runs[1:]:
        ok_in_base &= {p.name for p in r.probes if p.status == "ok"}
    out: dict[str, StoppedProbe] = {}
    for r in side.runs:
        for p in r.probes:
            if p.name in ok_in_base and p.status != "ok" and p.name not in out:
                out[p.name] = StoppedProbe(side.label, p.name, p.status, p.reason or "")
    return list(out.values())

