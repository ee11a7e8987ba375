"""A read-only snapshot of the machine: host, GPUs (through NVML), versions, storage.

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
from benchbench.machine.network import network_snapshot

SYS_CPU = Path("/sys/devices/system/cpu")


def _try(fn: Callable[[], Any]) -> Any:
    """Best effort: an unsupported or failing query gives None, never an exception."""
    try:
        return fn()
    except Exception:  # NVML raises NotSupported and friends per field; sysfs may be absent
        return None


def _text(x: Any) -> Any:
    return x.decode() if isinstance(x, bytes) else x


# --- host ------------------------------------------------------------------------------------

def cgroup_cpu_limit(root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """CPUs allowed by the cgroup quota (v2 cpu.max or v1 cfs quota), None when unlimited."""
    v2 = root / "cpu.max"
    if v2.exists():
        quota, _, period = v2.read_text().strip().partition(" ")
        if quota != "max" and period:
            return int(quota) / int(period)
        return None
    q, p = root / "cpu" / "cpu.cfs_quota_us", root / "cpu" / "cpu.cfs_period_us"
    if q.exists() and p.exists():
        quota, period = int(q.read_text()), int(p.read_text())
        return quota / period if quota > 0 and period > 0 else None
    return None


def usable_cores(root: Path = Path("/sys/fs/cgroup")) -> int:
    """Cores a data loader can really use: the affinity mask, capped by the cgroup quota."""
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)
    limit = _try(lambda: cgroup_cpu_limit(root))
    return max(1, min(affinity, math.ceil(limit))) if limit else affinity


def _parse_cache_size(text: str) -> int:
    text = text.strip().upper()
    mult = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(text[-1:], 1)
    return int(text.rstrip("KMG")) * mult


def llc_bytes(cpu_root: Path = SYS_CPU) -> int | None:
    """Total last-level cache of the machine (all sockets / CCDs), from sysfs."""
    caches: dict[str, tuple[int, int]] = {}
    for index in cpu_root.glob("cpu[0-9]*/cache/index[0-9]*"):
        level = _try(lambda i=index: int((i / "level").read_text()))
        size = _try(lambda i=index: _parse_cache_size((i / "size").read_text()))
        shared = _try(lambda i=index: (i / "shared_cpu_list").read_text().strip())
        if level and size and shared:
            caches[f"{level}:{shared}"] = (level, size)
    if not caches:
        return None
    top = max(level for level, _ in caches.values())
    return sum(size for level, size in caches.values() if level == top)


def _cpu_model() -> str | None:
    for line in _try(lambda: Path("/proc/cpuinfo").read_text().splitlines()) or []:
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
        "cgroup_cpu_limit": _try(cgroup_cpu_limit),
        "numa_nodes": len(nodes) or 1,
        "llc_bytes": llc_bytes(),
        "memory_total": vm.total,
        "memory_available": vm.available,
    }


def _version(dist: str) -> str | None:
    return _try(lambda: metadata.version(dist))


def _fio_version() -> str | None:
    try:
        out = subprocess.run(["fio", "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip().removeprefix("fio-") or None


def package_versions() -> dict[str, Any]:
    """Versions read from package metadata: no heavy import."""
    return {
        "python": platform.python_version(),
        "benchbench": _version("benchbench"),
        "torch": _version("torch"),
        "torchvision": _version("torchvision"),
        "nvidia_dali": next((v for v in (_version("nvidia-dali-cuda120"),
                                         _version("nvidia-dali-cuda110"),
                                         _version("nvidia-dali-cuda130")) if v), None),
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
    nccl = _try(lambda: torch.cuda.nccl.version())
    facts: dict[str, Any] = {
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "cudnn": cudnn_version(_try(torch.backends.cudnn.version)),
        "nccl": ".".join(map(str, nccl)) if isinstance(nccl, tuple) else nccl,
        "intraop_threads": torch.get_num_threads(),
        "host_llc_bytes": llc_bytes(),
        "usable_cores": usable_cores(),
        "gpus": [],
    }
    # torch says why CUDA is unusable only in a warning ("The NVIDIA driver on your system is
    # too old"): keep its words for the reason.
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        available = bool(_try(torch.cuda.is_available))
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


# --- NVML ------------------------------------------------------------------------------------

def _load_nvml() -> Any:
    import pynvml

    return pynvml


def _cpu_affinity(nvml: Any, h: Any, ncpus: int) -> list[int] | None:
    words = max(1, math.ceil(ncpus / 64))
    mask = _try(lambda: nvml.nvmlDeviceGetCpuAffinity(h, words))
    if mask is None:
        return None
    return [w * 64 + b for w, word in enumerate(mask) for b in range(64) if word >> b & 1]


def _numa_node(nvml: Any, h: Any, bus_id: str | None) -> int | None:
    node = _try(lambda: nvml.nvmlDeviceGetNumaNodeId(h))
    if node is None and bus_id:
        # NVML's bus id has an 8-digit domain; sysfs uses 4.
        sys_id = bus_id.lower()[-12:] if len(bus_id) > 12 else bus_id.lower()
        node = _try(lambda: int(Path(f"/sys/bus/pci/devices/{sys_id}/numa_node").read_text()))
    return node if node is None or node >= 0 else None


def pcie_link(nvml: Any, h: Any) -> dict[str, Any]:
    """Current and maximum PCIe generation and width. The current generation drops at idle,
    so a caller that wants the working link reads this while a copy is in flight."""
    return {
        "pcie_gen_current": _try(lambda: nvml.nvmlDeviceGetCurrPcieLinkGeneration(h)),
        "pcie_width_current": _try(lambda: nvml.nvmlDeviceGetCurrPcieLinkWidth(h)),
        "pcie_gen_max": _try(lambda: nvml.nvmlDeviceGetMaxPcieLinkGeneration(h)),
        "pcie_width_max": _try(lambda: nvml.nvmlDeviceGetMaxPcieLinkWidth(h)),
    }


# nvmlClocksEventReason* bits (nvml.h; "ClocksThrottleReason" before NVML 12.2). Which of them
# slow training is the doctor's call, not this module's.
CLOCK_EVENT_BITS = {0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap",
                    0x8: "hw_slowdown", 0x10: "sync_boost", 0x20: "sw_thermal_slowdown",
                    0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown",
                    0x100: "display_clock_setting"}


def clock_event_names(mask: int | None) -> list[str] | None:
    """The names of the bits set in an NVML clocks-event mask; an unnamed bit as 'bit_0x...'."""
    if mask is None:
        return None
    return [CLOCK_EVENT_BITS.get(1 << b, f"bit_{1 << b:#x}") for b in range(64) if mask >> b & 1]


def _clock_events(nvml: Any, h: Any) -> list[str] | None:
    for name in ("nvmlDeviceGetCurrentClocksEventReasons",
                 "nvmlDeviceGetCurrentClocksThrottleReasons"):  # the older pynvml spelling
        fn = getattr(nvml, name, None)
        mask = _try(lambda f=fn: f(h)) if fn else None
        if mask is not None:
            return clock_event_names(mask)
    return None


def memory_errors(nvml: Any, h: Any) -> dict[str, Any]:
    """Uncorrected ECC counts, retired pages (before A100) and remapped rows (A100 and later).
    A GPU without ECC, or of the other generation, answers NotSupported: None."""
    unc = getattr(nvml, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1)
    volatile, aggregate = (getattr(nvml, "NVML_VOLATILE_ECC", 0),
                           getattr(nvml, "NVML_AGGREGATE_ECC", 1))
    sbe = getattr(nvml, "NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS", 0)
    dbe = getattr(nvml, "NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR", 1)
    pending = _try(lambda: nvml.nvmlDeviceGetRetiredPagesPendingStatus(h))
    rows = _try(lambda: nvml.nvmlDeviceGetRemappedRows(h))
    return {
        "ecc_uncorrected_volatile": _try(lambda: nvml.nvmlDeviceGetTotalEccErrors(h, unc,
                                                                                  volatile)),
        "ecc_uncorrected_aggregate": _try(lambda: nvml.nvmlDeviceGetTotalEccErrors(h, unc,
                                                                                   aggregate)),
        "retired_pages_double_bit": _try(lambda: len(nvml.nvmlDeviceGetRetiredPages(h, dbe))),
        "retired_pages_single_bit": _try(lambda: len(nvml.nvmlDeviceGetRetiredPages(h, sbe))),
        "retired_pages_pending": None if pending is None else bool(pending),
        "remapped_rows": None if rows is None else {
            "correctable": rows[0], "uncorrectable": rows[1], "pending": bool(rows[2]),
            "failure": bool(rows[3])},
    }


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
    bus_id = _text(_try(lambda: nvml.nvmlDeviceGetPciInfo(h).busId))
    ecc = _try(lambda: nvml.nvmlDeviceGetEccMode(h))
    mhz = 1e6
    clock = nvml.NVML_CLOCK_SM if hasattr(nvml, "NVML_CLOCK_SM") else 1
    mem_clock = nvml.NVML_CLOCK_MEM if hasattr(nvml, "NVML_CLOCK_MEM") else 2
    procs = _try(lambda: nvml.nvmlDeviceGetComputeRunningProcesses(h)) or []
    power = _try(lambda: nvml.nvmlDeviceGetPowerManagementLimit(h))
    power_default = _try(lambda: nvml.nvmlDeviceGetPowerManagementDefaultLimit(h))
    cc = _try(lambda: nvml.nvmlDeviceGetCudaComputeCapability(h))
    sm_now = _try(lambda: nvml.nvmlDeviceGetClockInfo(h, clock))
    sm_max = _try(lambda: nvml.nvmlDeviceGetMaxClockInfo(h, clock))
    mem_max = _try(lambda: nvml.nvmlDeviceGetMaxClockInfo(h, mem_clock))
    return {
        "index": i,
        "name": _text(_try(lambda: nvml.nvmlDeviceGetName(h))),
        "uuid": _text(_try(lambda: nvml.nvmlDeviceGetUUID(h))),
        "pci_bus_id": bus_id,
        "capability": f"{cc[0]}.{cc[1]}" if cc else None,
        "memory_total": _try(lambda: nvml.nvmlDeviceGetMemoryInfo(h).total),
        **pcie_link(nvml, h),
        "persistence_mode": (None if (pm := _try(lambda: nvml.nvmlDeviceGetPersistenceMode(h)))
                             is None else bool(pm)),
        "ecc_current": None if ecc is None else bool(ecc[0]),
        "ecc_pending": None if ecc is None else bool(ecc[1]),
        "sm_clock": None if sm_now is None else sm_now * mhz,
        "sm_clock_max": None if sm_max is None else sm_max * mhz,
        "memory_clock_max": None if mem_max is None else mem_max * mhz,
        "power_limit": None if power is None else power / 1000.0,
        "power_limit_default": None if power_default is None else power_default / 1000.0,
        "clock_event_reasons": _clock_events(nvml, h),
        **memory_errors(nvml, h),
        "other_processes": [
            {"pid": p.pid, "memory_used": getattr(p, "usedGpuMemory", None)} for p in procs
            if not (own and is_own(p.pid, own))
        ],
        "numa_node": _numa_node(nvml, h, bus_id),
        "cpu_affinity": _cpu_affinity(nvml, h, ncpus),
    }


def gpu_snapshot(nvml: Any = None, own: set[int] | None = None
                 ) -> tuple[dict[str, Any], str | None]:
    """(driver facts with a 'gpus' list, reason when there are none). Read-only NVML queries.

    `nvml` is the pynvml module, or a recorded stand-in in tests. Processes that are `own`
    PIDs or their descendants (this run's ranks and workers) are not listed as other GPU
    processes.
    """
    try:
        nvml = nvml or _load_nvml()
        nvml.nvmlInit()
    except ImportError:
        return {"gpus": []}, "nvidia-ml-py is not installed"
    except Exception as exc:  # pynvml.NVMLError_LibraryNotFound, _DriverNotLoaded, ...
        return {"gpus": []}, (f"NVML unavailable: {exc} (NVML ships with the NVIDIA driver "
                              "as libnvidia-ml.so; benchbench reads it through nvidia-ml-py)")
    try:
        cuda = _try(nvml.nvmlSystemGetCudaDriverVersion)
        ncpus = os.cpu_count() or 1
        info = {
            "driver": _text(_try(nvml.nvmlSystemGetDriverVersion)),
            "cuda_driver": f"{cuda // 1000}.{cuda % 1000 // 10}" if cuda else None,
            "gpus": [_gpu_record(nvml, i, ncpus, own)
                     for i in range(nvml.nvmlDeviceGetCount())],
        }
        # Imported here: topology borrows this module's NVML helpers.
        from benchbench.machine.topology import gpu_topology

        info["topology"] = _try(lambda: gpu_topology(
            nvml, [nvml.nvmlDeviceGetHandleByIndex(g["index"]) for g in info["gpus"]]))
    finally:
        _try(nvml.nvmlShutdown)
    return info, None if info["gpus"] else "NVML reports no GPU"


def nvml_gpu_names(nvml: Any = None) -> list[str] | None:
    """The names of the GPUs NVML sees (every GPU on the machine, whatever
    CUDA_VISIBLE_DEVICES says), or None when NVML cannot be read."""
    try:
        nvml = nvml or _load_nvml()
        nvml.nvmlInit()
    except Exception:
        return None
    try:
        return [str(_text(_try(lambda i=i: nvml.nvmlDeviceGetName(
            nvml.nvmlDeviceGetHandleByIndex(i)))) or "?")
            for i in range(nvml.nvmlDeviceGetCount())]
    except Exception:
        return None
    finally:
        _try(nvml.nvmlShutdown)


# --- storage ---------------------------------------------------------------------------------

def storage_snapshot(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The filesystem and block device behind `path` (its nearest existing ancestor)."""
    p = Path(path).resolve()
    while not p.exists() and p != p.parent:
        p = p.parent
    best = None
    for part in _try(lambda: psutil.disk_partitions(all=True)) or []:
        mp = part.mountpoint
        if (str(p) == mp or str(p).startswith(mp.rstrip("/") + "/")) and (
                best is None or len(mp) > len(best.mountpoint)):
            best = part
    usage = _try(lambda: psutil.disk_usage(str(p)))
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
        info["rotational"] = _try(lambda: (disk / "queue" / "rotational").read_text().strip()
                                  == "1")
        info["model"] = _try(lambda: (disk / "device" / "model").read_text().strip())
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
    return env
