"""The transformer probe's config (model presets included), its defaults for every device and
--quick, and its spec."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchbench.core.config import ConfigError, doc_field
from benchbench.probes.api import Facts, ProbeSpec
from benchbench.workloads._config import TrainingConfig, search_field, training_defaults

# Sequences per step by device: the default, and where an 'auto' batch search starts.
BATCH = {"cuda": 16, "cpu": 8}
# 'auto' batch search stops here.
BATCH_CAP = 1024

# Dimensions per preset. gpt2-* follow GPT-2 (Radford et al. 2019) with the vocabulary padded to
# a multiple of 64 as nanoGPT does; 1.3b follows GPT-3 XL (Brown et al. 2020, table 2.1).
PRESETS: dict[str, dict[str, int]] = {
    "small": dict(n_layers=4, d_model=256, n_heads=4, vocab_size=8192, max_seq_len=1024),
    "gpt2-124m": dict(n_layers=12, d_model=768, n_heads=12, vocab_size=50304, max_seq_len=1024),
    "gpt2-350m": dict(n_layers=24, d_model=1024, n_heads=16, vocab_size=50304,
                      max_seq_len=1024),
    "1.3b": dict(n_layers=24, d_model=2048, n_heads=16, vocab_size=50304, max_seq_len=2048),
}
DIMENSIONS = ("n_layers", "d_model", "n_heads", "vocab_size")


def check_preset(preset: str | None) -> None:
    if preset is not None and preset not in PRESETS:
        raise ConfigError(f"preset: unknown {preset}; choose from {', '.join(PRESETS)}")


@dataclass(frozen=True)
class TransformerConfig(TrainingConfig):
    preset: str | None = doc_field(
        None, f"one of {', '.join(PRESETS)}; auto: gpt2-124m on GPU, small on CPU "
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
        check_preset(self.preset)
        for name in (*DIMENSIONS, "seq_len"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise ConfigError(f"{name} must be at least 1")
        if self.preset is None:  # the preset's own limits are checked once it is chosen
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
        dims = dict(PRESETS[self.preset or "small"])
        for name in DIMENSIONS:
            if getattr(self, name) is not None:
                dims[name] = getattr(self, name)
        return dims


def defaults(device: str, quick: bool, facts: Facts) -> dict[str, Any]:
    base = training_defaults(device, quick)
    # fp8 (torchao's float8 training) beside the AMP precisions: measured where the GPU and
    # torchao have it, and said why not everywhere else. At these presets, eager, it is
    # expected to be slower than amp_bf16 (pytorch/ao#685): the buyer's guide judges
    # Transformer Engine's claim only from compile=true at d_model >= 2048 (preset 1.3b).
    base["precisions"] = (*base["precisions"], "fp8")
    if device == "cuda":
        return {**base, "preset": "small" if quick else "gpt2-124m", "seq_len": 1024,
                "batch_size": BATCH["cuda"]}
    return {**base, "preset": "small", "seq_len": 128 if quick else 256,
            "batch_size": 4 if quick else BATCH["cpu"]}


SPEC = ProbeSpec(
    name="transformer",
    repeatable=True,
    budget_weight=2.0,
    description="GPT-style decoder training throughput per precision (tokens/s) and "
                "FLOPs per token for MFU",
    config_cls=TransformerConfig,
    run="benchbench.workloads.transformer.run",
    gpu_resource="gpu_compute",
    cpu_resource="cpu_compute",
    defaults=defaults,
)
