"""Render a machine's History as Markdown (printed, and history.md): the verdict, the change
points with what changed in the environment around them, the outlier runs, the series, the
environment's changes and the runs."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TypeVar

from benchbench.analysis import history_gate, two_cuts
from benchbench.analysis.change_points import (
    MIN_RUNS,
    OUTLIER_Z,
    OutlierRun,
    at_change,
    change_pct,
)
from benchbench.analysis.max_t import MIN_SIDE
from benchbench.compare.history_series import History, Series
from benchbench.core import names
from benchbench.core import units as fmt
from benchbench.reports.history_text import (
    alike,
    around,
    came_back,
    causes_text,
    clock_text,
    each_p_text,
    env_text,
    evidence_signature,
    evidence_words,
    figures_text,
    gathered,
    group_name,
    grouped,
    noise_text,
    pct,
    runs_text,
    shift_p_text,
    shift_told_text,
    span,
    split_text,
    steps_causes,
    steps_told,
    told_signature,
    value_span,
)

FULL_RUN_LIST = 50  # more runs than this: the runs table keeps those where something happened
SHARES_NAMED = 3  # the index's heaviest figures named beside it
NIGHT_UNITS = 3  # an outlier run's row gives its values in up to this many units
SPELLS_NAMED = 5  # the summary's levels that came back, before "N more, in the …"
T = TypeVar("T")


def _header(h: History) -> list[str]:
    first, last = h.runs[0], h.runs[-1]
    basis = last.identity.basis
    return [f"# benchbench history: {h.machine}", "",
            f"{len(h.runs)} runs of **{h.machine}** (identified by its {basis}), from "
            f"{first.started_at[:10]} to {last.started_at[:10]}, oldest first.", ""]


def _rule(h: History) -> list[str]:
    """How the summary above was decided: after it, so that the verdict comes first."""
    reference = (f"run {h.baseline}'s segment (--baseline)." if h.baseline else
                 "the best segment" + (f" of the last {h.window} runs" if h.window else "")
                 + f", never a spell (a level of {history_gate.SPELL_RUNS} runs or fewer above "
                 "the levels either side of it)"
                 + ("; for a GPU against the other GPUs, its first segment"
                    if any(s.peers for s in h.series) else "") + ".")
    a = f"{h.alpha:g}"
    return ["## The rule", "",
            "- **A run** counts once, as the geometric mean of its values per round.",
            f"- **An outlier run** lies more than {OUTLIER_Z:g} run-to-run noises off the level "
            "its neighbours on both sides agree on, alone (neither run beside it off with it). "
            "It is left out of the levels.",
            "- **A change point** is proposed by binary segmentation and PELT, and kept when the "
            "best split of the segments either side of it, paid for having been chosen (the "
            f"maximum-t test), gives p ≤ {a}.",
            "- **At a recorded change** (a driver, a kernel changed between two runs) the "
            "record gives the place: a step there is tested by Student's t at that place "
            f"alone, the series' recorded changes sharing {at_change(h.alpha):g}.",
            "- **The newest two runs**: whether they are a new level is the question asked "
            f"after every run, so their place is given too, and tested there alone at {a}.",
            f"- **Two steps**: where fewer than two cuts hold in at most {two_cuts.MAX_RUNS} "
            "runs, the best two are tested at once (the variance they explain against what "
            "pure noise's best pair explains, the rounds' noise joined as for one split) at "
            f"{a}, each also holding given the other at {two_cuts.EACH_GIVEN * h.alpha:g} "
            f"({a} where the rounds' noise joined). Where none holds alone and the two hold "
            "only at once, the series is no noise: one change point, at the best single "
            "split, held by their joint p.",
            "- **Regressed** (exit 3): the series' latest level is worse than its reference "
            f"by more than {h.threshold_pct:g}%, and the difference holds at p ≤ {a} (one step "
            "at a recorded change, at its level).",
            f"- **The reference** is {reference}",
            "- **The latest level** is the latest segment's; where that segment drifts, or the "
            "runs since the reference drift across change points, where the drift has taken "
            "it; or the latest run alone when it is an outlier run.",
            f"- **Worse, not held**: a drift that holds at {at_change(h.alpha):g} but not at "
            f"{a} and takes a series beyond the threshold is listed as worse than its "
            "reference but not held (more runs will tell). It does not fail.", "",
            "The method and its measured accuracy: docs/history-method.md.", ""]


def _summary(h: History) -> list[str]:
    regs = h.regressions
    out = ["## Summary", ""]
    if regs:
        out += [f"**{len(regs)} series regressed** (exit 3):", ""]
        out += [f"- {line}" for line in alike(h, regs)]
        causes = steps_causes(regs)
        told = "".join(f" {t[0].upper()}{t[1:]}." for t in steps_told(regs))
        if causes:
            out += ["", f"What changed around their steps: {causes}.{told}"]
    unheld = h.unheld
    if not regs:
        out.append("**No series regressed** (exit 0): " + (
            f"none is worse than its reference by more than {h.threshold_pct:g}% with its "
            "test holding." if unheld else
            f"every latest level is within {h.threshold_pct:g}% of its reference."))
    if unheld:
        out += ["", f"Worse than the reference by more than {h.threshold_pct:g}%, but the "
                "test did not hold (more runs will tell):", ""]
        out += [f"- {line}" for line in alike(h, unheld)]
    out += _kept_apart(h)
    at = sorted({s.run_at(x.at) for s in h.series for x in s.shifts})
    odd = sorted({s.run_at(o.at) for s in h.series for o in s.outliers})
    said = [f"{names.counted(sum(len(s.shifts) for s in h.series), 'change point')} in "
            f"{len(h.series)} series" + (f", at {runs_text(at)}" if at else "")]
    if odd:
        said.append(f"{names.counted(len(odd), 'outlier run')} ({runs_text(odd)}), off in "
                    f"{sum(len(s.outliers) for s in h.series)} series")
    out += ["", "; ".join(said) + "."]
    back = _came_back(h)
    if back:
        out += ["", "Of them, levels that came back (a spell that ended, not a new level; the "
                "exit code reads only where each series stands now):", ""]
        out += [f"- {line}" for line in back]
    return out + _blind_to(h) + [""]


def _kept_apart(h: History) -> list[str]:
    """Where the runs differ in their conditions (History.split): how many ran under each, and
    that they are separate series, judged only under the latest run's."""
    if not h.split:
        return []
    told = "; ".join(split_text(x.title, x.field, x.runs, "run") for x in h.split)
    latest = h.runs[-1].conditions
    return ["", f"**Kept apart**: runs under different conditions are separate series, never "
            f"one level or one change point search: {told}. The gate judges each figure's "
            "latest run" + (f" ({latest})" if latest else "") + " against the earlier runs of "
            "its own conditions; the series of other conditions are shown, not judged."]


