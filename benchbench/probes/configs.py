"""Each probe's configuration: a frozen dataclass whose every field is settable with --set.

A field left at None means "auto": the probe's spec (workloads/__init__.py) or the probe itself
chooses from the device and --quick, and records the choice in the run's params.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from benchbench.core.config import ConfigError, ProbeConfig, SamplingConfig, doc_field, size_field
from benchbench.core.sampling import RepeatPolicy

MATMUL_DTYPES = ("fp32", "tf32", "bf16", "fp16")


@dataclass(frozen=True)
class MatmulConfig(SamplingConfig):
    sizes: tuple[int, ...] | None = doc_field(
        None, "square matrix sizes n (n x n @ n x n); auto: 2048..16384 on GPU, 256..2048 on CPU")
    dtypes: tuple[str, ...] | None = doc_field(
        None, "fp32 (TF32 off), tf32, bf16, fp16; auto: all four on GPU, fp32 and bf16 on CPU")
    devices: tuple[int, ...] | None = doc_field(None, "GPU indices to measure; auto: every GPU")

    def validate(self) -> None:
        super().validate()
        _check_choices("dtypes", self.dtypes, MATMUL_DTYPES)
        _check_positive("sizes", self.sizes)


@dataclass(frozen=True)
class MemoryBandwidthConfig(SamplingConfig):
    host_size_bytes: int | None = size_field(
        None, "bytes per host buffer; auto: the larger of 4x the last-level cache and 1G "
        "(256M with --quick)")
    gpu_size_bytes: int | None = size_field(
        None, "bytes per GPU buffer; auto: the larger of 4x L2 and 2G (512M with --quick)")
    devices: tuple[int, ...] | None = doc_field(None, "GPU indices to measure; auto: every GPU")


COPY_DIRECTIONS = ("h2d", "d2h")
HOST_MEMORY_KINDS = ("pinned", "pageable")


@dataclass(frozen=True)
class HostDeviceCopyConfig(SamplingConfig):
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


# --- training probes ---------------------------------------------------------------------------

PRECISIONS = ("fp32", "tf32", "amp_bf16", "amp_fp16")
# The matmul dtype each training precision runs its tensor-core work in: MFU divides by that
# dtype's datasheet peak, mamfu by that dtype's measured matmul ceiling.
PRECISION_DTYPE = {"fp32": "fp32", "tf32": "tf32", "amp_bf16": "bf16", "amp_fp16": "fp16"}


def search_field(doc: str) -> object:
    """A batch size: an integer, None for the device default, or 'auto' for a search."""
    return field(default=None, metadata={"doc": doc, "search": True})


@dataclass(frozen=True)
class TrainingConfig(ProbeConfig):
    precisions: tuple[str, ...] | None = doc_field(
        None, "fp32 (TF32 off), tf32, amp_bf16, amp_fp16; auto: all four on GPU, fp32 and "
        "amp_bf16 on CPU")
    steps: int | None = doc_field(None, "timed training steps per precision (fewer when the "
                                        "time budget runs out)")
    compile: bool = doc_field(False, "wrap the model in torch.compile")

    def validate(self) -> None:
        super().validate()
        _check_choices("precisions", self.precisions, PRECISIONS)
        batch = getattr(self, "batch_size", None)
        if batch is not None and batch != "auto" and (not isinstance(batch, int) or batch < 1):
            raise ConfigError(f"batch_size must be a positive integer or auto, not {batch!r}")
        if self.steps is not None and self.steps < 1:
            raise ConfigError("steps must be at least 1")


@dataclass(frozen=True)
class ResNet50Config(TrainingConfig):
    batch_size: int | str | None = search_field(
        "images per step; auto: 256 on GPU (DLE's), 8 on CPU; 'auto' searches "
        "for the largest power of two that fits (CUDA only)")
    image_size: int | None = doc_field(None, "square input side; auto: 224 (64 on CPU --quick)")
    channels_last: bool | None = doc_field(None, "NHWC memory format; auto: on for GPU")

    def validate(self) -> None:
        super().validate()
        if self.image_size is not None and self.image_size < 32:
            raise ConfigError("image_size must be at least 32 (ResNet50 downsamples 32x)")


# Dimensions per preset. gpt2-* follow GPT-2 (Radford et al. 2019) with the vocabulary padded to
# a multiple of 64 as nanoGPT does; 1.3b follows GPT-3 XL (Brown et al. 2020, table 2.1).
TRANSFORMER_PRESETS: dict[str, dict[str, int]] = {
    "small": dict(n_layers=4, d_model=256, n_heads=4, vocab_size=8192, max_seq_len=1024),
    "gpt2-124m": dict(n_layers=12, d_model=768, n_heads=12, vocab_size=50304, max_seq_len=1024),
    "gpt2-350m": dict(n_layers=24, d_model=1024, n_heads=16, vocab_size=50304,
                      max_seq_len=1024),
    "1.3b": dict(n_layers=24, d_model=2048, n_heads=16, vocab_size=50304, max_seq_len=2048),
}


@dataclass(frozen=True)
class TransformerConfig(TrainingConfig):
    preset: str | None = doc_field(
        None, f"one of {', '.join(TRANSFORMER_PRESETS)}; auto: gpt2-124m on GPU, small on CPU "
        "and with --quick")
    n_layers: int | None = doc_field(None, "decoder blocks; auto: the preset's")
    d_model: int | None = doc_field(None, "model width; auto: the preset's")
    n_heads: int | None = doc_field(None, "attention heads; auto: the preset's")
    vocab_size: int | None = doc_field(None, "vocabulary; auto: the preset's")
    seq_len: int | None = doc_field(None, "tokens per sequence, at most the preset's maximum; "
                                          "auto: 1024 on GPU, 256 on CPU (128 with --quick)")
    batch_size: int | str | None = search_field(
        "sequences per step; auto: 16 on GPU, 8 on CPU (4 with --quick); 'auto' searches for "
        "the largest power of two that fits (CUDA only)")

    def validate(self) -> None:
        super().validate()
        if self.preset is not None and self.preset not in TRANSFORMER_PRESETS:
            raise ConfigError(f"preset: unknown {self.preset}; choose from "
                              f"{', '.join(TRANSFORMER_PRESETS)}")
        for name in ("n_layers", "d_model", "n_heads", "vocab_size", "seq_len"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise ConfigError(f"{name} must be at least 1")
        if self.preset is None:
            return
        dims = self.shape()
        if dims["d_model"] % dims["n_heads"]:
            raise ConfigError(f"d_model {dims['d_model']} is not divisible by n_heads "
                              f"{dims['n_heads']}")
        if self.seq_len is not None and self.seq_len > dims["max_seq_len"]:
            raise ConfigError(f"seq_len {self.seq_len} is larger than the {self.preset} model "
                              f"supports ({dims['max_seq_len']})")

    def shape(self) -> dict[str, int]:
        """The preset's dimensions with any field set here taking precedence."""
        dims = dict(TRANSFORMER_PRESETS[self.preset or "small"])
        for name in ("n_layers", "d_model", "n_heads", "vocab_size"):
            if getattr(self, name) is not None:
                dims[name] = getattr(self, name)
        return dims


