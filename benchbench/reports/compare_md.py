"""Render a Comparison as Markdown (printed, and compare.md) and as compare.csv rows."""

from __future__ import annotations

from typing import Any

from benchbench.analysis import regression as reg
from benchbench.analysis.config import WORKLOADS
from benchbench.analysis.verdict_types import WorkloadVerdict
from benchbench.compare.align import Row, headline, row_name, short_name
from benchbench.compare.comparison import Comparison
from benchbench.compare.conditions import UNLIKE_REASON, unlike
from benchbench.compare.environment import ENV_BYTES
from benchbench.compare.sides import UNFINISHED
from benchbench.core import interruption
from benchbench.core import units as fmt
from benchbench.core.names import counted, first_clauses, listed, probe_name
from benchbench.reports import compare_conditions, compare_cost_md, compare_references
from benchbench.reports.compare_conditions import LEGEND, MARK, UNLIKE
from benchbench.reports.csv import table_text
from benchbench.reports.plots import resource_name
from benchbench.reports.verdict import measured_au


def _v(v: float, unit: str) -> str:
    return fmt.value(v, "images/s" if unit == "samples/s" else unit)


def _fold(row: Row, d: reg.Decision) -> str:
    """A lower-is-better figure's change as how many times more it took: '2.77× slower' for a
    time (an oriented percent would print a step that took 2.77 times as long as '−177.1%'),
    '1.20× higher' for a size. d.ratio is oriented (> 1 better): the side's value over the
    baseline's is its inverse."""
    side_over_base = 1 / d.ratio if d.ratio else None
    if side_over_base is None:
        return "—"
    if f"{side_over_base:.2f}" == "1.00":
        return "1.00×"
    worse, better = ("slower", "faster") if row.unit == "s" else ("higher", "lower")
    return (f"{side_over_base:.2f}× {worse}" if side_over_base > 1 else
            f"{1 / side_over_base:.2f}× {better}")


def _ratio(row: Row, d: reg.Decision | None) -> str:
    """The side against the baseline in a value's cell: the side's value over the baseline's
    ('0.80×') for a rate, a time as slower or faster."""
    if d is None or d.ratio is None:
        return "—"
    return f"{d.ratio:.2f}×" if row.higher_is_better else _fold(row, d)


def _pct(row: Row, d: reg.Decision) -> str:
    """The change column: a rate's change in percent with its sign ('−20.0%'), a time's as
    slower or faster ('2.77× slower'), the same words the value cells use."""
    if not row.higher_is_better:
        return _fold(row, d)
    return "—" if d.change_pct is None else fmt.signed_percent(d.change_pct)


def _cell(row: Row, label: str) -> str:
    c = row.cells.get(label)
    if c is None:
        return "—"
    text = _v(c.value, row.unit)
    if c.runs > 1:
        text += f" ({c.runs} runs)"
    d = c.decision
    mark = UNLIKE if c.unlike else MARK[d.outcome] if d else ""
    return text if d is None else f"{text} · {_ratio(row, d)} {mark}"


def _header(comp: Comparison) -> list[str]:
    out = [f"# benchbench compare: {' vs '.join(s.label for s in comp.sides)}", ""]
    for s in comp.sides:
        role = "baseline" if s.baseline else "compared"
        runs = ", ".join(f"`{p}`" for p in s.sources)
        pooled = f", {len(s.runs)} runs pooled" if len(s.runs) > 1 else ""
        late = [src for r, src in zip(s.runs, s.sources, strict=True) if r.finished_at is None]
        note = ("" if not late else f"; {UNFINISHED}" if len(s.runs) == 1 else
                f"; {len(late)} of its {len(s.runs)} runs "
                f"{'has' if len(late) == 1 else 'have'} {UNFINISHED}: "
                + ", ".join(f"`{x}`" for x in late))
        cut = [(src, c) for r, src in zip(s.runs, s.sources, strict=True)
               if (c := interruption.of(r)) is not None]
        note += "".join(f"; {'' if len(s.runs) == 1 else f'`{src}` '}"
                        f"**{interruption.headline(c)}**" for src, c in cut)
        out.append(f"- **{s.label}** ({role}{pooled}): {runs} — {s.hardware}{note}")
    return out + [""]