def _came_back(h: History) -> list[str]:
    """A line per spell that came back (came_back): the figures whose level left and returned
    at the same runs, the same way, with the same cause and the same facts recorded, share it:
    'runs 9–11 (2026-11-09 to 2026-11-11): all 8 series −13.2%, back at run 12 (−0.7% against
    before); run 9's own record: CPU steal 21.0% to 26.0% where run 8 has 0.0%'."""
    def spell(x: tuple[Series, int]) -> tuple[int, int, bool, str, Hashable]:
        s, i = x
        return (s.run_at(s.shifts[i].at), s.run_at(s.shifts[i + 1].at),
                s.shifts[i].change_pct < 0, _cause(s, i), told_signature(s, i))

    found = [(s, i) for s in h.series for i in came_back(s, h.threshold_pct)]
    spells = gathered(found, lambda x: x[0], spell)
    lines = []
    for (start, end, _, cause, _), groups in sorted(spells.items(), key=lambda kv: kv[0][:2]):
        members = [x for group in groups for x in group]
        last = end - 1
        dates = (f"{h.run(start).started_at[:10]}" if last == start else
                 f"{h.run(start).started_at[:10]} to {h.run(last).started_at[:10]}")
        net = [change_pct(s.shifts[i].before, s.shifts[i + 1].after, s.higher_is_better)
               for s, i in members]
        said = "; ".join(w for w in (cause, shift_told_text(members)) if w)
        lines.append(f"{'run' if last == start else 'runs'} "
                     f"{start if last == start else f'{start}–{last}'} ({dates}): "
                     f"{figures_text(h, [[m for m, _ in g] for g in groups])} "
                     f"{span([s.shifts[i].change_pct for s, i in members], pct)}, back at run "
                     f"{end} (" + ("level with before" if all(abs(x) < 0.05 for x in net) else
                                   f"{span(net, pct)} against before")
                     + ")" + (f"; {said}" if said else ""))
    more = len(lines) - SPELLS_NAMED
    return lines[:SPELLS_NAMED] + ([f"{more} more, in the Change points table"] if more > 0 else [])