# --- data path (issue #4) -----------------------------------------------------------------------

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


LOADERS = ("torchvision", "dali_cpu", "dali_gpu")


@dataclass(frozen=True)
class DataloaderConfig(ProbeConfig):
    loaders: tuple[str, ...] | None = doc_field(
        None, "torchvision, dali_cpu, dali_gpu; auto: torchvision and dali_cpu, plus dali_gpu "
        "on a GPU")
    workers: tuple[int, ...] | None = doc_field(
        None, "worker counts to sweep; auto: 0, 1, 2, 4 … up to the usable cores")
    batch_size: int = doc_field(64, "images per batch")
    batches: int | None = doc_field(None, "timed batches per configuration; auto: 20 (5 with "
                                          "--quick)")
    image_size: int = doc_field(224, "RandomResizedCrop output side")

    def validate(self) -> None:
        super().validate()
        _check_choices("loaders", self.loaders, LOADERS)
        if self.workers is not None and (not self.workers or min(self.workers) < 0):
            raise ConfigError("workers must be a non-empty list of counts >= 0")
        if self.batch_size < 1 or (self.batches is not None and self.batches < 1):
            raise ConfigError("batch_size and batches must be at least 1")
        if self.image_size < 8:
            raise ConfigError("image_size must be at least 8")


STORAGE_JOBS = ("seq1m", "rand128k", "rand4k")


