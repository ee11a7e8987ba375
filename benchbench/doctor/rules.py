"""The configuration doctor's rules over an environment snapshot: the Check type, the host and
the driver (the GPUs' state is in gpu_rules.py).

Pure functions of the snapshot dict (environment.snapshot()) and, where a run measured the same
fact under load, of the RunResult. Nothing here changes a setting: a `fix` is advice printed
for an administrator, never run. The buyer's guide's rules only ever warn; a fact that breaks
or slows training (a pending row remap, a driver below the CUDA major's floor, thermal
throttling during the run) fails.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from benchbench.analysis.capacities import CoresNeeded, gpu_cores_needed
from benchbench.analysis.energy import steal_rows
from benchbench.core import units as fmt
from benchbench.core.results import RunResult
from benchbench.machine.steal import STEAL_FLAG

STATUSES = ("pass", "warn", "fail", "skipped")
GUIDE = "buyer's guide rule"
# Cores the training process itself keeps busy beside the loader's workers: launching kernels,
# the pin-memory thread, spin-waiting syncs (one to one and a half on an H200 box).
TRAINING_CORES = 2


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
    sizes = [g["memory_total"] for g in gpus(env) if g.get("memory_total") is not None]
    if not sizes or len(sizes) < len(gpus(env)):
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


def check_cpu(env: dict[str, Any], run: RunResult | None = None) -> Check:
    """The guide's core counts; on a GPU run that measured the loader's rate per core, the
    cores it takes to feed the GPUs' ResNet50 rate decide instead: a measurement before a rule
    of thumb."""
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
    fed = gpu_cores_needed(run) if run is not None else None
    if fed is not None:
        return _cores_by_measurement(fed, usable, measured, fix, notes)
    if not n:
        notes.append("no GPU is visible, so the per-GPU rule is not applied")
    if cores < need:
        return Check(name, "warn", measured, threshold, source, fix, "; ".join(notes) or None)
    if cores < 16:
        notes.append("16–32 preferred")
    return Check(name, "pass", measured, threshold, source, None, "; ".join(notes) or None)


def _cores_by_measurement(fed: CoresNeeded, usable: int, measured: str, fix: str,
                          notes: list[str]) -> Check:
    """The cores check held against the run's own measurement: the loader's rate per core
    against the GPUs' ResNet50 rate, plus the cores training itself takes."""
    decode, per_core, comp = math.ceil(fed.cores), fed.per_core, fed.compute.value or 0.0
    threshold = (f"enough cores to feed the GPUs: {comp:,.0f} images/s of ResNet50 at "
                 f"{per_core.value:,.0f} images/s per core ({per_core.key.get('loader')}) "
                 f"takes {decode}, plus {TRAINING_CORES} for training")
    source = "this run's measurement (dataloader per core, resnet50 throughput)"
    if usable < decode + TRAINING_CORES:
        if fed.loader.value and comp:
            notes.append(f"the run measured these CPUs decoding {fed.loader.value:,.0f} "
                         f"images/s, {fed.loader.value / comp:.0%} of what the GPUs compute, "
                         "before training takes its share")
        notes.append("the guide's 16–32 is a rule of thumb; this run measured what the GPUs "
                     "need")
        return Check("CPU cores", "warn", measured, threshold, source,
                     f"{fix}; or decode on the GPU (DALI) or ship uint8 batches",
                     "; ".join(notes))
    return Check("CPU cores", "pass", measured, threshold, source, None,
                 "; ".join(notes) or None)


# The buyer's guide on virtual machines, which check_virtualisation cites.
PREFER_METAL = ("prefer passthrough or bare-metal instances: cloud instances fluctuate because "
                "of the virtualisation layer and shared resources")
_SHARED_GPU = ("vGPU guest", "vGPU host", "vSGA host")


def check_virtualisation(env: dict[str, Any], run: RunResult | None) -> Check:
    """A VM whose neighbours took CPU time during the run, or a GPU shared through vGPU or MIG,
    warns; bare metal passes; a kind nobody could tell is skipped with the reason."""
    name = "virtualisation and neighbours"
    threshold = (f"bare metal or GPU passthrough; CPU steal ≤ {STEAL_FLAG:.0%} in every probe; "
                 "no vGPU, no MIG slice")
    v = env.get("virtualisation")
    if not isinstance(v, dict):
        return skipped(name, threshold, GUIDE, "the snapshot has no virtualisation facts (taken "
                       "by an older benchbench)")
    kind = str(v.get("kind") or "unknown")
    what = kind + (f" ({v['hypervisor']})" if v.get("hypervisor") else "") + (
        f", in a {v['container']} container" if v.get("container") else "")
    shared = [f"GPU {g.get('index')}: " + ("MIG on" if (g.get("mig_mode") or {}).get("current")
                                           else str(g.get("virtualization_mode")))
              for g in gpus(env) if g.get("virtualization_mode") in _SHARED_GPU
              or (g.get("mig_mode") or {}).get("current")]
    measured = [r for r in steal_rows(run) if r["fraction"] is not None] if run else []
    stolen = [r for r in measured if r["flagged"]]
    facts = [what]
    if measured:
        top = max(measured, key=lambda r: r["fraction"])
        facts.append(f"CPU steal up to {fmt.percent(top['fraction'])} (during {top['probe']})")
    facts += shared
    if shared or (kind == "vm" and stolen):
        why = []
        if stolen:
            why.append("another tenant took CPU time during " + ", ".join(
                f"{r['probe']} ({fmt.percent(r['fraction'])})" for r in stolen))
        if shared:
            why.append("a GPU is shared (vGPU or MIG): its neighbours share its memory "
                       "bandwidth or its time")
        return Check(name, "warn", "; ".join(facts), threshold, GUIDE, PREFER_METAL,
                     "; ".join(why))
    if kind == "bare metal":
        return Check(name, "pass", "; ".join(facts), threshold, GUIDE)
    if kind == "unknown":
        return skipped(name, threshold, GUIDE, str(v.get("reason") or "no sign said whether "
                                                   "a hypervisor is present"))
    if not measured:
        missing = ("no run was given to measure CPU steal: `benchbench run`, then "
                   "`benchbench doctor RUN`" if run is None else
                   "the run measured no CPU steal (" + next(
                       (str(r["reason"]) for r in steal_rows(run) if r["reason"]),
                       "its telemetry has no /proc/stat readings") + ")")
        return skipped(name, threshold, GUIDE, f"{what}, but {missing}")
    return Check(name, "pass", "; ".join(facts), threshold, GUIDE, None,
                 f"a VM, but no probe saw steal above {STEAL_FLAG:.0%}; {PREFER_METAL}")


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
    if have < (version_tuple(floor) or ()):
        return Check(name, "fail", measured, threshold, NVIDIA_TABLE, fix,
                     f"a CUDA {want[0]}.x build needs an R{floor.split('.')[0]}+ driver: CUDA "
                     "will not initialise")
    if have < (version_tuple(toolkit) or ()):
        return Check(name, "warn", measured, threshold, NVIDIA_TABLE, fix,
                     f"runs through CUDA minor-version compatibility (≥ {floor}), with limits: "
                     "PTX JIT of newer PTX fails and features that need the newer driver are "
                     "missing")
    return Check(name, "pass", measured, threshold, NVIDIA_TABLE)
