"""Draw the report's figures as PNG bytes: capacities, precision speedups, all-reduce, loaders,
and (from plots_telemetry) the telemetry timeline.

matplotlib is imported only inside plot_base's functions, so importing this module stays cheap.
Figures are small, at 100 dpi, and laid out by hand (no tight_layout): `run --quick` pays for
them.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable
from typing import Any

from benchbench.analysis import derive as analysis
from benchbench.analysis import stability
from benchbench.analysis.verdict_types import Verdict, WorkloadVerdict
from benchbench.core import units as fmt
from benchbench.core.results import Measurement, RunResult
from benchbench.core.stats import summarize
from benchbench.reports import plots_telemetry
from benchbench.reports.plot_base import draw_all, figure, finish, png, si_axis, style

# The order in which plots appear, and the names of their files (plots/<name>.png).
NAMES = ("capacities", "precision_speedups", "stability", "allreduce_busbw", "loader_workers",
         "telemetry")
RESOURCE_NAMES = {
    "gpu_compute": "GPU compute", "gpu_memory": "GPU memory",
    "host_device_link": "host→device link", "interconnect": "interconnect",
    "cpu_compute": "CPU compute", "cpu_dataloading": "CPU data loading",
    "storage": "storage", "host_memory": "host memory (page cache)",
}
LIMIT_COLOUR = "#c0392b"
BAR_COLOUR = "#7f9fbf"
UNKNOWN_COLOUR = "#9a9a9a"
# Log scale once the capacities span more than two decades: on a linear axis the smaller bars,
# usually the interesting ones, would be slivers.
LOG_SPAN = 100.0


def resource_name(resource: str | None) -> str:
    return RESOURCE_NAMES.get(resource or "", resource or "?")


def make(run: RunResult, verdict: Verdict | None,
         problems: list[str] | None = None) -> dict[str, bytes]:
    """PNG bytes per plot name, only for the plots whose data this run holds. A plot that fails
    to draw is left out and, when `problems` is given, said there instead of raising: the
    measurements are already saved, and a figure must not cost the run its report."""
    if importlib.util.find_spec("matplotlib") is None:
        if problems is not None:
            problems.append("no plots, because matplotlib is not installed")
        return {}
    makers: dict[str, Callable[[], bytes | None]] = {
        "capacities": lambda: capacities(verdict),
        "precision_speedups": lambda: precision_speedups(run),
        "stability": lambda: stability_over_time(run),
        "allreduce_busbw": lambda: allreduce_busbw(run),
        "loader_workers": lambda: loader_workers(run),
        "telemetry": lambda: plots_telemetry.telemetry(run.extra.get("telemetry")),
    }
    return draw_all(makers, NAMES, problems)


# --- stability --------------------------------------------------------------------------------

def stability_over_time(run: RunResult) -> bytes | None:
    """The stability probe's throughput per window over time, its median, and the windows
    that dropped: red where the telemetry gave a throttle reason or a clock drop."""
    j = stability.judge_run(run)
    windows, _ = stability.run_windows(run)
    if j is None or len(windows) < 2:
        return None
    t0 = windows[0][0]
    ts, vs = [t - t0 for t, _ in windows], [v for _, v in windows]
    fig = figure(7.6, 2.6)
    fig.subplots_adjust(left=0.1, right=0.97, top=0.86, bottom=0.2)
    ax = fig.subplots()
    ax.plot(ts, vs, color=BAR_COLOUR, linewidth=0.9, label="each window")
    ax.axhline(j["median_flops"], color="#333", linewidth=0.8, linestyle="--", label="median")
    for explained in (False, True):
        drops = [d for d in j["aligned_drops"] if bool(d["throttle"] or d["clock_drop"])
                 == explained]
        if drops:
            ax.scatter([d["t"] - t0 for d in drops], [d["ratio"] * j["median_flops"]
                                                     for d in drops], s=12, zorder=3,
                       color=LIMIT_COLOUR if explained else UNKNOWN_COLOUR,
                       label="throttled" if explained else "dropped, no throttle reason")
    ax.set_ylim(0, max(vs) * 1.15)
    si_axis(ax.yaxis, "FLOP/s")
    return finish(fig, ax, f"Stability: {j['judgement']} ({j['key'].get('dtype')} matmul "
                  f"n={j['key'].get('size')})", xlabel="seconds into the probe")


# --- helpers ----------------------------------------------------------------------------------

def _without(key: dict[str, Any], *names: str) -> tuple[tuple[str, Any], ...]:
    return tuple((k, v) for k, v in key.items() if k not in names)


def _group_label(group: tuple[tuple[str, Any], ...], varying: set[str]) -> str:
    return ", ".join(f"{k}={fmt.key_value(k, v)}" for k, v in group if k in varying)


def _varying(groups: list[tuple[tuple[str, Any], ...]]) -> set[str]:
    """The key fields whose value differs between groups: only those name a line."""
    values: dict[str, set[str]] = {}
    for g in groups:
        for k, v in g:
            values.setdefault(k, set()).add(str(v))
    return {k for k, vs in values.items() if len(vs) > 1}


# --- capacities -------------------------------------------------------------------------------

def _capacity_panels(verdict: Verdict | None) -> list[WorkloadVerdict]:
    if not verdict:
        return []
    panels = [verdict.main, *verdict.others()]
    return [p for p in panels if any(c is not None and c > 0 for c in p.capacities.values())]


def capacities(verdict: Verdict | None) -> bytes | None:
    """Each resource's capacity in the workload's samples/s, the limiting one in red; one panel
    per workload. Unknown capacities are hatched grey rows; not-applicable ones are left out
    (the HTML lists both with their reasons)."""
    panels = _capacity_panels(verdict)
    if not panels:
        return None
    heights = [0.9 + 0.34 * len(p.capacity_details) for p in panels]
    fig = figure(7.6, sum(heights) + 0.35 * (len(panels) - 1))
    labels = [resource_name(r) for p in panels for r in p.capacity_details]
    left = min(0.36, 0.03 + 0.009 * max(len(s) for s in labels))
    fig.subplots_adjust(left=left, right=0.94, top=1 - 0.55 / sum(heights),
                        bottom=0.5 / sum(heights), hspace=0.65)
    axes = fig.subplots(len(panels), 1, squeeze=False,
                        gridspec_kw={"height_ratios": heights})[:, 0]
    for ax, panel in zip(axes, panels, strict=True):
        _capacity_panel(ax, panel, width_in=7.6 * (0.94 - left))
    return png(fig)


# Width of one character of the 8.5 pt value labels, in inches (DejaVu Sans, bold: ~0.075).
_CHAR_IN = 0.075


def _capacity_panel(ax: Any, v: WorkloadVerdict, width_in: float) -> None:
    unit = v.sample_unit
    details = v.capacity_details
    known = sorted(((r, d.value) for r, d in details.items() if d.value is not None
                    and d.value > 0), key=lambda rc: rc[1])
    unknown = [r for r, d in details.items() if d.value is None
               and d.status != "not applicable"]
    limit = v.limiting_resource
    rows = [r for r, _ in known] + unknown
    values = [c for _, c in known]
    lo, hi = min(values), max(values)
    log = hi / lo > LOG_SPAN
    texts = [fmt.si(c, unit) + ("  ◀ limits training" if r == limit else "") for r, c in known]
    # Widen the axis until every value label fits to the right of its bar.
    room = [min(0.8, (len(t) + 1) * _CHAR_IN / width_in) for t in texts]
    if log:
        ax.set_xscale("log")
        xmin = lo / 3
        xmax = max(math.exp(math.log(xmin) + math.log(c * 1.08 / xmin) / (1 - f))
                   for c, f in zip(values, room, strict=True))
    else:
        xmin = 0.0
        xmax = max(c / (1 - 0.015 - f) for c, f in zip(values, room, strict=True))
    ax.set_xlim(xmin, xmax)
    ys = list(range(len(rows)))
    colours = [LIMIT_COLOUR if r == limit else BAR_COLOUR for r, _ in known]
    base = xmin if log else 0.0
    ax.barh(ys[:len(known)], [c - base for c in values], left=base, color=colours, height=0.62)
    for y, (r, c), text in zip(ys, known, texts, strict=False):  # ys also has unknowns
        ax.text(c * 1.08 if log else c + xmax * 0.015, y, text, va="center",
                fontsize=8.5, color=LIMIT_COLOUR if r == limit else "#222",
                fontweight="bold" if r == limit else "normal")
    for y, r in zip(ys[len(known):], unknown, strict=True):
        ax.barh(y, xmax - xmin, left=xmin, height=0.62, color="#f4f4f4",
                edgecolor=UNKNOWN_COLOUR, hatch="///", linewidth=0.6)
        why = details[r].missing or "not measured"
        why = why if len(why) <= 70 else why[:69] + "…"
        ax.text(math.sqrt(xmin * xmax) if log else xmax / 2, y, f"unknown: {why}",
                va="center", ha="center", fontsize=7.5, color="#444", style="italic",
                bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.0})
    if limit in dict(known):
        ax.axvline(dict(known)[limit], color=LIMIT_COLOUR, linewidth=0.9, linestyle="--")
    ax.set_yticks(ys, [resource_name(r) for r in rows], fontsize=9)
    for tick, r in zip(ax.get_yticklabels(), rows, strict=True):
        if r == limit:
            tick.set_color(LIMIT_COLOUR)
            tick.set_fontweight("bold")
        elif r in unknown:
            tick.set_color("#666")
    ax.set_ylim(len(rows) - 0.5, -0.5)  # the smallest capacity on top
    si_axis(ax.xaxis, unit)
    # Tick labels carry their unit, so at most five fit along the axis without touching.
    ax.xaxis.set_major_locator(_locator(log, 5))
    style(ax)
    ax.grid(False, axis="y")
    ax.set_xlabel(f"capacity, {unit} for the whole machine" + (" (log scale)" if log else ""),
                  fontsize=8.5)
    work = v.workload
    title = (f"{work}: limited by {resource_name(limit)}" if limit
             else f"{work}: no limiting resource named")
    ax.set_title(title, loc="left", fontsize=11, fontweight="bold",
                 color=LIMIT_COLOUR if limit else "#222")


# --- precision speedups -----------------------------------------------------------------------

def precision_speedups(run: RunResult) -> bytes | None:
    rows = analysis.precision_speedups(run)
    if not rows:
        return None
    width = max(4.0, 1.2 + 0.75 * len(rows))
    fig = figure(width, 3.0)
    fig.subplots_adjust(left=0.75 / width, right=0.98, top=0.86, bottom=0.24)
    ax = fig.add_subplot()
    xs = list(range(len(rows)))
    w = 0.38
    ax.bar([x - w / 2 for x in xs], [r["measured"] for r in rows], w, color=BAR_COLOUR,
           label="measured")
    expected = [(x, r["expected"]) for x, r in zip(xs, rows, strict=True) if r["expected"]]
    if expected:
        ax.bar([x + w / 2 for x, _ in expected], [e for _, e in expected], w, color="white",
               edgecolor="#555", hatch="//", label="datasheet")
    top = max([r["measured"] for r in rows] + [e for _, e in expected])
    for x, r in zip(xs, rows, strict=True):
        ax.text(x - w / 2, r["measured"], f"{r['measured']:.2f}×", ha="center", va="bottom",
                fontsize=7.5)
        if r["expected"]:
            ax.text(x + w / 2, r["expected"], f"{r['expected']:.2f}×", ha="center",
                    va="bottom", fontsize=7.5, color="#555")
        else:
            ax.text(x + w / 2, 0.05 * top, "no\ndatasheet", ha="center", va="bottom",
                    fontsize=6.5, color="#666")
    ax.axhline(1.0, color="#333", linewidth=0.8)
    ax.set_xticks(xs, [f"{r['model']}\n{r['ratio']}" for r in rows], fontsize=7.5)
    ax.set_ylim(0, top * 1.2)
    return finish(fig, ax, "Training speedup between precisions", ylabel="speedup (×)")


# --- all-reduce -------------------------------------------------------------------------------

def allreduce_busbw(run: RunResult) -> bytes | None:
    pr = run.probe("allreduce")
    if pr is None or pr.status != "ok":
        return None
    series: dict[tuple[str, tuple[Any, ...]], list[Measurement]] = {}
    for m in pr.measurements:
        if m.metric in ("busbw", "algbw") and "size_bytes" in m.key and m.value > 0:
            series.setdefault((m.metric, _without(m.key, "size_bytes")), []).append(m)
    if not series:
        return None
    varying = _varying([g for _, g in series])
    fig = figure(6.4, 3.3)
    fig.subplots_adjust(left=0.14, right=0.97, top=0.88, bottom=0.16)
    ax = fig.add_subplot()
    sizes: set[int] = set()
    values: list[float] = []
    for (metric, group), ms in sorted(series.items(), key=lambda kv: kv[0][0] != "busbw"):
        ms = sorted(ms, key=lambda m: m.key["size_bytes"])
        x = [m.key["size_bytes"] for m in ms]
        y = [m.value for m in ms]
        sizes.update(x)
        values += y
        stats = [summarize(m.samples) for m in ms]
        busbw = metric == "busbw"
        label = metric + (f" ({_group_label(group, varying)})" if varying else "")
        (line,) = ax.plot(x, y, marker="o" if busbw else "s", markersize=3.5 if busbw else 2.5,
                          linewidth=1.6 if busbw else 1.0, linestyle="-" if busbw else "--",
                          label=label)
        if all(s.q1 > 0 for s in stats):
            ax.fill_between(x, [s.q1 for s in stats], [s.q3 for s in stats],
                            color=line.get_color(), alpha=0.15, linewidth=0)
    ax.set_xscale("log", base=2)
    ticks = sorted(sizes)
    step = max(1, math.ceil(len(ticks) / 10))
    ax.set_xticks(ticks[::step], [fmt.iec(s) for s in ticks[::step]], fontsize=7.5)
    if max(values) / min(values) >= 10:
        ax.set_yscale("log")
    si_axis(ax.yaxis, "B/s")
    ax.xaxis.set_minor_locator(_locator(True, 0))
    world = pr.params.get("world_size")
    return finish(fig, ax, f"all_reduce, {pr.params.get('backend')}, {world} ranks (shaded: "
                  "IQR)", xlabel="message size", ylabel="bandwidth (decimal: 1 GB/s = 10⁹ B/s)")


def _locator(log: bool, n: int) -> Any:
    """At most n major ticks; none for n = 0."""
    from matplotlib.ticker import LogLocator, MaxNLocator, NullLocator

    if n == 0:
        return NullLocator()
    return LogLocator(base=10, numticks=n) if log else MaxNLocator(nbins=n - 1)


# --- data loaders -----------------------------------------------------------------------------

def loader_workers(run: RunResult) -> bytes | None:
    pr = run.probe("dataloader")
    if pr is None or pr.status != "ok":
        return None
    series: dict[tuple[Any, ...], list[Measurement]] = {}
    for m in pr.measurements:
        if m.metric == "throughput" and "loader" in m.key and "workers" in m.key:
            series.setdefault(_without(m.key, "workers"), []).append(m)
    if not series:
        return None
    varying = _varying(list(series)) | {"loader"}
    fig = figure(6.4, 3.2)
    fig.subplots_adjust(left=0.19, right=0.97, top=0.88, bottom=0.16)
    ax = fig.add_subplot()
    unit = "samples/s"
    top = 0.0
    workers: set[int] = set()
    for group, ms in series.items():
        ms = sorted(ms, key=lambda m: m.key["workers"])
        x = [int(m.key["workers"]) for m in ms]
        workers.update(x)
        unit = ms[0].unit
        stats = [summarize(m.samples) for m in ms]
        top = max([top] + [max(m.value, s.q3) for m, s in zip(ms, stats, strict=True)])
        ax.errorbar(x, [m.value for m in ms],
                    yerr=[[max(0.0, m.value - s.q1) for m, s in zip(ms, stats, strict=True)],
                          [max(0.0, s.q3 - m.value) for m, s in zip(ms, stats, strict=True)]],
                    marker="o", markersize=4, capsize=2, linewidth=1.4,
                    label=_group_label(group, varying).removeprefix("loader="))
    cores = pr.params.get("usable_cores")
    if cores:
        ax.axvline(cores, color="#888", linestyle=":", linewidth=1)
        ax.text(cores, 0.02, f"{cores} usable cores ", transform=ax.get_xaxis_transform(),
                fontsize=7, color="#555", ha="right")
    ax.set_xticks(sorted(workers | ({int(cores)} if cores else set())))
    ax.set_xlim(min(workers) - 0.5, max(workers | {int(cores or 0)}) + 0.5)
    ax.set_ylim(0, top * 1.15)
    si_axis(ax.yaxis, "images/s" if unit == "samples/s" else unit)
    return finish(fig, ax, "Data loading throughput by workers (bars: IQR)",
                  xlabel="loader worker processes", ylabel="decoded and augmented")
