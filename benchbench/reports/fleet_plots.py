"""Draw a Fleet's figures, as Figures and as PNG bytes: one per measurement and hardware
group, its nodes (or GPUs) sorted by their figure, the group's median and the band beyond
which a value is an outlier, the outliers marked and named. matplotlib only through plot_base.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchbench.compare.fleet import Entity, Fleet, Measure
from benchbench.reports.plot_base import draw, figure, finish, integer_axis, si_axis, wrap

POINT = "#0072B2"
OUTLIER = "#c0392b"
MEDIAN = "#333333"
BAND = "#e8e8e8"


def name(m: Measure) -> str:
    return f"{m.name} · {m.group}"


def entity_label(f: Fleet, e: Entity) -> str:
    node = f.nodes[e.node].label
    return f"{node} {e.device}" if e.within_node else node


def figures(f: Fleet) -> dict[str, Callable[[], Any]]:
    """Each measure's maker by name(): the laid-out Figure, or None without nodes."""
    return {name(m): (lambda m=m: measure_figure(f, m)) for m in f.measures}  # type: ignore[misc]


def make(f: Fleet, problems: list[str] | None = None) -> dict[str, bytes]:
    return draw(figures(f), problems)


def _note(ax: Any, text: str, at: tuple[float, float], right_half: bool, below: bool) -> None:
    """An outlier's name by its point, on the side towards the middle: never off the edge."""
    ax.annotate(text, at, textcoords="offset points", fontsize=6.5, color=OUTLIER,
                xytext=(-4 if right_half else 4, -9 if below else 4),
                ha="right" if right_half else "left")


def measure_figure(f: Fleet, m: Measure) -> Any:
    ranked = sorted(m.entities, key=lambda e: e.figure.value)
    if not ranked:
        return None
    unit = "images/s" if m.unit == "samples/s" else m.unit
    fig = figure(7.6, 2.8)
    ax = fig.add_subplot()
    xs = list(range(1, len(ranked) + 1))
    middle = (len(ranked) + 1) / 2
    ax.axhspan(m.center - m.bar, m.center + m.bar, color=BAND, zorder=0,
               label="within the group (not an outlier)")
    ax.axhline(m.median, color=MEDIAN, linewidth=1.2, label="group median", zorder=1)
    calm = [(x, e) for x, e in zip(xs, ranked, strict=True) if not e.score.outlier]
    odd = [(x, e) for x, e in zip(xs, ranked, strict=True) if e.score.outlier]
    ax.plot([x for x, _ in calm], [e.figure.value for _, e in calm], "o", markersize=3.5,
            color=POINT, label="node", zorder=2)
    if odd:
        ax.plot([x for x, _ in odd], [e.figure.value for _, e in odd], "o", markersize=5,
                color=OUTLIER, label="outlier", zorder=3)
        for x, e in odd:
            _note(ax, entity_label(f, e), (x, e.figure.value), x > middle, below=False)
    rank = {e.node: x for x, e in zip(xs, ranked, strict=True)}
    inside = [e for e in m.gpus if e.score.outlier and e.node in rank]
    if inside:
        ax.plot([rank[e.node] for e in inside], [e.figure.value for e in inside], "x",
                markersize=6, color=OUTLIER, label="GPU odd within its node", zorder=3)
        for e in inside:
            _note(ax, entity_label(f, e), (rank[e.node], e.figure.value),
                  rank[e.node] > middle, below=True)
    ax.set_xlim(0.3, len(ranked) + 0.7)
    integer_axis(ax.xaxis)
    ax.set_ylim(bottom=0)
    si_axis(ax.yaxis, unit)
    return finish(fig, ax, wrap(name(m), 90), xlabel="nodes, slowest first", ylabel=unit,
                  legend_size=6.5)
