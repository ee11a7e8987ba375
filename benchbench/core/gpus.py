"""Which of the machine's GPUs a run used: NVML lists every GPU on the machine, torch only the
ones CUDA_VISIBLE_DEVICES leaves it, renumbered from 0. The two lists are matched by UUID.

The environment snapshot's NVML records carry `torch_index` (N of the run's cuda:N, or None for
a GPU the run could not see). Everything that counts a run's GPUs or looks one up by its cuda:N
name goes through here, never through the length of the NVML list. Light: no torch, no NVML.
"""

from __future__ import annotations

from typing import Any


def normal_uuid(uuid: Any) -> str | None:
    """One spelling for a GPU UUID: NVML writes 'GPU-1a2b…', torch the bare '1a2b…'."""
    if not uuid:
        return None
    text = str(uuid).strip().lower()
    return text.removeprefix("gpu-")


def annotate(nvml_gpus: list[dict[str, Any]], torch_gpus: list[dict[str, Any]]) -> None:
    """Set each NVML record's `torch_index` from torch's device list, matching UUIDs."""
    by_uuid = {normal_uuid(g.get("uuid")): g.get("index") for g in torch_gpus}
    for g in nvml_gpus:
        g["torch_index"] = by_uuid.get(normal_uuid(g.get("uuid")))


def _records(env: dict[str, Any]) -> list[dict[str, Any]]:
    return [g for g in env.get("gpus") or [] if isinstance(g, dict)]


def run_gpus(env: dict[str, Any]) -> list[dict[str, Any]]:
    """The GPU records of the GPUs the run used, in cuda:N order. A snapshot taken before GPUs
    were matched (older runs, or torch's own list) counts every record."""
    records = _records(env)
    if not any("torch_index" in g for g in records):
        return records
    used = [g for g in records if g.get("torch_index") is not None]
    return sorted(used, key=lambda g: g["torch_index"])


def gpu_count(env: dict[str, Any]) -> int:
    """How many GPUs the run's torch saw: its own count when recorded, else the matched
    records."""
    seen = (env.get("torch") or {}).get("cuda_device_count")
    if isinstance(seen, int) and seen > 0:
        return seen
    return len(run_gpus(env))


def gpu_for(env: dict[str, Any], device: str) -> dict[str, Any] | None:
    """The record of 'cuda:N' (the run's numbering), or None."""
    if not str(device).startswith("cuda:"):
        return None
    index = int(str(device).split(":")[1])
    records = _records(env)
    if any("torch_index" in g for g in records):
        return next((g for g in records if g.get("torch_index") == index), None)
    return next((g for g in records if g.get("index") == index), None)


def hidden(env: dict[str, Any]) -> list[dict[str, Any]]:
    """Records of GPUs on the machine that the run could not see."""
    return [g for g in _records(env) if "torch_index" in g and g["torch_index"] is None]
