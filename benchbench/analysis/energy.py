"""What the run's probes cost in energy: J, average watts under load, J per image or token,
images (tokens) per kWh; and the CPU steal each probe saw.

Pure functions over a RunResult. The joules are the telemetry's, per probe
(run.extra["telemetry"]["probes"][name]["energy"], see benchbench.machine.telemetry_energy);
the throughput is the training probes'. A training probe's J per image is the power its best
precision drew during its own timed steps, integrated from the telemetry's power samples over
those seconds (the measurement's "timed_monotonic_s", round 1, whose telemetry is kept),
divided by that round's throughput: start-up, model builds, autotuning and the other
precisions are left out, and the row says so. A run recorded before the steps carried their
times falls back to the probe's whole first round, and says that instead. Nothing is
estimated: a figure that cannot be computed is None and the row says why.
"""

from __future__ import annotations

from typing import Any

from benchbench.analysis import capacities as cap
from benchbench.core.results import Measurement, RunResult
from benchbench.machine.energy import (
    average_watts,
    integrate_power,
    per_sample_energy,
    samples_per_kwh,
)
from benchbench.machine.steal import STEAL_FLAG

# The training probes, what one unit of their throughput is, and its plural.
TRAINING = {"resnet50": ("image", "images"), "transformer": ("token", "tokens")}


def _telemetry_probes(run: RunResult) -> dict[str, Any]:
    tel = run.extra.get("telemetry")
    probes = tel.get("probes") if isinstance(tel, dict) else None
    return probes if isinstance(probes, dict) else {}


def probe_energy(run: RunResult, name: str) -> dict[str, Any] | None:
    """The probe's stored energy record, or None when its telemetry has none."""
    energy = (_telemetry_probes(run).get(name) or {}).get("energy")
    return energy if isinstance(energy, dict) else None


def steal_rows(run: RunResult) -> list[dict[str, Any]]:
    """Per probe with telemetry, in run order: {"probe", "fraction" (0..1 or None), "reason",
    "flagged" (above STEAL_FLAG)}."""
    out = []
    for name, entry in _telemetry_probes(run).items():
        if not isinstance(entry, dict) or "steal_fraction" not in entry:
            continue
        f = entry.get("steal_fraction")
        out.append({"probe": name, "fraction": f, "reason": entry.get("steal_reason"),
                    "flagged": f is not None and f > STEAL_FLAG})
    return out


def _gpu_watts(energy: dict[str, Any]) -> dict[str, float]:
    """Average W per GPU over the seconds its joules cover."""
    seconds = energy.get("gpu_seconds") or {}
    out = {}
    for i, j in (energy.get("gpu_J") or {}).items():
        w = average_watts(j, float(seconds.get(i) or energy.get("seconds") or 0))
        if w is not None:
            out[str(i)] = w
    return out


def _cpu_watts(energy: dict[str, Any]) -> float | None:
    return average_watts(energy.get("cpu_J"), float(energy.get("seconds") or 0))


def _index(device: str) -> str:
    return device.partition(":")[2] or "0"


def _how(device: str, gpu_w: float | None, gpu_how: str, cpu_w: float | None, cpu_why: str
         ) -> str:
    """The load's basis in words: the GPU that trained (on a GPU) + the CPU packages."""
    cpu_text = f"CPU packages {cpu_w:,.0f} W (RAPL)" if cpu_w is not None else f"CPU {cpu_why}"
    if device.startswith("cuda"):
        return f"GPU {_index(device)} {gpu_w:,.0f} W ({gpu_how}) + {cpu_text}"
    return cpu_text


def _load(energy: dict[str, Any], device: str) -> tuple[float | None, float | None, str]:
    """(W of the device that trained, W of the CPU packages or None, the basis or the reason
    there is none). On a GPU it is that GPU (+ the CPU when RAPL was readable); on a CPU, the
    CPU packages alone."""
    cpu_w = _cpu_watts(energy)
    cpu_why = energy.get("cpu_source") or "not measurable here"
    if device.startswith("cuda"):
        gpu_w = _gpu_watts(energy).get(_index(device))
        if gpu_w is None:
            return None, cpu_w, (f"skipped, because GPU {_index(device)}'s energy was not "
                                 f"measured ({energy.get('gpu_source')})")
        return gpu_w, cpu_w, _how(device, gpu_w, energy.get("gpu_source") or "?", cpu_w,
                                  cpu_why)
    if cpu_w is None:
        return None, None, f"skipped, because the CPU energy is {cpu_why}"
    return None, cpu_w, _how(device, None, "", cpu_w, cpu_why)


