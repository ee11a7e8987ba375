"""Draw the telemetry timeline: CPU, disk and each GPU's series against time, probe by probe.

It reads run.extra["telemetry"] in the shape benchbench.machine.telemetry stores: one interval_s for
the whole run at the top, and per probe its own times, which restart at zero for every probe.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

from benchbench.reports.plot_base import figure, png, si_axis, style

# The sampler's interval, for a stored telemetry dict that lacks one.
DEFAULT_INTERVAL_S = 0.1


def _per_gpu(field: str, d: dict[str, Any]) -> dict[str, list[float]]:
    """One line per GPU: its `field` series."""
    return {f"GPU {i}": _floats(g.get(field)) for i, g in (d.get("gpus") or {}).items()}


def _floats(xs: Any) -> list[float]:
    return [float(x) if isinstance(x, (int, float)) else math.nan for x in xs or []]


def _timeline(probes: dict[str, Any], gap: float
              ) -> list[tuple[str, list[float], dict[str, Any]]]:
    """(probe, its x in seconds, its series) in run order. Times already on one clock across
    probes are kept; times that restart per probe are laid end to end."""
    out, offset, last = [], 0.0, -math.inf
    absolute = True
    for data in probes.values():
        t = _floats(data.get("t"))
        if t and t[0] < last:
            absolute = False
        last = t[-1] if t else last
    for name, data in probes.items():
        t = _floats(data.get("t"))
        if not t:
            continue
        x = t if absolute else [offset + v - t[0] for v in t]
        offset = x[-1] + gap
        out.append((name, x, data))
    return out


def telemetry(tel: dict[str, Any] | None) -> bytes | None:
    """One panel per series (CPU utilisation, disk reads, then per-GPU util, SM clock, power,
    temperature) against time, with each probe's start marked and named."""
    probes = (tel or {}).get("probes") or {}
    # interval_s is stored once, at the top: the probes' entries do not carry it.
    line = _timeline(probes, float((tel or {}).get("interval_s") or DEFAULT_INTERVAL_S))
    if not line:
        return None
    panels: list[tuple[str, str, Callable[[dict[str, Any]], dict[str, list[float]]]]] = [
        ("CPU utilisation", "%", lambda d: {"all cores": _floats(d.get("cpu_util"))}),
        ("disk reads", "B/s", lambda d: {"read": _floats(d.get("disk_read_Bps"))}),
    ]
    gpu_series = [("GPU utilisation", "%", "util"), ("GPU SM clock", "Hz", "sm_clock_Hz"),
                  ("GPU power", "W", "power_W"), ("GPU temperature", "°C", "temp_degC")]
    for title, unit, field in gpu_series:
        panels.append((title, unit, functools.partial(_per_gpu, field)))
    drawn = [(title, unit, get) for title, unit, get in panels
             if any(any(math.isfinite(v) for v in s) for _, _, d in line
                    for s in get(d).values())]
    if not drawn:
        return None
    height = 0.9 + 1.25 * len(drawn)
    fig = figure(8.0, height)
    fig.subplots_adjust(left=0.12, right=0.85, top=1 - 0.75 / height, bottom=0.45 / height,
                        hspace=0.35)
    axes = fig.subplots(len(drawn), 1, sharex=True, squeeze=False)[:, 0]
    colours: dict[str, str] = {}  # one colour per GPU in every panel
    for ax, (title, unit, get) in zip(axes, drawn, strict=True):
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
            ax.axvline(x[0], color="#999", linewidth=0.6, linestyle=":")
        if unit == "%":
            ax.set_ylim(0, 105)
        elif unit in ("B/s", "Hz", "W"):
            si_axis(ax.yaxis, unit)
        ax.set_ylabel(f"{title}\n({unit})", fontsize=7.5)
        style(ax)
        if len(labelled) > 1:
            ax.legend(fontsize=6.5, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    for name, x, _ in line:
        axes[0].text(x[0], 1.02, f" {name}", transform=axes[0].get_xaxis_transform(),
                     fontsize=6.5, rotation=30, ha="left", va="bottom", color="#444")
    axes[-1].set_xlabel("time (s)", fontsize=8.5)
    return png(fig)
