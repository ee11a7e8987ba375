"""The energy and neighbours section of report.md: joules and watts per probe, the power and J
per image or token over the training's timed steps, images (tokens) per kWh, and the CPU steal
each probe saw. It renders what analysis/energy computed, in three significant figures; every
missing figure carries its reason."""

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


def _per_sample(row: dict[str, Any]) -> str:
    if "per" not in row:
        return "—"
    if row.get("per_sample_J") is None:
        return "not measured"
    unit = "images" if row["per"] == "image" else "tokens"
    return (f"{energy.three(row['per_sample_J'])} J/{row['per']}, "
            f"{energy.three(row['per_kWh'])} {unit}/kWh")


def _probe_power(row: dict[str, Any]) -> str:
    """The mean power over the whole probe; a dash where start-up was most of it."""
    if row.get("watts") is None:
        return "—"
    share = row.get("timed_share")
    if share is not None and share < energy.MOSTLY_TIMED:
        return "— (mostly start-up)"
    return fmt.si(row["watts"], "W")


def _startup(row: dict[str, Any]) -> str | None:
    """What a training probe's mean power covered, where start-up was most of it."""
    share, seconds = row.get("timed_share"), row.get("seconds")
    if row.get("watts") is None or share is None or share >= energy.MOSTLY_TIMED \
            or not seconds:
        return None
    return (f"{row['probe']}: its timed steps took {fmt.seconds(share * seconds)} of its "
            f"{fmt.seconds(seconds)}; the rest was start-up (model builds, kernel "
            f"selection and autotuning, warm-up), so its mean power over the probe, "
            f"{fmt.si(row['watts'], 'W')}, is not the training's")


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
           "packages from RAPL. The mean power covers the whole probe, start-up included, "
           "and is left out where start-up was most of it. The power while timed and the "
           "energy per sample cover the best precision's own timed steps alone (round 1): "
           "NVML's energy counter read as they began and ended, over at least "
           f"{energy.MIN_WINDOW_S:g} s, since NVML averages a GPU's power over one second "
           "(each training probe's basis below).", ""]
    out += fmt.table(
        ["probe", "time", "GPU energy", "CPU energy", "mean power over the probe",
         "power while timed", "energy per sample"],
        [[r["probe"], fmt.seconds(r["seconds"]) if r.get("seconds") else "—",
          _joules(r["gpu_J"], r["gpu_source"]), _joules(r["cpu_J"], r["cpu_source"]),
          _probe_power(r),
          fmt.si(r["load_watts"], "W") if r.get("load_watts") is not None
          else "not measured" if "per" in r else "—", _per_sample(r)]
         for r in rows])
    reasons = list(dict.fromkeys(
        f"GPU energy {r['gpu_source']}" for r in rows
        if r.get("gpu_J") is None and r.get("gpu_source")))
    reasons += list(dict.fromkeys(
        f"CPU energy {r['cpu_source']}" for r in rows if r.get("cpu_J") is None
        and r.get("cpu_source")))
    out += [f"- {why}." for why in reasons]
    out += [f"- {r['probe']}: {r['basis']}." for r in rows if r.get("basis")]
    startup = [f"- {text}." for r in rows if (text := _startup(r))]
    out += startup
    return out + ([""] if reasons or startup or any(r.get("basis") for r in rows) else [])


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
