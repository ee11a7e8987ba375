"""What the run's probes cost in energy: J, average watts under load, J per image or token,
images (tokens) per kWh; and the CPU steal each probe saw.

Pure functions over a RunResult. The joules and the mean power over a whole probe (start-up
included) are the telemetry's (run.extra["telemetry"]["probes"][name]["energy"], see
benchbench.machine.telemetry_energy). A training probe's J per image is the energy of its best
precision's own timed steps in round 1 over the images they processed: on a GPU from NVML's
energy counter read as the steps began and ended (the measurement's "timed_energy"), else
from the telemetry's power samples over those seconds ("timed_monotonic_s"), and only over
MIN_WINDOW_S or more, since NVML's power is a one-second average. Start-up, model builds,
autotuning and the other precisions are left out. Nothing is estimated: a figure that cannot
be computed is None, and the row says why ("not measured, because …").
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


def _best(run: RunResult, probe: str) -> Measurement | None:
    return max(cap.metric(cap.ok_probe(run, probe), "throughput"), key=lambda m: m.value,
               default=None)


# The timed steps' power samples are trusted only when they cover this share of their seconds
# (a window shorter than one stored telemetry point gives nothing to integrate).
MIN_COVERED = 0.5
# A GPU's energy per sample needs timed steps at least this long. NVML's power reading on
# Ampere and later is a one-second average (nvmlDeviceGetPowerUsage; on A100 and H100 its
# sensor samples a quarter of that second, Yang et al., SC24), so a shorter window reads the
# start-up before it; the energy counter is read over the same steps and held to the same
# length.
MIN_WINDOW_S = 1.0
# The training probe's time is mostly start-up (builds, autotuning, warm-up) when its timed
# steps took under this share of it: its mean power is then not the training's.
MOSTLY_TIMED = 0.5


def counter_reading(m: Measurement) -> dict[str, float] | None:
    """The energy counter over the measurement's timed steps (context "timed_energy", round
    1): {"J", "s" (wall seconds between the reads), "samples" (images or tokens)}, or None."""
    got = m.context.get("timed_energy")
    if not isinstance(got, dict):
        return None
    vals = {k: got.get(k) for k in ("J", "s", "samples")}
    if not all(isinstance(v, (int, float)) and v >= 0 for v in vals.values()) \
            or not vals["s"] or not vals["samples"]:
        return None
    return {k: float(v) for k, v in vals.items() if v is not None}


def timed_window_s(m: Measurement) -> float | None:
    """Seconds of the measurement's timed steps in round 1 (its counter's wall seconds, else
    its recorded span, else the sum of its step times), or None where none was recorded."""
    counter = counter_reading(m)
    if counter:
        return counter["s"]
    window = m.context.get("timed_monotonic_s")
    if isinstance(window, list) and len(window) == 2 and all(
            isinstance(x, (int, float)) for x in window) and window[1] > window[0]:
        return float(window[1] - window[0])
    timed = m.context.get("timed_s")
    return float(timed) if isinstance(timed, (int, float)) and timed > 0 else None


def _too_short(best: Measurement, seconds: float) -> str:
    return (f"not measured, because {best.key.get('precision')}'s timed window was "
            f"{seconds:.2g} s, under the {MIN_WINDOW_S:g} s over which NVML averages a GPU's "
            "power")


def _samples_mean(tel: dict[str, Any], watts: list[float | None] | None, a: float, b: float
                  ) -> float | None:
    """Mean W of a stored power series over a..b (the telemetry's axis), or None where its
    samples cover under MIN_COVERED of it."""
    joules, covered = integrate_power(tel.get("t") or [], watts or [], a, b)
    return None if joules is None or covered < MIN_COVERED * (b - a) else joules / covered


def _window(run: RunResult, name: str, best: Measurement
            ) -> tuple[dict[str, Any], float, float] | None:
    """(the probe's telemetry, start, end of the timed steps on its axis), or None."""
    window = best.context.get("timed_monotonic_s")
    tel = _telemetry_probes(run).get(name) or {}
    origin = tel.get("t0_monotonic")
    if not (isinstance(window, list) and len(window) == 2 and isinstance(origin, (int, float))
            and tel.get("t")):
        return None
    a, b = window[0] - origin, window[1] - origin
    return (tel, a, b) if b > a else None


def _steps(best: Measurement, seconds: float) -> str:
    return f"its {best.context.get('steps', '?')} timed steps ({seconds:.2g} s)"


def _timed_load(run: RunResult, name: str, best: Measurement
                ) -> tuple[tuple[float | None, float | None, str] | None, str]:
    """((W of the device that trained, W of the CPU packages or None, how) over the best
    precision's own timed steps in round 1, or None; and why not, when None ("not measured,
    because …"). On a GPU: its energy counter over those steps where the run read it, else its
    power samples; neither over a window under MIN_WINDOW_S. On a CPU: the RAPL power samples."""
    device = str(best.key.get("device") or "cpu")
    span = _window(run, name, best)
    cpu_w = _samples_mean(span[0], span[0].get("cpu_power_W"), span[1], span[2]) \
        if span else None
    cpu_how = f"CPU packages {three(cpu_w)} W (RAPL)" if cpu_w is not None else \
        "CPU not measurable here"
    seconds = timed_window_s(best)
    if seconds is None:
        return None, "not measured, because this run recorded no timed-step times"
    if not device.startswith("cuda"):
        source = str((probe_energy(run, name) or {}).get("cpu_source") or "")
        if cpu_w is None and source.startswith("not measurable"):
            return None, f"not measured, because the CPU energy is {source}"
        if cpu_w is None:
            return None, (f"not measured, because the CPU's power samples cover under "
                          f"{MIN_COVERED:.0%} of {_steps(best, seconds)}")
        return (None, cpu_w, f"{cpu_how}, over {_steps(best, seconds)}"), ""
    if seconds < MIN_WINDOW_S:
        return None, _too_short(best, seconds)
    gpu = f"GPU {_index(device)}"
    counter = counter_reading(best)
    if counter:
        watts = counter["J"] / counter["s"]
        return (watts, cpu_w, f"{gpu} {three(watts)} W (NVML energy counter) + {cpu_how}, "
                              f"over {_steps(best, seconds)}"), ""
    gpu_w = _samples_mean(span[0], ((span[0].get("gpus") or {}).get(_index(device)) or {})
                          .get("power_W"), span[1], span[2]) if span else None
    if gpu_w is None:
        return None, (f"not measured, because the stored power samples cover under "
                      f"{MIN_COVERED:.0%} of {_steps(best, seconds)}")
    return (gpu_w, cpu_w, f"{gpu} {three(gpu_w)} W (NVML power samples, one-second "
                          f"averages) + {cpu_how}, over {_steps(best, seconds)}"), ""


def three(x: float) -> str:
    """Three significant figures, as every energy figure is given (NVML's power is good to a
    few percent): 4,690; 588; 0.125; 28.8 million; 3.65 billion."""
    for scale, word in ((1e9, "billion"), (1e6, "million")):
        if abs(x) >= scale:
            return f"{x / scale:.3g} {word}"
    return f"{float(f'{x:.3g}'):,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def _first_round(best: Measurement) -> float:
    """The throughput of round 1, whose telemetry the run keeps."""
    rounds = best.context.get("round_values")
    return float(rounds[0]) if isinstance(rounds, list) and rounds else best.value


def _timed_share(run: RunResult, name: str, seconds: Any) -> float | None:
    """The share of a training probe's first round its timed steps took (every precision's),
    or None where it cannot be told."""
    pr = cap.ok_probe(run, name)
    timed = [t for m in (pr.measurements if pr else []) if m.metric == "throughput"
             and (t := timed_window_s(m)) is not None]
    if not timed or not isinstance(seconds, (int, float)) or seconds <= 0:
        return None
    return min(1.0, sum(timed) / seconds)


def energy_rows(run: RunResult) -> list[dict[str, Any]]:
    """One row per probe whose telemetry recorded energy, in run order, then each training
    probe without telemetry whose timed steps read the energy counter (a simulated run):

    {"probe", "seconds", "gpu_J" (all GPUs), "gpu_source", "cpu_J", "cpu_source", "joules"
    (what was measured of GPUs + CPU, or None), "watts" (their average over the probe, start-up
    included), "timed_share" (a training probe: the share of its first round its timed steps
    took, or None)} and, for a training probe with a throughput, "per" ("image"/"token"),
    "precision", "throughput", "unit", "load_watts" (over the timed steps), "per_sample_J",
    "per_kWh", "basis" (how, or "not measured, because …")."""
    rows = []
    names = list(_telemetry_probes(run))
    names += [n for n in TRAINING if n not in names and (b := _best(run, n)) is not None
              and counter_reading(b)]
    for name in names:
        energy = probe_energy(run, name) or {}
        if not energy and name not in TRAINING:
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
            "gpu_source": energy.get("gpu_source") or "not recorded (no telemetry)",
            "cpu_J": cpu_j, "cpu_source": energy.get("cpu_source") or "not recorded",
            "joules": sum(parts) if parts else None, "watts": watts,
            "timed_share": _timed_share(run, name, energy.get("seconds"))
            if name in TRAINING else None}
        best = _best(run, name) if name in TRAINING else None
        if best is not None:
            row.update(_training_row(run, name, best))
        elif name in TRAINING:
            row["basis"] = (f"no energy per {TRAINING[name][0]}, because "
                            f"{cap.why_missing(run, name)}")
        rows.append(row)
    return rows


def _training_row(run: RunResult, name: str, best: Measurement) -> dict[str, Any]:
    one, many = TRAINING[name]
    timed, why = _timed_load(run, name, best)
    counter = counter_reading(best)
    if counter and timed:
        rate = counter["samples"] / counter["s"]  # the counter's own window
    else:
        rate = _first_round(best)
    out: dict[str, Any] = {"per": one, "precision": best.key.get("precision"),
                           "throughput": rate, "unit": best.unit, "load_watts": None,
                           "per_sample_J": None, "per_kWh": None}
    if timed is None:
        return {**out, "basis": f"energy per {one} {why}"}
    gpu_w, cpu_w, how = timed
    load = (gpu_w or 0.0) + (cpu_w or 0.0)
    basis = (f"{three(load)} W during {best.key.get('precision')}'s timed steps only ({how}, "
             f"round 1) ÷ its throughput there, {three(rate)} {many}/s")
    return {**out, "load_watts": load, "per_sample_J": per_sample_energy(load, rate),
            "per_kWh": samples_per_kwh(rate, load), "basis": basis}


def load_power(run: RunResult) -> dict[str, Any] | None:
    """The power one training device drew under load, from the training probes' energy:
    {"gpu_W": the trained GPU's mean W or None (a CPU run), "cpu_W": the CPU packages' mean W
    or None, "probes": [...], "basis": text}, over each probe's best precision's timed steps
    (see _timed_load); None when no training probe measured it there."""
    gpu, cpu, probes, how = [], [], [], []
    for name in TRAINING:
        best = _best(run, name)
        if best is None:
            continue
        timed, _ = _timed_load(run, name, best)
        if timed is None:
            continue
        gpu_w, cpu_w, basis = timed
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
