"""Render a comparison as one self-contained compare.html: the outcome first, then compare.md's
sections with the figures inline as base64 PNG (reports/page.py builds the page)."""

from __future__ import annotations

from benchbench.compare.comparison import Comparison
from benchbench.core.names import counted
from benchbench.reports import compare_conditions, page
from benchbench.reports.compare_plots import ALT
from benchbench.reports.html import esc

# compare.md's section a figure belongs under.
FIGURE_SECTIONS = {"headline": "Headline figures", "allreduce_busbw": "Measurements"}


def _outcome(comp: Comparison) -> str:
    n = len(comp.outcomes("regressed"))
    sides = " vs ".join(esc(s.label) for s in comp.sides)
    hw = [f"<strong>Different hardware</strong>: {esc(lab)} is compared with the baseline, but "
          "no regression is called on it." for lab in comp.different_hardware]
    told = compare_conditions.warning(comp)
    unlike = [f"<strong>Not like for like</strong>: {esc(told)} (see Conditions)."] \
        if told else []
    return page.outcome(
        bool(n), f"benchbench compare · {sides} · baseline <strong>"
                 f"{esc(comp.baseline.label)}</strong>",
        counted(n, "regression") if n else "No regression",
        [f"exit {3 if n else 0}: significant at α = {esc(f'{comp.alpha:g}')} and beyond "
         f"{esc(f'{comp.threshold_pct:g}')}%.", *hw, *unlike])


def render(comp: Comparison, markdown_text: str, plots: dict[str, bytes],
           notes: list[str] | None = None) -> str:
    figures = [page.Figure(name, png, ALT.get(name, name), FIGURE_SECTIONS.get(name))
               for name, png in plots.items()]
    return page.render("benchbench compare: " + " vs ".join(s.label for s in comp.sides),
                       _outcome(comp), markdown_text, figures, notes)