def _blind_to(h: History) -> list[str]:
    """A line where no series could see a slowdown of the threshold (Series.sees_pct): 'no
    series regressed' must not read as 'no slowdown'."""
    seen = [(s.sees_pct, s) for s in h.series if s.sees_pct is not None]
    if not seen:
        return ["", f"{len(h.runs)} runs are too few for a change point: each level is at "
                f"least {MIN_SIDE} runs."] if len(h.runs) < 2 * MIN_SIDE else []
    (blind, recorded), best = min(seen, key=lambda x: x[0][0])
    if blind <= h.threshold_pct:
        return []
    return ["", f"These {len(h.runs)} runs are too few or too noisy to see a "
            f"{h.threshold_pct:g}% slowdown where nothing recorded changed: the most sensitive "
            f"series, {best.name}, finds a slowdown of {_sees(blind)} in their middle about "
            f"half the time ({_sees(recorded)} where a change was recorded there, such as a "
            "driver update); more runs see smaller ones (the Series table gives each series')."]


def recorded_text(members: list[tuple[Series, OutlierRun]]) -> str:
    """What an outlier run's own record shows that the run before it does not, for the series
    it left alike (evidence_signature), each number's span across them."""
    s, o = members[0]
    told = s.told.get(o.at)
    if told is None:
        return "—"
    ref = f"run {told[0]}"
    return (evidence_words([e for m, x in members for e in m.told[x.at][1]], ref)
            or f"its run records nothing that {ref} does not")


def _outlier_runs(h: History) -> list[str]:
    """A row per bad night: the figures one run left alike (the same sign, the same facts
    recorded) share it, as one figure on several GPUs shares a line elsewhere; one run off in
    all eight series is one row, not eight."""
    def night(x: tuple[Series, OutlierRun]) -> tuple[int, bool, bool, Hashable]:
        s, o = x
        return s.run_at(o.at), o.latest, o.change_pct < 0, evidence_signature(s.told.get(o.at))

    found = [(s, o) for s in h.series for o in s.outliers]
    nights = gathered(found, lambda x: x[0], night)
    rows = []
    for (run, latest, _, _), groups in sorted(nights.items(), key=lambda kv: kv[0][0]):
        members = [x for group in groups for x in group]
        rows.append([str(run) + (" (latest)" if latest else ""), h.run(run).started_at[:10],
                     figures_text(h, [[x for x, _ in g] for g in groups]),
                     span([o.change_pct for _, o in members], pct),
                     _night_values(members), recorded_text(members)])
    if not rows:
        return []
    return ["## Outlier runs", "", "Single runs far off a level their neighbours agree on (two "
            "runs off together are a level, for the change points to test): a "
            "bad night, not a new level. They are left out of the levels; the latest run "
            "still counts for the exit code. The figures one run left alike share a row.",
            ""] + fmt.table(
        ["run", "date", "off in", "off", "its value against the level around it",
         "what its own run recorded"], rows)


def _night_values(members: list[tuple[Series, OutlierRun]]) -> str:
    """'152 GFLOP/s to 303 GFLOP/s against 200 GFLOP/s to 399 GFLOP/s; 30.3 images/s against
    39.9 images/s': the values against their levels (_by_unit)."""
    return _by_unit(members, lambda runs, unit: value_span([o.value for o in runs], unit)
                    + " against " + value_span([o.level for o in runs], unit))


def _cause(s: Series, i: int) -> str:
    return causes_text(*around(s, i))


def _change_points(h: History) -> list[str]:
    """A row per moment: the figures that moved alike at one run (the same way, tested alike,
    the same environment changed and the same facts recorded) share it, as one figure on
    several GPUs does, so that a driver that cost every figure is one row, not one per figure
    and GPU."""
    def moment(x: tuple[Series, int]) -> tuple[int, bool, str, str, Hashable]:
        s, i = x
        return (s.run_at(s.shifts[i].at), s.shifts[i].change_pct < 0, s.shifts[i].given,
                _cause(s, i), told_signature(s, i))

    found = [(s, i) for s in h.series for i in range(len(s.shifts))]
    moments = gathered(found, lambda x: x[0], moment)
    rows = []
    for (run, _, _, cause, _), groups in sorted(moments.items(), key=lambda kv: kv[0][0]):
        members = [x for group in groups for x in group]
        shifts = [s.shifts[i] for s, i in members]
        worst = max(shifts, key=lambda y: y.p_value)
        p = shift_p_text(worst) if len(members) == 1 else each_p_text(
            worst.p_value, worst.given, worst.held_at)
        rows.append([figures_text(h, [[m for m, _ in g] for g in groups]), str(run),
                     h.run(run).started_at[:10],
                     _by_unit([(s, s.shifts[i].before) for s, i in members], value_span),
                     _by_unit([(s, s.shifts[i].after) for s, i in members], value_span),
                     span([y.change_pct for y in shifts], pct), p,
                     f"{span([y.runs[0] for y in shifts], str)} / "
                     f"{span([y.runs[1] for y in shifts], str)}",
                     "; ".join(w for w in (cause, shift_told_text(members)) if w),
                     clock_text(members)])
    if not rows:
        return ["## Change points", "", "None: every series stayed at one level.", ""]
    header = ["series", "run", "date", "before", "after", "change", "p", "runs before / after",
              "what changed", "the clock it ran at"]
    if all(r[-1] == "—" for r in rows):  # no series read its clock: no column of dashes
        header, rows = header[:-1], [r[:-1] for r in rows]
    lead = (["The figures that moved alike at one run share a row; each one's levels are in "
             "the Series table and history.csv.", ""]
            if any(len(groups) > 1 for groups in moments.values()) else [])
    return ["## Change points", ""] + lead + fmt.table(header, rows)


