"""Draw the telemetry timeline: CPU, disk and each GPU's series against the run's time, with a
strip above that names each probe over the span it ran.

It reads run.extra["telemetry"] in the shape benchbench.machine.telemetry stores: one interval_s for
the whole run at the top, and per probe its own times, which restart at zero for every probe,
and t0_monotonic, where those times start on the run's one clock. Probes that carry it are
drawn where they ran, the gaps between them (worker start-up) included; without it (an older
run) they are laid end to end, one interval apart.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

from benchbench.core import names
from benchbench.reports.plot_base import figure, legend_beside, saved, si_axis, style

# The sampler's interval, for a stored telemetry dict that lacks one.
DEFAULT_INTERVAL_S = 0.1
LABEL_PT = 7.0  # the probe names in the strip
FIG_WIDTH_IN = 8.0
# What the panels leave of the figure's width for the time axis, at least (the y labels on
# the left, the legend on the right): the probe strip's rows are planned against it.
AXIS_WIDTH_IN = FIG_WIDTH_IN - 2.4
ROW_IN = 0.17  # one row of the probe strip


def _per_gpu(field: str, d: dict[str, Any]) -> dict[str, list[float]]:
    """One line per GPU: its `field` series."""
    return {f"GPU {i}": _floats(g.get(field)) for i, g in (d.get("gpus") or {}).items()}


def _floats(xs: Any) -> list[float]:
    return [float(x) if isinstance(x, (int, float)) else math.nan for x in xs or []]


def _timeline(probes: dict[str, Any], gap: float
              ) -> list[tuple[str, list[float], dict[str, Any]]]:
    """(probe, its x in seconds since the first probe began, its series), in the order they
    ran. On the run's clock where every probe has t0_monotonic; else times already on one
    clock across probes are kept, and times that restart per probe are laid end to end."""
    entries = [(name, _floats(data.get("t")), data) for name, data in probes.items()]
    entries = [(name, t, data) for name, t, data in entries if t]
    starts = [data.get("t0_monotonic") for _, _, data in entries]
    if entries and all(isinstance(s, (int, float)) for s in starts):
        first = min(starts)
        return sorted(((name, [s - first + v for v in t], data)
                       for (name, t, data), s in zip(entries, starts, strict=True)),
                      key=lambda e: e[1][0])
    absolute = all(b[1][0] >= a[1][-1] for a, b in zip(entries, entries[1:], strict=False))
    out, offset = [], 0.0
    for name, t, data in entries:
        x = t if absolute else [offset + v - t[0] for v in t]
        offset = x[-1] + gap
        out.append((name, x, data))
    return out


def _panels(line: list[tuple[str, list[float], dict[str, Any]]]
            ) -> list[tuple[str, str, Callable[[dict[str, Any]], dict[str, list[float]]]]]:
    """(title, unit, the series of one probe) for each series some probe has a reading of."""
    panels: list[tuple[str, str, Callable[[dict[str, Any]], dict[str, list[float]]]]] = [
        ("CPU utilisation", "%", lambda d: {"all cores": _floats(d.get("cpu_util"))}),
        ("disk reads", "B/s", lambda d: {"read": _floats(d.get("disk_read_Bps"))}),
    ]
    gpu_series = [("GPU utilisation", "%", "util"), ("GPU SM clock", "Hz", "sm_clock_Hz"),
                  ("GPU power", "W", "power_W"), ("GPU temperature", "°C", "temp_degC")]
    for title, unit, field in gpu_series:
        panels.append((title, unit, functools.partial(_per_gpu, field)))
    return [(title, unit, get) for title, unit, get in panels
            if any(any(math.isfinite(v) for v in s) for _, _, d in line
                   for s in get(d).values())]


def _label(entry: str) -> str:
    """A probe's human name, and its round where the entry is a later round's
    ("memory_bandwidth (round 2)")."""
    probe, sep, rest = entry.partition(" (round ")
    return names.probe_name(probe).removeprefix("the ") + sep + rest


def _rows(line: list[tuple[str, list[float], dict[str, Any]]], fig: Any, width_s: float
          ) -> list[tuple[int, float, str]]:
    """Each probe's (row in the strip, where its name is anchored, how): the first row whose
    last span and name end a little before this one begins. A name is measured in its font and read
    against the narrowest time axis; one that would pass the axis' end ends there."""
    from matplotlib.font_manager import FontProperties

    renderer = fig.canvas.get_renderer()
    font = FontProperties(size=LABEL_PT)
    s_per_px = width_s / (AXIS_WIDTH_IN * fig.dpi)
    ends: list[float] = []
    out = []
    for name, x, _ in line:
        w, _, _ = renderer.get_text_width_height_descent(_label(name), font, ismath=False)
        w_s = (w + 6) * s_per_px
        begin, at, how = (x[0], x[0], "left") if x[0] + w_s <= width_s else (
            width_s - w_s, width_s, "right")
        # A gap, so that two probes in one row read as two bars, not one.
        row = next((i for i, e in enumerate(ends) if e + 8 * s_per_px <= min(begin, x[0])),
                   len(ends))
        if row == len(ends):
            ends.append(0.0)
        ends[row] = max(x[-1], begin + w_s)
        out.append((row, at, how))
    return out


