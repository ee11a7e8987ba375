"""The host_device_copy probe's config, its defaults for --quick, and its spec."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from benchbench.core.config import SamplingConfig, check_choices, check_positive, doc_field
from benchbench.probes._config import every_gpu, sampling_defaults
from benchbench.probes.api import Facts, ProbeSpec

MiB = 1024**2
DIRECTIONS = ("h2d", "d2h")
HOST_MEMORY_KINDS = ("pinned", "pageable")


@dataclass(frozen=True)
class HostDeviceCopyConfig(SamplingConfig):
    sizes: tuple[int, ...] | None = field(default=None, metadata={
        "size": True, "doc": "transfer sizes; auto: 1M, 4M, ... 1G (1M, 16M, 256M with --quick)"})
    directions: tuple[str, ...] = doc_field(DIRECTIONS, "h2d and/or d2h")
    memories: tuple[str, ...] = doc_field(HOST_MEMORY_KINDS, "pinned and/or pageable host memory")
    devices: tuple[int, ...] | None = doc_field(None, "GPU indices to measure; auto: every GPU")
    concurrent: bool = doc_field(True, "also copy to all GPUs at once when there are several")

    def validate(self) -> None:
        super().validate()
        check_choices("directions", self.directions, DIRECTIONS)
        check_choices("memories", self.memories, HOST_MEMORY_KINDS)
        check_positive("sizes", self.sizes)


def defaults(device: str, quick: bool, facts: Facts) -> dict[str, Any]:
    sizes = (1 * MiB, 16 * MiB, 256 * MiB) if quick else tuple(MiB * 4**i for i in range(6))
    return {**sampling_defaults(device, quick), **every_gpu(device, facts), "sizes": sizes}


SPEC = ProbeSpec(
    name="host_device_copy",
    repeatable=True,
    description="host<->device copy bandwidth over PCIe, pinned and pageable, per GPU",
    config_cls=HostDeviceCopyConfig,
    run="benchbench.probes.host_device_copy.run",
    gpu_resource="host_device_link",
    cpu_resource="host_device_link",
    requires_gpu=True,
    per_gpu=True,
    defaults=defaults,
)
