"""Judges a probe's throughput over time: stable, steady at its power limit, throttling, noisy,
uncertain, or too short to tell.

Pure functions over ~100 ms throughput windows and the telemetry series the sampler stores per
probe (shape in machine/telemetry.py's docstring; run_windows puts the windows on its `t`).
A median hides a GPU that spent a fifth of the run power-capped, so the judgement looks at the
slow windows and asks the telemetry what the hardware said at those moments; a spread the SM
clock explains (stability_clock) is the clock's, and only what it leaves may be a neighbour's.
Units: s, units/s, Hz, W, degC, and ratios from 0 to 1.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from typing import Any

from benchbench.analysis import stability_clock as sc
from benchbench.analysis.stability_clock import clock_range as clock_range
from benchbench.analysis.window_stats import (
    DROP,
    MIN_WINDOWS,
    STABLE_DRIFT,
    clean,
    steady,
    summarize,
)
from benchbench.core import units as fmt
from benchbench.core.results import Measurement, RunResult

# An SM clock under CLOCK_DROP of the GPU's busy median is a drop, while the GPU is over
# BUSY_UTIL busy (an input-starved GPU lowers its clock on purpose): the telemetry flags' rule.
from benchbench.machine.telemetry_series import BUSY_UTIL, CLOCK_DROP

EXPLAINED = 0.5  # "throttling" once at least this share of the drops coincide with it
# A throttle reason explains drops only when it is active more often in the drop windows than
# in the others: one-sided Fisher's exact test at this level. An H100 or H200 under dense bf16
# load reports the power cap nearly all the time, so its being active in a drop says nothing.
REASON_P = 0.05
MAX_ALIGNED = 20
DEFAULT_WINDOW_S = 0.1

# Throttle names as benchbench.telemetry_series decodes them ("power cap", "hw thermal
# slowdown", ...), or NVML's own spellings ("sw_power_cap"); underscores are read as spaces.
_THROTTLING = ("power", "thermal", "slowdown", "brake")
_NOT_THROTTLING = ("idle", "applications", "display", "sync boost")


def _window_width(windows: list[tuple[float, float]]) -> float:
    steps = [b[0] - a[0] for a, b in zip(windows, windows[1:], strict=False) if b[0] > a[0]]
    return statistics.median(steps) if steps else DEFAULT_WINDOW_S


# --- alignment with telemetry ----------------------------------------------------------------

def _is_throttling(name: str) -> bool:
    low = name.lower().replace("_", " ")
    return any(w in low for w in _THROTTLING) and not any(w in low for w in _NOT_THROTTLING)


def _at(series: list[Any] | None, i: int) -> Any:
    return series[i] if series is not None and i < len(series) else None


def busy(gpu: dict[str, Any], i: int) -> bool:
    """Whether a GPU's stored series says it was busy at sample i: over BUSY_UTIL, or no
    utilisation known there (a run without a utilisation series counts every sample)."""
    util = _at(gpu.get("util"), i)
    return util is None or util > BUSY_UTIL


def busy_median_clock(gpu: dict[str, Any]) -> float | None:
    """The median SM clock over the samples where the GPU was busy: a boost peak at the start,
    or idle samples, would make every loaded sample look like a drop, or hide one."""
    clocks = [c for i, c in enumerate(gpu.get("sm_clock_Hz") or [])
              if c is not None and busy(gpu, i)]
    return float(statistics.median(clocks)) if clocks else None


class _Telemetry:
    """The stored series, indexed for looking up what each GPU did around a moment."""

    def __init__(self, telemetry: dict[str, Any] | None):
        telemetry = telemetry or {}
        self.t = list(telemetry.get("t") or [])  # Nones kept: indices must match the series
        self.gpus = {g: s for g, s in sorted((telemetry.get("gpus") or {}).items(),
                                             key=lambda kv: (len(str(kv[0])), str(kv[0])))}
        self.cpu_util = telemetry.get("cpu_util")
        self.median_clock = {g: busy_median_clock(s) for g, s in self.gpus.items()}
        # Stored series are downsampled (one point may stand for a second or more), so a drop
        # is matched against the points within one telemetry step as well as one window.
        known = [x for x in self.t if x is not None]
        steps = [b - a for a, b in zip(known, known[1:], strict=False) if b > a]
        self.step = statistics.median(steps) if steps else 0.0

    def span(self, start: float, width: float) -> list[int]:
        pad = max(width, self.step)
        return [i for i, x in enumerate(self.t)
                if x is not None and start - pad <= x <= start + width + pad]

    def gpu_at(self, g: str, idx: list[int]) -> dict[str, Any]:
        """What GPU g reported in the samples idx: throttling reasons, and the sample with the
        lowest SM clock (its clock, power and temperature), and whether that was a busy drop."""
        s = self.gpus[g]
        reasons: list[str] = []
        for i in idx:
            for name in _at(s.get("throttle"), i) or []:
                if _is_throttling(name) and name not in reasons:
                    reasons.append(name)
        clocked = [i for i in idx if _at(s.get("sm_clock_Hz"), i) is not None]
        low = min(clocked, key=lambda i: s["sm_clock_Hz"][i]) if clocked else (
            idx[0] if idx else None)
        med = self.median_clock[g]
        drop = any(med is not None and med > 0 and s["sm_clock_Hz"][i] < CLOCK_DROP * med
                   and busy(s, i) for i in clocked)
        out: dict[str, Any] = {"gpu": g, "throttle": reasons, "clock_drop": drop}
        for key in ("sm_clock_Hz", "power_W", "temp_degC"):
            out[key] = _at(s.get(key), low) if low is not None else None
        return out


def _align(t: float, ratio: float, width: float, tel: _Telemetry) -> dict[str, Any]:
    """What each GPU and the host reported around one window; `_explain` then says which GPU
    and reasons explain it."""
    idx = tel.span(t, width)
    util = [u for u in (_at(tel.cpu_util, i) for i in idx) if u is not None]
    return {"t": t, "ratio": ratio, "gpu": None, "throttle": [], "explains": [],
            "clock_drop": False, "sm_clock_Hz": None, "power_W": None, "temp_degC": None,
            "cpu_util": max(util) if util else None,
            "_per_gpu": [tel.gpu_at(g, idx) for g in tel.gpus]}


def _active(record: dict[str, Any], gpu: str, reason: str) -> bool:
    return any(r["gpu"] == gpu and reason in r["throttle"] for r in record["_per_gpu"])


def _over_represented(group: list[dict[str, Any]], rest: list[dict[str, Any]]
                      ) -> tuple[set[tuple[str, str]], list[str]]:
    """The (GPU, reason) pairs active more often in `group` (the drop windows) than in `rest`
    (the others), by a one-sided Fisher's exact test at REASON_P; and a sentence for each
    reason seen in the group that is not: it was active as often elsewhere."""
    from scipy.stats import fisher_exact

    seen = sorted({(r["gpu"], n) for rec in group for r in rec["_per_gpu"]
                   for n in r["throttle"]})
    explaining, common = set(), []
    for g, reason in seen:
        a = sum(_active(rec, g, reason) for rec in group)
        c = sum(_active(rec, g, reason) for rec in rest)
        if not rest:
            explaining.add((g, reason))
            continue
        p = fisher_exact([[a, len(group) - a], [c, len(rest) - c]],
                         alternative="greater").pvalue
        if a / len(group) > c / len(rest) and p < REASON_P:
            explaining.add((g, reason))
        else:
            common.append(f"{reason} on GPU {g} was active around {c / len(rest):.0%} of the "
                          f"other windows as well as {a / len(group):.0%} of these: it explains "
                          "none of them")
    return explaining, common


def _explain(records: list[dict[str, Any]], explaining: set[tuple[str, str]],
             tel: _Telemetry) -> None:
    """Per GPU, the throttle reasons that explain (`explains`, of those active); and the GPU
    each record shows: an explaining reason first, then the deepest clock drop."""
    for rec in records:
        for r in rec["_per_gpu"]:
            r["explains"] = [n for n in r["throttle"] if (r["gpu"], n) in explaining]
        shown = min(rec["_per_gpu"], default=None, key=lambda r: (
            not r["explains"], not r["clock_drop"],
            (r["sm_clock_Hz"] or math.inf) / (tel.median_clock[r["gpu"]] or 1)))
        if shown:
            rec.update(shown)


def _explained(record: dict[str, Any]) -> bool:
    return any(r["explains"] or r["clock_drop"] for r in record["_per_gpu"])


def _mhz(hz: float | None) -> str:
    return "unknown" if hz is None else f"{hz / 1e6:,.0f} MHz"


def _causes(records: list[dict[str, Any]], tel: _Telemetry, share: str) -> list[str]:
    """One sentence per (GPU, cause), most frequent first: "7 of 9 drops coincide with ...";
    `share` is that sentence's start, with {k} and {n} to fill in."""
    counts: Counter[tuple[str, str]] = Counter()
    clocks: dict[tuple[str, str], list[float]] = {}
    for rec in records:
        for r in rec["_per_gpu"]:
            causes = list(r["explains"]) or (
                ["an SM clock drop"] if r["clock_drop"] else [])
            for cause in causes:
                counts[(r["gpu"], cause)] += 1
                if r["sm_clock_Hz"] is not None:
                    clocks.setdefault((r["gpu"], cause), []).append(r["sm_clock_Hz"])
    sentences = []
    for (g, cause), k in counts.most_common():
        seen = clocks.get((g, cause))
        clock = (f" (SM clock {_mhz(statistics.median(seen))} vs median "
                 f"{_mhz(tel.median_clock[g])})") if seen else ""
        start = share.format(k=k, n=len(records))
        sentences.append(f"{start} coincide with {cause} on GPU {g}{clock}")
    return sentences


