"""The precision speedups of both training models on the report's first screen: what TF32,
mixed precision and fp8 bought on this machine, each beside the datasheet's ratio."""

from __future__ import annotations

from typing import Any

from benchbench.analysis import derive as analysis
from benchbench.analysis.advice import model_name
from benchbench.core import units as fmt
from benchbench.core.names import capitalised, precision_name
from benchbench.core.results import RunResult

TITLE = "Precision speedups"


def rows(run: RunResult) -> tuple[list[str], list[list[str]]]:
    """(header, a row per model): each pair's measured speedup and the datasheet's, '—'
    where either precision was not measured."""
    found = analysis.precision_speedups(run)
    if not found:
        return [], []
    pairs = [f"{n}/{d}" for n, d in analysis.SPEEDUP_PAIRS
             if any(s["ratio"] == f"{n}/{d}" for s in found)]
    by: dict[str, dict[str, dict[str, Any]]] = {}
    for s in found:
        by.setdefault(s["model"], {})[s["ratio"]] = s
    header = ["model", *[" ÷ ".join(precision_name(x) for x in p.split("/")) for p in pairs]]
    return header, [[capitalised(model_name(m).removeprefix("the ")),
                     *[_cell(got.get(p)) for p in pairs]]
                    for m, got in by.items()]


def _cell(s: dict[str, Any] | None) -> str:
    if s is None:
        return "—"
    sheet = f" (datasheet {s['expected']:.2f}×)" if s.get("expected") else ""
    return f"{s['measured']:.2f}×{sheet}"


def section(run: RunResult) -> list[str]:
    """Markdown: the table under the verdict, with its source line."""
    header, body = rows(run)
    if not body:
        return []
    return [f"**{TITLE}** (training throughput of one precision over another's; the "
            "datasheet's ratio is of the dense tensor-core peaks):", "",
            *fmt.table(header, body)]
