"""What a node's own run shows about one measurement: its PCIe link, its clocks and throttle
reasons under that probe's load, its ECC state, persistence mode, power limit, driver and the
other software, and another tenant's CPU steal; and which of these differ from another node's.

The fleet holds an outlier's facts against those of the group's median node: a fact they
share explains nothing. Facts come from the run's own records only: the environment snapshot
(NVML's GPU records), the telemetry of the probe, and host_device_copy's link read under load.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchbench.analysis.stability import busy_median_clock
from benchbench.compare.environment import EXPLAINING, env_value
from benchbench.core.gpus import gpu_for
from benchbench.core.results import RunResult

# Numbers that differ by less than this share of the larger are the same fact: clocks and
# power limits wander by a few MHz and watts.
SAME_WITHIN = 0.05
# CPU steal is a share of time: a difference below 2 points of it is noise (machine/steal.py
# flags a probe above the same 2%).
STEAL_POINTS = 0.02
IDLE_REASONS = frozenset({"gpu_idle"})  # an idle GPU's clock reason says nothing of the load
GROUPED = frozenset({"GPUs", "GPU count", "CPU"})  # the group's hardware: the same by design


@dataclass(frozen=True)
class Fact:
    name: str
    value: Any  # str, a number or None
    unit: str | None = None  # for a number: its SI unit ("Hz", "W", "ratio")


@dataclass(frozen=True)
class Evidence:
    """One fact of an outlier's run that the group's median node does not share."""

    name: str
    mine: Any
    theirs: Any
    unit: str | None = None


def _link(gen: Any, width: Any) -> str | None:
    return f"Gen{gen} x{width}" if gen is not None and width is not None else None


def _pcie(run: RunResult, device: str, g: dict[str, Any]) -> Fact | None:
    """The link host_device_copy read while it copied (an idle link trains down), else the
    snapshot's at idle; with the link it is capable of where it runs below it."""
    probe = run.probe("host_device_copy")
    ctx = next((m.context for m in (probe.measurements if probe else [])
                if m.metric == "peak_bandwidth" and m.key.get("device") == device
                and m.context.get("pcie_gen_current") is not None), None)
    src, name = (ctx, "PCIe link under load") if ctx else (g, "PCIe link at idle")
    now = _link(src.get("pcie_gen_current"), src.get("pcie_width_current"))
    top = _link(src.get("pcie_gen_max") or g.get("pcie_gen_max"),
                src.get("pcie_width_max") or g.get("pcie_width_max"))
    if now is None:
        return None
    return Fact(name, now if top in (None, now) else f"{now} (capable {top})")


def _telemetry(run: RunResult, probe: str) -> dict[str, Any]:
    tel = (run.extra.get("telemetry") or {}).get("probes") or {}
    got = tel.get(probe)
    return got if isinstance(got, dict) else {}


def _rows(g: dict[str, Any]) -> str | None:
    rows = g.get("remapped_rows")
    if not isinstance(rows, dict):
        return None
    parts = [f"{rows.get('uncorrectable', 0)} uncorrectable"]
    parts += [w for w in ("pending", "failure") if rows.get(w)]
    return ", ".join(parts)


def _gpu_facts(run: RunResult, probe: str, device: str) -> list[Fact]:
    g = gpu_for(run.environment or {}, device) or {}
    tel = (_telemetry(run, probe).get("gpus") or {}).get(device.split(":", 1)[1]) or {}
    reasons = sorted({r for names in tel.get("throttle") or [] for r in names or []}
                     - IDLE_REASONS)
    retired = [g.get(k) for k in ("retired_pages_double_bit", "retired_pages_single_bit")]
    onoff = {True: "on", False: "off", None: None}
    return [f for f in (
        _pcie(run, device, g),
        Fact("SM clock under load", busy_median_clock(tel), "Hz"),
        Fact("throttle reasons under load", ", ".join(reasons) or "none") if tel else None,
        Fact("power limit", g.get("power_limit"), "W"),
        Fact("ECC", onoff[g.get("ecc_current")]),
        Fact("uncorrected ECC errors since driver load", g.get("ecc_uncorrected_volatile")),
        Fact("retired pages", sum(r for r in retired if r) if any(
            r is not None for r in retired) else None),
        Fact("remapped rows", _rows(g)),
        Fact("persistence mode", onoff[g.get("persistence_mode")]),
        Fact("other processes on the GPU", len(g["other_processes"])
             if isinstance(g.get("other_processes"), list) else None),
    ) if f is not None and f.value is not None]


def facts(run: RunResult, probe: str, device: str | None) -> list[Fact]:
    """Every fact of `run` that bears on `probe` measured on `device` (a cuda:N, or None)."""
    out = _gpu_facts(run, probe, device) if device and device.startswith("cuda:") else []
    steal = _telemetry(run, probe).get("steal_fraction")
    if isinstance(steal, (int, float)):
        out.append(Fact("CPU steal", float(steal), "ratio"))
    env = run.environment or {}
    out += [Fact(name, v) for name in EXPLAINING if name not in GROUPED
            and (v := env_value(env, name)) is not None]
    return out


def flags(run: RunResult, probe: str) -> list[str]:
    """What the telemetry flagged during the probe (throttling, clock drops, steal)."""
    got = ((run.extra.get("telemetry") or {}).get("flags") or {}).get(probe) or []
    return [str(f) for f in got]


def _differs(a: Fact, b: Fact) -> bool:
    if isinstance(a.value, (int, float)) and isinstance(b.value, (int, float)):
        if a.unit == "ratio":
            return abs(a.value - b.value) > STEAL_POINTS
        top = max(abs(a.value), abs(b.value))
        return top > 0 and abs(a.value - b.value) / top > SAME_WITHIN
    return str(a.value) != str(b.value)


def clocked(mine: tuple[float, float] | None, theirs: tuple[float, float] | None
            ) -> list[Evidence]:
    """Where both figures' samples carry their SM clock (analysis/clocks.pooled: the clock, the
    rate per GHz of it), the clock they ran at and the work per GHz of it, each where it
    differs: a node slow at the same work per cycle ran at a lower clock."""
    if mine is None or theirs is None:
        return []
    out = [Evidence("SM clock while its samples ran", mine[0], theirs[0], "Hz"),
           Evidence("work per GHz of that clock", mine[1], theirs[1], "FLOP/s")]
    return [e for e in out if _differs(Fact(e.name, e.mine, e.unit),
                                       Fact(e.name, e.theirs, e.unit))]


def against(mine: RunResult, theirs: RunResult, probe: str, my_device: str | None,
            their_device: str | None) -> list[Evidence]:
    """The facts both runs record and differ in, then the flags only `mine` raised."""
    other = {f.name: f for f in facts(theirs, probe, their_device)}
    out = [Evidence(f.name, f.value, other[f.name].value, f.unit)
           for f in facts(mine, probe, my_device)
           if f.name in other and _differs(f, other[f.name])]
    seen = set(flags(theirs, probe))
    return out + [Evidence("flagged", x, None) for x in flags(mine, probe) if x not in seen]
