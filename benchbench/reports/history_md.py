"""Render a machine's History as Markdown (printed, and history.md) and as history.csv: the
change points with what changed in the environment around them, the series, the environment's
changes and the runs."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from benchbench.analysis import clocks
from benchbench.analysis.change_points import MIN_RUNS, OUTLIER_Z, Shift, at_change
from benchbench.analysis.history_gate import Gate
from benchbench.analysis.max_t import MIN_SIDE
from benchbench.compare.environment import ENV_BYTES
from benchbench.compare.evidence import Evidence
from benchbench.compare.history import EnvChange, History, Series
from benchbench.compare.series import without_device
from benchbench.core import names
from benchbench.core import units as fmt
from benchbench.reports.csv import table_text

FULL_RUN_LIST = 50  # more runs than this: the runs table keeps those where something happened
SHARES_NAMED = 3  # the index's heaviest figures named beside it
T = TypeVar("T")


def value(v: float, unit: str) -> str:
    return fmt.value(v, "images/s" if unit == "samples/s" else unit)


def pct(x: float) -> str:
    return f"{x:+.1f}%".replace("-", "−")


def noise_text(pct: float | None) -> str:
    """'±2.1%', or 'unknown' where too few runs (or nodes) measured a spread."""
    return "unknown" if pct is None else f"±{pct:.1f}%"


def fact(v: Any, unit: str | None) -> str:
    if v is None:
        return "—"
    if unit and isinstance(v, (int, float)):
        return fmt.value(v, unit)
    return str(v)


def evidence_text(e: Evidence, reference: str) -> str:
    if e.name == "flagged":
        return f"flagged: {e.mine}"
    return f"{e.name} {fact(e.mine, e.unit)} where {reference} has {fact(e.theirs, e.unit)}"


def p_text(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p = {p:.2g}"


def each_p_text(worst: float, held_at: float | None) -> str:
    """The p of several series' alike: 'p < 0.001 each', 'p ≤ 0.004', and, where each was tested
    at its recorded change, against what."""
    return (("p < 0.001 each" if worst < 0.001 else f"p ≤ {worst:.2g}")
            + (f", each tested at its recorded change against {held_at:.2g}"
               if held_at is not None else ""))


def shift_p_text(x: Shift) -> str:
    """A change point's p, and where it was tested at its recorded change alone, that."""
    return p_text(x.p_value) + (f", tested at its recorded change against {x.held_at:.2g}"
                                if x.given else "")


def env_text(name: str, v: Any) -> str:
    if v is None or v == "":
        return "—"
    if name in ENV_BYTES and isinstance(v, (int, float)):
        return fmt.iec(v)
    return str(v)


def change_text(c: EnvChange) -> str:
    return f"{c.field} {env_text(c.field, c.before)} → {env_text(c.field, c.after)}"


def causes_text(causes: list[EnvChange], runs: tuple[int, int]) -> str:
    between = f"between runs {runs[0]} and {runs[1]}"
    if not causes:
        return f"nothing recorded changed {between}"
    return "; ".join(change_text(c) for c in causes) + f" {between}"


def grouped(items: list[T], series_of: Callable[[T], Series],
            signature: Callable[[T], Hashable]) -> list[list[T]]:
    """The items, those of one figure on several devices that agree on `signature` together, in
    the order they first come: what eight GPUs show alike is one line, not eight."""
    out: dict[Hashable, list[T]] = {}
    for x in items:
        out.setdefault((without_device(series_of(x).key), signature(x)), []).append(x)
    return list(out.values())


def group_name(members: list[Series]) -> str:
    """'matmul peak bf16 (cuda:0–7)': the figure and the devices that show it alike; one series
    by its own name."""
    first = members[0]
    if len(members) == 1:
        return first.name
    device = dict(first.key[2]).get("device")
    return (first.name.removesuffix(f" ({device})") + " ("
            + names.devices([str(dict(m.key[2]).get("device")) for m in members]) + ")")


def span(values: list[float], text: Callable[[float], str]) -> str:
    """'−6.1% to −5.9%': the least and the most, or one value where both read alike."""
    low, high = text(min(values)), text(max(values))
    return low if low == high else f"{low} to {high}"


def value_span(values: list[float], unit: str) -> str:
    """'781 TFLOP/s to 785 TFLOP/s', or one value."""
    return span(values, lambda v: value(v, unit))


