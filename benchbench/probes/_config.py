"""What several probes' configurations share, torch-free: the sampling and training defaults
by device and --quick, the training precisions and the one choice of a device's best mixed
precision, the training probes' base config, and the data-path probes' synthetic dataset."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from benchbench.core.config import ConfigError, ProbeConfig, check_choices, doc_field
from benchbench.probes.api import Facts

PRECISIONS = ("fp32", "tf32", "amp_bf16", "amp_fp16")
# DLE's per-GPU batch for ResNet50, so that runs on different machines compare; on a CPU a
# 224 px step at batch 8 takes about two seconds on a small machine, and every round pays a
# cold one too (resnet50, pipeline and the "auto" batch search start here).
RESNET_BATCH = {"cuda": 256, "cpu": 8}


def sampling_defaults(device: str, quick: bool) -> dict[str, Any]:
    """A probe that times one operation repeatedly: its warm-up and sample length."""
    # GPU samples of ~20 ms are far above event resolution (~0.5 us); CPU samples are longer
    # because perf_counter around a Python loop carries scheduler noise on small boxes.
    if device == "cuda":
        return {"warmup_s": 0.2 if quick else 0.5, "min_sample_s": 0.02}
    return {"warmup_s": 0.1 if quick else 0.3, "min_sample_s": 0.02 if quick else 0.05}


def training_defaults(device: str, quick: bool) -> dict[str, Any]:
    """Precisions, timed steps and warm-up of a training probe."""
    if device == "cuda":
        # Five warm-up steps cover allocator growth and the clocks' ramp after the first
        # step's cuDNN autotuning; every round warms up again.
        return {"precisions": ("fp32", "tf32", "amp_bf16", "amp_fp16"),
                "steps": 20 if quick else 50, "warmup_steps": 5, "warmup_s": 0.0}
    # --quick on a CPU trains in fp32 only: amp_bf16 is emulated on most CPUs, and its first
    # steps there cost more than a quick run's share; the default run measures both.
    return {"precisions": ("fp32",) if quick else ("fp32", "amp_bf16"),
            "steps": 3 if quick else 5, "warmup_steps": 1, "warmup_s": 0.0}


def resnet_defaults(device: str, quick: bool) -> dict[str, Any]:
    """ResNet50's input on this device: the size, the layout and the batch."""
    cpu_quick = device == "cpu" and quick
    return {"image_size": 64 if cpu_quick else 224, "channels_last": device == "cuda",
            "batch_size": RESNET_BATCH["cuda" if device == "cuda" else "cpu"]}


def every_gpu(device: str, facts: Facts) -> dict[str, Any]:
    """`devices` resolved to every GPU torch sees (nothing on a CPU, or before facts)."""
    count = int(facts.get("cuda_device_count") or 0)
    return {"devices": tuple(range(count))} if device == "cuda" and count else {}


def capability(facts: Facts, index: int = 0) -> tuple[int, int] | None:
    """GPU `index`'s compute capability as torch reported it, or None when unknown."""
    gpus = facts.get("gpus") or []
    text = gpus[index].get("capability") if index < len(gpus) else None
    if not text:
        return None
    major, _, minor = str(text).partition(".")
    return int(major), int(minor or 0)


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
        None, "fp32 (TF32 off), tf32, amp_bf16, amp_fp16; auto: all four on GPU, fp32 and "
        "amp_bf16 on CPU (fp32 with --quick)")
    steps: int | None = doc_field(None, "timed training steps per precision (fewer when the "
                                        "time budget runs out); auto: 50 on GPU (20 with "
                                        "--quick), 5 on CPU (3 with --quick)")
    compile: bool = doc_field(False, "wrap the model in torch.compile")

    def validate(self) -> None:
        super().validate()
        check_choices("precisions", self.precisions, PRECISIONS)
        check_batch(getattr(self, "batch_size", None))
        if self.steps is not None and self.steps < 1:
            raise ConfigError("steps must be at least 1")


# The synthetic dataset's size: enough files that no loader worker idles at GPU batch sizes
# (the loaders cycle over it), few enough to generate in seconds.
DEFAULT_IMAGES, QUICK_IMAGES = 2000, 256


@dataclass(frozen=True)
class DatasetConfig:
    """The synthetic ImageFolder dataset generated when no --data-dir is given (not a probe:
    its fields are set with --set dataset.<field>=…)."""

    num_images: int | None = doc_field(None, "JPEG files to generate; auto: 2000 (256 with "
                                             "--quick)")
    num_classes: int = doc_field(10, "class sub-folders")
    mean_side: int = doc_field(433, "geometric mean image side in pixels; 433 gives ImageNet's "
                                    "typical ~500x375 and ~110 KB JPEGs")
    seed: int = doc_field(0, "random seed: the same parameters give the same files")

    def validate(self) -> None:
        if self.num_images is not None and self.num_images < 1:
            raise ConfigError("num_images must be at least 1")
        if self.num_classes < 1:
            raise ConfigError("num_classes must be at least 1")
        if self.mean_side < 32:
            raise ConfigError("mean_side must be at least 32 pixels")
