"""What the terminal ends with: the verdict in a few lines of words, then where the report is;
after an interruption, first what the signal left undone.

`run` and `report` print it on stdout. It reads the one computed Verdict and computes nothing
new; the human names come from core/names.py and the figures are formatted as report.md
formats them, so the terminal and the report say the same thing.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from benchbench.analysis.verdict_types import Verdict, WorkloadVerdict
from benchbench.core import units as fmt
from benchbench.core.interruption import Interruption, banner
from benchbench.core.names import (
    in_words,
    listed,
    precision_name,
    probe_name,
    resource_name,
)

MAX_LINES = 5  # the verdict's lines before the report's path: read at a glance


def lines(verdict: Verdict) -> list[str]:
    """At most MAX_LINES lines: what limits training and at what rate, the next limit, the
    one piece of advice, and what was not measured; or, without a verdict, why not."""
    v = verdict.main
    out = _limit(v) if v.limiting_resource else _no_verdict(v)
    return out[:MAX_LINES]


def report_line(written: list[Path], results: Path | None = None) -> str:
    """The one path a person opens, report.html, and what lies beside it, by kind."""
    html = next((p for p in written if p.name == "report.html"), None)
    main = html or next((p for p in written if p.name == "report.md"), None)
    if main is None:
        return ""
    here = main.parent
    beside = []
    if results is not None and results.parent.resolve() == here.resolve():
        beside.append(results.name)
    beside += [p.name for p in written if p != main and p.name == "report.md"]
    if any(p.suffix == ".csv" for p in written):
        beside.append("CSV")
    if any(p.suffix == ".png" for p in written):
        beside.append("plots")
    tail = f" ({listed(beside)} beside it)" if beside else ""
    return f"report: {main}{tail}"


def show(text: str, console: Console | None = None) -> None:
    """Print the summary on stdout: on a terminal each line wrapped between words at its
    width, so that a long advice is read whole; into a pipe or a file, one line each."""
    out = console or Console(highlight=False)
    out.print(text, markup=False, emoji=False, highlight=False, soft_wrap=not out.is_terminal)


def summary(verdict: Verdict, written: list[Path], results: Path | None = None,
            interrupted: Interruption | None = None) -> str:
    """The verdict's lines and the report's path line, as the terminal prints them; a run a
    signal stopped opens with what it left undone."""
    path = report_line(written, results)
    first = [banner(interrupted)] if interrupted is not None else []
    return "\n".join([*first, *lines(verdict), *([path] if path else [])])


def _limit(v: WorkloadVerdict) -> list[str]:
    limit = v.limiting_resource or ""
    cap = v.capacity(limit)
    at = f": {_rate(cap, v)} of {probe_name(v.workload)}" if cap is not None else ""
    prec = f" ({precision_name(v.precision)})" if v.precision else ""
    au = v.predicted_accelerator_utilisation
    busy = (f"; predicted accelerator utilisation {fmt.percent(au)}"
            if au is not None and au < 0.995 and not v.on_cpu else "")
    out = [f"Training here is limited by {resource_name(limit)}{at}{prec}{busy}."]
    unknown = _unknown(v)
    if v.next_limit:
        nxt, value = v.next_limit
        if cap:
            ratio = value / cap
            head = (f"{ratio:.2f}× the current limit" if ratio < 1.1 else
                    f"{ratio:.1f}× the current limit" if ratio < 10 else
                    f"{ratio:,.0f}× the current limit")
            if v.close_call:
                head += ": a close call, within their measured noise"
            floor = v.floor_of(nxt)
            out.append(f"Next limit: {resource_name(nxt)} at "
                       + (f"least {_rate(value, v)} ({head}; {floor})." if floor else
                          f"{_rate(value, v)} ({head})."))
        else:
            out.append(f"Next limit: {resource_name(nxt)} at {_rate(value, v)}.")
    elif unknown:
        out.append(f"Next limit: unknown, because {_names(unknown)} "
                   f"{'was' if len(unknown) == 1 else 'were'} not measured.")
        unknown = []
    advice = _advice(v)
    if advice:
        out.append(f"Advice: {advice}")
    if unknown:
        out.append(f"Not measured, so not judged: {_names(unknown)} (the report says why).")
    return out


def _no_verdict(v: WorkloadVerdict) -> list[str]:
    unknown = _unknown(v)
    compute = [(r, why) for r, why in unknown if r.endswith("_compute")]
    first = (compute or unknown or [("", "no capacity was measured")])[0]
    reason = (f"{resource_name(first[0])} was not measured ({first[1]})" if first[0]
              else first[1])
    out = [_one_line(f"No verdict on what limits {probe_name(v.workload)}: {reason}.", 220)]
    measured = [f"{resource_name(r)} {_rate(c, v)}" for r, c in v.capacities.items()
                if c is not None]
    others = [u for u in unknown if u != first]
    parts = ([f"Measured: {', '.join(measured)}"] if measured else []) + (
        [f"not measured: {_names(others)}"] if others else [])
    if parts:
        text = "; ".join(parts)
        out.append(text[0].upper() + text[1:] + ".")
    advice = _advice(v)
    if advice:
        out.append(f"Advice: {advice}")
    return out


def _rate(value: float | None, v: WorkloadVerdict) -> str:
    return f"{fmt.figure(value or 0)} {v.unit}"


def _unknown(v: WorkloadVerdict) -> list[tuple[str, str]]:
    """(resource id, why) for each capacity the verdict could not measure."""
    out = []
    for item in v.unknown:
        resource, _, why = item.partition(": ")
        out.append((resource, in_words(why)))
    return out


def _names(items: list[tuple[str, str]]) -> str:
    return listed([resource_name(r) for r, _ in items])


def _advice(v: WorkloadVerdict) -> str:
    """The verdict's first advice that the lines above do not already say, whole: show()
    wraps it to the terminal. The next limit has its own line: advice that only restates it
    keeps its lead clause ("Compute is the bottleneck, as it should be")."""
    fresh = [a for a in v.advice if "next limit" not in a.lower()]
    if fresh:
        return " ".join(in_words(fresh[0]).split())
    if v.advice:
        return " ".join(in_words(v.advice[0].split(":")[0].rstrip(".") + ".").split())
    return ""


def _one_line(text: str, limit: int) -> str:
    """The text on one line, cut at its last sentence or clause boundary within `limit`."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit]
    for sep in (". ", "; ", ", ", ": "):
        i = cut.rfind(sep)
        if i >= limit // 2:
            return cut[:i + 1] if sep == ". " else cut[:i] + "…"
    return cut[:cut.rfind(" ")] + "…"