def runs_text(numbers: list[int], first: int = 6) -> str:
    """'run 8', 'runs 8, 15 and 21', 'runs 3, 8, 12, 15, 20, 25 and 5 more'."""
    words = [str(n) for n in numbers[:first]]
    if len(numbers) > first:
        words.append(f"{len(numbers) - first} more")
    return ("run " if len(numbers) == 1 else "runs ") + names.listed(words)


def shift_text(h: History, s: Series, i: int) -> str:
    """'run 7 (2026-11-14): resnet50 amp_bf16 224px −6.1% (p < 0.001); driver 550.54 →
    560.28 between runs 6 and 7'"""
    x: Shift = s.shifts[i]
    run = s.run_at(x.at)
    before = s.run_at(x.at - 1)
    return (f"run {run} ({h.run(run).started_at[:10]}): {s.name} {pct(x.change_pct)} "
            f"({shift_p_text(x)}); {causes_text(s.causes[i], (before, run))}")


def gate_text(h: History, s: Series, causes: bool = False) -> str:
    """'resnet50 fp32 64px −15.2%: the latest segment (runs 81–100) against the best segment
    (runs 1–20) (p < 0.001), in 4 steps: run 21 (2026-10-21) −4.1%, …'"""
    return gates_text(h, [s], causes)


def gate_signature(s: Series) -> Hashable:
    """What gates_text says of a series but its name and figures: the series that share it
    read as one line."""
    g = s.gate
    if g is None:
        return None
    return (g.latest_what, g.reference_what, g.across,
            tuple((s.run_at(x.at), x.given) for x in g.steps), _held(g))


def _held(g: Gate) -> bool:
    """The gate's p is its one step's, tested at its recorded change."""
    return bool(len(g.steps) == 1 and g.steps[0].given and g.p_value == g.steps[0].p_value)


def gates_text(h: History, members: list[Series], causes: bool = False) -> str:
    """gate_text for one figure on several devices whose gates share gate_signature:
    'matmul peak bf16 (cuda:0–7) −6.1% to −5.9%: … (p < 0.001 each), since run 15 (…)'."""
    s, g = members[0], members[0].gate
    if g is None:
        return f"{group_name(members)}: no level to judge"
    gates = [m.gate for m in members if m.gate is not None]
    if len(members) == 1:
        p = shift_p_text(g.steps[0]) if _held(g) else p_text(g.p_value)
    else:
        p = each_p_text(max(x.p_value for x in gates),
                        max(x.steps[0].held_at for x in gates) if _held(g) else None)
    if g.p_value > g.held_at:  # beyond the threshold, but the test did not hold
        p += f", not ≤ {g.held_at:.2g}"
    head = (f"{group_name(members)} {span([x.change_pct for x in gates], pct)}: "
            f"{g.latest_what} against {g.reference_what} ({p})")
    if not g.steps:
        return head
    steps = [f"run {s.run_at(x.at)} ({h.run(s.run_at(x.at)).started_at[:10]})"
             + (f" {span([y.steps[k].change_pct for y in gates], pct)}"
                if len(g.steps) > 1 else "") for k, x in enumerate(g.steps)]
    text = (f"{head}; change points cut the drift at {', '.join(steps)}" if g.across else
            f"{head}, since {steps[0]}" if len(steps) == 1 else
            f"{head}, in {len(steps)} steps: {', '.join(steps)}")
    if causes:
        text += "".join(f"; {step_causes(s, x)}" for x in g.steps)
    return text


def _around(s: Series, i: int) -> tuple[list[EnvChange], tuple[int, int]]:
    """What changed in the environment at s's shift i, and the runs either side of it."""
    x = s.shifts[i]
    return s.causes[i], (s.run_at(x.at - 1), s.run_at(x.at))


def step_causes(s: Series, x: Shift) -> str:
    """What changed in the environment between the runs either side of one of s's shifts."""
    return causes_text(*_around(s, s.shifts.index(x)))


def steps_causes(regs: list[Series]) -> str:
    """What changed around the steps of the regressed series, in the order of their runs, the
    steps where nothing recorded changed named once: 'driver 550 → 560 between runs 10 and 11;
    nothing recorded changed between runs 6 and 7, 12 and 13, and 18 and 19'; '' where the
    gates hold no step."""
    found: dict[tuple[int, int], set[str]] = {}
    for s in regs:
        for x in (s.gate.steps if s.gate else []):
            causes, runs = _around(s, s.shifts.index(x))
            found.setdefault(runs, set()).update(change_text(c) for c in causes)
    told = [f"{'; '.join(sorted(texts))} between runs {a} and {b}"
            for (a, b), texts in sorted(found.items()) if texts]
    quiet = [f"{a} and {b}" for (a, b), texts in sorted(found.items()) if not texts]
    if quiet:
        told.append("nothing recorded changed between runs " + (
            quiet[0] if len(quiet) == 1 else ", ".join(quiet[:-1]) + ", and " + quiet[-1]))
    return "; ".join(told)


