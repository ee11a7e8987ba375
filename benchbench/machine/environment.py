"""A read-only snapshot of the machine: host, virtualisation, GPUs (NVML), versions, storage,
and its identity (identity.py).

Nothing here changes a setting: NVML is only queried and sysfs only read. Units are fixed so
key names carry none: sizes and memory in bytes, clocks in Hz, power in W, network link rates in
B/s per direction. Every field that cannot be read is None, and a missing GPU list comes with
the reason.
"""

from __future__ import annotations

import math
import os
import platform
import socket
import subprocess
import warnings
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import psutil

from benchbench.core.gpus import annotate
from benchbench.machine.identity import identity
from benchbench.machine.network import network_snapshot
from benchbench.machine.nvml import (
    as_text,
    best_effort,
    clock_events,
    cpu_affinity,
    load_nvml,
    memory_errors,
    numa_node,
    pcie_link,
)
from benchbench.machine.topology import gpu_topology
from benchbench.machine.virtualisation import detect, gpu_sharing

SYS_CPU = Path("/sys/devices/system/cpu")


# --- host ------------------------------------------------------------------------------------

def cgroup_cpu_limit(root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """CPUs allowed by the cgroup quota (v2 cpu.max or v1 cfs quota), None when unlimited."""
    v2 = root / "cpu.max"
    if v2.exists():
        text, _, period = v2.read_text().strip().partition(" ")
        if text != "max" and period:
            return int(text) / int(period)
        return None
    q, p = root / "cpu" / "cpu.cfs_quota_us", root / "cpu" / "cpu.cfs_period_us"
    if q.exists() and p.exists():
        quota_us, period_us = int(q.read_text()), int(p.read_text())
        return quota_us / period_us if quota_us > 0 and period_us > 0 else None
    return None


def usable_cores(root: Path = Path("/sys/fs/cgroup")) -> int:
    """Cores a data loader can really use: the affinity mask, capped by the cgroup quota."""
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)
    limit = best_effort(lambda: cgroup_cpu_limit(root))
    return max(1, min(affinity, math.ceil(limit))) if limit else affinity


def _parse_cache_size(text: str) -> int:
    text = text.strip().upper()
    mult = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(text[-1:], 1)
    return int(text.rstrip("KMG")) * mult


def llc_bytes(cpu_root: Path = SYS_CPU) -> int | None:
    """Total last-level cache of the machine (all sockets / CCDs), from sysfs."""
    caches: dict[str, tuple[int, int]] = {}
    for index in cpu_root.glob("cpu[0-9]*/cache/index[0-9]*"):
        level = best_effort(lambda i=index: int((i / "level").read_text()))
        size = best_effort(lambda i=index: _parse_cache_size((i / "size").read_text()))
        shared = best_effort(lambda i=index: (i / "shared_cpu_list").read_text().strip())
        if level and size and shared:
            caches[f"{level}:{shared}"] = (level, size)
    if not caches:
        return None
    top = max(level for level, _ in caches.values())
    return sum(size for level, size in caches.values() if level == top)


def _cpu_model() -> str | None:
    for line in best_effort(lambda: Path("/proc/cpuinfo").read_text().splitlines()) or []:
        if line.lower().startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or None


def host_snapshot() -> dict[str, Any]:
    vm = psutil.virtual_memory()
    nodes = list(Path("/sys/devices/system/node").glob("node[0-9]*"))
    return {
        "hostname": socket.gethostname(),
        "os": platform.platform(),
        "kernel": platform.release(),
        "cpu_model": _cpu_model(),
        "cores_physical": psutil.cpu_count(logical=False),
        "cores_logical": psutil.cpu_count(logical=True),
        "cores_usable": usable_cores(),
        "cgroup_cpu_limit": best_effort(cgroup_cpu_limit),
        "numa_nodes": len(nodes) or 1,
        "llc_bytes": llc_bytes(),
        "memory_total": vm.total,
        "memory_available": vm.available,
    }


def _version(dist: str) -> str | None:
    return best_effort(lambda: metadata.version(dist))


