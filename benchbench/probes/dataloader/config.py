"""The dataloader probe's config, its defaults for every device, --quick and the machine's
usable cores, and its spec."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchbench.core.config import ConfigError, ProbeConfig, check_choices, doc_field
from benchbench.probes.api import Facts, ProbeSpec

LOADERS = ("torchvision", "dali_cpu", "dali_gpu")


@dataclass(frozen=True)
class DataloaderConfig(ProbeConfig):
    loaders: tuple[str, ...] | None = doc_field(
        None, "torchvision, dali_cpu, dali_gpu; auto: torchvision and dali_cpu, plus dali_gpu "
        "on a GPU")
    workers: tuple[int, ...] | None = doc_field(
        None, "worker counts to sweep; auto: 0, 1, 2, 4 … up to the usable cores (the usable "
              "cores only with --quick)")
    batch_size: int | None = doc_field(
        None, "images per batch; auto: 256 on a GPU (ResNet50's and the pipeline's batch, so "
              "that the loader alone and inside the pipeline compare), 64 on a CPU")
    batches: int | None = doc_field(None, "timed batches per configuration, at least: rounded up "
                                          "to whole rounds of the workers and never under three "
                                          "rounds; auto: 20 (5 with --quick)")
    min_seconds: float | None = doc_field(None, "timed seconds per configuration, at least "
                                                "(within the budget); auto: 2 (0.6 with --quick)")
    image_size: int = doc_field(224, "RandomResizedCrop output side")

    def validate(self) -> None:
        super().validate()
        check_choices("loaders", self.loaders, LOADERS)
        if self.workers is not None and (not self.workers or min(self.workers) < 0):
            raise ConfigError("workers must be a non-empty list of counts >= 0")
        if (self.batch_size is not None and self.batch_size < 1) or \
                (self.batches is not None and self.batches < 1):
            raise ConfigError("batch_size and batches must be at least 1")
        if self.min_seconds is not None and self.min_seconds < 0:
            raise ConfigError("min_seconds must be >= 0")
        if self.image_size < 8:
            raise ConfigError("image_size must be at least 8")


def auto_workers(cores: int, quick: bool) -> tuple[int, ...]:
    """0, 1, 2, 4 … up to `cores` (cores itself included); with quick, `cores` only: each
    loader at its best, the figure the verdict and the pipeline use, without the per-core
    curve."""
    if quick:
        return (cores,)
    counts, w = [0], 1
    while w < cores:
        counts.append(w)
        w *= 2
    return (*counts, cores)


def defaults(device: str, quick: bool, facts: Facts) -> dict[str, Any]:
    cores = facts.get("usable_cores")
    # Its warm-up is batches, not seconds: every worker's first batch and what start-up queued
    # (the probe warms up for the larger of those and warmup_steps), which each configuration
    # pays.
    return {"batches": 5 if quick else 20, "min_seconds": 0.6 if quick else 2.0,
            "batch_size": 256 if device == "cuda" else 64,
            "warmup_steps": 1 if quick else 2, "warmup_s": 0.0,
            "loaders": ("torchvision", "dali_cpu", *(("dali_gpu",) if device == "cuda" else ())),
            **({"workers": auto_workers(int(cores), quick)} if cores else {})}


SPEC = ProbeSpec(
    name="dataloader",
    repeatable=True,
    # Each round starts its loaders afresh (worker processes, DALI's import): a fixed cost
    # that a share of weight 1 left no time after, on a small machine.
    budget_weight=6.0,
    # A GPU box's loaders have their cores: the share that measured them (DALI's GPU
    # pipeline, a worker sweep) before DALI's CPU one needed room on a 2-core VM's quick run.
    gpu_weight=2.0,
    description="decode + augment throughput (images/s) of torchvision and DALI loaders "
                "over a worker sweep, files already in the page cache",
    config_cls=DataloaderConfig,
    run="benchbench.probes.dataloader.run",
    gpu_resource="cpu_dataloading",
    cpu_resource="cpu_dataloading",
    needs_data=True,
    defaults=defaults,
)
