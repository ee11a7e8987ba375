"""The whole comparison: the sides aligned, each side's verdict recomputed from its
measurements, and the regression decision per row against the baseline."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from benchbench.analysis import clocks, regression, run_noise
from benchbench.compare import conditions as cond
from benchbench.compare.align import Row, align, pooled_run
from benchbench.compare.environment import EnvRow, environment_diff
from benchbench.compare.evidence import flags as probe_flags
from benchbench.compare.sides import Side
from benchbench.core import interruption


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
    # each recorded condition across the sides (compare/conditions.py)
    conditions: list[cond.Condition] = field(default_factory=list)

    @property
    def unlike(self) -> list[cond.Condition]:
        """The conditions on which some side differs from the baseline."""
        return [c for c in self.conditions if c.differs]

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
            alpha: float = regression.DEFAULT_ALPHA, workload: str | None = None,
            noise: run_noise.Table | None = None) -> Comparison:
    """Align the sides, recompute each side's verdict from its measurements (the verdict cached
    in results.json is never trusted), and decide every row against the baseline. `noise`:
    what unchanged pairs showed (default: the table shipped with benchbench)."""
    from benchbench.analysis import verdict

    base = next(s for s in sides if s.baseline)
    for s in sides:
        try:
            s.verdict = verdict.verdict(s.run or pooled_run(s.runs), workload)
        except (KeyError, TypeError, ValueError, AttributeError, ZeroDivisionError) as exc:
            # A run whose measurements the analysis cannot read still compares, figure by
            # figure; its verdict says why it is missing instead of stopping the comparison.
            s.verdict, s.verdict_error = None, f"{type(exc).__name__}: {exc}"
    rows = align(sides)
    other_hw = [s.label for s in sides if not s.baseline and
                (s.hardware != base.hardware or s.hardware.startswith("mixed"))]
    if base.hardware.startswith("mixed"):
        other_hw = [s.label for s in sides if not s.baseline]
    families = _families(rows, sides, base)
    table = run_noise.shipped() if noise is None else noise
    device, mode = _device_mode(base)
    same = _judged_as_another(rows)
    conds = cond.conditions(sides)
    for row in rows:
        b = row.cells.get(base.label)
        for lab, cell in row.cells.items():
            if b is None or lab == base.label:
                continue
            found = cond.unlike(conds, row.probe, row.key, lab, base.label)
            cell.unlike = cond.reason(found, lab, base.label) if found else None
            if row.unit == "count":
                cell.decision = regression.Decision(
                    regression.NOT_TESTED, None, None, None,
                    reason="a count that describes the workload, not a speed")
                continue
            side = next(s for s in sides if s.label == lab)
            if id(row) in same:  # one measurement, one verdict: the judged figure's
                hib = row.higher_is_better
                cell.decision = regression.Decision(
                    regression.NOT_TESTED, regression.ratio(b.value, cell.value, hib),
                    regression.change_pct(b.value, cell.value, hib), None,
                    reason=f"the same timings as its {same[id(row)]}, which is judged instead")
                continue
            d = regression.decide(b.units, cell.units, row.higher_is_better,
                                  statistic=row.statistic, threshold_pct=threshold_pct,
                                  alpha=alpha, values=(b.value, cell.value),
                                  samples=(b.samples, cell.samples),
                                  pooled=len(base.runs) > 1 or len(side.runs) > 1,
                                  family=families.get((_family_key(row), lab)),
                                  floor=run_noise.floor(table, device, mode, row.probe,
                                                        row.metric, row.key))
            if lab in other_hw and d.outcome != regression.NOT_TESTED:
                d = replace(d, outcome=regression.NOT_TESTED, test=None, p_value=None,
                            reason="different hardware")
            elif cell.unlike:  # measured under other conditions: a ratio, never a verdict
                d = replace(d, outcome=regression.NOT_TESTED, test=None, p_value=None,
                            reason=cell.unlike)
            evidence = machine_evidence(side, row.probe, base)
            if d.outcome == regression.REGRESSED and evidence:
                d = replace(d, reason="; ".join(filter(None, [d.reason, (
                    "measured while " + "; ".join(evidence) + ": the machine, not the "
                    "software, is the first suspect")])))
            if d.outcome in (regression.REGRESSED, regression.IMPROVED) and b.clock \
                    and cell.clock and b.value:
                change = (cell.value / b.value - 1) * 100
                d = replace(d, reason="; ".join(filter(None, [d.reason, clocks.moved(
                    b.clock, cell.clock, change)])))
            cell.decision = d
    # A probe that stopped under other conditions (a --quick run's shorter budget) is not one
    # that stopped working: it is left to "Only in some runs".
    stopped = [] if base.hardware.startswith("mixed") else [
        x for s in sides if not s.baseline and s.label not in other_hw
        for x in probes_that_stopped(base, s)
        if not cond.unlike(conds, x.probe, {}, s.label, base.label)]
    env = environment_diff({s.label: s.runs for s in sides})
    return Comparison(sides, rows, env, threshold_pct, alpha, workload, other_hw,
                      stopped=stopped, conditions=conds)


def machine_evidence(side: Side, probe: str, base: Side) -> list[str]:
    """What the telemetry flagged on `side` during `probe` (throttling, clock drops, another
    tenant's CPU steal) and never on the baseline: a change measured then is the machine's
    state as much as the software's."""
    def flags(s: Side) -> list[str]:
        return [f for r in s.runs for f in probe_flags(r, probe)]

    seen = set(flags(base))
    return list(dict.fromkeys(f for f in flags(side) if f not in seen))


def _device_mode(base: Side) -> tuple[str, str]:
    """The baseline's device ('cuda' or 'cpu') and mode ('quick' or 'default'): which
    unchanged pairs calibrate its noise."""
    config = (base.run or base.runs[0]).config
    return (str(config.get("device_resolved") or "cpu"),
            "quick" if config.get("quick") else "default")


# Figures that are another figure of the same timings (same key) in other units: one
# measurement, one verdict, the judged figure's. (probe or "*", metric) -> the judged metric.
SAME_TIMINGS = {
    ("*", "step_time"): "throughput",  # a training step's time and its images or tokens/s
    ("allreduce", "allreduce_time"): "busbw",  # algbw = size / time, busbw = algbw × 2(n-1)/n
    ("allreduce", "algbw"): "busbw",
    ("dataloader", "throughput_per_core"): "throughput",  # ÷ the cores it used
}


def _judged_as_another(rows: list[Row]) -> dict[int, str]:
    """Rows whose timings another row of their probe and key is judged on: id -> that row's
    metric."""
    present = {(r.probe, r.metric, tuple(sorted(r.key.items(), key=str))) for r in rows}
    out = {}
    for r in rows:
        judged = SAME_TIMINGS.get((r.probe, r.metric)) or SAME_TIMINGS.get(("*", r.metric))
        if judged and (r.probe, judged, tuple(sorted(r.key.items(), key=str))) in present:
            out[id(r)] = judged
    return out


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
    did not run at all is not one: it was not asked for, or a signal stopped the run before
    it; nor is one a signal cut short (core/interruption.py)."""
    ok_in_base = {p.name for p in base.runs[0].probes if p.status == "ok"}
    for r in base.runs[1:]:
        ok_in_base &= {p.name for p in r.probes if p.status == "ok"}
    out: dict[str, StoppedProbe] = {}
    for r in side.runs:
        cut = interruption.of(r)
        signalled = cut.cut_first_round if cut is not None else None
        for p in r.probes:
            if p.name in ok_in_base and p.status != "ok" and p.name not in out \
                    and p.name != signalled:
                out[p.name] = StoppedProbe(side.label, p.name, p.status, p.reason or "")
    return list(out.values())

