"""The energy and neighbours section of report.md: joules and watts per probe, J per image or
token, images (tokens) per kWh, and the CPU steal each probe saw. It renders what
analysis/energy computed; every missing figure carries its reason."""

from __future__ import annotations

from typing import Any

from benchbench.analysis import energy
from benchbench.core import units as fmt
from benchbench.core.results import RunResult


def _joules(j: Any, source: Any) -> str:
    if isinstance(j, (int, float)):
        return f"{fmt.si(j, 'J')} ({source})"
    text = str(source or "not measured")
    return "not measurable here" if text.startswith("not measurable") else \
        "skipped" if text.startswith("skipped") else text


def _per_sample(row: dict[str, Any]) -> tuple[str, str]:
    if row.get("per_sample_J") is None:
        return "—", "—"
    per, unit = row["per"], "images" if row["per"] == "image" else "tokens"
    return f"{row['per_sample_J']:.3g} J/{per}", f"{fmt.figure(row['per_kWh'])} {unit}/kWh"


def _energy(run: RunResult) -> list[str]:
    rows = energy.energy_rows(run)
    if not rows:
        return ["Energy: skipped, because this run's telemetry has no energy readings (a run "
                "by an older benchbench, or the sampler failed).", ""]
    out = ["GPU energy from NVML's energy counter (or its power samples, integrated), CPU "
           "packages from RAPL; average power is over the probe's first round, all its "
           "precisions together; energy per sample is the power during the best precision's "
           "own timed steps over its throughput (each probe's basis below).", ""]
    out += fmt.table(
        ["probe", "time", "GPU energy", "CPU energy", "average power", "energy per sample",
         "per kWh"],
        [[r["probe"], fmt.seconds(r["seconds"]) if r.get("seconds") else "—",
          _joules(r["gpu_J"], r["gpu_source"]), _joules(r["cpu_J"], r["cpu_source"]),
          fmt.si(r["watts"], "W") if r.get("watts") is not None else "—", *_per_sample(r)]
         for r in rows])
    reasons = list(dict.fromkeys(
        f"GPU energy {r['gpu_source']}" for r in rows
        if r.get("gpu_J") is None and r.get("gpu_source")))
    reasons += list(dict.fromkeys(
        f"CPU energy {r['cpu_source']}" for r in rows if r.get("cpu_J") is None
        and r.get("cpu_source")))
    out += [f"- {why}." for why in reasons]
    out += [f"- {r['probe']}: {r['basis']}." for r in rows if r.get("basis")]
    return out + ([""] if reasons or any(r.get("basis") for r in rows) else [])


def _steal(run: RunResult) -> list[str]:
    rows = energy.steal_rows(run)
    if not rows:
        return []
    out = []
    for r in rows:
        if r["fraction"] is None:
            out.append(f"- CPU steal during {r['probe']}: skipped, because {r['reason']}")
        else:
            mark = " ⚠ another tenant took this CPU time" if r["flagged"] else ""
            out.append(f"- CPU steal during {r['probe']}: {fmt.percent(r['fraction'])}{mark}")
    return ["CPU steal (time the hypervisor gave to other tenants) from /proc/stat, between "
            "the start and the end of each probe:", "", *out, ""]


def section(run: RunResult) -> list[str]:
    """## Energy: the energy table and the per-probe steal lines."""
    return ["## Energy", "", *_energy(run), *_steal(run)]