def _by_unit(members: list[tuple[Series, T]], clause: Callable[[list[T], str], str]) -> str:
    """'201 GFLOP/s to 401 GFLOP/s; 36.1 GB/s': the members' clause per unit, up to
    NIGHT_UNITS; past that, the machine's index's where it is among them, else where each
    series' is."""
    by_unit: dict[str, list[T]] = {}
    for s, x in members:
        by_unit.setdefault(s.unit, []).append(x)
    if len(by_unit) <= NIGHT_UNITS:
        return "; ".join(clause(xs, unit) for unit, xs in by_unit.items())
    index = [(s, x) for s, x in members if s.weights]
    if not index:
        return "each series' in history.csv"
    (s, x), = index
    return f"{s.name}: {clause([x], s.unit)}"


def _state(s: Series, threshold_pct: float) -> tuple[str, int | None]:
    """Where a series' latest level stands, as a kind: 'apart' (of other conditions than its
    figure's latest run: not judged), 'regressed', 'unheld' (worse than its reference by more
    than the threshold, the test not holding), 'worse' (within the threshold), 'since' (run N,
    better or level) or 'one' (level)."""
    g, seg = s.gate, s.segments[-1] if s.segments else None
    return (("apart", None) if not s.judged else ("regressed", None) if g and g.regressed
            else ("unheld", None)
            if s.unheld(threshold_pct) else ("worse", None)
            if g and g.change_pct < 0 else ("since", s.run_at(seg.start)) if seg and seg.start
            else ("one", None))


def _sees(pct: float) -> str:
    """'−10.1%': a slowdown of that much."""
    return f"−{pct:.1f}%"


def _series(h: History) -> list[str]:
    rows = []
    for group in grouped(h.series, lambda s: s, lambda s: (
            len(s.runs), tuple(s.run_at(x.at) for x in s.shifts), s.noise_pct is None,
            s.sees_pct is None, bool(s.segments), _state(s, h.threshold_pct))):
        s, unit = group[0], group[0].unit
        kind, since = _state(s, h.threshold_pct)
        gated = [m.gate.change_pct for m in group if m.gate]
        change = span(gated, pct) if gated else ""
        state = {"apart": "not judged: other conditions than the latest run",
                 "regressed": f"**regressed {change}**",
                 "unheld": f"{change} against its reference, not held",
                 "worse": f"{change} against its reference",
                 "since": f"since run {since}", "one": "one level"}[kind]
        rows.append([group_name(group), str(len(s.runs)),
                     value_span([m.values[-1] for m in group], unit),
                     value_span([m.segments[-1].level for m in group], unit)
                     if s.segments else "—",
                     noise_text(None) if s.noise_pct is None else
                     span([m.noise_pct or 0.0 for m in group], noise_text),
                     "—" if s.sees_pct is None else
                     span([m.sees_pct[0] for m in group if m.sees_pct], _sees) + " / "
                     + span([m.sees_pct[1] for m in group if m.sees_pct], _sees),
                     f"{len(s.shifts)} each" if len(group) > 1 and s.shifts else
                     str(len(s.shifts)), state])
    whole = next((s for s in h.series if s.probe == "all"), None)
    wholes = sum(s.probe == "all" for s in h.series)
    index = ([(f"- **The machine as a whole**: the first series, {whole.name}, is"
               if wholes == 1 else "- **The machine as a whole**: the first "
               f"{wholes} series, one per set of conditions, are each")
              + " the geometric mean of the figures every one of its runs measured, each about "
              "its median run and weighted by the inverse of its noise, in percent of the median "
              "run; a change every figure shares shows in it above the noise of any one."
              + shares_text(whole, "Its weights" if wholes == 1 else
                            f"The weights of {whole.name}")]
             if whole else [])
    gpus = sorted({round(h.alpha / s.alpha) for s in h.series if s.alpha is not None})
    against = (["- **Against the other GPUs**: a figure that several GPUs measure has a series "
                "per GPU against the median of the other GPUs in the same run. What moves them "
                "all alike (the day, the host, a driver) cancels there, so a GPU that fell "
                "behind the others shows above its own noise; a figure's GPUs share "
                f"p ≤ {h.alpha:g}, each held at {h.alpha:g} / "
                + " or ".join(str(k) for k in gpus) + " GPUs. These series are plotted where "
                "they have change points."] if gpus else [])
    return ["## Series", "",
            "- **Noise**: the run-to-run spread (robust, from successive runs); unknown for a "
            f"series of fewer than {MIN_RUNS} runs.",
            "- **Sees**: the smallest slowdown in the middle of these runs that this noise lets "
            "a change point be found for about half the time, where nothing recorded changed / "
            "where a change was recorded there (a driver, a kernel). A larger one is found more "
            "often, and more runs see smaller ones.",
            *index, *against,
            "- **Plots**: each figure is plotted in history.html (another GPU's where it "
            "changed otherwise than the first's).", ""] + fmt.table(
        ["series", "runs", "latest run", "latest segment's level", "noise", "sees",
         "change points", "latest level"], rows)


