"""What the verdict is about: the workload and the user's real training set (not a probe: set
with --set analysis.<field>=…)."""

from __future__ import annotations

from dataclasses import dataclass

from benchbench.core.config import ConfigError, check_choices, doc_field, size_field

WORKLOADS = ("resnet50", "transformer")
# ImageNet-1k's training set: 1,281,167 JPEGs of 114,660 B on average, about 147 GB.
IMAGENET_SAMPLES = 1_281_167
IMAGENET_MEAN_FILE_BYTES = 114_660


@dataclass(frozen=True)
class AnalysisConfig:
    """What the verdict is about (not a probe: set with --set analysis.<field>=…). The probes
    measure a small sample; the verdict judges the user's real training set."""

    workload: str = doc_field("resnet50", "the workload the top-level verdict is for: "
                                          "resnet50 or transformer")
    dataset_samples: int | None = doc_field(
        None, "images in the real training set; auto: the --data-dir's, else ImageNet-1k's "
              "1,281,167")
    dataset_bytes: int | None = size_field(
        None, "bytes of the real training set; auto: the --data-dir's, else ImageNet-1k's "
              "(about 147 GB)")

    def validate(self) -> None:
        check_choices("workload", (self.workload,), WORKLOADS)
        for name in ("dataset_samples", "dataset_bytes"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise ConfigError("dataset_samples and dataset_bytes must be positive")
