"""Draw a History's figures, as Figures and as PNG bytes: one per series, its runs as points
(each round faint behind), the level of each segment, the drift where the gate reads the latest
level from one, the change points and the environment's changes.

The first device's series (cpu or cuda:0) are all drawn; another GPU's only where it changed at
other runs than the first, so an 8-GPU machine's history is not 60 figures of the same lines.
matplotlib only through plot_base.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchbench.compare.history_series import History, Series
from benchbench.compare.series import without_device
from benchbench.reports.history_text import pct
from benchbench.reports.plot_base import (
    Progress,
    draw,
    figure,
    finish,
    integer_axis,
    room_above,
    si_axis,
)

POINT = "#0072B2"
ROUND = "#b8cfe0"
LEVEL = "#333333"
SHIFT = "#c0392b"
ENV = "#9a9a9a"
DRIFT = "#d35400"  # a drift the gate reads that did not regress (within the threshold, or not held)
MAX_ENV_LABELS = 12  # more changes than this are drawn as lines without their names


# the y axis spans at least this many thresholds about the median run, so that a step of the
# threshold fills a fair share of it and noise far below it stays flat
SPAN_THRESHOLDS = 4
FROM_ZERO_BELOW = 0.5  # the axis starts at 0 where the least value is under this share of the most


def _y_range(ax: Any, values: list[float], threshold_pct: float) -> bool:
    """The y axis about the data, not from 0, so that a step of a few percent shows: at least
    SPAN_THRESHOLDS thresholds about the median value, and every value inside it; from 0 where
    the values span more than half the most (a step that large shows from 0). True where the
    axis is cut (its label says so)."""
    positive = sorted(v for v in values if v > 0)
    if not positive or positive[0] < FROM_ZERO_BELOW * positive[-1]:
        ax.set_ylim(bottom=0)
        return False
    mid = positive[len(positive) // 2]
    half = SPAN_THRESHOLDS * threshold_pct / 200 * mid
    lo, hi = min(positive[0], mid - half), max(positive[-1], mid + half)
    pad = 0.06 * (hi - lo)
    if lo - pad <= 0:
        ax.set_ylim(bottom=0)
        return False
    ax.set_ylim(lo - pad, hi + pad)
    return True


def drawn(h: History) -> list[Series]:
    """The first device's series, and another device's where its change points lie at other
    runs (or go the other way) than the first device's: eight GPUs that one driver slowed
    alike are one figure."""
    def steps(s: Series) -> set[tuple[int, bool]]:
        return {(s.run_at(x.at), x.change_pct < 0) for x in s.shifts}

    first = {without_device(s.key): steps(s) for s in h.series if s.first_device}
    return [s for s in h.series if s.first_device
            or (s.shifts and steps(s) != first.get(without_device(s.key)))]


def name(s: Series) -> str:
    return f"series {s.name}"


def figures(h: History) -> dict[str, Callable[[], Any]]:
    """Each drawn series' maker by name(): the laid-out Figure, or None without runs."""
    return {name(s): (lambda s=s: series_figure(h, s)) for s in drawn(h)}  # type: ignore[misc]


def make(h: History, problems: list[str] | None = None,
         progress: Progress | None = None) -> dict[str, bytes]:
    """PNG bytes per drawn series (by name()); a figure that fails is said in `problems`."""
    return draw(figures(h), problems, progress)


def series_figure(h: History, s: Series) -> Any:
    if not s.runs:
        return None
    unit = "images/s" if s.unit == "samples/s" else s.unit
    fig = figure(7.6, 2.8)
    ax = fig.add_subplot()
    rx = [n for n, p in zip(s.runs, s.points, strict=True) for _ in p]
    ry = [v for p in s.points for v in p]
    ax.scatter(rx, ry, s=5, color=ROUND, label="each round", zorder=2)
    ax.plot(s.runs, s.values, "o", markersize=3, color=POINT, label="each run", zorder=3)
    for i, seg in enumerate(s.segments):
        ax.hlines(seg.level, s.run_at(seg.start) - 0.5, s.run_at(seg.stop - 1) + 0.5,
                  color=LEVEL, linewidth=1.6, label="segment level" if i == 0 else None,
                  zorder=4)
    line = s.gate.drift if s.gate else None
    if line is not None:  # the drift the gate reads its latest level from
        ax.plot([s.run_at(line.runs[0]), s.run_at(line.runs[1])], [line.start, line.end], "--",
                color=SHIFT if s.gate and s.gate.regressed else DRIFT, linewidth=1.4,
                label="drift (the gate's latest level)", zorder=4)
    odd = [(s.run_at(o.at), s.values[o.at]) for o in s.outliers]
    if odd:
        ax.plot([r for r, _ in odd], [v for _, v in odd], "x", markersize=6, color=SHIFT,
                label="outlier run", zorder=5)
    names = []
    for i, x in enumerate(s.shifts):
        ax.axvline(s.run_at(x.at) - 0.5, color=SHIFT, linestyle="--", linewidth=1.2,
                   label="change point" if i == 0 else None, zorder=1)
        if len(s.shifts) <= MAX_ENV_LABELS:  # its change, to the right of its line
            names.append(ax.text(s.run_at(x.at) - 0.5, 1.0, " " + pct(x.change_pct),
                                 rotation=90, va="top", ha="left", fontsize=6, color=SHIFT,
                                 transform=ax.get_xaxis_transform()))
    at: dict[int, list[str]] = {}
    for c in h.changes:
        at.setdefault(c.runs[1], []).append(c.field)
    for i, (run, fields) in enumerate(sorted(at.items())):
        ax.axvline(run - 0.5, color=ENV, linestyle=":", linewidth=0.9,
                   label="environment changed" if i == 0 else None, zorder=0)
        if len(at) <= MAX_ENV_LABELS:
            names.append(ax.text(run - 0.5, 1.0, ", ".join(dict.fromkeys(fields)) + " ",
                                 rotation=90, va="top", ha="right", fontsize=6, color="#666",
                                 transform=ax.get_xaxis_transform()))
    ax.set_xlim(0.5, len(h.runs) + 0.5)
    integer_axis(ax.xaxis)
    cut = _y_range(ax, ry + list(s.values) + ([line.start, line.end] if line else []),
                   h.threshold_pct)
    if s.unit == "ratio":
        # the machine's index (compare/history.composite), of its median run; a GPU against
        # the other GPUs (against_the_others), of their median
        from matplotlib.ticker import PercentFormatter

        # its decimals from the axis' span: a cut axis ticks every 2.5%, not "98%, 98%"
        ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=None))
        unit = ("% of the median run" if s.probe == "all" else
                "% of the other GPUs' median")
    else:
        si_axis(ax.yaxis, unit)
    finish(fig, ax, s.name, xlabel="run (oldest first)",
           ylabel=unit + (", not from 0" if cut else ""), legend_size=6.5)
    room_above(fig, ax, names, max(ry + list(s.values)))  # the changes' names over no point
    return fig
