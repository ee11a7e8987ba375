"""The environments of the runs being compared, side by side: GPU model and count, driver,
CUDA, cuDNN, NCCL, torch, CPU, RAM, kernel, and which of them differ; and the hardware identity
that decides whether a regression may be called between two runs at all.

Reads only the environment snapshot stored in results.json (environment.py's keys: host,
virtualisation, versions, torch, driver, cuda_driver, gpus, storage, identity).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from benchbench.core.gpus import gpu_count, run_gpus
from benchbench.core.results import RunResult


def hardware_id(run: RunResult) -> str:
    """The GPU model(s) of a GPU run, else the CPU model: runs that differ here are compared,
    but no regression is called between them."""
    env = run.environment or {}
    device = (run.config or {}).get("device_resolved")
    gpus = [str(g.get("name")) for g in run_gpus(env)]
    if gpus and device != "cpu":
        return "GPU " + " + ".join(sorted(set(gpus)))
    return "CPU " + str((env.get("host") or {}).get("cpu_model") or "unknown")


def _cudnn(v: Any) -> Any:
    """cuDNN as 'major.minor.patch': torch reports an integer (92400 for 9.24.0; 8902 for
    8.9.2), some runs recorded it as text already."""
    if isinstance(v, int) and v >= 1000:
        major, rest = (v // 10000, v % 10000) if v >= 90000 else (v // 1000, v % 1000)
        return f"{major}.{rest // 100}.{rest % 100}"
    return v


def _gpu_models(env: dict[str, Any]) -> str | None:
    gpus = run_gpus(env)
    if not gpus:
        return None
    names: dict[str, int] = {}
    for g in gpus:
        names[str(g.get("name"))] = names.get(str(g.get("name")), 0) + 1
    return ", ".join(f"{n}× {name}" for name, n in names.items())


def _virtualisation(env: dict[str, Any]) -> str | None:
    """'vm (KVM)', 'bare metal', 'unknown'; None for a snapshot that did not record it."""
    v = env.get("virtualisation")
    if not isinstance(v, dict):
        return None
    return str(v.get("kind")) + (f" ({v['hypervisor']})" if v.get("hypervisor") else "")


def _per_gpu(env: dict[str, Any], read: Any) -> str | None:
    """The distinct values of one GPU fact over the run's GPUs; None when none recorded it."""
    values = [read(g) for g in run_gpus(env) if "virtualization_mode" in g]
    return ", ".join(dict.fromkeys(str(v) for v in values)) if values else None


def _mig(g: dict[str, Any]) -> str:
    mig = g.get("mig_mode")
    if not isinstance(mig, dict):
        return "unknown"
    if not mig.get("current"):
        return "off"
    slices = g.get("mig_devices")
    return "on" + (f" ({slices} slices)" if slices is not None else "")


# (row name, how to read it from an environment snapshot)
ENV_FIELDS: list[tuple[str, Any]] = [
    ("GPUs", _gpu_models),
    ("GPU count", gpu_count),
    ("GPU memory", lambda e: next((g.get("memory_total") for g in run_gpus(e)), None)),
    ("GPU virtualisation", lambda e: _per_gpu(e, lambda g: g.get("virtualization_mode")
                                              or "unknown")),
    ("MIG", lambda e: _per_gpu(e, _mig)),
    ("virtualisation", _virtualisation),
    ("driver", lambda e: e.get("driver")),
    ("VBIOS", lambda e: ", ".join(dict.fromkeys(
        str(g["vbios_version"]) for g in run_gpus(e) if g.get("vbios_version"))) or None),
    ("CUDA driver", lambda e: e.get("cuda_driver")),
    ("CUDA (torch)", lambda e: (e.get("torch") or {}).get("torch_cuda")),
    ("cuDNN", lambda e: _cudnn((e.get("torch") or {}).get("cudnn"))),
    ("NCCL", lambda e: (e.get("torch") or {}).get("nccl")),
    ("torch", lambda e: (e.get("torch") or {}).get("torch") or (e.get("versions") or {}).get(
        "torch")),
    ("torchvision", lambda e: (e.get("versions") or {}).get("torchvision")),
    ("DALI", lambda e: (e.get("versions") or {}).get("nvidia_dali")),
    ("fio", lambda e: (e.get("versions") or {}).get("fio")),
    ("Python", lambda e: (e.get("versions") or {}).get("python")),
    ("benchbench", lambda e: (e.get("versions") or {}).get("benchbench")),
    ("CPU", lambda e: (e.get("host") or {}).get("cpu_model")),
    ("CPU cores usable", lambda e: (e.get("host") or {}).get("cores_usable")),
    ("RAM", lambda e: (e.get("host") or {}).get("memory_total")),
    ("kernel", lambda e: (e.get("host") or {}).get("kernel")),
    ("BIOS", lambda e: " ".join(str(x) for x in (
        ((e.get("identity") or {}).get("dmi") or {}).get(k) for k in ("bios_version",
                                                                       "bios_date")) if x)
     or None),
    ("OS", lambda e: (e.get("host") or {}).get("os")),
    ("storage", lambda e: " ".join(str(x) for x in (
        (e.get("storage") or {}).get("fstype"), (e.get("storage") or {}).get("device"))
        if x) or None),
    ("host", lambda e: (e.get("host") or {}).get("hostname")),
]
_READERS = dict(ENV_FIELDS)
# The fields that can explain a change of one machine's figures (history's attribution, the
# fleet's evidence): all but the host name (the machine itself) and the memory sizes, which a
# kernel's reservation moves by a few KiB between boots.
EXPLAINING = tuple(name for name, _ in ENV_FIELDS if name not in ("host", "RAM", "GPU memory"))
# Byte counts among ENV_FIELDS, shown in binary units by the renderers.
ENV_BYTES = frozenset({"GPU memory", "RAM"})


def env_value(env: dict[str, Any], name: str) -> Any:
    """One ENV_FIELDS row's value for one environment snapshot; None where it is not recorded
    or the snapshot has another shape."""
    try:
        return _READERS[name](env or {})
    except (AttributeError, TypeError):
        return None


@dataclass
class EnvRow:
    name: str
    values: dict[str, list[Any]]  # side label -> the distinct values of its runs
    differs: bool


def environment_diff(sides: dict[str, list[RunResult]]) -> list[EnvRow]:
    """Every environment field, each side's values (by side label, over its runs), and
    whether any side differs."""
    out = []
    for name, _ in ENV_FIELDS:
        values: dict[str, list[Any]] = {}
        for label, runs in sides.items():
            vals: list[Any] = []
            for r in runs:
                v = env_value(r.environment, name)
                if v not in vals:
                    vals.append(v)
            values[label] = vals
        flat = {json.dumps(v, default=str) for vs in values.values() for v in vs}
        out.append(EnvRow(name, values, len(flat) > 1))
    return out
