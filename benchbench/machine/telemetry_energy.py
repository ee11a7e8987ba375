"""CPU steal and energy over one probe: counters read at its start and end, and their sums.

The sampler (benchbench.machine.telemetry) takes a Mark when it opens and another when it
stops: /proc/stat's CPU times, the RAPL counters and each GPU's NVML energy counter. usage()
turns the pair, and the raw power samples for a GPU without the counter, into the probe's
"steal_fraction" and "energy". Files and NVML are only read. Units: J, s, and steal as a
ratio from 0 to 1. A probe's entry in run.extra["telemetry"]["probes"] gains:

    "steal_fraction": 0.041 or None, "steal_reason": None or "why it is None",
    "energy": {"gpu_J": {"0": J}, "gpu_seconds": {"0": s covered},
               "gpu_source": "NVML energy counter" | "power samples integrated"
                             | "skipped, because …",
               "cpu_J": J or None, "cpu_source": "RAPL" | "not measurable here: …",
               "seconds": s from the first reading to the last}

GPUs are keyed as in the series. gpu_seconds is what each GPU's joules cover: the probe's
seconds for the counter, the sampled seconds for integrated power (a gap is never bridged).
A GPU whose counters differ in kind names both: "NVML energy counter for GPU 0; power samples
integrated for GPU 1".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchbench.machine.energy import (
    RaplZone,
    integrate_power,
    nvml_energy_joules,
    rapl_joules,
    rapl_unavailable_reason,
    read_rapl,
)
from benchbench.machine.nvml import best_effort
from benchbench.machine.steal import (
    CpuTimes,
    read_proc_stat,
    steal_fraction,
    unavailable_reason,
)

COUNTER = "NVML energy counter"
INTEGRATED = "power samples integrated"


@dataclass(frozen=True)
class Mark:
    """The counters at one instant: `t` on the sampler's clock, mJ per GPU (by the run's key)."""

    t: float
    cpu: CpuTimes | None
    rapl: dict[str, RaplZone] | None
    rapl_reason: str | None  # why rapl is None
    gpu_mJ: dict[str, int | None]  # in mJ, as NVML answers


def take_mark(t: float, root: Path, nvml: Any, handles: dict[str, Any]) -> Mark:
    """Read every counter once; a counter that cannot be read is None."""
    rapl = read_rapl(root)
    return Mark(t, read_proc_stat(root), rapl, None if rapl else rapl_unavailable_reason(root),
                {i: best_effort(lambda h=h: int(nvml.nvmlDeviceGetTotalEnergyConsumption(h)))
                 for i, h in handles.items()})


def _gpu_energy(start: Mark, end: Mark, raw: dict[str, Any], sampled: str
                ) -> tuple[dict[str, float], dict[str, float], str]:
    """(J per GPU, seconds each covers, the source). The counter where both readings exist;
    else the GPU's raw power samples, integrated over the seconds they cover."""
    joules: dict[str, float] = {}
    seconds: dict[str, float] = {}
    how: dict[str, str] = {}
    gpus = raw.get("gpus") or {}
    everyone = sorted(set(start.gpu_mJ) | set(gpus), key=int)
    for i in everyone:
        j = nvml_energy_joules(start.gpu_mJ.get(i), end.gpu_mJ.get(i))
        if j is not None:
            joules[i], seconds[i], how[i] = j, end.t - start.t, COUNTER
            continue
        j, covered = integrate_power(raw.get("t") or [], (gpus.get(i) or {}).get("power_W") or [])
        if j is not None:
            joules[i], seconds[i], how[i] = j, covered, INTEGRATED
    if not everyone:
        return {}, {}, sampled if sampled.startswith("skipped") else \
            "skipped, because the sampler had no GPU to read"
    missing = [i for i in everyone if i not in joules]
    if not joules:
        return {}, {}, (f"skipped, because NVML gave neither an energy counter nor a power "
                        f"reading for GPU {', '.join(missing)}")
    kinds = sorted(set(how.values()))
    if len(kinds) == 1:
        text = kinds[0]
    else:
        text = "; ".join(f"{k} for GPU {', '.join(i for i in how if how[i] == k)}"
                         for k in kinds)
    if missing:
        text += f"; GPU {', '.join(missing)} not measured (no counter, no power reading)"
    return joules, seconds, text


def usage(start: Mark | None, end: Mark | None, raw: dict[str, Any], sampled: str
          ) -> dict[str, Any]:
    """{"steal_fraction", "steal_reason", "energy"} for the interval from start to end.
    `raw` is the sampler's raw series; `sampled` its GPU source ("NVML" or "skipped, because
    …")."""
    if start is None or end is None:
        why = ("the sampler did not take its first reading" if start is None else
               "the sampler was still in a driver call when the probe ended")
        return {"steal_fraction": None, "steal_reason": why,
                "energy": {"gpu_J": {}, "gpu_seconds": {}, "gpu_source": f"skipped, because {why}",
                           "cpu_J": None, "cpu_source": f"not measurable here: {why}",
                           "seconds": None}}
    fraction = steal_fraction(start.cpu, end.cpu) if start.cpu and end.cpu else None
    reason = None
    if fraction is None:
        reason = unavailable_reason(start.cpu, end.cpu) or "no steal counter could be compared"
    gpu_j, gpu_s, gpu_source = _gpu_energy(start, end, raw, sampled)
    cpu_j = rapl_joules(start.rapl, end.rapl)
    cpu_source = "RAPL" if cpu_j is not None else "not measurable here: " + (
        start.rapl_reason or end.rapl_reason
        or "the RAPL counters wrapped without a known range, or their zones changed")
    return {
        "steal_fraction": None if fraction is None else round(fraction, 5),
        "steal_reason": reason,
        "energy": {"gpu_J": {i: round(j, 3) for i, j in gpu_j.items()},
                   "gpu_seconds": {i: round(s, 3) for i, s in gpu_s.items()},
                   "gpu_source": gpu_source,
                   "cpu_J": None if cpu_j is None else round(cpu_j, 3), "cpu_source": cpu_source,
                   "seconds": round(end.t - start.t, 3)},
    }