def _header(h: History) -> list[str]:
    first, last = h.runs[0], h.runs[-1]
    basis = last.identity.basis
    return [f"# benchbench history: {h.machine}", "",
            f"{len(h.runs)} runs of **{h.machine}** (identified by its {basis}), from "
            f"{first.started_at[:10]} to {last.started_at[:10]}, oldest first.", ""]


def _rule(h: History) -> list[str]:
    """How the summary above was decided: after it, so that the verdict comes first."""
    reference = (f"run {h.baseline}'s segment (--baseline)" if h.baseline else
                 "the best segment" + (f" of the last {h.window} runs" if h.window else ""))
    return ["## The rule", "",
            "Each run counts once, as the geometric mean of its values per round. A run "
            f"more than {OUTLIER_Z:g} run-to-run noises off the level its neighbours on both "
            "sides agree on is an outlier run, left out of the levels. Change points: binary "
            "segmentation and PELT propose, and each is kept when the best split of the "
            "segments either side of it, paid for having been chosen (the maximum-t test), "
            f"gives p ≤ {h.alpha:g}. Where the environment changed between two runs (a driver, "
            "a kernel), the record gave the place: a step there is tested by Student's t at "
            f"that place alone, the series' recorded changes sharing {at_change(h.alpha):g}. "
            "A series regressed when its latest level (the latest "
            "segment's level; where that segment drifts, or the runs since the reference drift "
            "across change points, where the drift has taken it; or the "
            f"latest run alone when it is an outlier run) is worse than {reference} by more than "
            f"{h.threshold_pct:g}% and the difference holds at p ≤ {h.alpha:g} (one step at a "
            "recorded change, at its level). The method and its measured accuracy: "
            "docs/history-method.md.", ""]


def _summary(h: History) -> list[str]:
    regs = h.regressions
    out = ["## Summary", ""]
    if regs:
        out += [f"**{len(regs)} series regressed** (exit 3):", ""]
        out += [f"- {gates_text(h, group)}" for group in grouped(regs, lambda s: s,
                                                                 gate_signature)]
        causes = steps_causes(regs)
        if causes:
            out += ["", f"What changed around their steps: {causes}."]
    unheld = h.unheld
    if not regs:
        out.append("**No series regressed** (exit 0): " + (
            f"none is worse than its reference by more than {h.threshold_pct:g}% with its "
            "test holding." if unheld else
            f"every latest level is within {h.threshold_pct:g}% of its reference."))
    if unheld:
        out += ["", f"Worse than the reference by more than {h.threshold_pct:g}%, but the "
                "test did not hold (more runs will tell):", ""]
        out += [f"- {gates_text(h, group)}" for group in grouped(unheld, lambda s: s,
                                                                 gate_signature)]
    at = sorted({s.run_at(x.at) for s in h.series for x in s.shifts})
    odd = sorted({s.run_at(o.at) for s in h.series for o in s.outliers})
    said = [f"{sum(len(s.shifts) for s in h.series)} change point(s) in {len(h.series)} "
            "series" + (f", at {runs_text(at)}" if at else "")]
    if odd:
        said.append(f"{len(odd)} outlier run(s) ({runs_text(odd)}), off in "
                    f"{sum(len(s.outliers) for s in h.series)} series")
    out += ["", "; ".join(said) + "."]
    return out + _blind_to(h) + [""]


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


def recorded_text(s: Series, at: int) -> str:
    """What an outlier run's own record shows that the run before it does not."""
    told = s.told.get(at)
    if told is None:
        return "—"
    ref = f"run {told[0]}"
    return ("; ".join(evidence_text(e, ref) for e in told[1])
            or f"its run records nothing that {ref} does not")


def _outlier_runs(h: History) -> list[str]:
    found = [(s, o) for s in h.series for o in s.outliers]
    rows = []
    for group in grouped(found, lambda x: x[0], lambda x: (
            x[0].run_at(x[1].at), x[1].latest, x[1].change_pct < 0,
            recorded_text(x[0], x[1].at))):
        s, o = group[0]
        run, unit = s.run_at(o.at), s.unit
        rows.append([group_name([m for m, _ in group]), str(run) + (" (latest)" if o.latest
                                                                      else ""),
                     h.run(run).started_at[:10],
                     value_span([x.value for _, x in group], unit),
                     value_span([x.level for _, x in group], unit),
                     span([x.change_pct for _, x in group], pct), recorded_text(s, o.at)])
    if not rows:
        return []
    return ["## Outlier runs", "", "Single runs far off a level their neighbours agree on: a "
            "bad night, not a new level. They are left out of the levels; the latest run "
            "still counts for the exit code.", ""] + fmt.table(
        ["series", "run", "date", "its value", "the level around it", "off",
         "what its own run recorded"], rows)


