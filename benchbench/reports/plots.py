"""Draw the report's figures, as Figures (figures()) and as PNG bytes (make()): capacities,
precision speedups, stability, all-reduce, loaders, and (from plots_telemetry) the telemetry
timeline.

matplotlib is imported only inside plot_base's functions, so importing this module stays cheap.
Figures are small, at 100 dpi, laid out by matplotlib's constrained layout and measured where a
label must fit beside a bar: no margin is tuned by hand, so no label is cut.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable
from typing import Any

from benchbench.analysis import derive as analysis
from benchbench.analysis import stability
from benchbench.analysis.verdict_types import Verdict, WorkloadVerdict
from benchbench.core import names
from benchbench.core import units as fmt
from benchbench.core.results import Measurement, RunResult
from benchbench.core.stats import summarize
from benchbench.reports import interconnect, plots_telemetry
from benchbench.reports.plot_base import (
    draw_all,
    figure,
    finish,
    integer_axis,
    room_right,
    saved,
    si_axis,
    style,
    wrap,
)

# The order in which plots appear, and the names of their files (plots/<name>.png).
NAMES = ("capacities", "precision_speedups", "stability", "allreduce_busbw", "loader_workers",
         "telemetry")
LIMIT_COLOUR = "#c0392b"
BAR_COLOUR = "#7f9fbf"
UNKNOWN_COLOUR = "#9a9a9a"
# Log scale once the capacities span more than two decades: on a linear axis the smaller bars,
# usually the interesting ones, would be slivers.
LOG_SPAN = 100.0


def resource_name(resource: str | None) -> str:
    """The resource as a row label: its human name, without the article prose puts first."""
    return names.resource_name(resource or "?").removeprefix("the ")


def figures(run: RunResult, verdict: Verdict | None) -> dict[str, Callable[[], Any]]:
    """Each plot's maker by name, in NAMES order: the laid-out Figure, or None where the run
    has no data for it. The test of the pictures reads the Figures before they are saved."""
    return {
        "capacities": lambda: capacities_figure(verdict),
        "precision_speedups": lambda: precision_speedups_figure(run),
        "stability": lambda: stability_figure(run),
        "allreduce_busbw": lambda: allreduce_figure(run),
        "loader_workers": lambda: loader_workers_figure(run),
        "telemetry": lambda: plots_telemetry.telemetry_figure(run.extra.get("telemetry")),
    }


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


# Each plot as PNG bytes, or None without its data.
def capacities(verdict: Verdict | None) -> bytes | None:
    return saved(capacities_figure(verdict))


def precision_speedups(run: RunResult) -> bytes | None:
    return saved(precision_speedups_figure(run))


def stability_over_time(run: RunResult) -> bytes | None:
    return saved(stability_figure(run))


def allreduce_busbw(run: RunResult) -> bytes | None:
    return saved(allreduce_figure(run))


def loader_workers(run: RunResult) -> bytes | None:
    return saved(loader_workers_figure(run))


# --- stability --------------------------------------------------------------------------------

def stability_figure(run: RunResult) -> Any:
    """The stability probe's throughput per window over time, its median, and the windows
    that dropped: red where the telemetry gave a throttle reason or a clock drop."""
    j = stability.judge_run(run)
    windows, _ = stability.run_windows(run)
    if j is None or len(windows) < 2:
        return None
    t0 = windows[0][0]
    ts, vs = [t - t0 for t, _ in windows], [v for _, v in windows]
    fig = figure(7.6, 2.6)
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
    clocks = stability.clock_range(j.get("clock"))
    held = f", {clocks}" if j["judgement"] == stability.POWER_LIMIT and clocks else ""
    return finish(fig, ax, f"Stability: {j['judgement']}{held} ({j['key'].get('dtype')} matmul "
                  f"n={j['key'].get('size')})", xlabel="seconds into the probe")


# --- helpers ----------------------------------------------------------------------------------

def _without(key: dict[str, Any], *fields: str) -> tuple[tuple[str, Any], ...]:
    return tuple((k, v) for k, v in key.items() if k not in fields)


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


def capacities_figure(verdict: Verdict | None) -> Any:
    """Each resource's capacity in the workload's samples/s, the limiting one in red; one panel
    per workload. Unknown capacities are hatched grey rows; not-applicable ones are left out
    (the HTML lists both with their reasons)."""
    panels = _capacity_panels(verdict)
    if not panels:
        return None
    heights = [0.9 + 0.34 * len(p.capacity_details) for p in panels]
    fig = figure(7.6, sum(heights) + 0.2 * (len(panels) - 1))
    axes = fig.subplots(len(panels), 1, squeeze=False,
                        gridspec_kw={"height_ratios": heights})[:, 0]
    labels = [_capacity_panel(ax, panel) for ax, panel in zip(axes, panels, strict=True)]
    for ax, texts in zip(axes, labels, strict=True):  # each value label right of its bar
        room_right(fig, ax, texts)
    return fig


def _capacity_panel(ax: Any, v: WorkloadVerdict) -> list[Any]:
    """One workload's bars; the value labels, for the caller to make room for."""
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
    if log:
        ax.set_xscale("log")
    xmin = lo / 3 if log else 0.0
    ax.set_xlim(xmin, hi * 1.1)
    ys = list(range(len(rows)))
    colours = [LIMIT_COLOUR if r == limit else BAR_COLOUR for r, _ in known]
    ax.barh(ys[:len(known)], [c - xmin for c in values], left=xmin, color=colours, height=0.62)
    texts = [ax.text(c * 1.04 if log else c, y, f" {fmt.si(c, unit)}"
                     + ("  ◀ limits training" if r == limit else ""), va="center",
                     fontsize=8.5, color=LIMIT_COLOUR if r == limit else "#222",
                     fontweight="bold" if r == limit else "normal")
             for y, (r, c) in zip(ys, known, strict=False)]  # ys also has unknowns
    across = ax.get_yaxis_transform()  # x in axes fractions: the row spans the whole axis
    for y, r in zip(ys[len(known):], unknown, strict=True):
        ax.axhspan(y - 0.31, y + 0.31, facecolor="#f4f4f4", edgecolor=UNKNOWN_COLOUR,
                   hatch="///", linewidth=0.6)
        why = details[r].missing or "not measured"
        why = why if len(why) <= 70 else why[:69] + "…"
        ax.text(0.5, y, f"unknown: {why}", transform=across, va="center", ha="center",
                fontsize=7.5, color="#444", style="italic",
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
    work = names.probe_name(v.workload)
    title = (f"{work}: limited by {names.resource_name(limit)}" if limit
             else f"{work}: no limiting resource named")
    ax.set_title(wrap(title, 80), loc="left", fontsize=11, fontweight="bold",
                 color=LIMIT_COLOUR if limit else "#222")
    return texts


# --- precision speedups -----------------------------------------------------------------------

def _pair_name(ratio: str) -> str:
    num, _, den = ratio.partition("/")
    return f"{names.precision_name(num)} over {names.precision_name(den)}"


def precision_speedups_figure(run: RunResult) -> Any:
    """Each training model's speedup between two precisions, beside the datasheet's ratio:
    one row per pair, so that one pair is one short row rather than a bar filling the plot."""
    rows = analysis.precision_speedups(run)
    if not rows:
        return None
    fig = figure(7.0, 1.3 + 0.55 * len(rows))
    ax = fig.add_subplot()
    ys = list(range(len(rows)))
    h = 0.36
    ax.barh([y - h / 2 for y in ys], [r["measured"] for r in rows], h, color=BAR_COLOUR,
            label="measured")
    expected = [(y, r["expected"]) for y, r in zip(ys, rows, strict=True) if r["expected"]]
    if expected:
        ax.barh([y + h / 2 for y, _ in expected], [e for _, e in expected], h, color="white",
                edgecolor="#555", hatch="//", label="datasheet")
    top = max([r["measured"] for r in rows] + [e for _, e in expected])
    texts = []
    for y, r in zip(ys, rows, strict=True):
        texts.append(ax.text(r["measured"], y - h / 2, f" {r['measured']:.2f}×", va="center",
                             fontsize=7.5))
        if r["expected"]:
            texts.append(ax.text(r["expected"], y + h / 2, f" {r['expected']:.2f}×",
                                 va="center", fontsize=7.5, color="#555"))
        else:
            texts.append(ax.text(0, y + h / 2, " no datasheet ratio", va="center",
                                 fontsize=7, color="#666", style="italic", zorder=3,
                                 bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.4}))
    ax.axvline(1.0, color="#333", linewidth=0.8)
    ax.set_yticks(ys, [f"{names.probe_name(r['model'])}\n{wrap(_pair_name(r['ratio']), 26)}"
                       for r in rows], fontsize=7.5)
    ax.set_ylim(len(rows) - 0.4, -0.6)  # the first pair on top
    ax.set_xlim(0, top * 1.1)
    finish(fig, ax, "Training speedup between precisions",
           xlabel="speedup (×; 1 = as fast as the slower precision)")
    ax.grid(False, axis="y")
    room_right(fig, ax, texts)
    return fig


