"""What every plot shares: a laid-out matplotlib figure, its PNG bytes, SI and integer ticks,
the legend beside the data, wrapped labels, the house style.

matplotlib is imported inside the functions (importing this module stays cheap) and only
through its object-oriented API, Figure + FigureCanvasAgg: no pyplot, no backend switch, no
rcParams change, so nothing global moves under another user of matplotlib in the process.
"""

from __future__ import annotations

import importlib.util
import io
import textwrap
from collections.abc import Callable
from typing import Any

from benchbench.core import units as fmt

DPI = 100
# Constrained layout's padding around the axes' labels and between panels, in inches: every
# label and legend inside the picture without a hand-tuned margin.
PAD_IN = 0.06
# Legend and category labels longer than this many characters wrap onto a second line.
WRAP = 24
Progress = Callable[[int, int], None]  # progress(done, total): figures drawn so far


def figure(width: float, height: float) -> Any:
    """An empty Figure of this size in inches, drawn by Agg, laid out by constrained layout:
    the axes shrink until their tick labels, axis labels, titles and (axes) legends fit."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.layout_engine import ConstrainedLayoutEngine

    fig = Figure(figsize=(width, height), dpi=DPI,
                 layout=ConstrainedLayoutEngine(w_pad=PAD_IN, h_pad=PAD_IN))
    FigureCanvasAgg(fig)
    return fig


def png(fig: Any) -> bytes:
    """The figure as PNG bytes, without the matplotlib version in its metadata."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return buf.getvalue()


def wrap(text: str, width: int = WRAP) -> str:
    """A label on lines of at most `width` characters (a longer word keeps its line)."""
    return "\n".join(textwrap.wrap(text, width, break_on_hyphens=False)) or text


def si_axis(axis: Any, unit: str) -> None:
    """Tick labels in SI units, and no minor ticks: on a log axis they are most of the drawing
    time and say nothing the grid does not."""
    from matplotlib.ticker import FuncFormatter, NullLocator

    axis.set_major_formatter(FuncFormatter(lambda v, _: fmt.si(v, unit) if v > 0 else "0"))
    axis.set_minor_locator(NullLocator())


def integer_axis(axis: Any) -> None:
    """Whole-number ticks only (runs, nodes, workers): never 0.5 of a run."""
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(nbins="auto", integer=True, min_n_ticks=1))


def legend_beside(ax: Any, size: float = 7.5, **kw: Any) -> Any:
    """The axes' legend to the right of its data, top-aligned, each entry wrapped: it never
    covers a point, and constrained layout keeps it inside the picture."""
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return None
    return ax.legend(handles, [wrap(lab) for lab in labels], fontsize=size, frameon=False,
                     loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, **kw)


def finish(fig: Any, ax: Any, title: str, xlabel: str | None = None,
           ylabel: str | None = None, legend_size: float = 7.5) -> Any:
    """The common ending of a one-axis figure: its labels, a left-aligned title, the legend
    beside the data, the house style; the Figure."""
    if xlabel:
        ax.set_xlabel(xlabel, fontsize=8.5)
    if ylabel:
        ax.set_ylabel(ylabel, fontsize=8.5 if len(ylabel) < 30 else 8)
    ax.set_title(title, loc="left", fontsize=10)
    legend_beside(ax, legend_size)
    style(ax)
    return fig


def saved(fig: Any) -> bytes | None:
    """The PNG of a figure that has data; None for none."""
    return None if fig is None else png(fig)


def room_right(fig: Any, ax: Any, texts: list[Any], pad_px: float = 4.0) -> None:
    """Widen the x axis until each text, anchored at a data x, ends inside the axes: measured
    on the laid-out figure, in the axis' own scale (linear or log), twice because the axes'
    width moves a little with the new ticks."""
    import math

    if not texts:
        return
    log = ax.get_xscale() == "log"
    to = (lambda v: math.log(v)) if log else (lambda v: v)
    back = (lambda v: math.exp(v)) if log else (lambda v: v)
    renderer = fig.canvas.get_renderer()
    for _ in range(2):
        fig.draw_without_rendering()
        lo, hi = ax.get_xlim()
        width = ax.bbox.width
        need = to(hi)
        for t in texts:
            free = width - pad_px - t.get_window_extent(renderer).width
            x = t.get_position()[0]
            if free > 0 and x > lo:
                need = max(need, to(lo) + (to(x) - to(lo)) * width / free)
        if need <= to(hi) + 1e-9 * abs(to(hi)):
            return
        ax.set_xlim(lo, back(need))


def room_above(fig: Any, ax: Any, texts: list[Any], data_top: float,
               pad_px: float = 4.0) -> None:
    """Raise a linear y axis' top until the data (up to data_top) ends below the tallest of
    these texts, which hang from the axes' top: they name lines without covering points.
    One layout pass: a new top moves the y tick labels, which changes the axes' width, not
    their height, and the texts' height is their own."""
    if not texts:
        return
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    lo, hi = ax.get_ylim()
    height = ax.bbox.height
    free = height - pad_px - max(t.get_window_extent(renderer).height for t in texts)
    if free <= 0 or data_top <= lo:
        return
    need = lo + (data_top - lo) * height / free
    if need > hi * (1 + 1e-9):
        ax.set_ylim(lo, need)


def style(ax: Any) -> None:
    """No top or right spine, a light major grid behind the data, small tick labels."""
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.grid(True, which="major", color="#e4e4e4", linewidth=0.8)
    ax.set_axisbelow(True)
    ax.tick_params(labelsize=8)


def draw_all(makers: dict[str, Any], names: tuple[str, ...] | list[str],
             problems: list[str] | None, progress: Progress | None = None) -> dict[str, bytes]:
    """Each figure's PNG by name, from makers that return a Figure (or its PNG bytes) or None.
    A figure that fails to draw is named in `problems` (when given) instead of costing the
    report; figures with no data are left out. progress(done, total) before each and at the
    end."""
    out: dict[str, bytes] = {}
    tell = progress or (lambda done, total: None)
    for i, name in enumerate(names):
        tell(i, len(names))
        try:
            drawn = makers[name]()
            if drawn is not None and not isinstance(drawn, bytes):
                drawn = png(drawn)
        except Exception as exc:  # noqa: BLE001 - one broken figure must not cost the report
            if problems is None:
                raise
            problems.append(f"{name}: not drawn, because {type(exc).__name__}: {exc}")
            continue
        if drawn is not None:
            out[name] = drawn
    tell(len(names), len(names))
    return out


def draw(makers: dict[str, Callable[[], Any]], problems: list[str] | None,
         progress: Progress | None = None) -> dict[str, bytes]:
    """Each figure's PNG by name, in the makers' order; none, said in `problems`, without
    matplotlib."""
    if importlib.util.find_spec("matplotlib") is None:
        if problems is not None:
            problems.append("no figures, because matplotlib is not installed")
        return {}
    return draw_all(makers, list(makers), problems, progress)
