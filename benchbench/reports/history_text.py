"""The phrases history's reports share (history.md, the JUnit cases, fleet's lines): values
and changes, p values, what changed in the environment, a change point and a gate in one line,
and one figure on several devices named once."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from benchbench.analysis import clocks, history_gate
from benchbench.analysis.change_points import Shift, change_pct
from benchbench.analysis.history_gate import Gate
from benchbench.compare.environment import ENV_BYTES
from benchbench.compare.evidence import Evidence
from benchbench.compare.history_series import EnvChange, History, Series
from benchbench.compare.series import without_device
from benchbench.core import names
from benchbench.core import units as fmt

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)
FIGURES_NAMED = 4  # the figures one line names before "and N more figures"


def value(v: float, unit: str) -> str:
    return fmt.value(v, "images/s" if unit == "samples/s" else unit)


def pct(x: float) -> str:
    return fmt.signed_percent(x)


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


def each_p_text(worst: float, given: str = "", held_at: float = 0.0) -> str:
    """The p of several series' alike: 'p < 0.001 each', 'p ≤ 0.004', and, where each was tested
    at a given place alone (Shift.given: its recorded change, the newest runs'), against
    what."""
    return (("p < 0.001 each" if worst < 0.001 else f"p ≤ {worst:.2g}")
            + (f", each tested at {given} against {held_at:.2g}" if given else ""))


def shift_p_text(x: Shift) -> str:
    """A change point's p, and where it was tested at a given place alone (its recorded change,
    the newest runs'), that."""
    return p_text(x.p_value) + (f", tested at {x.given} against {x.held_at:.2g}"
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


def gathered(items: list[T], series_of: Callable[[T], Series],
             signature: Callable[[T], K]) -> dict[K, list[list[T]]]:
    """grouped's groups gathered by their signature, in the order they first come: each value
    the figures (each on its devices) that show one moment, one night, one gate alike."""
    out: dict[K, list[list[T]]] = {}
    for group in grouped(items, series_of, signature):
        out.setdefault(signature(group[0]), []).append(group)
    return out


def group_name(members: list[Series]) -> str:
    """'matmul peak bf16 (cuda:0–7)': the figure and the devices that show it alike; one series
    by its own name."""
    first = members[0]
    if len(members) == 1:
        return first.name
    device = dict(first.key[2]).get("device")
    return (first.name.removesuffix(f" ({device})") + " ("
            + names.devices([str(dict(m.key[2]).get("device")) for m in members]) + ")")


def figures_text(h: History, groups: list[list[Series]]) -> str:
    """'all 8 series', or the figures by name, each on its devices: 'matmul peak bf16
    (cuda:0–7) and resnet50 amp_bf16 224px'; past FIGURES_NAMED, how many more."""
    count = sum(len(group) for group in groups)
    if count == len(h.series) > 1:
        return f"all {count} series"
    words = [group_name(group) for group in groups[:FIGURES_NAMED]]
    if len(groups) > FIGURES_NAMED:
        words.append(f"{len(groups) - FIGURES_NAMED} more figures")
    return names.listed(words)


def alike(h: History, series: list[Series]) -> list[str]:
    """A line per gate that several series share (gate_signature): one figure on several
    devices, and several figures that moved alike (a driver that cost every figure), each
    named once: a bad driver is one line, not one per figure."""
    return [gates_text(h, [s for group in groups for s in group],
                       figures=groups if len(groups) > 1 else None)
            for groups in _alike_groups(series)]


def _alike_groups(series: list[Series]) -> list[list[list[Series]]]:
    """The series by gate_signature, each as its figures (grouped: one figure on its devices)."""
    return list(gathered(series, lambda s: s, gate_signature).values())


FACTS_NAMED = 6  # the facts a run's record shows that one line names before "N more"


def named_briefly(h: History, series: list[Series]) -> str:
    """The terminal's last line names what regressed, since a person reads a terminal from its
    end: 'resnet50 fp32 64px −10.7% since run 13', each group of alike gates (alike) once, up
    to names.TERMINAL_NAMED, then how many more."""
    words = []
    for groups in _alike_groups(series):
        members = [s for group in groups for s in group]
        gates = [s.gate for s in members if s.gate is not None]
        g = members[0].gate
        since = (f" since run {members[0].run_at(g.steps[0].at)}" if g is not None and g.steps
                 else "")
        words.append(f"{figures_text(h, groups)} {span([x.change_pct for x in gates], pct)}"
                     + since)
    return names.first_clauses(words)


def tally_text(counts: list[tuple[str, int]], noun: str) -> str:
    """'12 --quick runs and 3 full runs', '5 nodes under resnet50: image size 64 px and 1 under
    …': how many runs (or nodes) ran under each conditions, in words (conditions.words)."""
    return names.listed([names.counted(n, f"{w} {noun}", f"{w} {noun}s")
                         if w in ("--quick", "full") else
                         f"{names.counted(n, noun) if k == 0 else n} under {w}"
                         for k, (w, n) in enumerate(counts)])


def split_text(title: str, field: str, counts: list[tuple[str, int]], noun: str) -> str:
    """'12 --quick runs and 3 full runs', 'resnet50: image size 224 px in 10 runs and 64 px in
    5': how many runs recorded each value of a condition that kept them apart."""
    if field == "quick":
        return tally_text(counts, noun)
    return f"{title} " + names.listed([f"{w} in {names.counted(n, noun)}" if k == 0
                                       else f"{w} in {n}" for k, (w, n) in enumerate(counts)])


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
    return (f"run {run} ({h.run(run).started_at[:10]}): {s.name} {pct(x.change_pct)} "
            f"({shift_p_text(x)}); {step_causes(s, x)}")


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
    """The gate's p is its one step's, tested at a given place (its recorded change, the
    newest runs')."""
    return bool(len(g.steps) == 1 and g.steps[0].given and g.p_value == g.steps[0].p_value)


def gates_text(h: History, members: list[Series], causes: bool = False,
               figures: list[list[Series]] | None = None) -> str:
    """gate_text for one figure on several devices whose gates share gate_signature:
    'matmul peak bf16 (cuda:0–7) −6.1% to −5.9%: … (p < 0.001 each), since run 15 (…)';
    for several figures alike, `figures` (each on its devices, as grouped) names them."""
    s, g = members[0], members[0].gate
    name = figures_text(h, figures) if figures else group_name(members)
    if g is None:
        return f"{name}: no level to judge"
    gates = [m.gate for m in members if m.gate is not None]
    if len(members) == 1:
        p = shift_p_text(g.steps[0]) if _held(g) else p_text(g.p_value)
    else:
        p = each_p_text(max(x.p_value for x in gates),
                        *((g.steps[0].given, max(x.steps[0].held_at for x in gates))
                          if _held(g) else ()))
    if g.p_value > g.held_at:  # beyond the threshold, but the test did not hold
        p += f", not ≤ {g.held_at:.2g}"
    elif s.unheld(h.threshold_pct):  # held against no change, but not beyond the threshold
        p += (f"; beyond {h.threshold_pct:g}% at p = {g.beyond_p:.2g}, not ≤ "
              f"{history_gate.BEYOND_LEVEL:g}")
    head = (f"{name} {span([x.change_pct for x in gates], pct)}: "
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


def around(s: Series, i: int) -> tuple[list[EnvChange], tuple[int, int]]:
    """What changed in the environment at s's shift i, and the runs either side of it."""
    x = s.shifts[i]
    return s.causes[i], (s.run_at(x.at - 1), s.run_at(x.at))


def step_causes(s: Series, x: Shift) -> str:
    """What changed in the environment between the runs either side of one of s's shifts, and
    what the new level's first run itself recorded that the run before it does not."""
    i = s.shifts.index(x)
    told = shift_told_text([(s, i)])
    return causes_text(*around(s, i)) + (f"; {told}" if told else "")


def came_back(s: Series, threshold_pct: float) -> list[int]:
    """The shifts of s that began a level which came back: the next shift goes the other way
    and leaves the series within threshold_pct of where it stood before, and within half of
    the first's change (a night's neighbour, a throttled week). Left to right, a level's own
    return does not begin another (100, 87, 100, 87, 100 is two dips, not three)."""
    found: list[int] = []
    for i, (a, b) in enumerate(itertools.pairwise(s.shifts)):
        net = change_pct(a.before, b.after, s.higher_is_better)
        back = abs(net) <= min(threshold_pct, abs(a.change_pct) / 2)
        if a.change_pct * b.change_pct < 0 and back and not (found and found[-1] == i - 1):
            found.append(i)
    return found


def _told_key(e: Evidence) -> tuple[str, str | None, str | None]:
    """What a fact's line keeps across series: its name, and a value that is not a number (a
    number's own is spanned)."""
    numeric = isinstance(e.mine, (int, float)) and isinstance(e.theirs, (int, float))
    return (e.name, None, None) if numeric else (e.name, str(e.mine), str(e.theirs))


def evidence_signature(told: tuple[int, list[Evidence]] | None) -> Hashable:
    """What a run's evidence against another run (history.Series.told, shift_told) says but
    its numbers: the series that share it read as one (evidence_words spans the numbers)."""
    return None if told is None else (told[0], tuple(dict.fromkeys(
        _told_key(e) for e in told[1])))


def told_signature(s: Series, i: int) -> Hashable:
    """What shift_told_text says of one series' shift i but its numbers: the members of a group
    that share it read as one."""
    told = s.shift_told.get(s.shifts[i].at)
    return None if not told or not told[1] else evidence_signature(told)


def shift_told_text(group: list[tuple[Series, int]]) -> str:
    """"run 13's own record: CPU steal 30.1% to 31.0% where run 12 has 0.0%": what the first run
    of a new level recorded that the run before it does not (history.Series.shift_told), for a
    group whose members share told_signature, each number's span across them; '' where it
    shows nothing."""
    s, i = group[0]
    told = s.shift_told.get(s.shifts[i].at)
    if not told or not told[1]:
        return ""
    return (f"run {s.run_at(s.shifts[i].at)}'s own record: "
            + evidence_words([e for m, k in group for e in m.shift_told[m.shifts[k].at][1]],
                             f"run {told[0]}", ", "))


def evidence_words(found: list[Evidence], reference: str, sep: str = "; ") -> str:
    """evidence_text of each fact, those of one name from several figures or devices (a
    number's own spanned) said once: 'CPU steal 21.0% to 23.0% where run 8 has 0.0%'."""
    facts: dict[tuple[str, str | None, str | None], list[Evidence]] = {}
    for e in found:
        facts.setdefault(_told_key(e), []).append(e)
    words = []
    for (name, text, _), es in facts.items():
        if text is not None:
            words.append(evidence_text(es[0], reference))
            continue
        unit = es[0].unit
        words.append(f"{name} {_text_span(es, 'mine', unit)} where {reference} has "
                     f"{_text_span(es, 'theirs', unit)}")
    if len(words) > FACTS_NAMED:  # eight GPUs' flags from every probe of the index
        words = words[:FACTS_NAMED] + [f"{len(words) - FACTS_NAMED} more (in results.json)"]
    return sep.join(words)


def _text_span(found: list[Evidence], side: str, unit: str | None) -> str:
    """The least and the most of one side of a fact's numbers, in its unit."""
    return span([getattr(e, side) for e in found], lambda v: fact(v, unit))


def steps_causes(regs: list[Series]) -> str:
    """What changed around the steps of the regressed series, in the order of their runs, the
    steps where nothing recorded changed named once: 'driver 550 → 560 between runs 10 and 11;
    nothing recorded changed between runs 6 and 7, 12 and 13, and 18 and 19'; '' where the
    gates hold no step."""
    found: dict[tuple[int, int], set[str]] = {}
    for s in regs:
        for x in (s.gate.steps if s.gate else []):
            causes, runs = around(s, s.shifts.index(x))
            found.setdefault(runs, set()).update(change_text(c) for c in causes)
    told = [f"{'; '.join(sorted(texts))} between runs {a} and {b}"
            for (a, b), texts in sorted(found.items()) if texts]
    quiet = [f"{a} and {b}" for (a, b), texts in sorted(found.items()) if not texts]
    if quiet:
        told.append("nothing recorded changed between runs " + (
            quiet[0] if len(quiet) == 1 else ", ".join(quiet[:-1]) + ", and " + quiet[-1]))
    return "; ".join(told)


def steps_told(regs: list[Series]) -> list[str]:
    """What the first run of each regressed series' step itself recorded that the run before
    it does not (shift_told_text), a line per step and what it shows, in the order of their
    runs: "run 13's own record: CPU steal 30.1% to 31.0% where run 12 has 0.0%"."""
    found: dict[tuple[int, Hashable], list[tuple[Series, int]]] = {}
    for s in regs:
        for x in (s.gate.steps if s.gate else []):
            i = s.shifts.index(x)
            if (sig := told_signature(s, i)) is not None:
                found.setdefault((s.run_at(x.at), sig), []).append((s, i))
    return [shift_told_text(group) for _, group in sorted(found.items(), key=lambda kv: kv[0][0])]


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
    text = "SM clock " + span([c for c, _ in moved], pct) + " while the samples ran"
    which = {clocks.carried(c, g, x.change_pct) for (c, g), (_, x, _) in zip(moved, moves,
                                                                              strict=True)}
    text += ", per GHz of it " + span([g for _, g in moved], pct)
    one = which.pop() if len(which) == 1 else None
    return text + (f": {one}" if one and len(moves) == len(group) else "")
