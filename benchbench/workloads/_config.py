"""What the training workloads' configurations share, torch-free: the training defaults by
device and --quick, the precisions and the one choice of a device's best mixed precision,
ResNet50's input, the batch field and the training workloads' base config."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from benchbench.core.config import (
    CPU_QUICK_PIPELINE_SIZE,
    ConfigError,
    ProbeConfig,
    check_choices,
    doc_field,
)
from benchbench.probes._config import capability
from benchbench.probes.api import Facts

PRECISIONS = ("fp32", "tf32", "amp_bf16", "amp_fp16", "fp8")
# DLE's per-GPU batch for ResNet50, so that runs on different machines compare; on a CPU a
# 224 px step at batch 8 takes about two seconds on a small machine, and every round pays a
# cold one too (resnet50, pipeline and the "auto" batch search start here).
RESNET_BATCH = {"cuda": 256, "cpu": 8}


# A GPU precision's timed steps last at least this long: NVML's power reading is a one-second
# average and a power-capped GPU settles its clock in about a second, so a shorter window
# measures the ramp (an H200's two timed ResNet50 steps, 0.1 s, read 165 W of a steady 590).
GPU_MIN_TIMED_S = 1.5


def training_defaults(device: str, quick: bool) -> dict[str, Any]:
    """Precisions, timed steps and warm-up of a training probe."""
    if device == "cuda":
        # Warm-up steps cover allocator growth and the clocks' ramp after the first step's
        # cuDNN autotuning: five, three in a quick run, whose 1.5 s timed window (twice
        # the default's share of steps) then starts on a settled clock.
        return {"precisions": ("fp32", "tf32", "amp_bf16", "amp_fp16"),
                "steps": 20 if quick else 50, "warmup_steps": 3 if quick else 5,
                "warmup_s": 0.0, "min_timed_s": GPU_MIN_TIMED_S}
    # --quick on a CPU trains in fp32 only: amp_bf16 is emulated on most CPUs, and its first
    # steps there cost more than a quick run's share; the default run measures both. Two
    # timed steps a round, at the default's 224 px: ~1.5 s each on 2 cores.
    return {"precisions": ("fp32",) if quick else ("fp32", "amp_bf16"),
            "steps": 2 if quick else 5, "warmup_steps": 1, "warmup_s": 0.0,
            "min_timed_s": 0.0}


def resnet_defaults(device: str, quick: bool, pipeline: bool = False) -> dict[str, Any]:
    """ResNet50's input on this device: the size (224 px, the real one; the pipeline's on a
    CPU with --quick: CPU_QUICK_PIPELINE_SIZE), the layout and the batch."""
    small = pipeline and device == "cpu" and quick
    return {"image_size": CPU_QUICK_PIPELINE_SIZE if small else 224,
            "channels_last": device == "cuda",
            "batch_size": RESNET_BATCH["cuda" if device == "cuda" else "cpu"]}


def best_amp(device: str, facts: Facts) -> str:
    """The precision a device trains fastest in: amp_bf16 where its tensor cores do bf16
    (compute capability 8.0, Ampere, and later), else amp_fp16 (V100, T4); fp32 on a CPU,
    where bf16 is usually emulated and far slower. A GPU whose capability is unknown is taken
    for a recent one; the probe's own check of the precision says so if it is not."""
    if device != "cuda":
        return "fp32"
    cap = capability(facts)
    return "amp_fp16" if cap is not None and cap[0] < 8 else "amp_bf16"


def search_field(doc: str) -> Any:
    """A batch size: an integer, or 'auto' for a search of the largest that fits."""
    return field(default=None, metadata={"doc": doc, "search": True})


def check_batch(batch: Any) -> None:
    if batch is not None and batch != "auto" and (not isinstance(batch, int) or batch < 1):
        raise ConfigError(f"batch_size must be a positive integer or auto, not {batch!r}")


def check_image_size(size: int | None) -> None:
    if size is not None and size < 32:
        raise ConfigError("image_size must be at least 32 (ResNet50 downsamples 32x)")


@dataclass(frozen=True)
class TrainingConfig(ProbeConfig):
    precisions: tuple[str, ...] | None = doc_field(
        None, "fp32 (TF32 off), tf32, amp_bf16, amp_fp16, fp8 (the transformer only, through "
        "torchao); auto: fp32, tf32, amp_bf16 and amp_fp16 on GPU, fp32 and amp_bf16 on CPU "
        "(fp32 with --quick); the transformer adds fp8 on every device and says why it is "
        "skipped where it cannot run; the pipeline takes the device's best one only")
    steps: int | None = doc_field(None, "timed training steps per precision (fewer when the "
                                        "time budget runs out); auto: 50 on GPU (20 with "
                                        "--quick), 5 on CPU (3 with --quick)")
    min_timed_s: float | None = doc_field(
        None, "the timed steps of a precision last at least this many seconds (steps are "
              "added to reach it, within the time budget); auto: 1.5 on GPU, 0 on CPU")
    compile: bool = doc_field(False, "wrap the model in torch.compile")

    def validate(self) -> None:
        super().validate()
        check_choices("precisions", self.precisions, PRECISIONS)
        check_batch(getattr(self, "batch_size", None))
        if self.steps is not None and self.steps < 1:
            raise ConfigError("steps must be at least 1")
        if self.min_timed_s is not None and self.min_timed_s < 0:
            raise ConfigError("min_timed_s must not be negative")


