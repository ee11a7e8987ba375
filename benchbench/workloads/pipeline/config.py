"""The pipeline probe's config, its defaults for every device and --quick, and its spec."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchbench.core.config import ConfigError, doc_field
from benchbench.probes.api import Facts, ProbeSpec
from benchbench.probes.dataloader.config import LOADERS
from benchbench.workloads._config import best_amp, resnet_defaults, training_defaults
from benchbench.workloads.resnet50.config import ResNet50Config


@dataclass(frozen=True)
class PipelineConfig(ResNet50Config):
    # A fixed batch: the pipeline compares the loader with the step at the resnet50 probe's
    # batch, so it does not search.
    batch_size: int | None = doc_field(None, "images per step; auto: 256 on GPU (DLE's), 8 on "
                                             "CPU, as the resnet50 probe")
    image_size: int | None = doc_field(None, "square input side; auto: 224 (64 on a CPU with "
                                             "--quick, to fit its minute)")
    loader: str | None = doc_field(None, "torchvision, dali_cpu or dali_gpu; auto: the best "
                                         "configuration the dataloader probe found")
    workers: int | None = doc_field(None, "loader workers; auto: the dataloader probe's best")

    def validate(self) -> None:
        super().validate()
        if self.loader is not None and self.loader not in LOADERS:
            raise ConfigError(f"loader: unknown {self.loader}; choose from {', '.join(LOADERS)}")
        if self.workers is not None and self.workers < 0:
            raise ConfigError("workers must be >= 0")


def defaults(device: str, quick: bool, facts: Facts) -> dict[str, Any]:
    # One precision, the one the device trains fastest in: the pipeline asks whether the
    # loader keeps up with the fastest step.
    return {**training_defaults(device, quick), **resnet_defaults(device, quick, pipeline=True),
            "precisions": (best_amp(device, facts),)}


# Runs after dataloader (it reuses the best loader configuration) and after storage.
SPEC = ProbeSpec(
    name="pipeline",
    # A warm round and five timed rounds of the loader's workers, after the first step (its
    # cuDNN autotuning on a GPU) and the drain.
    budget_weight=3.5,
    gpu_weight=2.7,
    description="the real input pipeline feeding the ResNet50 training step: total_ips against "
                "compute_ips (accelerator utilisation), data wait and compute per step",
    config_cls=PipelineConfig,
    run="benchbench.workloads.pipeline.run",
    gpu_resource="cpu_dataloading",
    cpu_resource="cpu_dataloading",
    needs_data=True,
    defaults=defaults,
)