def _cause(s: Series, i: int) -> str:
    return causes_text(*_around(s, i))


def clock_text(group: list[tuple[Series, int]]) -> str:
    """The SM clock's move at a group's shift (one series, or one figure on several GPUs that
    moved alike): 'SM clock 1,755 → 1,485 MHz (−15.4%) while the samples ran, per GHz of it
    +0.0%: the clock moved, not the work per cycle'; for several, the spans, and the
    conclusion where every member draws it; '—' where no member read its clock."""
    moves = [(s, s.shifts[i], m) for s, i in group
             if i < len(s.clock_moves) and (m := s.clock_moves[i]) is not None]
    if not moves:
        return "—"
    if len(group) == 1:
        _, x, (before, after) = moves[0]
        return clocks.moved(before, after, x.change_pct)
    moved = [clocks.shifts(b, a) for _, _, (b, a) in moves]
    text = "SM clock " + span([c for c, _ in moved], clocks.signed) + " while the samples ran"
    which = {clocks.carried(c, g, x.change_pct) for (c, g), (_, x, _) in zip(moved, moves,
                                                                              strict=True)}
    text += ", per GHz of it " + span([g for _, g in moved], clocks.signed)
    one = which.pop() if len(which) == 1 else None
    return text + (f": {one}" if one and len(moves) == len(group) else "")


def _change_points(h: History) -> list[str]:
    found = [(s, i) for s in h.series for i in range(len(s.shifts))]
    rows = []
    for group in grouped(found, lambda x: x[0], lambda x: (
            x[0].run_at(x[0].shifts[x[1]].at), x[0].shifts[x[1]].change_pct < 0,
            x[0].shifts[x[1]].given, _cause(*x))):
        shifts = [s.shifts[i] for s, i in group]
        s, x = group[0][0], shifts[0]
        run, unit = s.run_at(x.at), s.unit
        worst = max(shifts, key=lambda y: y.p_value)
        p = shift_p_text(worst) if len(group) == 1 else each_p_text(
            worst.p_value, worst.held_at if worst.given else None)
        rows.append([group_name([m for m, _ in group]), str(run), h.run(run).started_at[:10],
                     value_span([y.before for y in shifts], unit),
                     value_span([y.after for y in shifts], unit),
                     span([y.change_pct for y in shifts], pct), p,
                     f"{span([y.runs[0] for y in shifts], str)} / "
                     f"{span([y.runs[1] for y in shifts], str)}", _cause(*group[0]),
                     clock_text(group)])
    if not rows:
        return ["## Change points", "", "None: every series stayed at one level.", ""]
    header = ["series", "run", "date", "before", "after", "change", "p", "runs before / after",
              "what changed", "the clock it ran at"]
    if all(r[-1] == "—" for r in rows):  # no series read its clock: no column of dashes
        header, rows = header[:-1], [r[:-1] for r in rows]
    return ["## Change points", ""] + fmt.table(header, rows)


