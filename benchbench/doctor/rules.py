"""The configuration doctor's rules over an environment snapshot: host, driver, GPU health, NICs.

Pure functions of the snapshot dict (environment.snapshot()) and, where a run measured the same
fact under load, of the RunResult. Nothing here changes a setting: a `fix` is advice printed
for an administrator, never run. The buyer's guide's rules only ever warn; a fact that breaks
or slows training (a pending row remap, a driver below the CUDA major's floor, thermal
throttling during the run) fails.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from benchbench.core import units as fmt
from benchbench.core.gpus import gpu_for
from benchbench.core.results import RunResult

STATUSES = ("pass", "warn", "fail", "skipped")
GUIDE = "buyer's guide rule"


@dataclass(frozen=True)
class Check:
    """One finding: a fact held against a threshold, whose rule it is, and what would fix it."""

    name: str
    status: str  # pass | warn | fail | skipped
    measured: str  # the fact with its units; "unknown" when skipped
    threshold: str
    source: str  # whose rule: the buyer's guide, NVIDIA's table, this run's measurement ...
    fix: str | None = None  # the command or change an administrator would make; never run here
    detail: str | None = None  # a note; for a skipped check, the reason ("because ...")

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status {self.status!r} is not one of {STATUSES}")

    @property
    def label(self) -> str:
        return f"skipped, because {self.detail}" if self.status == "skipped" else self.status


def skipped(name: str, threshold: str, source: str, reason: str) -> Check:
    return Check(name, "skipped", "unknown", threshold, source, None, reason)


def count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def worst(statuses: list[str]) -> str:
    return next((s for s in ("fail", "warn") if s in statuses), "pass")


def gpus(env: dict[str, Any]) -> list[dict[str, Any]]:
    return [g for g in env.get("gpus") or [] if isinstance(g, dict)]


def no_fact(env: dict[str, Any], what: str) -> str:
    """Why a per-GPU fact is unknown: no GPU at all, or NVML did not answer."""
    reason = env.get("gpus_reason")
    if not gpus(env):
        return f"no GPU is visible ({reason or 'no reason recorded'})"
    return f"NVML does not report {what} for these GPUs" + (f" ({reason})" if reason else "")


# --- host --------------------------------------------------------------------------------------

def check_ram(env: dict[str, Any]) -> Check:
    name, threshold = "RAM vs GPU memory", "≥ 2× total GPU memory (3× preferred)"
    ram = (env.get("host") or {}).get("memory_total")
    sizes = [g.get("memory_total") for g in gpus(env)]
    if not sizes or None in sizes:
        return skipped(name, threshold, GUIDE, no_fact(env, "GPU memory")
                       + ": the rule sizes RAM by GPU memory")
    if not ram:
        return skipped(name, threshold, GUIDE, "the snapshot has no RAM size")
    total = sum(sizes)
    ratio = ram / total
    measured = (f"{fmt.iec(ram)} RAM = {ratio:.1f}× {fmt.iec(total)} GPU memory "
                f"({count(len(sizes), 'GPU')})")
    # Pinned staging buffers, loader workers, the page cache that holds the dataset after the
    # first epoch, and checkpoints assembled in host memory all scale with GPU memory.
    if ratio < 2:
        return Check(name, "warn", measured, threshold, GUIDE,
                     f"add RAM: at least {fmt.iec(2 * total)}, {fmt.iec(3 * total)} preferred")
    note = None if ratio >= 3 else f"3× preferred ({fmt.iec(3 * total)})"
    return Check(name, "pass", measured, threshold, GUIDE, None, note)


def check_cpu(env: dict[str, Any]) -> Check:
    host = env.get("host") or {}
    usable, physical = host.get("cores_usable"), host.get("cores_physical")
    n = len(gpus(env))
    need = max(8, 4 * n)
    name = "CPU cores"
    per_gpu = f"; ≥ 4 per GPU: ≥ {need} for {count(n, 'GPU')}" if n else ""
    threshold = "≥ 8 cores, 16–32 preferred" + per_gpu
    source = GUIDE + (" (8, 16–32 preferred); ≥ 4 per GPU: a common rule of thumb" if n else "")
    if not usable:
        return skipped(name, threshold, source, "the snapshot has no usable-core count")
    # A hyperthread sibling decodes far fewer images than a core: count physical cores.
    cores = min(usable, physical) if physical else usable
    measured = (f"{cores} cores usable ({usable} CPUs left by CPU affinity and the cgroup "
                f"quota; {physical} physical, {host.get('cores_logical')} logical)")
    limited = physical and usable < physical
    fix = ("raise the CPU quota or cpuset of this container or job (docker --cpus / --cpuset-cpus"
           ", Slurm --cpus-per-task)" if limited else "a CPU (or a second socket) with more cores")
    notes = []
    if limited:
        notes.append(f"the cgroup quota or CPU affinity leaves {usable} of {physical} physical "
                     "cores to benchbench")
    if not n:
        notes.append("no GPU is visible, so the per-GPU rule is not applied")
    if cores < need:
        return Check(name, "warn", measured, threshold, source, fix, "; ".join(notes) or None)
    if cores < 16:
        notes.append("16–32 preferred")
    return Check(name, "pass", measured, threshold, source, None, "; ".join(notes) or None)


# --- driver and CUDA ---------------------------------------------------------------------------

# NVIDIA CUDA Toolkit release notes, Table 3 "CUDA Toolkit and Corresponding Driver Versions",
# Linux x86_64 column, GA releases (docs.nvidia.com/cuda/cuda-toolkit-release-notes, as of the
# CUDA 13.2 notes).
TOOLKIT_DRIVER = {
    (11, 8): "520.61.05", (12, 0): "525.60.13", (12, 1): "530.30.02", (12, 2): "535.54.03",
    (12, 3): "545.23.06", (12, 4): "550.54.14", (12, 5): "555.42.02", (12, 6): "560.28.03",
    (12, 8): "570.26", (12, 9): "575.51.03", (13, 0): "580.65.06", (13, 1): "590.44.01",
    (13, 2): "595.45.04",
}
# NVIDIA CUDA compatibility guide, minor-version compatibility: any toolkit of a major runs on
# this driver or newer, without features that need a newer driver (PTX JIT of newer PTX fails).
MAJOR_FLOOR = {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}
NVIDIA_TABLE = ("NVIDIA CUDA release notes, Table 3 (toolkit and minimum driver) and "
                "minor-version compatibility")


def version_tuple(text: str | None) -> tuple[int, ...] | None:
    """'550.54.15' -> (550, 54, 15); missing parts are 0, so '570.26' is (570, 26, 0)."""
    parts = re.findall(r"\d+", str(text or ""))
    return tuple(int(p) for p in (parts + ["0", "0", "0"])[:3]) if parts else None


def check_driver_guide(env: dict[str, Any]) -> Check:
    name, threshold = "driver and CUDA (guide)", "driver ≥ 535, CUDA 12.0 or newer"
    driver, cuda = env.get("driver"), env.get("cuda_driver")
    if not driver:
        return skipped(name, threshold, GUIDE, no_fact(env, "the driver version"))
    d, c = version_tuple(driver), version_tuple(cuda)
    measured = f"driver {driver}, CUDA {cuda or '?'} (the newest CUDA this driver supports)"
    if d and d[0] < 535 or c and c[:2] < (12, 0):
        return Check(name, "warn", measured, threshold, GUIDE,
                     "upgrade to a current data-center driver branch (R535 LTS, R570 or R580 "
                     "LTS) from NVIDIA's CUDA repository or your distribution")
    return Check(name, "pass", measured, threshold, GUIDE)


def check_driver_torch(env: dict[str, Any]) -> Check:
    name = "driver for torch's CUDA"
    facts = env.get("torch")
    tc, driver = (facts or {}).get("torch_cuda"), env.get("driver")
    threshold = "the toolkit's minimum driver (Table 3); below the major's floor CUDA fails"
    if facts is None:
        return skipped(name, threshold, NVIDIA_TABLE, "the snapshot has no torch facts")
    if not tc:
        return skipped(name, threshold, NVIDIA_TABLE,
                       f"torch {facts.get('torch') or '(not installed)'} is not built with CUDA")
    if not driver:
        return skipped(name, threshold, NVIDIA_TABLE, no_fact(env, "the driver version"))
    want, have = version_tuple(tc), version_tuple(driver)
    if want is None or have is None or want[0] not in MAJOR_FLOOR:
        return skipped(name, threshold, NVIDIA_TABLE, f"CUDA {tc} is not in the table")
    known = [k for k in TOOLKIT_DRIVER if k[0] == want[0] and k <= want[:2]]
    toolkit = TOOLKIT_DRIVER[max(known)] if known else MAJOR_FLOOR[want[0]]
    floor = MAJOR_FLOOR[want[0]]
    threshold = (f"≥ {toolkit} for CUDA {tc}; ≥ {floor} for any CUDA {want[0]}.x through "
                 "minor-version compatibility")
    measured = f"driver {driver}; torch {facts.get('torch')} built for CUDA {tc}"
    fix = (f"upgrade the driver to ≥ {toolkit}, or install a torch built for a CUDA this driver "
           f"supports (CUDA {env.get('cuda_driver') or '?'} or older)")
    if have < version_tuple(floor):
        return Check(name, "fail", measured, threshold, NVIDIA_TABLE, fix,
                     f"a CUDA {want[0]}.x build needs an R{floor.split('.')[0]}+ driver: CUDA "
                     "will not initialise")
    if have < version_tuple(toolkit):
        return Check(name, "warn", measured, threshold, NVIDIA_TABLE, fix,
                     f"runs through CUDA minor-version compatibility (≥ {floor}), with limits: "
                     "PTX JIT of newer PTX fails and features that need the newer driver are "
                     "missing")
    return Check(name, "pass", measured, threshold, NVIDIA_TABLE)


# --- GPU state ---------------------------------------------------------------------------------

def check_persistence(env: dict[str, Any]) -> Check:
    name, threshold = "persistence mode", "on"
    source = "NVIDIA driver persistence documentation"
    known = [g for g in gpus(env) if g.get("persistence_mode") is not None]
    if not known:
        return skipped(name, threshold, source, no_fact(env, "persistence mode"))
    off = [str(g.get("index")) for g in known if not g["persistence_mode"]]
    if not off:
        return Check(name, "pass", f"on ({count(len(known), 'GPU')})", threshold, source)
    return Check(name, "warn", f"off on GPU {', '.join(off)}", threshold, source,
                 "`sudo systemctl enable --now nvidia-persistenced` (or `sudo nvidia-smi -pm 1`"
                 ", which lasts until reboot)",
                 "without it the driver unloads when the last CUDA process exits: every start "
                 "pays driver initialisation again")


def _loaded_links(env: dict[str, Any], run: RunResult | None) -> dict[int, dict[str, Any]]:
    """NVML GPU index -> the PCIe link host_device_copy read from NVML while copies were
    running. The probe names GPUs as the run saw them (cuda:N under CUDA_VISIBLE_DEVICES), so
    each is matched to its NVML record by UUID."""
    pr = run.probe("host_device_copy") if run else None
    out: dict[int, dict[str, Any]] = {}
    for m in pr.measurements if pr else []:
        g = gpu_for(env, str(m.key.get("device", "")))
        if g is not None and g.get("index") is not None \
                and m.context.get("pcie_gen_current") is not None:
            out.setdefault(int(g["index"]), m.context)
    return out


def check_pcie(env: dict[str, Any], run: RunResult | None) -> Check:
    name, threshold = "PCIe link", "current = maximum generation and width, under load"
    source = "NVML link state"
    loaded = _loaded_links(env, run)
    rows, statuses = [], []
    for g in gpus(env):
        i = g.get("index")
        link = loaded.get(i) or g
        gen, width = link.get("pcie_gen_current"), link.get("pcie_width_current")
        gmax = link.get("pcie_gen_max") or g.get("pcie_gen_max")
        wmax = link.get("pcie_width_max") or g.get("pcie_width_max")
        if None in (gen, width, gmax, wmax):
            continue
        when = "under load" if i in loaded else "at idle"
        rows.append(f"GPU {i}: Gen{gen} x{width} of Gen{gmax} x{wmax} {when}")
        short = gen < gmax or width < wmax
        statuses.append(("fail" if i in loaded else "warn") if short else "pass")
    if not rows:
        return skipped(name, threshold, source, no_fact(env, "the PCIe link"))
    status = worst(statuses)
    if loaded:
        source = "measured: NVML link state read by host_device_copy under load"
    if status == "pass":
        return Check(name, status, "; ".join(rows), threshold, source)
    if status == "fail":
        return Check(name, status, "; ".join(rows), threshold, source,
                     "reseat the GPU or move it to a full-width slot; check risers, cables and "
                     "the BIOS PCIe speed and bifurcation settings",
                     "the link ran below its maximum while copies were in flight")
    return Check(name, status, "; ".join(rows), threshold, source,
                 "`benchbench run --only host_device_copy` reads the link under load",
                 "idle links train down to save power, so this reading may be harmless")


# Clock-event reasons that are no throttling: an idle GPU, clocks an administrator chose, the
# display clock, and sync boost (a group of GPUs held to the slowest one's clock).
_NOT_THROTTLING = ("idle", "applicationsclock", "userdefinedclock", "displayclock", "syncboost")


def throttle_kind(reason: str) -> str | None:
    """'fail' for thermal, power-brake or hardware slowdown; 'warn' for the software power cap
    (usual at full load on many data-center GPUs) and other limits or clock drops; None for
    what is not throttling. Takes NVML reason names ('hw_thermal_slowdown') and the telemetry
    module's flag sentences ('GPU 0 power-capped during 35% of the probe')."""
    n = re.sub(r"[^a-z]", "", reason.lower())
    if any(k in n for k in _NOT_THROTTLING):
        return None
    if "thermal" in n or "brake" in n or "hwslowdown" in n:
        return "fail"
    if any(k in n for k in ("power", "slowdown", "throttl", "limit", "clockfell")):
        return "warn"
    return None  # a flag about something else, e.g. a pegged host CPU


