"""What several probes' configurations share, torch-free: the sampling defaults by device and
--quick, every GPU, a GPU's compute capability from the facts, and the data-path probes'
synthetic dataset. The training workloads' shared defaults are in workloads/_config.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchbench.core.config import ConfigError, doc_field
from benchbench.probes.api import Facts


def sampling_defaults(device: str, quick: bool) -> dict[str, Any]:
    """A probe that times one operation repeatedly: its warm-up and sample length."""
    # GPU samples of ~20 ms are far above event resolution (~0.5 us); CPU samples are longer
    # because perf_counter around a Python loop carries scheduler noise on small boxes.
    if device == "cuda":
        return {"warmup_s": 0.2 if quick else 0.5, "min_sample_s": 0.02}
    return {"warmup_s": 0.1 if quick else 0.3, "min_sample_s": 0.02 if quick else 0.05}


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
