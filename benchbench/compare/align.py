"""Pooling and alignment: each side's runs merged into one, and one row per measurement that
matches across the sides, with each side's values."""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from benchbench.analysis import clocks, regression
from benchbench.compare.sides import (
    CompareError,
    Side,
    assign_labels,
    incidental,
    load_side,
    match_key,
)
from benchbench.core import stats
from benchbench.core.names import counted
from benchbench.core.results import Measurement, ProbeResult, RunResult
from benchbench.core.rounds import joined_context, round_values


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


def _key_of(probe: str, m: Measurement, full: set[tuple[str, str]]) -> tuple[Any, ...]:
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
    groups: dict[str, dict[tuple[Any, ...], list[Measurement]]] = {}
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
                              samples=[s for m in group for s in m.samples],
                              context=joined_context(group)))
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
    # Why this side's figure is not like-for-like with the baseline's (compare/conditions)
    unlike: str | None = None
    # (the SM clock its samples ran at, the rate per GHz of it), where they carry their clock
    # (analysis/clocks.pooled)
    clock: tuple[float, float] | None = None


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
    per_side: list[dict[tuple[Any, ...], list[tuple[str, Measurement]]]] = []
    order: dict[tuple[Any, ...], None] = {}
    for s in sides:
        found: dict[tuple[Any, ...], list[tuple[str, Measurement]]] = {}
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
                                  units=units, clock=clocks.pooled(ms))
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
    return headline_name(row.probe, row.metric, row.key) or row_name(row)


def headline_name(probe: str, metric: str, key: dict[str, Any]) -> str | None:
    """A headline figure's short name ('matmul peak fp32'); None for another measurement."""
    template = HEADLINE.get((probe, metric))
    if template is None:
        return None

    class _Missing(dict[str, Any]):
        def __missing__(self, k: str) -> str:
            return "?"

    return template.format_map(_Missing(key))


def row_name(row: Row, with_metric: bool = True) -> str:
    """'matmul peak_flops dtype=fp32', without the fields every such row shares."""
    from benchbench.core.units import key_value

    key = " ".join(f"{k}={key_value(k, v)}" for k, v in row.key.items() if k != "device")
    return " ".join(x for x in (row.probe, row.metric if with_metric else "", key) if x)


def _refuse_one_run_twice(sides: list[Side]) -> None:
    """One results.json on two sides would compare a run with itself: no change, whatever
    changed."""
    seen: dict[str, int] = {}
    for i, s in enumerate(sides):
        for src in s.sources:
            real = os.path.realpath(os.path.join(src, "results.json") if os.path.isdir(src)
                                    else src)
            if seen.setdefault(real, i) != i:
                raise CompareError(f"{src}: the same run is on two sides; compare it with "
                                   "another run")


def make_sides(positional: Sequence[str], baselines: Sequence[str],
               include_interrupted: bool = False) -> list[Side]:
    """The baseline side first, then the others, each loaded; refuses nothing to compare, and
    an interrupted run unless `include_interrupted`."""
    sides = [load_side([a], include_interrupted=include_interrupted) for a in positional]
    if baselines:
        sides.insert(0, load_side(list(baselines), baseline=True,
                                  include_interrupted=include_interrupted))
    elif sides:
        sides[0].baseline = True
    if len(sides) < 2:
        n = sum(len(s.runs) for s in sides)
        have = (f"{counted(n, 'run')} {'makes' if n == 1 else 'make'} one side" if n else
                "no run given")
        raise CompareError(f"nothing to compare: {have}; give two RUNs, or --baseline RUN "
                           "and a RUN")
    _refuse_one_run_twice(sides)
    assign_labels(sides)
    for s in sides:
        s.run = pooled_run(s.runs)
    return sides