def _rule(comp: Comparison) -> list[str]:
    """How the summary was decided: after the summary and the conditions, so that the verdict
    comes first."""
    return ["## The rule", "",
            f"- **A measurement regressed** when it is worse than the baseline "
            f"({comp.baseline.label}) by more than {comp.threshold_pct:g}% in the direction of "
            "better and by more than this machine's run-to-run noise explains.",
            "- **Its values** are one per round (each a fresh process, minutes apart) of every "
            "run; the samples inside one process share its state and are not compared.",
            "- **With several runs a side**: a two-sided t-test at "
            f"α = {comp.alpha:g} on the logarithms of the values.",
            "- **With one run a side**, where unchanged back-to-back pairs of runs calibrated "
            "the measurement: its change beyond the threshold and beyond what those pairs "
            "showed (its floor, named with each change), every round of one side beyond every "
            "round of the other, and every round of the run judged beyond the baseline by the "
            "floor (one slow round beside one at the baseline's level is a passing state: not "
            "held); a smaller change is inconclusive, with the runs a side that would judge it. "
            "A step time and its throughput are one measurement, judged once.",
            "- **With one run a side, uncalibrated**: every value beyond every value of the "
            "other side by more than the threshold and the widest spread between rounds in its "
            "family (the probe's metric across its keys), and the family's median change "
            "beyond them too. With no second value in the family the noise is unknown and the "
            "change inconclusive.",
            "- **A probe that stopped**: one that measured in every baseline run and was "
            "skipped or failed in a run of another side is a regression of that probe.", ""]


def _summary(comp: Comparison) -> list[str]:
    regs = comp.outcomes(reg.REGRESSED)
    imps = comp.outcomes(reg.IMPROVED)
    inc = comp.outcomes(reg.INCONCLUSIVE)
    out = ["## Summary", ""]
    if regs or comp.stopped:
        stopped = f" and {counted(len(comp.stopped), 'probe')} that stopped measuring" \
            if comp.stopped else ""
        out.append(f"**{counted(len(regs), 'regression')}{stopped}** (exit 3).")
    else:
        out.append("**No regression** (exit 0).")
    unlike = sum(c.unlike is not None for r in comp.rows for c in r.cells.values())
    out.append(f"{counted(len(imps), 'significant improvement')}, {len(inc)} inconclusive, "
               f"{counted(len(comp.matched), 'measurement')} in every side, "
               f"{len(comp.partial)} only "
               "in some" + (f"; {unlike} not like for like ({UNLIKE}: measured under other "
                            "conditions, see Conditions), with no verdict" if unlike else "")
               + ".")
    for lab in comp.different_hardware:
        side = next(s for s in comp.sides if s.label == lab)
        out.append(f"\n**Different hardware**: {lab} ({side.hardware}) against the baseline "
                   f"({comp.baseline.hardware}): compared, but no regression is called.")
    return out + [""]


def named_briefly(comp: Comparison) -> str:
    """The terminal's last line names what regressed, the worst first, since a person reads a
    terminal from its end: 'matmul peak fp32 −20.0%; storage failed'; with more than two sides,
    in which."""
    many = len(comp.sides) > 2
    found = sorted(comp.outcomes(reg.REGRESSED), key=lambda x: x[2].change_pct or 0.0)
    words = [f"{short_name(row)} {_pct(row, d)}" + (f" in {side}" if many else "")
             for row, side, d in found]
    words += [f"{x.probe} {x.status}" + (f" in {x.side}" if many else "") for x in comp.stopped]
    return first_clauses(words)


def _unsteady(d: reg.Decision) -> str:
    """'baseline CV 13%' for each side whose own samples varied beyond NOISY_CV; '—' else."""
    return ", ".join(f"{side} CV {v:.0%}" for side, v in reg.unsteady_sides(d.cv)) or "—"


def _noise(d: reg.Decision) -> str:
    """The smallest change the noise lets one call, each way: a bar of log ratio is −24% down
    where it is +32% up (the reason of a slowdown names the −24%); '±2%' where they round alike."""
    if d.noise_pct is None:
        return "unknown"
    up = d.noise_pct
    down = up / (1 + up / 100)
    return f"±{up:.0f}%" if f"{up:.0f}" == f"{down:.0f}" else f"−{down:.0f}% / +{up:.0f}%"