def _best(run: RunResult, probe: str) -> Measurement | None:
    return max(cap.metric(cap.ok_probe(run, probe), "throughput"), key=lambda m: m.value,
               default=None)


# The timed steps' power is trusted only when the samples cover this share of their seconds
# (a window shorter than one stored telemetry point gives nothing to integrate).
MIN_COVERED = 0.5


def _timed_load(run: RunResult, name: str, best: Measurement
                ) -> tuple[tuple[float | None, float | None, str] | None, str]:
    """((W of the device that trained, W of the CPU packages or None, how) over the best
    precision's own timed steps in round 1, from the stored power samples, or None; and why
    not, when None: the measurement carries no step times, or the samples do not cover them."""
    window = best.context.get("timed_monotonic_s")
    tel = _telemetry_probes(run).get(name) or {}
    origin, t = tel.get("t0_monotonic"), tel.get("t") or []
    if not (isinstance(window, list) and len(window) == 2 and isinstance(origin, (int, float))
            and t):
        return None, "this run recorded no timed-step times"
    a, b = window[0] - origin, window[1] - origin
    if b <= a:
        return None, "this run recorded no timed-step times"

    def mean_w(watts: list[float | None] | None) -> float | None:
        joules, covered = integrate_power(t, watts or [], a, b)
        return None if joules is None or covered < MIN_COVERED * (b - a) else joules / covered

    device = str(best.key.get("device") or "cpu")
    steps = f"its {best.context.get('steps', '?')} timed steps ({b - a:.1f} s)"
    short = (f"the stored power samples cover under {MIN_COVERED:.0%} of {steps}")
    cpu_w = mean_w(tel.get("cpu_power_W"))
    gpu_w = None
    if device.startswith("cuda"):
        gpu_w = mean_w(((tel.get("gpus") or {}).get(_index(device)) or {}).get("power_W"))
        if gpu_w is None:
            return None, short
    elif cpu_w is None:
        return None, short
    how = _how(device, gpu_w, "NVML power samples", cpu_w, "not measurable here")
    return (gpu_w, cpu_w, f"{how}, over {steps}"), ""


def _first_round(best: Measurement) -> float:
    """The throughput of round 1, whose telemetry the run keeps."""
    rounds = best.context.get("round_values")
    return float(rounds[0]) if isinstance(rounds, list) and rounds else best.value


def energy_rows(run: RunResult) -> list[dict[str, Any]]:
    """One row per probe whose telemetry recorded energy, in run order:

    {"probe", "seconds", "gpu_J" (all GPUs), "gpu_source", "cpu_J", "cpu_source", "joules"
    (what was measured of GPUs + CPU, or None), "watts" (their average)} and, for a training
    probe with a throughput, "per" ("image"/"token"), "precision", "throughput", "unit",
    "load_watts", "per_sample_J", "per_kWh", "basis" (how, or "skipped, because …")."""
    rows = []
    for name in _telemetry_probes(run):
        energy = probe_energy(run, name)
        if energy is None:
            continue
        gpu_j = sum(float(j) for j in (energy.get("gpu_J") or {}).values()) \
            if energy.get("gpu_J") else None
        cpu_j = energy.get("cpu_J")
        parts = [j for j in (gpu_j, cpu_j) if j is not None]
        gpu_w = _gpu_watts(energy)
        cpu_w = _cpu_watts(energy)
        watts = sum(gpu_w.values()) + (cpu_w or 0.0) if gpu_w or cpu_w is not None else None
        row: dict[str, Any] = {
            "probe": name, "seconds": energy.get("seconds"), "gpu_J": gpu_j,
            "gpu_source": energy.get("gpu_source"), "cpu_J": cpu_j,
            "cpu_source": energy.get("cpu_source"), "joules": sum(parts) if parts else None,
            "watts": watts}
        best = _best(run, name) if name in TRAINING else None
        if best is not None:
            row.update(_training_row(run, name, best, energy))
        elif name in TRAINING:
            row["basis"] = (f"no energy per {TRAINING[name][0]}, because "
                            f"{cap.why_missing(run, name)}")
        rows.append(row)
    return rows