def shares_text(whole: Series, whose: str = "Its weights") -> str:
    """' Its weights here: host-device h2d pinned (cuda:0–7) 62%, …': the figures that carry
    the index most, so that a reader sees what it follows."""
    parts = sorted(((sum(w for _, w in g), group_name([m for m, _ in g]))
                    for g in grouped(whole.weights, lambda x: x[0], lambda x: None)),
                   key=lambda x: -x[0])
    if not parts:
        return ""
    shown = parts if len(parts) <= SHARES_NAMED + 1 else parts[:SHARES_NAMED]
    words = [f"{n} {100 * w:.1f}%" if w >= 0.001 else f"{n} under 0.1%" for w, n in shown]
    rest = parts[len(shown):]
    if rest:
        words.append(f"the other {names.counted(len(rest), 'figure')} "
                     f"{100 * sum(w for w, _ in rest):.1f}%")
    return f" {whose} here: " + names.listed(words) + "."


def _changes(h: History) -> list[str]:
    if not h.changes:
        return ["## Environment changes", "", "None recorded between the runs.", ""]
    return ["## Environment changes", ""] + fmt.table(
        ["between runs", "what", "before", "after"],
        [[f"{c.runs[0]} and {c.runs[1]}", c.field, env_text(c.field, c.before),
          env_text(c.field, c.after)] for c in h.changes])


def _runs(h: History) -> list[str]:
    marked = {s.run_at(x.at) for s in h.series for x in s.shifts}
    marked |= {c.runs[1] for c in h.changes} | {1, len(h.runs)}
    marked |= {b.number for a, b in zip(h.runs, h.runs[1:], strict=False)
               if a.conditions != b.conditions}  # where the conditions changed
    shown = [r for r in h.runs if len(h.runs) <= FULL_RUN_LIST or r.number in marked]
    lead = ([] if len(shown) == len(h.runs) else
            [f"The first and last runs and those where something changed; all {len(h.runs)} "
             "are in history.csv.", ""])
    rows = [[str(r.number), r.started_at, r.label or "—", f"`{r.source}`"] for r in shown]
    if h.split:
        return ["## Runs", ""] + lead + fmt.table(
            ["run", "started", "label", "conditions", "source"],
            [[*row[:3], r.conditions or "—", row[3]] for row, r in zip(rows, shown, strict=True)])
    return ["## Runs", ""] + lead + fmt.table(["run", "started", "label", "source"], rows)


def render(h: History) -> str:
    lines = (_header(h) + _summary(h) + _rule(h) + _change_points(h) + _outlier_runs(h) + _series(h)
             + _changes(h) + _runs(h))
    if h.set_apart:
        lines += ["## Set apart", "", "Runs not of this machine, left out of every series:",
                  ""] + fmt.table(["run", "why"], [[f"`{a}`", b] for a, b in h.set_apart])
    if h.notes:
        lines += ["## Notes", ""] + [f"- {n}" for n in h.notes] + [""]
    return "\n".join(lines).rstrip() + "\n"