def telemetry(tel: dict[str, Any] | None) -> bytes | None:
    return saved(telemetry_figure(tel))


def telemetry_figure(tel: dict[str, Any] | None) -> Any:
    """One panel per series (CPU utilisation, disk reads, then per-GPU util, SM clock, power,
    temperature) against time, under a strip that names each probe over its span."""
    # Every round: the first round's series under "probes", the later ones under "rounds".
    probes = {**((tel or {}).get("probes") or {}), **((tel or {}).get("rounds") or {})}
    # interval_s is stored once, at the top: the probes' entries do not carry it.
    line = _timeline(probes, float((tel or {}).get("interval_s") or DEFAULT_INTERVAL_S))
    drawn = _panels(line) if line else []
    if not drawn:
        return None
    width_s = max(x[-1] for _, x, _ in line)
    fig = figure(FIG_WIDTH_IN, 1.0)
    rows = _rows(line, fig, width_s)  # the strip's height follows from its rows
    strip = ROW_IN * (max(r for r, _, _ in rows) + 1) + 0.1
    fig.set_size_inches(FIG_WIDTH_IN, 0.6 + strip + 1.25 * len(drawn))
    axes = fig.subplots(len(drawn) + 1, 1, sharex=True, squeeze=False,
                        gridspec_kw={"height_ratios": [strip] + [1.25] * len(drawn)})[:, 0]
    _strip(axes[0], line, rows)
    colours: dict[str, str] = {}  # one colour per GPU in every panel
    for ax, (title, unit, get) in zip(axes[1:], drawn, strict=True):
        labelled: set[str] = set()
        for _, x, data in line:
            for name, ys in get(data).items():
                if unit == "%":  # utilisation is stored as a ratio from 0 to 1
                    ys = [v * 100 for v in ys]
                n = min(len(x), len(ys))
                (ln,) = ax.plot(x[:n], ys[:n], linewidth=0.9, color=colours.get(name),
                                label=None if name in labelled else name)
                colours.setdefault(name, ln.get_color())
                labelled.add(name)
        for _, x, _ in line:
            ax.axvline(x[0], color="#bbb", linewidth=0.6, linestyle=":")
        if unit == "%":
            ax.set_ylim(0, 105)
        elif unit in ("B/s", "Hz", "W"):
            si_axis(ax.yaxis, unit)
        ax.set_ylabel(f"{title}\n({unit})", fontsize=7.5)
        style(ax)
    # One legend: the colours are the same in every panel.
    many = next((ax for ax in axes[1:] if len(ax.get_legend_handles_labels()[1]) > 1), None)
    if many is not None:
        legend_beside(many, 6.5, ncol=1 + (len(many.get_legend_handles_labels()[1]) - 1) // 6)
    axes[0].set_xlim(0, width_s)
    fig.align_ylabels(axes[1:])
    axes[-1].set_xlabel("time since the first probe began (s)", fontsize=8.5)
    return fig


def _strip(ax: Any, line: list[tuple[str, list[float], dict[str, Any]]],
           rows: list[tuple[int, float, str]]) -> None:
    """Each probe's span as a bar in its row, its name under it (at its start, or ending at
    the axis' end)."""
    for (name, x, _), (row, at, how) in zip(line, rows, strict=True):
        ax.plot([x[0], x[-1]], [row, row], color="#7f9fbf", linewidth=3,
                solid_capstyle="butt")
        ax.text(at, row + 0.12, _label(name), fontsize=LABEL_PT, va="top", ha=how,
                color="#333")
    ax.set_ylim(max(r for r, _, _ in rows) + 1.05, -0.15)
    ax.set_yticks([])
    for spine in ax.spines.values():
        spine.set_visible(False)
    ax.tick_params(axis="x", length=0)
    ax.set_title("Telemetry by probe", loc="left", fontsize=10)