def _telemetry(run: RunResult | None) -> tuple[dict[str, list[str]], bool]:
    """(probe -> flags, whether GPU clock-event reasons were sampled during the run)."""
    tel = (run.extra.get("telemetry") if run else None) or {}
    flags = tel.get("flags")
    sampled = isinstance(flags, dict) and str((tel.get("source") or {}).get("gpu", "")) == "NVML"
    return (flags if isinstance(flags, dict) else {}), sampled


def check_throttling(env: dict[str, Any], run: RunResult | None) -> Check:
    name = "clock throttling"
    threshold = ("no thermal, power-brake or hardware slowdown (idle, application clocks, display "
                 "clock and sync boost are not throttling)")
    flags, sampled = _telemetry(run)
    found = [(f"{probe}: {r}", r) for probe, rs in flags.items() for r in rs or []]
    known = [g for g in gpus(env) if g.get("clock_event_reasons") is not None]
    found += [(f"GPU {g.get('index')} {r} at the snapshot", r) for g in known
              for r in g["clock_event_reasons"]]
    if not sampled and not known:
        return skipped(name, threshold, "NVML clock-event reasons",
                       no_fact(env, "clock-event reasons")
                       + (", and the run's telemetry sampled no GPU" if run else ""))
    source = ("measured: NVML clock-event reasons sampled during the run" if sampled
              else "NVML clock-event reasons at the snapshot")
    hits = [(text, throttle_kind(r)) for text, r in found if throttle_kind(r)]
    lowered = [g for g in gpus(env) if g.get("power_limit") and g.get("power_limit_default")
               and g["power_limit"] < 0.99 * g["power_limit_default"]]
    capped = [f"GPU {g.get('index')} power limit {g['power_limit']:g} W, below its default "
              f"{g['power_limit_default']:g} W" for g in lowered]
    status = worst([k for _, k in hits] + ["warn"] * len(capped))
    measured = "; ".join([text for text, _ in hits] + capped) or "none"
    note = None if sampled else ("one reading at the snapshot, not under load; a run with "
                                 "telemetry samples the reasons during each probe")
    if status == "pass":
        return Check(name, status, measured, threshold, source, None, note)
    fixes = []
    if any(k == "fail" for _, k in hits):
        fixes.append("check cooling (airflow, fans, inlet temperature) and power delivery (PSU "
                     "redundancy, power-brake signal); watch `nvidia-smi -q -d PERFORMANCE` "
                     "during a run")
    if lowered:
        fixes.append("restore the default power limit: " + ", ".join(
            f"`sudo nvidia-smi -i {g.get('index')} -pl {g['power_limit_default']:g}`"
            for g in lowered))
    if not fixes:
        note = ("the GPU held its power limit or dropped its clocks: usual at full load on many "
                "data-center GPUs, but the numbers are below what the GPU can do cooler")
    return Check(name, status, measured, threshold, source, "; ".join(fixes) or None, note)


