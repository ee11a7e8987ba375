"""The memory_bandwidth probe's config, its defaults for every device and --quick (buffer
sizes from the machine's cache sizes), and its spec."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchbench.core.config import ConfigError, SamplingConfig, doc_field, size_field
from benchbench.probes._config import every_gpu, sampling_defaults
from benchbench.probes.api import Facts, ProbeSpec

GiB = 1024**3
MiB = 1024**2
# When a cache size is unknown, assume a large one rather than risk measuring a cache.
FALLBACK_LLC = 256 * MiB
FALLBACK_L2 = 128 * MiB


@dataclass(frozen=True)
class MemoryBandwidthConfig(SamplingConfig):
    host_size_bytes: int | None = size_field(
        None, "bytes per host buffer; auto: the larger of 4x the last-level cache and 1G "
        "(256M with --quick)")
    gpu_size_bytes: int | None = size_field(
        None, "bytes per GPU buffer; auto: the larger of 4x L2 and 2G (512M with --quick)")
    devices: tuple[int, ...] | None = doc_field(None, "GPU indices to measure; auto: every GPU")

    def validate(self) -> None:
        super().validate()
        for name in ("host_size_bytes", "gpu_size_bytes"):
            size = getattr(self, name)
            if size is not None and size < MiB:
                raise ConfigError(f"{name} must be at least 1M")


def _round_mib(n: float) -> int:
    return int(-(-n // MiB) * MiB)


def host_cache(facts: Facts) -> int:
    return int(facts.get("host_llc_bytes") or FALLBACK_LLC)


def gpu_cache(facts: Facts, index: int) -> int:
    gpus = facts.get("gpus") or []
    return int((gpus[index].get("l2_cache_bytes") if index < len(gpus) else None)
               or FALLBACK_L2)


def defaults(device: str, quick: bool, facts: Facts) -> dict[str, Any]:
    """Buffers at least 4x the cache they must dwarf: the host's last-level cache, and the
    largest L2 of the GPUs (so that one size serves every GPU)."""
    out = {**sampling_defaults(device, quick), **every_gpu(device, facts),
           "host_size_bytes": _round_mib(max(4 * host_cache(facts),
                                             256 * MiB if quick else GiB))}
    if device == "cuda":
        l2 = max((gpu_cache(facts, i) for i in range(len(facts.get("gpus") or []))),
                 default=FALLBACK_L2)
        out["gpu_size_bytes"] = _round_mib(max(4 * l2, 512 * MiB if quick else 2 * GiB))
    return out


SPEC = ProbeSpec(
    name="memory_bandwidth",
    repeatable=True,
    description="copy bandwidth of GPU memory and host memory (bytes read + written)",
    config_cls=MemoryBandwidthConfig,
    run="benchbench.probes.memory_bandwidth.run",
    gpu_resource="gpu_memory",
    cpu_resource="host_memory",
    per_gpu=True,
    defaults=defaults,
)