# --- all-reduce -------------------------------------------------------------------------------

def allreduce_figure(run: RunResult) -> Any:
    pr = run.probe("allreduce")
    if pr is None or pr.status != "ok" or interconnect.single_rank_allreduce(pr):
        return None
    series: dict[tuple[str, tuple[Any, ...]], list[Measurement]] = {}
    for m in pr.measurements:
        if m.metric in ("busbw", "algbw") and "size_bytes" in m.key and m.value > 0:
            series.setdefault((m.metric, _without(m.key, "size_bytes")), []).append(m)
    if not series:
        return None
    varying = _varying([g for _, g in series])
    fig = figure(7.2, 3.3)
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
    return finish(fig, ax, f"all-reduce, {pr.params.get('backend')}, {world} ranks (shaded: "
                  "IQR)", xlabel="message size", ylabel="bandwidth (1 GB/s = 10⁹ B/s)")


def _locator(log: bool, n: int) -> Any:
    """At most n major ticks; none for n = 0."""
    from matplotlib.ticker import LogLocator, MaxNLocator, NullLocator

    if n == 0:
        return NullLocator()
    return LogLocator(base=10, numticks=n) if log else MaxNLocator(nbins=n - 1)


# --- data loaders -----------------------------------------------------------------------------

def loader_workers_figure(run: RunResult) -> Any:
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
    fig = figure(7.2, 3.2)
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
    cores = int(pr.params.get("usable_cores") or 0)
    ticks = sorted(workers | ({cores} if cores else set()))
    if ticks[-1] >= 16:  # doubling counts: on a linear axis 0, 1 and 2 would collide
        ax.set_xscale("symlog", base=2, linthresh=1, linscale=0.5)
        ax.set_xlim(-0.3, ticks[-1] * 1.25)
        ax.set_xticks(ticks, [str(t) for t in ticks])
    else:
        ax.set_xlim(min(0, ticks[0]) - 0.5, ticks[-1] + 0.5)
        integer_axis(ax.xaxis)
    ax.xaxis.set_minor_locator(_locator(False, 0))
    if cores:
        ax.axvline(cores, color="#888", linestyle=":", linewidth=1, label=f"{cores} usable cores")
    ax.set_ylim(0, top * 1.15)
    si_axis(ax.yaxis, "images/s" if unit == "samples/s" else unit)
    return finish(fig, ax, "Data loading throughput by workers (bars: IQR)",
                  xlabel="loader worker processes", ylabel="decoded and augmented")
