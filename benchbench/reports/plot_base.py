"""What every plot shares: a matplotlib figure, its PNG bytes, SI tick labels, the house style.

matplotlib is imported inside the functions (importing this module stays cheap) and only
through its object-oriented API, Figure + FigureCanvasAgg: no pyplot, no backend switch, no
rcParams change, so nothing global moves under another user of matplotlib in the process.
"""

from __future__ import annotations

import importlib.util
import io
from collections.abc import Callable
from typing import Any

from benchbench.core import units as fmt

DPI = 100


def figure(width: float, height: float) -> Any:
    """An empty Figure of this size in inches, drawn by Agg."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


def png(fig: Any) -> bytes:
    """The figure as PNG bytes, without the matplotlib version in its metadata."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return buf.getvalue()


def si_axis(axis: Any, unit: str) -> None:
    """Tick labels in SI units, and no minor ticks: on a log axis they are most of the drawing
    time and say nothing the grid does not."""
    from matplotlib.ticker import FuncFormatter, NullLocator

    axis.set_major_formatter(FuncFormatter(lambda v, _: fmt.si(v, unit) if v > 0 else "0"))
    axis.set_minor_locator(NullLocator())


def finish(fig: Any, ax: Any, title: str, xlabel: str | None = None,
           ylabel: str | None = None, legend_size: float = 7.5, legend_loc: str = "upper left",
           legend_columns: int = 1) -> bytes:
    """The common ending of a one-axis figure: its labels, a left-aligned title, the legend
    (in the upper left unless told), the house style; the PNG bytes."""
    if xlabel:
        ax.set_xlabel(xlabel, fontsize=8.5)
    if ylabel:
        ax.set_ylabel(ylabel, fontsize=8.5 if len(ylabel) < 30 else 8)
    ax.set_title(title, loc="left", fontsize=10)
    ax.legend(fontsize=legend_size, frameon=False, loc=legend_loc, ncol=legend_columns)
    style(ax)
    return png(fig)


def style(ax: Any) -> None:
    """No top or right spine, a light major grid behind the data, small tick labels."""
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.grid(True, which="major", color="#e4e4e4", linewidth=0.8)
    ax.set_axisbelow(True)
    ax.tick_params(labelsize=8)


def draw_all(makers: dict[str, Any], names: tuple[str, ...] | list[str],
             problems: list[str] | None) -> dict[str, bytes]:
    """Each figure's PNG by name. A figure that fails to draw is named in `problems` (when
    given) instead of costing the report; figures with no data are left out."""
    out: dict[str, bytes] = {}
    for name in names:
        try:
            drawn = makers[name]()
        except Exception as exc:  # noqa: BLE001 - one broken figure must not cost the report
            if problems is None:
                raise
            problems.append(f"{name}: not drawn, because {type(exc).__name__}: {exc}")
            continue
        if drawn is not None:
            out[name] = drawn
    return out


def draw(makers: dict[str, Callable[[], bytes | None]],
         problems: list[str] | None) -> dict[str, bytes]:
    """Each figure's PNG by name, in the makers' order; none, said in `problems`, without
    matplotlib."""
    if importlib.util.find_spec("matplotlib") is None:
        if problems is not None:
            problems.append("no figures, because matplotlib is not installed")
        return {}
    return draw_all(makers, list(makers), problems)