def _fio_version() -> str | None:
    try:
        out = subprocess.run(["fio", "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip().removeprefix("fio-") or None


# DALI's wheels, one per CUDA major it is built for, newest first.
DALI_WHEELS = ("nvidia-dali-cuda130", "nvidia-dali-cuda120", "nvidia-dali-cuda110")


def dali_wheels() -> list[str]:
    """The DALI wheels installed here, newest CUDA first (one, unless two were mixed)."""
    return [w for w in DALI_WHEELS if _version(w)]


def package_versions() -> dict[str, Any]:
    """Versions read from package metadata: no heavy import."""
    dali = next(iter(dali_wheels()), None)
    return {
        "python": platform.python_version(),
        "benchbench": _version("benchbench"),
        "torch": _version("torch"),
        "torchvision": _version("torchvision"),
        "nvidia_dali": _version(dali) if dali else None,
        "nvidia_dali_wheel": dali,
        "nvidia_ml_py": _version("nvidia-ml-py"),
        "fio": _fio_version(),
    }


# --- torch -----------------------------------------------------------------------------------

def cudnn_version(v: int | None) -> str | None:
    """torch reports cuDNN as an integer: 8902 is 8.9.2 (major*1000), 90100 is 9.1.0."""
    if not v:
        return None
    if v >= 90000:
        return f"{v // 10000}.{v % 10000 // 100}.{v % 100}"
    return f"{v // 1000}.{v % 1000 // 100}.{v % 100}"


def torch_facts() -> dict[str, Any]:
    """What torch sees: its CUDA, cuDNN and NCCL versions and each visible device.

    It initialises CUDA, so the runner calls it in a worker process, never in the parent.
    """
    try:
        import torch
    except ImportError as exc:
        return {"cuda_available": False, "cuda_device_count": 0, "gpus": [],
                "usable_cores": usable_cores(),
                "no_gpu_reason": f"torch is not importable: {exc}"}
    nccl = best_effort(lambda: torch.cuda.nccl.version())
    facts: dict[str, Any] = {
        # A plain str: a TorchVersion would make the run's own process import torch to read it.
        "torch": str(torch.__version__),
        "torch_cuda": torch.version.cuda,
        "cudnn": cudnn_version(best_effort(torch.backends.cudnn.version)),
        "nccl": ".".join(map(str, nccl)) if isinstance(nccl, tuple) else nccl,
        "intraop_threads": torch.get_num_threads(),
        "torchao": _version("torchao"),  # fp8 training (the [fp8] extra); None: absent
        "host_llc_bytes": llc_bytes(),
        "usable_cores": usable_cores(),
        "gpus": [],
    }
    # torch says why CUDA is unusable only in a warning ("The NVIDIA driver on your system is
    # too old"): keep its words for the reason.
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        available = bool(best_effort(torch.cuda.is_available))
    facts["cuda_available"] = available
    facts["cuda_device_count"] = torch.cuda.device_count() if available else 0
    if not available:
        why = next((" ".join(str(w.message).split()) for w in said
                    if "cuda" in str(w.message).lower()), None)
        facts["no_gpu_reason"] = (
            "torch was built without CUDA (install a CUDA build: pip install torch from "
            "https://download.pytorch.org/whl/cu128)" if torch.version.cuda is None
            else f"torch cannot use CUDA: {why}" if why
            else "torch finds no CUDA device (an NVIDIA GPU with its driver loaded is needed; "
                 "check nvidia-smi and CUDA_VISIBLE_DEVICES)")
    for i in range(facts["cuda_device_count"]):
        p = torch.cuda.get_device_properties(i)
        facts["gpus"].append({
            "index": i, "name": p.name, "capability": f"{p.major}.{p.minor}",
            "memory_total": p.total_memory, "multiprocessors": p.multi_processor_count,
            "l2_cache_bytes": getattr(p, "L2_cache_size", None),
            "uuid": str(p.uuid) if getattr(p, "uuid", None) is not None else None,
        })
    return facts


# --- GPUs (through NVML) ---------------------------------------------------------------------

def _parent(pid: int) -> int | None:
    try:
        return psutil.Process(pid).ppid() or None
    except (psutil.Error, OSError):
        return None


def is_own(pid: int, roots: set[int], parent: Callable[[int], int | None] = _parent,
           depth: int = 32) -> bool:
    """Whether `pid` is one of `roots` or descends from one: the run's own ranks and their
    workers, which NVML lists beside any other process holding a CUDA context."""
    seen = 0
    current: int | None = pid
    while current is not None and seen < depth:
        if current in roots:
            return True
        current = parent(current)
        seen += 1
    return False


def _gpu_record(nvml: Any, i: int, ncpus: int, own: set[int] | None = None) -> dict[str, Any]:
    h = nvml.nvmlDeviceGetHandleByIndex(i)
    bus_id = as_text(best_effort(lambda: nvml.nvmlDeviceGetPciInfo(h).busId))
    ecc = best_effort(lambda: nvml.nvmlDeviceGetEccMode(h))
    mhz = 1e6
    clock = nvml.NVML_CLOCK_SM if hasattr(nvml, "NVML_CLOCK_SM") else 1
    mem_clock = nvml.NVML_CLOCK_MEM if hasattr(nvml, "NVML_CLOCK_MEM") else 2
    procs = best_effort(lambda: nvml.nvmlDeviceGetComputeRunningProcesses(h)) or []
    power = best_effort(lambda: nvml.nvmlDeviceGetPowerManagementLimit(h))
    power_default = best_effort(lambda: nvml.nvmlDeviceGetPowerManagementDefaultLimit(h))
    cc = best_effort(lambda: nvml.nvmlDeviceGetCudaComputeCapability(h))
    sm_now = best_effort(lambda: nvml.nvmlDeviceGetClockInfo(h, clock))
    sm_max = best_effort(lambda: nvml.nvmlDeviceGetMaxClockInfo(h, clock))
    mem_max = best_effort(lambda: nvml.nvmlDeviceGetMaxClockInfo(h, mem_clock))
    # virtualization_mode (passthrough, vGPU ...), mig_mode and mig_devices; None where unread
    sharing = {k: v for k, v in gpu_sharing(nvml, [h])[0].items() if k != "index"}
    return {
        "index": i,
        "name": as_text(best_effort(lambda: nvml.nvmlDeviceGetName(h))),
        "uuid": as_text(best_effort(lambda: nvml.nvmlDeviceGetUUID(h))),
        "pci_bus_id": bus_id,
        "capability": f"{cc[0]}.{cc[1]}" if cc else None,
        "vbios_version": as_text(best_effort(lambda: nvml.nvmlDeviceGetVbiosVersion(h))),
        "memory_total": best_effort(lambda: nvml.nvmlDeviceGetMemoryInfo(h).total),
        **pcie_link(nvml, h),
        "persistence_mode": (None if (pm := best_effort(
            lambda: nvml.nvmlDeviceGetPersistenceMode(h))) is None else bool(pm)),
        "ecc_current": None if ecc is None else bool(ecc[0]),
        "ecc_pending": None if ecc is None else bool(ecc[1]),
        "sm_clock": None if sm_now is None else sm_now * mhz,
        "sm_clock_max": None if sm_max is None else sm_max * mhz,
        "memory_clock_max": None if mem_max is None else mem_max * mhz,
        "power_limit": None if power is None else power / 1000.0,
        "power_limit_default": None if power_default is None else power_default / 1000.0,
        "clock_event_reasons": clock_events(nvml, h),
        **memory_errors(nvml, h),
        "other_processes": [
            {"pid": p.pid, "memory_used": getattr(p, "usedGpuMemory", None)} for p in procs
            if not (own and is_own(p.pid, own))
        ],
        "numa_node": numa_node(nvml, h, bus_id),
        "cpu_affinity": cpu_affinity(nvml, h, ncpus),
        **sharing,
    }


def gpu_snapshot(nvml: Any = None, own: set[int] | None = None
                 ) -> tuple[dict[str, Any], str | None]:
    """(driver facts with a 'gpus' list, reason when there are none). Read-only NVML queries.

    `nvml` is the pynvml module, or a recorded stand-in in tests. Processes that are `own`
    PIDs or their descendants (this run's ranks and workers) are not listed as other GPU
    processes.
    """
    try:
        nvml = nvml or load_nvml()
        nvml.nvmlInit()
    except ImportError:
        return {"gpus": []}, "nvidia-ml-py is not installed"
    except Exception as exc:  # pynvml.NVMLError_LibraryNotFound, _DriverNotLoaded, ...
        return {"gpus": []}, (f"NVML unavailable: {exc} (NVML ships with the NVIDIA driver "
                              "as libnvidia-ml.so; benchbench reads it through nvidia-ml-py)")
    try:
        cuda = best_effort(nvml.nvmlSystemGetCudaDriverVersion)
        ncpus = os.cpu_count() or 1
        info = {
            "driver": as_text(best_effort(nvml.nvmlSystemGetDriverVersion)),
            "cuda_driver": f"{cuda // 1000}.{cuda % 1000 // 10}" if cuda else None,
            "gpus": [_gpu_record(nvml, i, ncpus, own)
                     for i in range(nvml.nvmlDeviceGetCount())],
        }
        info["topology"] = best_effort(lambda: gpu_topology(
            nvml, [nvml.nvmlDeviceGetHandleByIndex(g["index"]) for g in info["gpus"]]))
    finally:
        best_effort(nvml.nvmlShutdown)
    return info, None if info["gpus"] else "NVML reports no GPU"


def nvml_gpu_names(nvml: Any = None) -> list[str] | None:
    """The names of the GPUs NVML sees (every GPU on the machine, whatever
    CUDA_VISIBLE_DEVICES says), or None when NVML cannot be read."""
    try:
        nvml = nvml or load_nvml()
        nvml.nvmlInit()
    except Exception:
        return None
    try:
        return [str(as_text(best_effort(lambda i=i: nvml.nvmlDeviceGetName(
            nvml.nvmlDeviceGetHandleByIndex(i)))) or "?")
            for i in range(nvml.nvmlDeviceGetCount())]
    except Exception:
        return None
    finally:
        best_effort(nvml.nvmlShutdown)


# --- storage ---------------------------------------------------------------------------------

def storage_snapshot(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The filesystem and block device behind `path` (its nearest existing ancestor)."""
    p = Path(path).resolve()
    while not p.exists() and p != p.parent:
        p = p.parent
    best = None
    for part in best_effort(lambda: psutil.disk_partitions(all=True)) or []:
        mp = part.mountpoint
        if (str(p) == mp or str(p).startswith(mp.rstrip("/") + "/")) and (
                best is None or len(mp) > len(best.mountpoint)):
            best = part
    usage = best_effort(lambda: psutil.disk_usage(str(p)))
    info: dict[str, Any] = {
        "path": str(p),
        "mountpoint": best.mountpoint if best else None,
        "fstype": best.fstype if best else None,
        "device": best.device if best else None,
        "total": usage.total if usage else None,
        "free": usage.free if usage else None,
    }
    dev = Path(best.device).name if best and best.device.startswith("/dev/") else None
    block = Path("/sys/class/block") / dev if dev else None
    if block and block.exists():
        disk = block.resolve().parent if (block / "partition").exists() else block.resolve()
        info["rotational"] = best_effort(
            lambda: (disk / "queue" / "rotational").read_text().strip() == "1")
        info["model"] = best_effort(lambda: (disk / "device" / "model").read_text().strip())
    return info


# --- network ---------------------------------------------------------------------------------

def snapshot(out_dir: str | os.PathLike[str] = ".", facts: dict[str, Any] | None = None,
             own: set[int] | None = None) -> dict[str, Any]:
    """The whole environment. `facts` comes from torch_facts() (run in a worker by `run`);
    `own` are the PIDs of this run's processes (every rank's, under torchrun or srun): they and
    their children are not "other GPU processes"."""
    gpu_info, reason = gpu_snapshot(own={os.getpid(), *(own or ())})
    env: dict[str, Any] = {
        "host": host_snapshot(),
        # bare metal or a VM (which hypervisor), a container, a gVisor sandbox: files only
        "virtualisation": best_effort(lambda: detect(environ=os.environ)),
        "versions": package_versions(),
        "driver": gpu_info.get("driver"),
        "cuda_driver": gpu_info.get("cuda_driver"),
        "gpus": gpu_info["gpus"],
        "gpus_reason": reason,
        "topology": gpu_info.get("topology"),
        "storage": storage_snapshot(out_dir),
        "network": network_snapshot(),
    }
    if facts is not None:
        env["torch"] = {k: facts.get(k) for k in
                        ("torch", "torch_cuda", "cudnn", "nccl", "intraop_threads",
                         "cuda_available", "cuda_device_count", "no_gpu_reason")}
        if env["gpus"] and facts.get("cuda_available"):
            annotate(env["gpus"], facts.get("gpus") or [])
        if not env["gpus"] and facts.get("gpus"):
            # NVML is absent but torch sees GPUs: fall back to torch's device properties.
            env["gpus"] = facts["gpus"]
            env["gpus_reason"] = f"{reason}; GPU facts from torch.cuda instead"
    # Last: the GPUs' UUIDs are final only here (NVML's, else torch's).
    env["identity"] = identity(env["host"]["hostname"], env["gpus"])
    return env
