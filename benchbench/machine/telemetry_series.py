"""Pure functions on telemetry series: throttle-reason decoding, downsampling, and the flags.

No thread, no psutil, no NVML: the sampler in benchbench.machine.telemetry calls these on its raw
samples, and anything that reads a stored run can call them on the stored series (the shape is
in benchbench.machine.telemetry's docstring). Utilisation is a ratio from 0 to 1, clocks are in Hz.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

# 300 points draw a readable line and keep results.json small: a 128-core host adds ~40k
# per-core numbers per probe at this bound.
MAX_POINTS = 300
FLAG_SHARE = 0.05  # a reason active in fewer samples than this is a blip, not throttling
CLOCK_DROP = 0.9  # SM clock under this share of its busy median in the probe is a drop...
BUSY_UTIL = 0.5  # ...only while the GPU is this busy: an idle GPU lowers its clocks on purpose
CPU_PEGGED = 0.95
# Probes that are meant to load the host CPU; for any other, a pegged CPU is worth a flag.
CPU_LOADING = frozenset({"cpu_compute", "cpu_dataloading", "host_memory"})

# nvml.h, nvmlClocksEventReason* (formerly nvmlClocksThrottleReason*). None marks a bit that is
# not throttling: GpuIdle (nothing to run), ApplicationsClocksSetting and DisplayClockSetting
# (clocks someone configured; the environment snapshot records them).
CLOCK_EVENT_REASONS: dict[int, str | None] = {
    0x1: None, 0x2: None, 0x100: None,
    0x4: "power cap",  # SwPowerCap: the driver holds power at the board's limit
    0x8: "hw slowdown",
    0x10: "sync boost",
    0x20: "sw thermal slowdown",
    0x40: "hw thermal slowdown",
    0x80: "hw power brake",
    0x200: "board limit",
    0x400: "reliability",
}
# HwSlowdown is also raised alongside these two, which say why: keep only the specific one.
_HW_SPECIFIC = ("hw thermal slowdown", "hw power brake")
_REASON_ORDER = [n for n in CLOCK_EVENT_REASONS.values() if n]
_PHRASE = {"power cap": "power-capped"}


def decode_clock_events(mask: int) -> list[str]:
    """Names of the throttle reasons set in an NVML clock-event bitmask, in bit order."""
    names = []
    for bit in (1 << i for i in range(int(mask).bit_length())):
        if mask & bit:
            name = CLOCK_EVENT_REASONS.get(bit, f"reason 0x{bit:x}")  # a bit newer than us
            if name:
                names.append(name)
    if any(n in names for n in _HW_SPECIFIC):
        names = [n for n in names if n != "hw slowdown"]
    return names


# --- downsampling ----------------------------------------------------------------------------

def _union(bucket: list[list[str]]) -> list[str]:
    names = {n for v in bucket for n in v}
    return [n for n in _REASON_ORDER if n in names] + sorted(names - set(_REASON_ORDER))


def _mean(bucket: list[Any]) -> Any:
    if isinstance(bucket[0], list):  # per-core: mean of each core (hotplug may change the count)
        return [sum(col) / len(col) for col in zip(*bucket, strict=False)]
    return sum(bucket) / len(bucket)


def downsample(values: list[Any], factor: int, flags: bool = False) -> list[Any]:
    """One point per `factor` samples: the mean (per element for lists), or for throttle
    flags the union, so a reason seen once in a bucket stays visible. Nulls are skipped; a
    bucket of nulls gives null."""
    out = []
    for i in range(0, len(values), max(1, factor)):
        got = [v for v in values[i:i + factor] if v is not None]
        out.append(None if not got else _union(got) if flags else _mean(got))
    return out


def downsample_factor(n: int, max_points: int = MAX_POINTS) -> int:
    return max(1, math.ceil(n / max(1, max_points)))


def round_series(values: list[Any], digits: int) -> list[Any]:
    """Each value (and each element of a per-core list) rounded; 0 digits gives an int."""
    def one(x: Any) -> Any:
        if x is None:
            return None
        if isinstance(x, list):
            return [one(v) for v in x]
        return round(x) if digits == 0 else round(x, digits)
    return [one(v) for v in values]


# --- flags -----------------------------------------------------------------------------------

def throttle_flags(probe: dict[str, Any]) -> list[str]:
    """Facts that make a probe's numbers suspect: a throttle reason active in at least 5% of
    the samples, and an SM clock under 90% of its median while the GPU was busy. The busy
    median, not the peak: an H100 or H200 boosts to ~1980 MHz for a moment and then holds
    ~1750 under dense load, and against the peak every compute probe would be flagged.

    Works on raw series (the sampler calls it before downsampling, so shares are exact) and
    on stored ones, where a reason counts for its whole bucket."""
    flags = []
    for gpu, s in probe.get("gpus", {}).items():
        readings = [v for v in s.get("throttle", []) if v is not None]
        for reason in _union(readings) if readings else []:
            share = sum(reason in v for v in readings) / len(readings)
            if share >= FLAG_SHARE:
                what = _PHRASE.get(reason, f"clocks limited by {reason}")
                flags.append(f"GPU {gpu} {what} during {share:.0%} of the probe")
        clocks, util = s.get("sm_clock_Hz", []), s.get("util", [])
        busy = [c for c, u in zip(clocks, util, strict=False)  # util may be unreadable: []
                if c is not None and u is not None and u > BUSY_UTIL]
        med = statistics.median(busy) if busy else None
        low = [c for c in busy if med and c < CLOCK_DROP * med]
        if med and len(low) / len(busy) >= FLAG_SHARE:
            flags.append(f"GPU {gpu} SM clock fell to {min(low) / med:.0%} of its busy median "
                         f"of {med / 1e6:.0f} MHz in this probe, and stayed under "
                         f"{CLOCK_DROP:.0%} of it in {len(low) / len(busy):.0%} of the busy "
                         f"samples")
    return flags


def cpu_flags(probe: dict[str, Any], resource: str | None) -> list[str]:
    """A pegged host CPU during a probe that is not meant to load it (a GPU, link or storage
    probe): the host may have held it back."""
    util = [u for u in probe.get("cpu_util", []) if u is not None]
    if resource in CPU_LOADING or not util:
        return []
    mean = sum(util) / len(util)
    if mean <= CPU_PEGGED:
        return []
    cores = next((len(c) for c in probe.get("cpu_util_per_core", []) if c), None)
    over = f" over all {cores} cores" if cores else ""
    return [f"CPU utilisation averaged {mean:.0%}{over} during this probe"]
