"""Whether the stability probe's dips follow the GPU's SM clock: each window's throughput per GHz
of the clock sampled with it, and what held the clock there.

A data-center GPU under dense load sits at its power limit, where the driver moves the SM clock
every few hundred milliseconds (an H200 at 700 W: 1,245-1,590 MHz under a bf16 matmul), and
the 100 ms windows' throughput moves with it while the work per cycle holds. Dividing each
window by its clock separates the two: what the clock explains is the power limit's doing;
what it leaves is the device's, or a neighbour's. Pure functions over the windows, the clocks
the probe read with them (context "window_sm_clock_Hz") or else the telemetry's stored series
(machine/telemetry.py). Units: Hz, FLOP/s, ratios from 0 to 1.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from benchbench.analysis import window_stats as ws
from benchbench.core import units as fmt
from benchbench.machine.telemetry_series import BUSY_UTIL, FLAG_SHARE

MIN_CLOCKED = 0.8  # the share of windows that must have a clock for the rate per GHz to count
# The dips follow the clock when the throughput rises with it (Pearson's r positive at this
# one-sided level) and, per GHz of it, meets the stable bars with its CV bar (STABLE_CV in
# analysis/window_stats.py) widened by the clock readings' own error: one reading is an instant
# standing for a 100 ms window in which a capped GPU's clock moves. That error is estimated
# from consecutive readings (the standard deviation of their differences over sqrt 2, as for
# two independent readings), and the two add in quadrature.
FOLLOW_P = 0.05
HELD = 0.5  # the power cap "held" the GPU when active in at least this share of busy samples
CAP = "power cap"


def _is_cap(name: str) -> bool:
    return name.lower().replace("_", " ").endswith(CAP)


def _is_fault(name: str) -> bool:
    """Thermal, power-brake and hardware slowdowns: limits a healthy GPU does not hit."""
    low = name.lower().replace("_", " ")
    return any(w in low for w in ("thermal", "brake", "hw slowdown"))


def _at(series: list[Any] | None, i: int) -> Any:
    return series[i] if series is not None and i < len(series) else None


def _busy(gpu: dict[str, Any], i: int) -> bool:
    util = _at(gpu.get("util"), i)
    return util is None or util > BUSY_UTIL


def _step(t: list[Any]) -> float:
    known = [x for x in t if x is not None]
    steps = [b - a for a, b in zip(known, known[1:], strict=False) if b > a]
    return statistics.median(steps) if steps else 0.0


def window_clocks(windows: list[tuple[float, float]], width: float,
                  telemetry: dict[str, Any] | None, gpu: str) -> list[float | None]:
    """Each window's SM clock from the telemetry: the mean of the busy samples within the
    window, padded by half a telemetry step on each side (a stored point may stand for
    several windows); None where none fell there."""
    g = ((telemetry or {}).get("gpus") or {}).get(gpu) or {}
    t, clocks = (telemetry or {}).get("t") or [], g.get("sm_clock_Hz") or []
    pad = _step(t) / 2
    out: list[float | None] = []
    for start, _ in windows:
        got = [c for i, (x, c) in enumerate(zip(t, clocks, strict=False))
               if x is not None and c and start - pad <= x <= start + width + pad
               and _busy(g, i)]
        out.append(statistics.fmean(got) if got else None)
    return out


def busy_clocks(windows: list[tuple[float, float]], width: float,
                telemetry: dict[str, Any] | None, gpu: str) -> list[float]:
    """The telemetry's busy SM clock samples over the windows' span, in time order."""
    g = ((telemetry or {}).get("gpus") or {}).get(gpu) or {}
    t, clocks = (telemetry or {}).get("t") or [], g.get("sm_clock_Hz") or []
    first, last = windows[0][0], windows[-1][0] + width
    return [c for i, (x, c) in enumerate(zip(t, clocks, strict=False))
            if x is not None and c and first <= x <= last and _busy(g, i)]


def reason_shares(windows: list[tuple[float, float]], width: float,
                  telemetry: dict[str, Any] | None, gpu: str) -> tuple[float, float, int]:
    """(share of the busy samples over the windows' span with the power cap, share with a
    thermal, power-brake or hardware slowdown, how many busy samples had their reasons read)."""
    g = ((telemetry or {}).get("gpus") or {}).get(gpu) or {}
    t, reasons = (telemetry or {}).get("t") or [], g.get("throttle") or []
    first, last = windows[0][0], windows[-1][0] + width
    read = [r for i, (x, r) in enumerate(zip(t, reasons, strict=False))
            if x is not None and r is not None and first <= x <= last and _busy(g, i)]
    if not read:
        return 0.0, 0.0, 0
    capped = sum(any(_is_cap(n) for n in r) for r in read) / len(read)
    faults = sum(any(_is_fault(n) for n in r) for r in read) / len(read)
    return capped, faults, len(read)


def clock_error(clocks: list[float]) -> float:
    """The error of one clock reading standing for a window, as a ratio of the clock: the
    standard deviation of consecutive readings' differences over sqrt 2 (0 for a steady
    clock). `clocks`: the raw readings in time order, one window or one sample apart."""
    diffs = [b - a for a, b in zip(clocks, clocks[1:], strict=False)]
    if len(diffs) < 2 or not clocks:
        return 0.0
    return statistics.stdev(diffs) / math.sqrt(2) / statistics.fmean(clocks)


def per_ghz(windows: list[tuple[float, float]], clocks: list[float | None]
            ) -> list[tuple[float, float]]:
    """(t, throughput per GHz of the window's clock) for each window with a clock."""
    return [(t, v / c * 1e9) for (t, v), c in zip(windows, clocks, strict=True) if c]


def correlation(windows: list[tuple[float, float]], clocks: list[float | None]
                ) -> tuple[float, float] | None:
    """(Pearson's r of the windows' throughput against their clocks, its one-sided p for a
    positive r), or None with fewer than three pairs or a constant series."""
    from scipy.stats import pearsonr

    pairs = [(v, c) for (_, v), c in zip(windows, clocks, strict=True) if c]
    values, hz = [v for v, _ in pairs], [c for _, c in pairs]
    if len(pairs) < 3 or len(set(values)) < 2 or len(set(hz)) < 2:
        return None
    got = pearsonr(values, hz, alternative="greater")
    return float(got.statistic), float(got.pvalue)


def held(capped: float, faults: float) -> bool:
    """The power cap held the GPU, and nothing worse did."""
    return capped >= HELD and faults < FLAG_SHARE


def _pct(x: float | None, sign: bool = False) -> str:
    return "n/a" if x is None else fmt.signed_percent(100 * x) if sign else f"{x:.1%}"


# --- the view a judgement reads -------------------------------------------------------------

def clock_view(clean: list[tuple[float, float]], width: float,
               telemetry: dict[str, Any] | None, gpu: str,
               probe_clocks: list[float | None] | None) -> dict[str, Any] | None:
    """The windows per GHz of their SM clock, or None where under MIN_CLOCKED of them have
    one: {"source", "per": ws.summarize(per GHz), "error" (the clock readings' own), "bar",
    "steady", "range_Hz": (low, high), "capped", "faults" (shares of busy samples), "r"}."""
    source = "the probe's own readings"
    clocks = probe_clocks
    if not clocks or sum(c is not None for c in clocks) < MIN_CLOCKED * len(clean):
        source = "the telemetry's samples"
        clocks = window_clocks(clean, width, telemetry, gpu)
    known = [c for c in clocks if c]
    if len(known) < max(ws.MIN_WINDOWS, MIN_CLOCKED * len(clean)):
        return None
    per = ws.summarize(per_ghz(clean, clocks))
    sampled = busy_clocks(clean, width, telemetry, gpu)
    readings = known if source.startswith("the probe") else sampled
    error = clock_error(readings)
    bar = math.hypot(ws.STABLE_CV, error)
    r = correlation(clean, clocks)
    steady = ws.steady(per, bar) and r is not None and r[0] > 0 and r[1] < FOLLOW_P
    capped, faults, _ = reason_shares(clean, width, telemetry, gpu)
    seen = readings + sampled
    return {"source": source, "per": per, "error": error, "bar": bar, "steady": steady,
            "range_Hz": (min(seen), max(seen)) if seen else None,
            "capped": capped, "faults": faults, "r": r}


def clock_range(view: dict[str, Any] | None) -> str | None:
    """'1,245–1,590 MHz': the SM clocks read while the windows ran, or None."""
    lo_hi = (view or {}).get("range_Hz")
    if not lo_hi:
        return None
    return f"{lo_hi[0] / 1e6:,.0f}–{lo_hi[1] / 1e6:,.0f} MHz"


def _per_ghz_line(view: dict[str, Any]) -> str:
    per = view["per"]
    return (f"CV {_pct(per['cv'])} (the bar: {_pct(view['bar'])}, the {_pct(ws.STABLE_CV)} of a "
            f"steady clock widened by the clock readings' own {_pct(view['error'])}), worst 1% "
            f"at {_pct(per['worst_1pct_ratio'])}, drift {_pct(per['drift'], True)}")


def follows(view: dict[str, Any], held: bool) -> list[str]:
    """The evidence that the dips follow the clock, and what held it (`held`: the power cap)."""
    r = (f"; throughput against the clock: r = {view['r'][0]:.2f} (p = {view['r'][1]:.2g})"
         if view["r"] is not None else "")
    why = (f"which the power cap held at {clock_range(view)} (power cap in "
           f"{view['capped']:.0%} of the busy samples, no thermal, power-brake or hardware "
           "slowdown)" if held else
           f"which moved over {clock_range(view)}" + (
               f" with a thermal, power-brake or hardware slowdown in {view['faults']:.0%} of "
               "the busy samples" if view["faults"] else " with no throttle reason to say why"))
    return [f"throughput followed the SM clock, {why}{r}",
            f"per GHz of the clock read with each window ({view['source']}), throughput held "
            f"steady: {_per_ghz_line(view)}"]


def not_followed(view: dict[str, Any]) -> str:
    """The evidence that the clock does not explain the spread."""
    return (f"per GHz of the SM clock read with each window ({view['source']}; "
            f"{clock_range(view)}), throughput still varied: {_per_ghz_line(view)}"
            + (f"; against the clock, r = {view['r'][0]:.2f}" if view["r"] else "")
            + ": the clock does not explain the spread")


def capped_unclocked(clean: list[tuple[float, float]], width: float,
                     telemetry: dict[str, Any] | None, gpu: str) -> bool:
    """Whether the power cap held the GPU over the windows (its reasons were read)."""
    capped, _, read = reason_shares(clean, width, telemetry, gpu)
    return read > 0 and capped >= HELD