def _state(s: Series, threshold_pct: float) -> tuple[str, int | None]:
    """Where a series' latest level stands, as a kind: 'regressed', 'unheld' (worse than its
    reference by more than the threshold, the test not holding), 'worse' (within the
    threshold), 'since' (run N, better or level) or 'one' (level)."""
    g, seg = s.gate, s.segments[-1] if s.segments else None
    return (("regressed", None) if g and g.regressed else ("unheld", None)
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
        change = span([m.gate.change_pct for m in group if m.gate], pct)
        state = {"regressed": f"**regressed {change}**",
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
    index = (f" The first, {whole.name}, is the machine as a whole: the geometric mean of "
             "the figures every run measured, each about its median run and weighted by the "
             "inverse of its noise, in percent of the median run; a change every figure shares "
             "shows in it above the noise of any one." + shares_text(whole) if whole else "")
    gpus = sorted({round(h.alpha / s.alpha) for s in h.series if s.alpha is not None})
    against = (" A figure that several GPUs measure has a series per GPU against the median of "
               "the other GPUs in the same run (\"against the other GPUs\"): what moves them "
               "all alike (the day, the host, a driver) cancels there, so a GPU that fell "
               "behind the others shows above its own noise; a figure's GPUs share "
               f"p ≤ {h.alpha:g}, each held at {h.alpha:g} / "
               + " or ".join(str(k) for k in gpus) + " GPUs; these series are "
               "plotted where they have change points." if gpus else "")
    return ["## Series", "", "Noise: the run-to-run spread (robust, from successive runs); "
            f"unknown for a series of fewer than {MIN_RUNS} runs. Sees: the smallest slowdown "
            "in the middle of these runs that this noise lets a change point be found for "
            "about half the time, where nothing recorded changed / where a change was "
            "recorded there (a driver, a kernel); a larger one is found more often, and more "
            "runs see smaller ones. Each figure is plotted "
            "in history.html (another GPU's where it changed otherwise than the first's)."
            + index + against, ""] + fmt.table(
        ["series", "runs", "latest run", "latest segment's level", "noise", "sees",
         "change points", "latest level"], rows)


def shares_text(whole: Series) -> str:
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
        words.append(f"the other {len(rest)} figure(s) {100 * sum(w for w, _ in rest):.1f}%")
    return " Its weights here: " + names.listed(words) + "."


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
    shown = [r for r in h.runs if len(h.runs) <= FULL_RUN_LIST or r.number in marked]
    lead = ([] if len(shown) == len(h.runs) else
            [f"The first and last runs and those where something changed; all {len(h.runs)} "
             "are in history.csv.", ""])
    return ["## Runs", ""] + lead + fmt.table(
        ["run", "started", "label", "source"],
        [[str(r.number), r.started_at, r.label or "—", f"`{r.source}`"] for r in shown])


def render(h: History) -> str:
    lines = (_header(h) + _summary(h) + _rule(h) + _change_points(h) + _outlier_runs(h) + _series(h)
             + _changes(h) + _runs(h))
    if h.set_apart:
        lines += ["## Set apart", "", "Runs not of this machine, left out of every series:",
                  ""] + fmt.table(["run", "why"], [[f"`{a}`", b] for a, b in h.set_apart])
    if h.notes:
        lines += ["## Notes", ""] + [f"- {n}" for n in h.notes] + [""]
    return "\n".join(lines).rstrip() + "\n"


# --- history.csv ------------------------------------------------------------------------------

def csv_rows(h: History) -> tuple[list[str], list[dict[str, Any]]]:
    """One row per run and series: the run's figure and rounds, its segment and level, the
    series' noise (empty: unknown) and the least slowdown it sees (Series.sees_pct: blind, and
    at a recorded change), and, on the first run of a segment, the change point's change and
    p."""
    keys: dict[str, None] = {}
    out = []
    for s in h.series:
        fields = dict(s.key[2])
        keys.update(dict.fromkeys(fields))
        starts = {x.at: x for x in s.shifts}
        odd = {o.at for o in s.outliers}
        reg = s.regression
        began = reg.steps[-1] if reg is not None and reg.steps else None
        for i, (number, rounds, v) in enumerate(zip(s.runs, s.points, s.values, strict=True)):
            seg = next(g for g in s.segments if g.start <= i < g.stop)
            shift = starts.get(i)
            run = h.run(number)
            out.append({"run": number, "started_at": run.started_at, "source": run.source,
                        "label": run.label, "series": s.name, "probe": s.probe,
                        "metric": s.metric, **{f"key.{k}": v for k, v in fields.items()},
                        "unit": s.unit, "value": v,
                        "rounds": len(rounds), "segment": s.segments.index(seg) + 1,
                        "segment_level": seg.level, "noise_pct": s.noise_pct,
                        "sees_pct": s.sees_pct[0] if s.sees_pct else None,
                        "sees_recorded_pct": s.sees_pct[1] if s.sees_pct else None,
                        "change_point": shift is not None,
                        "change_pct": shift.change_pct if shift else None,
                        "p_value": shift.p_value if shift else None,
                        "p_held_at": shift.held_at if shift else None,
                        "outlier_run": i in odd,
                        "regression": shift is not None and shift is began})
    lead = ["run", "started_at", "source", "label", "series", "probe", "metric"]
    tail = ["unit", "value", "rounds", "segment", "segment_level", "noise_pct", "sees_pct",
            "sees_recorded_pct", "change_point", "change_pct", "p_value", "p_held_at",
            "outlier_run", "regression"]
    return lead + [f"key.{k}" for k in keys] + tail, out


def csv_text(h: History) -> str:
    return table_text(*csv_rows(h))