def _gpu_memory_problems(g: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(failures, warnings) of one GPU's memory-error counters."""
    fail, warn = [], []
    rows = g.get("remapped_rows") or {}
    if rows.get("pending"):
        fail.append("a row remap is pending (needs a GPU reset)")
    if rows.get("failure"):
        fail.append("a row remap failed")
    if g.get("retired_pages_pending"):
        fail.append("a page retirement is pending (needs a GPU reset)")
    if g.get("ecc_uncorrected_volatile"):
        fail.append(f"{g['ecc_uncorrected_volatile']} uncorrected ECC errors since the driver "
                    "loaded")
    if g.get("ecc_uncorrected_aggregate") and not g.get("ecc_uncorrected_volatile"):
        warn.append(f"{g['ecc_uncorrected_aggregate']} uncorrected ECC errors in its lifetime")
    retired = (g.get("retired_pages_double_bit") or 0) + (g.get("retired_pages_single_bit") or 0)
    if retired:
        warn.append(f"{retired} retired pages")
    if rows.get("uncorrectable"):
        warn.append(f"{rows['uncorrectable']} rows remapped after uncorrectable errors")
    if g.get("ecc_current") is False:
        warn.append("ECC is off, so memory errors go undetected")
    return fail, warn


_MEMORY_KEYS = ("ecc_uncorrected_volatile", "ecc_uncorrected_aggregate", "retired_pages_double_bit",
                "retired_pages_single_bit", "retired_pages_pending", "remapped_rows")


def check_memory_errors(env: dict[str, Any]) -> Check:
    name = "ECC and memory errors"
    threshold = ("no uncorrected ECC error since the driver loaded, no pending page retirement "
                 "or row remap, no remap failure")
    source = "NVML memory error counters (NVIDIA GPU memory error management)"
    known = [g for g in gpus(env) if any(g.get(k) is not None for k in _MEMORY_KEYS)]
    if not known:
        return skipped(name, threshold, source, no_fact(env, "ECC or row-remapping counters")
                       + (" (GeForce GPUs have no ECC)" if gpus(env) else ""))
    fails, warns = [], []
    for g in known:
        f, w = _gpu_memory_problems(g)
        fails += [f"GPU {g.get('index')}: {x}" for x in f]
        warns += [f"GPU {g.get('index')}: {x}" for x in w]
    if not fails and not warns:
        return Check(name, "pass", "no uncorrected errors, retired pages or pending remaps on "
                                   + count(len(known), "GPU"), threshold, source)
    fix = ("drain the GPU, then reset it (`sudo nvidia-smi -r -i N`) or reboot: benchbench never "
           "resets a GPU; if errors recur or a remap failed, ask the vendor for an RMA "
           "(`nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER` shows the counters)")
    if not fails and all("ECC is off" in w for w in warns):
        fix = "`sudo nvidia-smi -e 1`, then reboot"
    return Check(name, "fail" if fails else "warn", "; ".join(fails + warns), threshold, source,
                 fix)


def check_processes(env: dict[str, Any], run: RunResult | None) -> Check:
    name, threshold = "other GPU processes", "no other compute process on the GPUs"
    source = "NVML running compute processes"
    known = [g for g in gpus(env) if "other_processes" in g]
    if not known:
        return skipped(name, threshold, source, no_fact(env, "running processes"))
    busy = [f"GPU {g.get('index')}: " + ", ".join(
        f"pid {p.get('pid')}" + (f" ({fmt.iec(p['memory_used'])})" if p.get("memory_used")
                                 else "") for p in g["other_processes"])
            for g in known if g["other_processes"]]
    if not busy:
        return Check(name, "pass", f"none on {count(len(known), 'GPU')}", threshold, source)
    # In a saved run the snapshot was taken just before the probes: they shared the GPU.
    return Check(name, "fail" if run else "warn", "; ".join(busy), threshold, source,
                 "stop them, or choose idle GPUs with CUDA_VISIBLE_DEVICES; list them with "
                 "`nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv`",
                 "this run's measurements shared the GPU with them" if run else None)
