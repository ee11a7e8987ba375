"""The ddp_scaling probe's config, its defaults for every device and --quick, and its spec."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchbench.core.config import (
    ConfigError,
    ProbeConfig,
    check_choices,
    check_positive,
    doc_field,
)
from benchbench.probes.api import Facts, ProbeSpec
from benchbench.workloads._config import PRECISIONS, RESNET_BATCH, best_amp, check_image_size


@dataclass(frozen=True)
class DdpScalingConfig(ProbeConfig):
    counts: tuple[int, ...] | None = doc_field(
        None, "numbers of ranks to train on; auto: 1, 2, 4 ... up to every GPU (1 and 2 CPU "
              "ranks)")
    precision: str | None = doc_field(None, "auto: amp_bf16 where the GPU has it, else "
                                            "amp_fp16; fp32 on CPU")
    batch_size: int | None = doc_field(None, "images per rank and step; auto: 256 on GPU, 4 "
                                             "on CPU")
    image_size: int | None = doc_field(None, "square input side; auto: 224 on GPU, 32 on CPU")
    channels_last: bool | None = doc_field(None, "NHWC memory format; auto: on for GPU")
    steps: int | None = doc_field(None, "timed training steps per rank count; auto: 20 on GPU "
                                        "(10 with --quick), 3 on CPU (2 with --quick)")
    timeout_s: float | None = doc_field(None, "a rendezvous or collective that takes longer "
                                              "fails; auto: 120 (60 on a CPU with --quick)")

    def validate(self) -> None:
        super().validate()
        check_positive("counts", self.counts)
        for name in ("batch_size", "steps"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise ConfigError(f"{name} must be at least 1")
        if self.precision is not None:
            # fp8 is the transformer's (torchao's float8 Linear layers); ResNet50 is convolutions.
            check_choices("precision", (self.precision,), tuple(x for x in PRECISIONS
                                                                 if x != "fp8"))
        check_image_size(self.image_size)
        if self.timeout_s is not None and self.timeout_s <= 0:
            raise ConfigError("timeout_s must be positive")


def defaults(device: str, quick: bool, facts: Facts) -> dict[str, Any]:
    precision = best_amp(device, facts)
    if device == "cuda":
        return {"steps": 10 if quick else 20, "warmup_steps": 3 if quick else 5,
                "image_size": 224, "batch_size": RESNET_BATCH["cuda"], "channels_last": True,
                "precision": precision, "timeout_s": 120.0, "warmup_s": 0.0}
    # A functional check on CPU: two ranks share the cores, so the figures are contention.
    return {"steps": 2 if quick else 3, "warmup_steps": 1, "image_size": 32,
            "batch_size": 4, "channels_last": False, "counts": (1, 2), "precision": precision,
            "timeout_s": 60.0 if quick else 120.0, "warmup_s": 0.0}


# A distributed probe: it runs first under torchrun or srun (see engine/runner.py).
SPEC = ProbeSpec(
    name="ddp_scaling",
    budget_weight=2.0,
    description="DistributedDataParallel ResNet50 throughput at 1, 2, 4 ... GPUs: scaling "
                "efficiency and the cost knee",
    config_cls=DdpScalingConfig,
    run="benchbench.workloads.ddp_scaling.run",
    gpu_resource="interconnect",
    cpu_resource="interconnect",
    distributed=True,
    exchanges=True,
    defaults=defaults,
)