def _decisions(comp: Comparison) -> list[str]:
    out: list[str] = []
    if comp.stopped:
        out += ["## Probes that stopped measuring", "",
                "Each measured in every baseline run; in this side it did not, which is a "
                "regression of the whole probe (a slower machine runs out of its time budget, "
                "a broken driver fails a kernel):", ""]
        out += fmt.table(["side", "probe", "status", "because"],
                         [[x.side, x.probe, x.status, x.reason] for x in comp.stopped])
    header = ["side", "measurement", "baseline", "side's", "change", "noise", "values a side",
              "p", "evidence"]
    for title, outcome in (("Regressions", reg.REGRESSED), ("Improvements", reg.IMPROVED)):
        found = comp.outcomes(outcome)
        if not found:
            continue
        base = comp.baseline.label
        out += [f"## {title}", ""] + fmt.table(header, [
            [lab, row_name(r), _v(r.cells[base].value, r.unit), _v(r.cells[lab].value, r.unit),
             _pct(r, d), _noise(d), f"{d.units[0]} / {d.units[1]}",
             "—" if d.p_value is None else f"{d.p_value:.2g}", d.reason or ""]
            for r, lab, d in found])
    return out


def _undecided(comp: Comparison) -> list[str]:
    out: list[str] = []
    inc = comp.outcomes(reg.INCONCLUSIVE)
    unknown = [x for x in inc if reg.noise_unknown(x[2])]
    known = [x for x in inc if not reg.noise_unknown(x[2])]
    if inc:
        out += ["## Inconclusive", "",
                f"A change this machine's run-to-run noise could explain, or whose noise is "
                f"unknown, is not called either way: {reg.INCONCLUSIVE_ADVICE}.", ""]
    if known:
        out += fmt.table(["side", "measurement", "change", "noise", "why"],
                         [[lab, row_name(r), _pct(r, d), _noise(d), d.reason]
                          for r, lab, d in known])
    if unknown:
        # one reason, said once: a row each would repeat it dozens of times in a quick run
        probes = [f"{probe_name(p)} (`{p}`)" for p in dict.fromkeys(r.probe for r, _, _ in unknown)]
        out += [f"Noise unknown in {counted(len(unknown), 'measurement')} of {listed(probes)}: no "
                "measurement of their kind (the probe's metric, across its keys) has two "
                "values on a side, so nothing says how far this machine's values differ with "
                "nothing changed. Their changes, and where a run's own samples varied by more "
                f"than {reg.NOISY_CV:.0%} while it ran:", ""]
        out += fmt.table(["side", "measurement", "change", "own samples unsteady"],
                         [[lab, row_name(r), _pct(r, d), _unsteady(d)]
                          for r, lab, d in unknown])
    skipped = comp.outcomes(reg.NOT_TESTED)
    if skipped:
        why: dict[str, int] = {}
        for _, _, d in skipped:  # the unlike ones once: the Conditions section lists why
            r = f"{UNLIKE_REASON} ({UNLIKE}, see Conditions)" \
                if d.reason.startswith(UNLIKE_REASON) else d.reason
            why[r] = why.get(r, 0) + 1
        out += ["Not tested: " + "; ".join(f"{n} × {w}" for w, n in why.items()) + ".", ""]
    return out