def _pct(x: float | None, sign: bool = False) -> str:
    return "n/a" if x is None else fmt.signed_percent(100 * x) if sign else f"{x:.1%}"


# --- the judgement ---------------------------------------------------------------------------

POWER_LIMIT = "steady at its power limit"
UNCERTAIN = "uncertain"


def judge(windows: list[tuple[float, float]],
          telemetry: dict[str, Any] | None = None,
          clocks: list[float | None] | None = None, gpu: str = "0") -> dict[str, Any]:
    """{"judgement": "stable" | POWER_LIMIT | "throttling" | "noisy" | UNCERTAIN |
    "too short", "evidence": [sentences],
    "aligned_drops": [{"t": s, "ratio", "gpu", "throttle": [names active], "explains":
    [those of them active more often in drops than elsewhere], "clock_drop": bool (under 90%
    of the busy median), "sm_clock_Hz", "power_W", "temp_degC", "cpu_util"}, ...] (worst
    first, at most 20),
    "summary": summarize(windows), "reason": str | None, "clock": the clock view or None
    (see stability_clock.clock_view)}; reason completes "skipped, because …" when the
    judgement is "too short". `clocks`: the SM clock the probe read with each window (None
    where it read none); else the telemetry's samples of GPU `gpu` give each window's clock.

    POWER_LIMIT: throughput per GHz of each window's clock held steady while the power cap
    held the GPU and nothing worse did; "noisy" (a neighbour's doing, likely) only where the
    clock does not explain the spread; UNCERTAIN where the power cap held the GPU but no clock
    was read to tell."""
    if clocks is not None and len(clocks) == len(windows):
        by_t = {t: c for (t, _), c in zip(windows, clocks, strict=True)}
    else:
        by_t = None
    kept = clean(windows)
    s = summarize(kept)
    n, med = s["n_windows"], s["median"]
    out: dict[str, Any] = {"judgement": "too short", "evidence": [], "aligned_drops": [],
                           "summary": s, "reason": None, "clock": None}
    if n < MIN_WINDOWS:
        out["reason"] = (f"only {n} throughput window{' was' if n == 1 else 's were'} "
                         f"recorded, and judging stability needs at least {MIN_WINDOWS}")
        return out
    width = _window_width(kept)
    evidence = [f"CV {_pct(s['cv'])} over {n} windows of {width * 1e3:.0f} ms; worst 1% at "
                f"{_pct(s['worst_1pct_ratio'])} of the median; drift {_pct(s['drift'], True)}"]
    out["evidence"] = evidence
    if not med or med <= 0:
        out["judgement"] = "noisy"
        evidence.append("the median window throughput was 0")
        return out

    tel = _Telemetry(telemetry)
    aligned = [_align(t, v / med, width, tel) for t, v in kept]
    drops = [r for r in aligned if r["ratio"] < DROP]
    explaining, common = _over_represented(drops, [r for r in aligned if r["ratio"] >= DROP])
    _explain(aligned, explaining, tel)
    drops.sort(key=lambda r: r["ratio"])
    out["aligned_drops"] = [{k: v for k, v in r.items() if k != "_per_gpu"}
                            for r in drops[:MAX_ALIGNED]]
    if steady(s):
        out["judgement"] = "stable"
        return out
    view = sc.clock_view(kept, width, telemetry, gpu,
                       [by_t.get(t) for t, _ in kept] if by_t else None)
    out["clock"] = view
    if view and view["steady"] and sc.held(view["capped"], view["faults"]):
        out["judgement"] = POWER_LIMIT
        evidence += sc.follows(view, held=True)
        return out

    explained = [r for r in drops if _explained(r)]
    if drops and len(explained) / len(drops) >= EXPLAINED:
        out["judgement"] = "throttling"
        evidence += _causes(drops, tel, "{k} of {n} drops")
    elif slide := _slide(aligned, s, tel):
        out["judgement"] = "throttling"
        evidence += slide
    else:
        out["judgement"] = "noisy"
        if s["drift"] is not None and abs(s["drift"]) > STABLE_DRIFT:
            evidence.append(f"throughput moved {_pct(s['drift'], True)} from the first 10% of "
                            "windows to the last")
        evidence += _causes(drops, tel, "{k} of {n} drops")  # too few to be the cause
    if out["judgement"] == "noisy" and view and view["steady"]:
        # The clock explains the spread, though no power cap held it: the device slowed.
        out["judgement"] = "throttling"
        evidence += sc.follows(view, held=False)
        return out
    if out["judgement"] == "noisy" and view is None and sc.capped_unclocked(kept, width,
                                                                          telemetry, gpu):
        out["judgement"] = UNCERTAIN
        capped, _, _ = sc.reason_shares(kept, width, telemetry, gpu)
        evidence.append(f"the power cap was active in {capped:.0%} of the busy samples, and "
                        "no SM clock was read with the windows: whether the cap's clock or "
                        "another tenant moved the throughput cannot be told")
        return out
    if out["judgement"] == "noisy" and view:
        evidence.insert(1, sc.not_followed(view))
    if out["judgement"] == "noisy" or len(explained) < len(drops):
        evidence += common
    unexplained = len(drops) - len(explained)
    if unexplained:
        if not tel.t:
            why = ("; no telemetry was recorded for this probe, so throttling cannot be told "
                   "apart from another tenant or process")
        elif not tel.gpus:
            why = ("; the telemetry has no GPU and a CPU reports no throttle reasons, so "
                   "another tenant or process is the likely cause")
        else:
            why = (" with no throttle reason or clock drop in the telemetry: another tenant or "
                   "process is the likely cause")
        evidence.append(f"{unexplained} window{'s' if unexplained != 1 else ''} more than "
                        f"{1 - DROP:.0%} below the median{why}")
        evidence += _cpu_context(drops, tel)
    elif not drops and out["judgement"] == "noisy":
        evidence.append(f"no window fell more than {1 - DROP:.0%} below the median: the "
                        "spread is many small swings")
    return out


