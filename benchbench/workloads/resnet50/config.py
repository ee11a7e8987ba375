"""The resnet50 probe's config, its defaults for every device and --quick, and its spec."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchbench.core.config import ConfigError, doc_field
from benchbench.probes.api import Facts, ProbeSpec
from benchbench.workloads._config import (
    TrainingConfig,
    check_image_size,
    resnet_defaults,
    search_field,
    training_defaults,
)

# 'auto' batch search stops here: beyond it a single GPU gains nothing in throughput.
BATCH_CAP = 2048


@dataclass(frozen=True)
class ResNet50Config(TrainingConfig):
    batch_size: int | str | None = search_field(
        "images per step; auto: 256 on GPU (DLE's), 8 on CPU; 'auto' searches "
        "for the largest power of two that fits (CUDA only)")
    image_size: int | None = doc_field(None, "square input side; auto: 224")
    channels_last: bool | None = doc_field(None, "NHWC memory format; auto: on for GPU")

    def validate(self) -> None:
        super().validate()
        check_image_size(self.image_size)
        if self.precisions and "fp8" in self.precisions:
            raise ConfigError("precisions: fp8 trains through torchao's float8 Linear layers, "
                              "and ResNet50 is convolutions; fp8 is the transformer's")


def defaults(device: str, quick: bool, facts: Facts) -> dict[str, Any]:
    return {**training_defaults(device, quick), **resnet_defaults(device, quick)}


SPEC = ProbeSpec(
    name="resnet50",
    repeatable=True,
    # On a CPU at 224 px (--quick too, so that quick and default agree) one step of 8 images
    # takes ~1.5 s on 2 cores: a round's build, warm step and timed steps need ~5 s of a quick
    # run, a default round's two precisions ~25 s.
    budget_weight=6.0,
    # four precisions on a GPU, each with its own start-up (cuDNN's autotuning)
    gpu_weight=3.2,
    description="ResNet50 training-step throughput per precision (images/s), synthetic "
                "data on the device",
    config_cls=ResNet50Config,
    run="benchbench.workloads.resnet50.run",
    gpu_resource="gpu_compute",
    cpu_resource="cpu_compute",
    defaults=defaults,
)