def _verdicts(comp: Comparison) -> list[str]:
    labels = [s.label for s in comp.sides]
    vs = {s.label: s.verdict for s in comp.sides}
    errors = {s.label: s.verdict_error for s in comp.sides}
    work = next((v.main.workload for v in vs.values() if v), "training")

    base = comp.baseline.label

    def unlike_mark(lab: str, source: str | None) -> str:
        """' ≠' on a side's capacity whose probe ran under other conditions than the
        baseline's (its source names the probe first: 'resnet50 throughput')."""
        probe = (source or "").split(" ")[0]
        return f" {UNLIKE}" if lab != base and probe and unlike(
            comp.conditions, probe, {}, lab, base) else ""

    def lim(lab: str, v: WorkloadVerdict | None) -> str:
        if errors[lab]:
            return f"not computed ({errors[lab]})"
        r = v.limiting_resource if v else None
        return f"**{resource_name(r)}**" if r else "none named"

    def main(lab: str) -> WorkloadVerdict | None:
        v = vs[lab]
        return v.main if v else None

    def predicted(v: WorkloadVerdict | None) -> str:
        x = v.predicted_accelerator_utilisation if v else None
        return fmt.percent(x) if x is not None else "—"

    rows = [["limiting resource"] + [lim(lab, main(lab)) for lab in labels],
            ["predicted accelerator utilisation"] + [predicted(main(lab)) for lab in labels],
            ["measured (real pipeline)"]
            + [measured_au(m) if (m := main(lab)) else "—" for lab in labels]]
    resources: dict[str, None] = {}
    for lab in labels:
        resources.update(dict.fromkeys(m.capacity_details if (m := main(lab)) else {}))
    for r in resources:
        cells = []
        for lab in labels:
            m = main(lab)
            c = m.capacity(r) if m else None
            src = m.capacity_details[r].source if m and r in m.capacity_details else None
            cells.append(fmt.si(c, m.sample_unit) + unlike_mark(lab, src)
                         if m and c is not None else "—")
        rows.append([f"capacity: {resource_name(r)}"] + cells)
    other = [w for w in WORKLOADS if w != work]
    for w in other:
        rows.append([f"{w}: limiting resource"] + [
            lim(lab, v.per_workload.get(w) if (v := vs[lab]) else None) for lab in labels])
    return ([f"## Verdicts ({work}, recomputed from each side's measurements)", ""]
            + fmt.table([""] + labels, rows))


def _env_value(name: str, values: list[Any]) -> str:
    def one(v: Any) -> str:
        if v is None or v == "":
            return "—"
        if name in ENV_BYTES and isinstance(v, (int, float)):
            return fmt.iec(v)
        return str(v)
    return " / ".join(one(v) for v in values) or "—"


def _environment(comp: Comparison) -> list[str]:
    labels = [s.label for s in comp.sides]
    rows = []
    for e in comp.env:
        cells = [_env_value(e.name, e.values.get(lab, [])) for lab in labels]
        if all(c == "—" for c in cells):
            continue
        name = f"**≠ {e.name}**" if e.differs else e.name
        rows.append([name] + ([f"**{c}**" for c in cells] if e.differs else cells))
    differs = [e.name for e in comp.env if e.differs and e.name != "host"]
    lead = (f"Differs: {', '.join(differs)}." if differs
            else "The environments match (apart from the host name, where shown).")
    return ["## Environment", "", lead, ""] + fmt.table([""] + labels, rows)


def _headline(comp: Comparison) -> list[str]:
    rows = headline(comp.rows)
    if not rows:
        return []
    labels = [s.label for s in comp.sides]
    return (["## Headline figures", ""]
            + fmt.table(["figure"] + labels,
                        [[short_name(r)] + [_cell(r, lab) for lab in labels] for r in rows]))


def _measurements(comp: Comparison) -> list[str]:
    labels = [s.label for s in comp.sides]
    out = ["## Measurements", "",
           "Values are the medians of each side's values, one per round of each run (a peak "
           f"over sizes: the median of the runs' peaks). {LEGEND}.", ""]
    by_probe: dict[str, list[Row]] = {}
    for r in comp.matched:
        by_probe.setdefault(r.probe, []).append(r)
    for probe, rows in by_probe.items():
        notes = [r.incidental_note() for r in rows]
        head = ["metric", "key"] + labels + (["differs in"] if any(notes) else [])
        body = []
        for r, note in zip(rows, notes, strict=True):
            key = ", ".join(f"{k}={fmt.key_value(k, v)}" for k, v in r.key.items())
            body.append([r.metric, key] + [_cell(r, lab) for lab in labels]
                        + ([note] if any(notes) else []))
        out += [f"### {probe}", ""] + fmt.table(head, body)
    return out