def _slide(aligned: list[dict[str, Any]], s: dict[str, Any], tel: _Telemetry) -> list[str]:
    """Thermal throttling often shows as a slide rather than as drops: when throughput fell
    across the run, ask the telemetry about the last 10% of the windows, against the rest."""
    if s["drift"] is None or s["drift"] >= -STABLE_DRIFT or not tel.gpus:
        return []
    k = max(1, len(aligned) // 10)
    tail = [dict(r, _per_gpu=[dict(g) for g in r["_per_gpu"]]) for r in aligned[-k:]]
    explaining, _ = _over_represented(tail, aligned[:-k])
    _explain(tail, explaining, tel)
    if sum(_explained(r) for r in tail) / len(tail) < EXPLAINED:
        return []
    return ([f"throughput slid {_pct(s['drift'], True)} from the first 10% of windows to the "
             "last"] + _causes(tail, tel, "{k} of the last {n} windows"))


def _cpu_context(drops: list[dict[str, Any]], tel: _Telemetry) -> list[str]:
    overall = [u for u in tel.cpu_util or [] if u is not None]
    during = [r["cpu_util"] for r in drops if r["cpu_util"] is not None]
    if not overall or not during:
        return []
    # Each drop's peak, not its mean: a competing process shows as a burst.
    return [f"host CPU utilisation around the drops peaked at {statistics.fmean(during):.0%} "
            f"(mean over the drops) vs {statistics.fmean(overall):.0%} over the probe"]


# --- a run's stability probe -----------------------------------------------------------------

def _sustained(run: RunResult) -> Measurement | None:
    pr = run.probe("stability")
    if pr is None or pr.status != "ok":
        return None
    return next((m for m in pr.measurements if m.metric == "sustained_flops"), None)


def run_windows(run: RunResult) -> tuple[list[tuple[float, float]], dict[str, Any] | None]:
    """The stability probe's windows as (s on its telemetry's time axis, FLOP/s), and that
    telemetry; ([], None) when the probe did not measure. Without a shared clock origin the
    windows start at 0, which lines them up only roughly (the worker's start-up differs)."""
    m = _sustained(run)
    if m is None:
        return [], None
    tel = ((run.extra.get("telemetry") or {}).get("probes") or {}).get("stability")
    t0, tel_t0 = m.context.get("t0_monotonic"), (tel or {}).get("t0_monotonic")
    offset = t0 - tel_t0 if isinstance(t0, (int, float)) and isinstance(tel_t0, (int, float)) \
        else 0.0
    starts = m.context.get("window_starts_s") or []
    return [(offset + t, v) for t, v in zip(starts, m.samples, strict=False)], tel


def judge_run(run: RunResult) -> dict[str, Any] | None:
    """The judgement of the run's stability probe (see judge), with what it ran; None when
    the probe did not measure."""
    m = _sustained(run)
    windows, tel = run_windows(run)
    if m is None or not windows:
        return None
    clocks = m.context.get("window_sm_clock_Hz")
    gpu = str(m.key.get("device") or "").partition(":")[2] or "0"
    got = judge(windows, tel, clocks if isinstance(clocks, list) else None, gpu)
    return {**got, "key": m.key, "median_flops": m.value,
            "seconds": m.context.get("seconds"), "window_s": m.context.get("window_s"),
            "aligned": tel is not None and "t0_monotonic" in tel}
