"""Rounds: a repeatable probe runs its timed section again later in the run, in a fresh worker.

The samples of one worker share that process's state (its memory layout, its threads' cores,
the clock speed and the neighbours of the moment), so their spread says little about how much
two runs of the same machine differ. pyperf spreads its values over worker processes for that
reason, and asv repeats in separate rounds. A run here executes every probe once, then every
repeatable probe again, round after round, each time in a fresh worker, with the other probes
in between; each measurement keeps one value per round (context "round_values"), and compare
judges a change against the spread of those values, the run-to-run noise, not against the
spread of one worker's samples. Pure functions: no I/O, no torch.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any, TypeVar

from benchbench.core.results import Measurement, ProbeResult
from benchbench.core.stats import median

# Rounds when the run does not say, by (--quick, device): two with --quick on a CPU (its time
# target allows one more pass of the repeatable probes, not two) and on a CPU by default, where
# one 224 px ResNet50 step takes seconds and a third round would not fit the default run's 4
# minutes; three on a GPU by default. A GPU's quick run makes one pass: a second would pay
# every precision's start-up (cuDNN's autotuning) again, three quarters of an H200's quick
# run, where one longer steady window per figure measures more.
DEFAULT_ROUNDS = {(True, "cpu"): 2, (False, "cpu"): 2, (True, "cuda"): 1, (False, "cuda"): 3}


def default_rounds(quick: bool, device: str) -> int:
    return DEFAULT_ROUNDS[(quick, "cuda" if device == "cuda" else "cpu")]

T = TypeVar("T")


def schedule(specs: Sequence[T], repeatable: Sequence[bool], rounds: int
             ) -> list[tuple[T, int]]:
    """(probe, round) in the order they run: every probe in round 1, then each later round
    of the repeatable ones, so that a probe's rounds lie minutes apart."""
    out = [(s, 1) for s in specs]
    for r in range(2, rounds + 1):
        out += [(s, r) for s, rep in zip(specs, repeatable, strict=True) if rep]
    return out


def _combine(a: Measurement, b: Measurement) -> Measurement:
    """Two rounds of one measurement as one: the value by the measurement's statistic over
    both rounds' samples, every round's own value kept in round_values."""
    rounds = [*a.context.get("round_values", [a.value]), b.value]
    if a.statistic == "median":
        samples = [*a.samples, *b.samples]
        value = median(samples)
        context = joined_context([a, b])
    elif a.statistic == "total_over_time":
        # Total work over total time: each round's n samples took n / value of the time.
        samples = [*a.samples, *b.samples]
        na, nb = len(a.samples), len(b.samples)
        value = (na + nb) / (na / a.value + nb / b.value)
        context = joined_context([a, b])
    else:  # "max" over sizes: the better round's peak, with its own per-size samples
        best = a if a.value >= b.value else b
        samples, value, context = best.samples, best.value, best.context
    return dataclasses.replace(a, value=value, samples=samples,
                               context={**context, "round_values": rounds,
                                        "rounds": len(rounds)})


# Context lists that hold one value per sample: they follow the samples when rounds join.
PER_SAMPLE = ("sm_clock_Hz",)


def joined_context(ms: Sequence[Measurement]) -> dict[str, Any]:
    """The first's context for the measurements' samples joined in order (rounds, or runs):
    each per-sample list joined where every one of them kept it, and left out where one did
    not (it would no longer line up with the samples)."""
    context = dict(ms[0].context)
    for k in PER_SAMPLE:
        lists = [x for m in ms if isinstance(x := m.context.get(k), list)
                 and len(x) == len(m.samples)]
        if len(lists) == len(ms):
            context[k] = [v for x in lists for v in x]
        else:
            context.pop(k, None)
    if "sm_clock_Hz" not in context:
        context.pop("sm_clock_read", None)
    return context


def start(result: ProbeResult) -> ProbeResult:
    """Round 1's result, each measurement carrying its value as the first of round_values."""
    ms = [dataclasses.replace(m, context={**m.context, "round_values": [m.value],
                                          "rounds": 1}) for m in result.measurements]
    return dataclasses.replace(result, measurements=ms)


def _notes(reason: str | None) -> list[str]:
    return [n for n in (reason or "").split("; ") if n]


def _same(a: str, b: str) -> bool:
    """Two notes that differ only in their figures ("~2.05 s" and "~2.31 s")."""
    return re.sub(r"[\d.,]+", "#", a) == re.sub(r"[\d.,]+", "#", b)


def _later_notes(notes: list[str], reason: str | None, round_no: int) -> list[str]:
    """A later round's notes that say something new, marked with their round."""
    return [f"round {round_no}: {n}" for n in _notes(reason)
            if not any(_same(n, old.split(": ", 1)[-1]) or _same(n, old) for old in notes)]


def merge(into: ProbeResult, more: ProbeResult, round_no: int,
          said: str | None = None) -> ProbeResult:
    """A later round folded into the probe's result so far. A round that failed or was
    skipped leaves the others' figures standing and says so in the reason, by `said` where
    given (a round a signal cut short is no failure of the probe)."""
    notes = _notes(into.reason)
    duration = (into.duration_s or 0.0) + (more.duration_s or 0.0)
    if more.status != "ok":
        notes.append(f"round {round_no} {said or more.status}: {more.reason}")
        return dataclasses.replace(into, reason="; ".join(notes), duration_s=duration)
    if into.status != "ok":
        first = start(more)
        notes = [f"round 1 to {round_no - 1} {into.status}: {into.reason}",
                 *_notes(more.reason)]
        return dataclasses.replace(first, reason="; ".join(notes), duration_s=duration)
    by_key: dict[tuple[str, str], int] = {}
    merged = list(into.measurements)
    for i, m in enumerate(merged):
        by_key[_key(m)] = i
    for m in more.measurements:
        found = by_key.get(_key(m))
        if found is None:  # measured in this round only (a size an earlier round skipped)
            merged.append(dataclasses.replace(m, context={**m.context, "round_values": [m.value],
                                                          "rounds": 1}))
        else:
            merged[found] = _combine(merged[found], m)
    notes = _held(notes, _notes(more.reason), round_no) + _later_notes(notes, more.reason,
                                                                          round_no)
    return dataclasses.replace(into, measurements=merged, reason="; ".join(notes) or None,
                               duration_s=duration)


_ROUND_MARK = re.compile(r"rounds? \d")


def _held(notes: list[str], more: list[str], round_no: int) -> list[str]:
    """The notes so far, each that held in every earlier round (it has no round mark) but not
    in this one marked with the rounds it held in: DALI skipped for time in round 1 and
    measured in round 2 was not skipped by the run."""
    rounds = {2: "round 1", 3: "rounds 1 and 2"}.get(round_no, f"rounds 1 to {round_no - 1}")
    return [n if _ROUND_MARK.match(n) or any(_same(n, m) for m in more) else f"{rounds}: {n}"
            for n in notes]


def _key(m: Measurement) -> tuple[str, str]:
    return m.metric, repr(sorted(m.key.items()))


def round_values(m: Measurement) -> list[float]:
    """The measurement's value in each round it was taken (just its value without rounds)."""
    values: Any = m.context.get("round_values")
    if isinstance(values, list) and values and all(isinstance(v, (int, float)) for v in values):
        return [float(v) for v in values]
    return [m.value]
