"""Energy a probe used, in J: CPU packages from RAPL counters, GPUs from NVML, or power samples.

Read the counters before and after a probe and take the difference, or integrate the power
samples the telemetry already keeps when no counter exists. Only files are read; NVML values
come in as numbers, so nothing here imports pynvml. Units: J, W, s; energy per sample in J.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

POWERCAP = "sys/class/powercap"
# Top-level zones only: intel-rapl:0, intel-rapl:1 (one per package, plus psys on some
# laptops). Subzones (intel-rapl:0:0 core, :1 dram) are inside their package, so adding them
# would count twice; intel-rapl-mmio:0 is the same package read another way. Recent kernels
# register AMD Zen's RAPL under the same intel-rapl name.
_TOP_ZONE = re.compile(r"intel-rapl:\d+")
# The platform (psys) zone already contains the packages.
_CONTAINS_OTHERS = ("psys",)
_JOULES_PER_KWH = 3.6e6


@dataclass(frozen=True)
class RaplZone:
    """One powercap zone at one instant. The counter wraps to 0 after max_energy_range_uj."""

    name: str  # "package-0", "psys", ...
    energy_uj: int
    max_energy_range_uj: int | None


def _scan(root: Path) -> tuple[dict[str, RaplZone] | None, str | None]:
    base = Path(root) / POWERCAP
    try:
        dirs = sorted(p for p in base.iterdir() if _TOP_ZONE.fullmatch(p.name))
    except OSError:
        dirs = []
    if not dirs:
        return None, (f"/{POWERCAP} has no RAPL zone (not an Intel or AMD CPU, the "
                      "intel_rapl driver is not loaded, or a VM that does not pass RAPL on)")
    zones = {}
    for d in dirs:
        try:
            energy = int((d / "energy_uj").read_text())
        except PermissionError:
            return None, (f"/{POWERCAP}/{d.name}/energy_uj is readable only by root (since "
                          "the PLATYPUS fix, CVE-2020-8694: Linux 5.10 and its backports)")
        except (OSError, ValueError) as e:
            why = e.strerror if isinstance(e, OSError) and e.strerror else type(e).__name__
            return None, f"/{POWERCAP}/{d.name}/energy_uj could not be read ({why})"
        try:
            name = (d / "name").read_text().strip() or d.name
        except OSError:
            name = d.name
        try:
            wrap: int | None = int((d / "max_energy_range_uj").read_text())
        except (OSError, ValueError):
            wrap = None  # a wrapped interval then gives None instead of a wrong number
        zones[d.name] = RaplZone(name, energy, wrap)
    return zones, None


def read_rapl(root: Path = Path("/")) -> dict[str, RaplZone] | None:
    """The top-level RAPL zones by directory name ("intel-rapl:0": RaplZone); None when there
    are none or one cannot be read (a partial sum would look like a real total)."""
    return _scan(root)[0]


def rapl_unavailable_reason(root: Path = Path("/")) -> str | None:
    """Completes "skipped, because …" when read_rapl gives None, else None."""
    return _scan(root)[1]


def rapl_joules(before: dict[str, RaplZone] | None,
                after: dict[str, RaplZone] | None) -> float | None:
    """Energy of the CPU packages between two readings, in J; None when nothing comparable.

    One wrap of a counter is undone with max_energy_range_uj. A longer interval can hide
    several wraps (the range is ~262 kJ on many servers: about 15 min at 300 W), so read at
    least that often."""
    if not before or not after:
        return None
    total_uj = 0
    common = [k for k in before if k in after and before[k].name not in _CONTAINS_OTHERS]
    if not common:
        return None
    for key in common:
        delta = after[key].energy_uj - before[key].energy_uj
        if delta < 0:
            wrap = after[key].max_energy_range_uj
            if not wrap:
                return None
            delta += wrap
            if delta < 0:
                return None
        total_uj += delta
    return total_uj / 1e6


def nvml_energy_joules(before_mJ: int | None, after_mJ: int | None) -> float | None:  # noqa: N803
    """GPU energy between two nvmlDeviceGetTotalEnergyConsumption readings (mJ since the
    driver loaded), in J; None when either is missing or the counter went back (a reload)."""
    if before_mJ is None or after_mJ is None or after_mJ < before_mJ:
        return None
    return (after_mJ - before_mJ) / 1e3


def integrate_power(t: list[float | None], watts: list[float | None],
                    start: float = -math.inf, end: float = math.inf
                    ) -> tuple[float | None, float]:
    """(J, s covered): the trapezoid integral over consecutive samples that both have a value,
    within `start`..`end` (the clock of `t`; the whole series by default), the power at a
    window's edge interpolated from its neighbours.

    A gap (None) is skipped, not bridged, so the J are only for the seconds covered; scale by
    the probe's duration yourself if you accept that assumption. (None, 0.0) without a pair
    inside the window."""
    pts = list(zip(t, watts, strict=False))
    joules, seconds = 0.0, 0.0
    for (t0, w0), (t1, w1) in zip(pts, pts[1:], strict=False):
        if t0 is None or t1 is None or w0 is None or w1 is None:
            continue
        a, b = max(t0, start), min(t1, end)
        if t1 <= t0 or b <= a:
            continue
        wa = w0 if a == t0 else w0 + (w1 - w0) * (a - t0) / (t1 - t0)
        wb = w1 if b == t1 else w0 + (w1 - w0) * (b - t0) / (t1 - t0)
        joules += (wa + wb) / 2 * (b - a)
        seconds += b - a
    return (joules if seconds > 0 else None), seconds


def per_sample_energy(joules: float | None, samples: float) -> float | None:
    """J per image (or token); None when no sample was processed or the energy is unknown."""
    if joules is None or samples <= 0:
        return None
    return joules / samples


def samples_per_kwh(samples_per_s: float, watts: float | None) -> float | None:
    """Images (or tokens) per kWh at a steady rate and power; None without a positive power."""
    if watts is None or watts <= 0:
        return None
    return samples_per_s / watts * _JOULES_PER_KWH


def average_watts(joules: float | None, seconds: float) -> float | None:
    """Mean power in W over `seconds`; None when either is unknown or no time passed."""
    if joules is None or seconds <= 0:
        return None
    return joules / seconds
