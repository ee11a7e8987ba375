"""Draw a Fleet's figures, as Figures and as PNG bytes: one per measurement and hardware
group, its nodes (or GPUs) sorted by their figure, the group's median and the band beyond
which a value is an outlier, the outliers marked and named; with the nodes' earlier runs, one
more per measurement of each node's change since its own. matplotlib only through plot_base.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchbench.compare.fleet import Entity, Fleet, Measure
from benchbench.reports.plot_base import (
    Progress,
    draw,
    figure,
    finish,
    integer_axis,
    si_axis,
    wrap,
)

POINT = "#0072B2"
OUTLIER = "#c0392b"
MEDIAN = "#333333"
BAND = "#e8e8e8"


def name(m: Measure) -> str:
    return f"{m.name} · {m.group}"


def change_name(m: Measure) -> str:
    return f"{m.name} · {m.group} · change since the earlier runs"


def entity_label(f: Fleet, e: Entity) -> str:
    node = f.nodes[e.node].label
    return f"{node} {e.device}" if e.within_node else node


def figures(f: Fleet) -> dict[str, Callable[[], Any]]:
    """Each measure's maker by name() (and, with earlier runs, change_name()): the laid-out
    Figure, or None without nodes."""
    out: dict[str, Callable[[], Any]] = {
        name(m): (lambda m=m: measure_figure(f, m)) for m in f.measures}  # type: ignore[misc]
    for m in f.measures:
        if m.changes:
            out[change_name(m)] = lambda m=m: change_figure(f, m)  # type: ignore[misc]
    return out


def make(f: Fleet, problems: list[str] | None = None,
         progress: Progress | None = None) -> dict[str, bytes]:
    return draw(figures(f), problems, progress)


def _note(ax: Any, text: str, at: tuple[float, float], right_half: bool, below: bool,
          color: str = OUTLIER) -> None:
    """A point's name by it, on the side towards the middle: never off the edge."""
    ax.annotate(text, at, textcoords="offset points", fontsize=6.5, color=color,
                xytext=(-4 if right_half else 4, -9 if below else 4),
                ha="right" if right_half else "left")


def _ranked(f: Fleet, title: str, points: list[tuple[Entity, float]], center: float,
            bar: float, median: float, gpus: list[tuple[Entity, float]],
            from_zero: bool) -> Any:
    """The nodes sorted by their value, the band within `bar` of `center`, the median, the
    outliers marked and named (and each GPU odd within its node, at its node's place); the
    first node named too where it is no outlier, so the slowest has a name on the plot as it
    has in the table."""
    ranked = sorted(points, key=lambda p: p[1])
    fig = figure(7.6, 2.8)
    ax = fig.add_subplot()
    xs = list(range(1, len(ranked) + 1))
    middle = (len(ranked) + 1) / 2
    ax.axhspan(center - bar, center + bar, color=BAND, zorder=0,
               label="within the group (not an outlier)")
    ax.axhline(median, color=MEDIAN, linewidth=1.2, label="group median", zorder=1)
    calm = [(x, y) for x, (e, y) in zip(xs, ranked, strict=True) if not e.score.outlier]
    odd = [(x, e, y) for x, (e, y) in zip(xs, ranked, strict=True) if e.score.outlier]
    ax.plot([x for x, _ in calm], [y for _, y in calm], "o", markersize=3.5,
            color=POINT, label="node", zorder=2)
    if odd:
        ax.plot([x for x, _, _ in odd], [y for _, _, y in odd], "o", markersize=5,
                color=OUTLIER, label="outlier", zorder=3)
        for x, e, y in odd:
            _note(ax, entity_label(f, e), (x, y), x > middle, below=False)
    if calm and calm[0][0] == 1:
        _note(ax, entity_label(f, ranked[0][0]), calm[0], False, below=True, color=MEDIAN)
    rank = {e.node: x for x, (e, _) in zip(xs, ranked, strict=True)}
    inside = [(e, y) for e, y in gpus if e.score.outlier and e.node in rank]
    if inside:
        ax.plot([rank[e.node] for e, _ in inside], [y for _, y in inside], "x",
                markersize=6, color=OUTLIER, label="GPU odd within its node", zorder=3)
        for e, y in inside:
            _note(ax, entity_label(f, e), (rank[e.node], y), rank[e.node] > middle,
                  below=True)
    ax.set_xlim(0.3, len(ranked) + 0.7)
    integer_axis(ax.xaxis)
    if from_zero:
        ax.set_ylim(bottom=0)
    return fig, ax, wrap(title, 90)


def measure_figure(f: Fleet, m: Measure) -> Any:
    if not m.entities:
        return None
    unit = "images/s" if m.unit == "samples/s" else m.unit
    fig, ax, title = _ranked(f, name(m), [(e, e.figure.value) for e in m.entities], m.center,
                             m.bar, m.median, [(e, e.figure.value) for e in m.gpus],
                             from_zero=True)
    si_axis(ax.yaxis, unit)
    return finish(fig, ax, title, xlabel="nodes, slowest first", ylabel=unit, legend_size=6.5)


def change_figure(f: Fleet, m: Measure) -> Any:
    """Each node's change since its earlier run, in percent (now / then − 1), sorted."""
    if m.since is None or not m.changes:
        return None
    g = m.since
    fig, ax, title = _ranked(f, change_name(m), [(e, (e.score.value - 1) * 100)
                                                 for e in m.changes],
                             (g.center - 1) * 100, g.bar * 100, (g.median - 1) * 100, [],
                             from_zero=False)
    ax.axhline(0, color=MEDIAN, linewidth=0.6, linestyle=":", zorder=1)
    return finish(fig, ax, title, xlabel="nodes, sorted by their change",
                  ylabel="change since the earlier run (%)", legend_size=6.5)