def _training_row(run: RunResult, name: str, best: Measurement, energy: dict[str, Any]
                  ) -> dict[str, Any]:
    one, many = TRAINING[name]
    timed, untimed = _timed_load(run, name, best)
    rate = _first_round(best) if timed else best.value
    shown = f"{rate:,.0f} {many}/s" if rate >= 100 else f"{rate:.3g} {many}/s"
    if timed:
        gpu_w, cpu_w, how = timed
        load: float | None = (gpu_w or 0.0) + (cpu_w or 0.0)
        basis = (f"{load:,.0f} W during {best.key.get('precision')}'s timed steps only ({how}, "
                 f"round 1) ÷ its throughput there, {shown}")
    else:
        device = str(best.key.get("device") or "cpu")
        gpu_w, cpu_w, how = _load(energy, device)
        load = None if how.startswith("skipped") else (gpu_w or 0.0) + (cpu_w or 0.0)
        basis = how if load is None else (
            f"{load:,.0f} W under load ({how}), averaged over the probe's first round and all "
            f"its precisions ({untimed}), ÷ its best throughput, "
            f"{best.key.get('precision')} at {shown}")
    return {"per": one, "precision": best.key.get("precision"), "throughput": rate,
            "unit": best.unit, "load_watts": load,
            "per_sample_J": per_sample_energy(load, rate) if load else None,
            "per_kWh": samples_per_kwh(rate, load), "basis": basis}


def load_power(run: RunResult) -> dict[str, Any] | None:
    """The power one training device drew under load, from the training probes' energy:
    {"gpu_W": the trained GPU's mean W or None (a CPU run), "cpu_W": the CPU packages' mean W
    or None, "probes": [...], "basis": text}, over each probe's best precision's timed steps
    where the run recorded them; None when no training probe measured it."""
    gpu, cpu, probes, how = [], [], [], []
    for name in TRAINING:
        best, energy = _best(run, name), probe_energy(run, name)
        if best is None or energy is None:
            continue
        timed, untimed = _timed_load(run, name, best)
        gpu_w, cpu_w, basis = timed or _load(energy, str(best.key.get("device") or "cpu"))
        if basis.startswith("skipped"):
            continue
        probes.append(name)
        how.append(f"{name}: {basis}")
        if gpu_w is not None:
            gpu.append(gpu_w)
        if cpu_w is not None:
            cpu.append(cpu_w)
    if not probes:
        return None
    return {"gpu_W": sum(gpu) / len(gpu) if gpu else None,
            "cpu_W": sum(cpu) / len(cpu) if cpu else None,
            "probes": probes, "basis": "; ".join(how)}


def measured_watts(run: RunResult) -> float | None:
    """Average GPU + CPU watts under load across the training probes (the GPU that trained
    and the CPU packages where RAPL was readable); None when not measured."""
    load = load_power(run)
    if load is None:
        return None
    return (load["gpu_W"] or 0.0) + (load["cpu_W"] or 0.0)


def images_per_kwh(run: RunResult) -> tuple[float | None, str]:
    """(ResNet50 images per kWh on one device at its best throughput, the basis), or
    (None, why not)."""
    row = next((r for r in energy_rows(run) if r["probe"] == "resnet50"), None)
    if row is None:
        why = ("the resnet50 probe has no energy telemetry"
               if cap.ok_probe(run, "resnet50") else cap.why_missing(run, "resnet50"))
        return None, f"skipped, because {why}"
    if row.get("per_kWh") is None:
        return None, row.get("basis") or "skipped, because resnet50 measured no throughput"
    return row["per_kWh"], row["basis"]