def _partial(comp: Comparison) -> list[str]:
    labels = [s.label for s in comp.sides]
    out: list[str] = []
    status_rows = []
    names: dict[str, None] = {}
    for s in comp.sides:
        for r in s.runs:
            names.update(dict.fromkeys(p.name for p in r.probes))
    for name in names:
        per = []
        for s in comp.sides:
            st = sorted({(p.status, p.reason if p.status != "ok" else None)
                         for r in s.runs for p in r.probes if p.name == name}, key=str)
            per.append(" / ".join(f"{a}{f' ({b})' if b else ''}" for a, b in st) or "not run")
        if len({p.split(" (")[0] for p in per}) > 1:
            status_rows.append([name] + per)
    if not comp.partial and not status_rows:
        return []
    out += ["## Only in some runs", ""]
    if status_rows:
        out += ["Probes whose status differs:", ""] + fmt.table(["probe"] + labels, status_rows)
    if comp.partial:
        out += fmt.table(["probe", "metric", "key", "only in"], [
            [r.probe, r.metric, ", ".join(f"{k}={fmt.key_value(k, v)}" for k, v in
                                          r.key.items()),
             ", ".join(lab for lab in labels if lab in r.cells)] for r in comp.partial])
        out += _lacking(comp)
    return out


def _lacking(comp: Comparison) -> list[str]:
    """Where a run's probe finished but lacks some of the measurements above, what that probe
    said of its run (a size the budget did not pay for, a part it skipped): the reason the row
    is one-sided, in the run's own words. Probes whose status differs are in the table above."""
    rows = []
    for name in dict.fromkeys(r.probe for r in comp.partial):
        for s in comp.sides:
            if all(s.label in r.cells for r in comp.partial if r.probe == name):
                continue
            said = sorted({p.reason for r in s.runs for p in r.probes
                           if p.name == name and p.status == "ok" and p.reason})
            if said:
                rows.append([name, s.label, " / ".join(said)])
    if not rows:
        return []
    return ["Where a run lacks some of them, what its probe said:", ""] + fmt.table(
        ["probe", "run", "its probe's note"], rows)


def render(comp: Comparison) -> str:
    lines = (_header(comp) + _summary(comp) + compare_conditions.section(comp) + _rule(comp)
             + _decisions(comp) + _headline(comp)
             + _verdicts(comp) + compare_references.section(comp) + _environment(comp)
             + compare_cost_md.section(comp) + _undecided(comp)
             + _measurements(comp) + _partial(comp))
    return "\n".join(lines).rstrip() + "\n"


# --- compare.csv ------------------------------------------------------------------------------

LEADING = ["probe", "metric"]
TRAILING = ["unit", "statistic", "higher_is_better", "side", "baseline", "runs", "n",
            "median", "cv", "ratio", "change_pct", "outcome", "test", "p_value", "noise_pct",
            "units", "reason",
            "differs_in", "conditions_differ"]


def csv_rows(comp: Comparison) -> tuple[list[str], list[dict[str, Any]]]:
    """One row per measurement and side that has it; key fields as key.<name> columns."""
    keys: dict[str, None] = {}
    out = []
    for r in comp.rows:
        keys.update(dict.fromkeys(r.key))
        note = r.incidental_note()
        for s in comp.sides:
            c = r.cells.get(s.label)
            if c is None:
                continue
            d = c.decision
            row: dict[str, Any] = {"probe": r.probe, "metric": r.metric,
                                   **{f"key.{k}": v for k, v in r.key.items()}}
            row.update(unit=r.unit, statistic=r.statistic, higher_is_better=r.higher_is_better,
                       side=s.label, baseline=s.baseline, runs=c.runs, n=len(c.samples),
                       median=c.value, cv=c.cv, ratio=d.ratio if d else None,
                       change_pct=d.change_pct if d else None,
                       outcome=d.outcome if d else "baseline", test=d.test if d else None,
                       p_value=d.p_value if d else None, reason=d.reason if d else "",
                       noise_pct=d.noise_pct if d else None, units=len(c.units),
                       differs_in=note, conditions_differ=c.unlike or "")
            out.append(row)
    return LEADING + [f"key.{k}" for k in keys] + TRAILING, out


def csv_text(comp: Comparison) -> str:
    return table_text(*csv_rows(comp))
