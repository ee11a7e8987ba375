"""Draw a comparison's figures, as Figures and as PNG bytes: the headline figures as grouped
bars relative to the baseline, and the all-reduce busbw curves of every side overlaid.

matplotlib only through plot_base (Figure + FigureCanvasAgg, imported inside its functions).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from benchbench.analysis import regression as reg
from benchbench.compare.align import headline, short_name
from benchbench.compare.comparison import Comparison
from benchbench.core import units as fmt
from benchbench.reports.plot_base import (
    Progress,
    draw,
    figure,
    finish,
    legend_beside,
    room_right,
    si_axis,
    style,
    wrap,
)

NAMES = ("headline", "allreduce_busbw")
ALT = {"headline": "Headline figures of each side relative to the baseline (1.0 = baseline; "
                   "longer is better)",
       "allreduce_busbw": "all_reduce bus bandwidth against message size, one line per side"}
# Colour-blind-safe (Okabe-Ito), the baseline in grey.
COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442")
BASE_COLOUR = "#9a9a9a"
REGRESSED = "#c0392b"


def _colour(comp: Comparison, label: str) -> str:
    others = [s.label for s in comp.sides if not s.baseline]
    return BASE_COLOUR if label == comp.baseline.label else COLOURS[
        others.index(label) % len(COLOURS)]


def figures(comp: Comparison) -> dict[str, Callable[[], Any]]:
    """Each figure's maker by name: the laid-out Figure, or None without its data."""
    return {"headline": lambda: headline_bars(comp), "allreduce_busbw": lambda: busbw(comp)}


def make(comp: Comparison, problems: list[str] | None = None,
         progress: Progress | None = None) -> dict[str, bytes]:
    """PNG bytes per figure this comparison has data for. A figure that fails to draw is named
    in `problems` instead of stopping the report (when `problems` is given)."""
    return draw(figures(comp), problems, progress)


def headline_bars(comp: Comparison) -> Any:
    """One group per headline figure, one bar per side: its ratio to the baseline (> 1 is
    better whichever way the metric points), labelled with the side's own value."""
    rows = headline(comp.rows)
    base = comp.baseline.label
    rows = [r for r in rows if base in r.cells and r.cells[base].value > 0]
    if not rows:
        return None
    labels = [s.label for s in comp.sides]
    n = len(labels)
    bar = 0.8 / n
    names = [wrap(short_name(r), 32) for r in rows]
    fig = figure(8.0, 1.2 + len(rows) * (0.2 * n + 0.16))
    ax = fig.add_subplot()
    top = 1.0
    values = []
    for i, lab in enumerate(labels):
        ys, xs, texts, edges = [], [], [], []
        for j, r in enumerate(rows):
            c = r.cells.get(lab)
            if c is None:
                continue
            ratio = 1.0 if lab == base else (c.decision.ratio if c.decision else None)
            if ratio is None:
                continue
            ys.append(j + (i - (n - 1) / 2) * bar)
            xs.append(ratio)
            texts.append(fmt.value(c.value, "images/s" if r.unit == "samples/s" else r.unit))
            bad = c.decision is not None and c.decision.outcome == reg.REGRESSED
            edges.append(REGRESSED if bad else "none")
        top = max([top] + xs)
        ax.barh(ys, xs, height=bar * 0.92, color=_colour(comp, lab), edgecolor=edges,
                linewidth=1.6, label=lab)
        # On white: a label that starts left of the baseline's line is not struck through.
        values += [ax.text(x, y, f" {t}", va="center", fontsize=6.5, color="#333",
                           bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.4})
                   for y, x, t in zip(ys, xs, texts, strict=True)]
    ax.axvline(1.0, color="#333", linewidth=0.8)
    ax.set_xlim(0, top * 1.05)
    ax.set_yticks(range(len(rows)), names, fontsize=7.5)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlabel(wrap(f"relative to {base} (1.0); longer is better, red edge: regressed",
                       90), fontsize=8)
    ax.set_title("Headline figures", loc="left", fontsize=10)
    legend_beside(ax, 7)
    style(ax)
    ax.grid(False, axis="y")
    room_right(fig, ax, values)
    return fig


def _series(comp: Comparison) -> dict[tuple[Any, ...], dict[str, list[tuple[int, float]]]]:
    """(the key without size_bytes) -> side label -> [(size, busbw)], sorted by size."""
    out: dict[tuple[Any, ...], dict[str, list[tuple[int, float]]]] = {}
    for r in comp.rows:
        if r.probe != "allreduce" or r.metric != "busbw" or "size_bytes" not in r.key:
            continue
        group = tuple((k, v) for k, v in r.key.items() if k != "size_bytes")
        for lab, c in r.cells.items():
            if c.value > 0:
                out.setdefault(group, {}).setdefault(lab, []).append(
                    (int(r.key["size_bytes"]), c.value))
    for per in out.values():
        for pts in per.values():
            pts.sort()
    return out


def busbw(comp: Comparison) -> Any:
    series = _series(comp)
    if not series:
        return None
    groups = list(series)
    varying = {k for k in {k for g in groups for k, _ in g}
               if len({dict(g).get(k) for g in groups}) > 1}
    fig = figure(7.6, 3.4)
    ax = fig.add_subplot()
    styles = ("-", "--", ":", "-.")
    sizes: set[int] = set()
    values: list[float] = []
    for gi, g in enumerate(groups):
        suffix = ", ".join(f"{k}={v}" for k, v in g if k in varying)
        for lab, pts in series[g].items():
            x, y = [p[0] for p in pts], [p[1] for p in pts]
            sizes.update(x)
            values += y
            ax.plot(x, y, marker="o", markersize=3, linewidth=1.5,
                    linestyle=styles[gi % len(styles)], color=_colour(comp, lab),
                    label=lab + (f" ({suffix})" if suffix else ""))
    ax.set_xscale("log", base=2)
    ticks = sorted(sizes)
    step = max(1, math.ceil(len(ticks) / 10))
    ax.set_xticks(ticks[::step], [fmt.iec(s) for s in ticks[::step]], fontsize=7.5)
    from matplotlib.ticker import NullLocator

    ax.xaxis.set_minor_locator(NullLocator())  # minor ticks on a log axis cost time, say nothing
    if max(values) / min(values) >= 10:
        ax.set_yscale("log")
    si_axis(ax.yaxis, "B/s")
    return finish(fig, ax, "all_reduce busbw, median per size", xlabel="message size",
                  ylabel="busbw (1 GB/s = 10⁹ B/s)", legend_size=7)

