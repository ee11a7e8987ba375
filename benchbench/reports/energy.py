"""The energy and neighbours section of report.md: joules and watts per probe, J per image or
token, images (tokens) per kWh, and the CPU steal each probe saw. It renders what
analysis/energy computed; every missing figure carries its reason."""

from __future__ import annotations

from typing import Any

from benchbench.analysis import energy
from benchbench.core import units as fmt
from benchbench.core.names import probe_name
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


def _why(source: Any) -> str:
    """A source's reason without its status prefix: 'NVML is unavailable: …'."""
    text = str(source or "no reading recorded")
    for prefix in ("skipped, because ", "not measurable here: ", "not measured, because "):
        text = text.removeprefix(prefix)
    return text


def _not_measured(rows: list[dict[str, Any]]) -> str:
    """'Energy: not measured, because …' once, for a run where no probe has a reading."""
    gpu = list(dict.fromkeys(_why(r.get("gpu_source")) for r in rows))
    cpu = list(dict.fromkeys(_why(r.get("cpu_source")) for r in rows))
    return (f"Energy: not measured, because neither source could be read: GPU energy — "
            f"{'; '.join(gpu)}; CPU energy — {'; '.join(cpu)}.")


def _energy(run: RunResult) -> list[str]:
    rows = energy.energy_rows(run)
    if not rows:
        return ["Energy: not measured, because this run's telemetry has no energy readings (a "
                "run by an older benchbench, or the sampler failed).", ""]
    if all(r.get("gpu_J") is None and r.get("cpu_J") is None for r in rows):
        # A table of rows that each say "skipped / —" and the same reason three times says
        # less than this one line.
        return [_not_measured(rows), ""]
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
    """A line per probe whose steal was flagged, one for the rest, one per skip reason."""
    rows = energy.steal_rows(run)
    if not rows:
        return []
    out = [f"- CPU steal during {probe_name(r['probe'])}: {fmt.percent(r['fraction'])} ⚠ "
           "another tenant took this CPU time" for r in rows if r["flagged"]]
    calm = [r for r in rows if r["fraction"] is not None and not r["flagged"]]
    if len(calm) == 1:
        out.append(f"- CPU steal during {probe_name(calm[0]['probe'])}: "
                   f"{fmt.percent(calm[0]['fraction'])}")
    elif calm:
        top = max(calm, key=lambda r: r["fraction"])
        some = "every probe" if len(calm) == len(rows) else f"the {len(calm)} other probes"
        out.append(f"- CPU steal in {some}: at most {fmt.percent(top['fraction'])} (during "
                   f"{probe_name(top['probe'])}), below the flag for another tenant")
    skipped: dict[str, list[str]] = {}
    for r in rows:
        if r["fraction"] is None:
            skipped.setdefault(str(r["reason"]), []).append(probe_name(r["probe"]))
    out += [f"- CPU steal during {', '.join(names)}: skipped, because {why}"
            for why, names in skipped.items()]
    return ["CPU steal (time the hypervisor gave to other tenants) from /proc/stat, between "
            "the start and the end of each probe:", "", *out, ""]


def section(run: RunResult) -> list[str]:
    """## Energy: the energy table, or why there is none, and CPU steal."""
    return ["## Energy", "", *_energy(run), *_steal(run)]
