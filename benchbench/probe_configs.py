"""Each probe's configuration: a frozen dataclass whose every field is settable with --set.

A field left at None means "auto": the probe's spec (workloads/__init__.py) or the probe itself
chooses from the device and --quick, and records the choice in the run's params.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from benchbench.config import ConfigError, ProbeConfig, doc_field, size_field

MATMUL_DTYPES = ("fp32", "tf32", "bf16", "fp16")


@dataclass(frozen=True)
class MatmulConfig(ProbeConfig):
    sizes: tuple[int, ...] | None = doc_field(
        None, "square matrix sizes n (n x n @ n x n); auto: 4096..16384 on GPU, 256..1024 on CPU")
    dtypes: tuple[str, ...] | None = doc_field(
        None, "fp32 (TF32 off), tf32, bf16, fp16; auto: all four on GPU, fp32 and bf16 on CPU")
    devices: tuple[int, ...] | None = doc_field(None, "GPU indices to measure; auto: every GPU")

    def validate(self) -> None:
        super().validate()
        _check_choices("dtypes", self.dtypes, MATMUL_DTYPES)
        _check_positive("sizes", self.sizes)


@dataclass(frozen=True)
class MemoryBandwidthConfig(ProbeConfig):
    host_size_bytes: int | None = size_field(
        None, "bytes per host buffer; auto: the larger of 4x the last-level cache and 1G "
        "(256M with --quick)")
    gpu_size_bytes: int | None = size_field(
        None, "bytes per GPU buffer; auto: the larger of 4x L2 and 2G (512M with --quick)")
    devices: tuple[int, ...] | None = doc_field(None, "GPU indices to measure; auto: every GPU")


COPY_DIRECTIONS = ("h2d", "d2h")
HOST_MEMORY_KINDS = ("pinned", "pageable")


@dataclass(frozen=True)
class HostDeviceCopyConfig(ProbeConfig):
    sizes: tuple[int, ...] | None = field(default=None, metadata={
        "size": True, "doc": "transfer sizes; auto: 1M, 4M, ... 1G (1M, 16M, 256M with --quick)"})
    directions: tuple[str, ...] = doc_field(COPY_DIRECTIONS, "h2d and/or d2h")
    memories: tuple[str, ...] = doc_field(HOST_MEMORY_KINDS, "pinned and/or pageable host memory")
    devices: tuple[int, ...] | None = doc_field(None, "GPU indices to measure; auto: every GPU")
    concurrent: bool = doc_field(True, "also copy to all GPUs at once when there are several")

    def validate(self) -> None:
        super().validate()
        _check_choices("directions", self.directions, COPY_DIRECTIONS)
        _check_choices("memories", self.memories, HOST_MEMORY_KINDS)
        _check_positive("sizes", self.sizes)


def _check_choices(name: str, values: tuple[str, ...] | None, allowed: tuple[str, ...]) -> None:
    if values is None:
        return
    if not values:
        raise ConfigError(f"{name} must not be empty")
    bad = [v for v in values if v not in allowed]
    if bad:
        raise ConfigError(f"{name}: unknown {', '.join(bad)}; choose from {', '.join(allowed)}")


def _check_positive(name: str, values: tuple[int, ...] | None) -> None:
    if values is not None and (not values or any(v <= 0 for v in values)):
        raise ConfigError(f"{name} must be a non-empty list of positive numbers")