@dataclass(frozen=True)
class StorageConfig(ProbeConfig):
    size: int | None = size_field(None, "scratch file size; auto: 4G (256M with --quick), "
                                        "capped by free space")
    runtime: float | None = doc_field(None, "seconds per fio job (time-based); auto: 10 (2 "
                                            "with --quick), less when the time budget is "
                                            "short, so that every job runs")
    jobs: tuple[str, ...] = doc_field(STORAGE_JOBS, "seq1m, rand128k and/or rand4k")
    iodepth: int = doc_field(32, "outstanding I/Os per job (needs libaio or io_uring)")
    numjobs: int = doc_field(4, "parallel fio jobs for the random reads")
    dataset_read_limit: int = size_field(2 * 1024**3, "most bytes of the dataset read cold")
    raw_device: str | None = doc_field(None, "a block device to read (fio --readonly); only "
                                             "when named here")

    def validate(self) -> None:
        super().validate()
        _check_choices("jobs", self.jobs, STORAGE_JOBS)
        if self.iodepth < 1 or self.numjobs < 1:
            raise ConfigError("iodepth and numjobs must be at least 1")
        if self.runtime is not None and self.runtime <= 0:
            raise ConfigError("runtime must be positive")
        if self.size is not None and self.size < 1024**2:
            raise ConfigError("size must be at least 1M")


@dataclass(frozen=True)
class PipelineConfig(ResNet50Config):
    loader: str | None = doc_field(None, "torchvision, dali_cpu or dali_gpu; auto: the best "
                                         "configuration the dataloader probe found")
    workers: int | None = doc_field(None, "loader workers; auto: the dataloader probe's best")

    def validate(self) -> None:
        super().validate()
        if self.loader is not None and self.loader not in LOADERS:
            raise ConfigError(f"loader: unknown {self.loader}; choose from {', '.join(LOADERS)}")
        if self.workers is not None and self.workers < 0:
            raise ConfigError("workers must be >= 0")


# --- distributed probes ------------------------------------------------------------------------

ALLREDUCE_DTYPES = ("fp32", "fp16", "bf16")
BACKENDS = ("auto", "nccl", "gloo")


@dataclass(frozen=True)
class AllreduceConfig:
    """Its own warm-up and iteration fields carry nccl-tests' names (-w, -n), so that its
    figures and settings read the same as nccl-tests'."""

    sizes: tuple[int, ...] | None = field(default=None, metadata={
        "size": True, "doc": "message sizes in bytes; auto: 1K, 4K, ... 1G on GPU, 1K ... 256M "
                             "on CPU (64M with --quick)"})
    dtype: str = doc_field("fp32", "element type: fp32, fp16 or bf16")
    iters: int = doc_field(20, "all-reduces per timed sample, fewer when the budget is short "
                               "(nccl-tests' -n)")
    warmup: int = doc_field(5, "untimed all-reduces per size (nccl-tests' -w)")
    ranks: int | None = doc_field(None, "ranks on one node; auto: one per GPU, or 2 CPU ranks")
    backend: str = doc_field("auto", "auto (NCCL on GPUs, gloo on CPU), nccl or gloo")
    timeout_s: float = doc_field(60.0, "a rendezvous or collective that takes longer fails, "
                                       "naming the rank")

    def validate(self) -> None:
        _check_positive("sizes", self.sizes)
        _check_choices("dtype", (self.dtype,), ALLREDUCE_DTYPES)
        _check_choices("backend", (self.backend,), BACKENDS)
        if self.iters < 1 or self.warmup < 0:
            raise ConfigError("iters must be at least 1 and warmup not negative")
        if self.ranks is not None and self.ranks < 1:
            raise ConfigError("ranks must be at least 1")
        if self.timeout_s <= 0:
            raise ConfigError("timeout_s must be positive")

    def repeat_policy(self, min_repeats: int) -> RepeatPolicy:
        return RepeatPolicy(min_repeats=min_repeats, max_repeats=min_repeats, warmup_s=0.0,
                            warmup_steps=self.warmup)


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
    steps: int | None = doc_field(None, "timed training steps per rank count; auto: 20 on GPU, "
                                        "3 on CPU")
    timeout_s: float = doc_field(120.0, "a rendezvous or collective that takes longer fails")

    def validate(self) -> None:
        super().validate()
        _check_positive("counts", self.counts)
        for name in ("batch_size", "steps"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise ConfigError(f"{name} must be at least 1")
        if self.precision is not None:
            _check_choices("precision", (self.precision,), PRECISIONS)
        if self.image_size is not None and self.image_size < 32:
            raise ConfigError("image_size must be at least 32 (ResNet50 downsamples 32x)")
        if self.timeout_s <= 0:
            raise ConfigError("timeout_s must be positive")


# --- the verdict -------------------------------------------------------------------------------

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
        _check_choices("workload", (self.workload,), WORKLOADS)
        for name in ("dataset_samples", "dataset_bytes"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise ConfigError("dataset_samples and dataset_bytes must be positive")
