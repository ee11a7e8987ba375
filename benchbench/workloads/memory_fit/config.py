"""The memory_fit workload's config, its defaults for every device and --quick, and its spec."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchbench.analysis.memory_fit import LADDER
from benchbench.core.config import ConfigError, ProbeConfig, check_choices, doc_field
from benchbench.probes.api import Facts, ProbeSpec
from benchbench.workloads._config import best_amp

MODES = ("plain", "checkpointing")


@dataclass(frozen=True)
class MemoryFitConfig(ProbeConfig):
    ladder: tuple[str, ...] | None = doc_field(
        None, f"model sizes to search, smallest first, from {', '.join(LADDER)}; auto: all "
              "of them on GPU, 125m and 350m on CPU (125m with --quick)")
    seq_len: int | None = doc_field(None, "tokens per sequence, micro-batch 1; auto: 2048 on "
                                          "GPU, 256 on CPU (64 with --quick)")
    modes: tuple[str, ...] | None = doc_field(
        None, "plain, checkpointing (activation checkpointing of every block); auto: both")
    precision: str | None = doc_field(
        None, "amp_bf16, amp_fp16 (with GradScaler) or fp32; auto: amp_bf16 where the GPU has "
              "bf16 tensor cores, amp_fp16 on older GPUs, fp32 on CPU")
    bisect_steps: int | None = doc_field(
        None, "on a GPU, sizes tried between the last rung that fits and the first that does "
              "not (the lower rung's width at more layers); auto: 3 on GPU, 0 on CPU, whose "
              "search ends at time or free RAM, never at out of memory")
    ram_share: float = doc_field(
        0.5, "on a CPU, try a size only when its estimate is under this share of the free "
             "RAM: a CPU never reports out of memory, the kernel's OOM killer ends the run")

    def validate(self) -> None:
        super().validate()
        if self.ladder is not None:
            if not self.ladder:
                raise ConfigError("ladder must name at least one size")
            check_choices("ladder", self.ladder, tuple(LADDER))
        if self.seq_len is not None and self.seq_len < 1:
            raise ConfigError("seq_len must be at least 1")
        if self.modes is not None:
            if not self.modes:
                raise ConfigError("modes must name at least one of plain, checkpointing")
            check_choices("modes", self.modes, MODES)
        if self.precision is not None:
            check_choices("precision", (self.precision,), ("amp_bf16", "amp_fp16", "fp32"))
        if self.bisect_steps is not None and self.bisect_steps < 0:
            raise ConfigError("bisect_steps must be 0 or more")
        if not 0 < self.ram_share <= 1:
            raise ConfigError("ram_share must be in (0, 1]")


def defaults(device: str, quick: bool, facts: Facts) -> dict[str, Any]:
    if device == "cuda":
        return {"ladder": tuple(LADDER), "seq_len": 2048, "modes": MODES,
                "precision": best_amp(device, facts), "bisect_steps": 3, "warmup_steps": 0,
                "warmup_s": 0.0}
    # A 125M step on 2 cores takes 0.7-0.9 s (fused AdamW and the 32k-token head), so --quick
    # shortens the sequence; on 2 cores its budget then pays for the plain mode's point, and
    # the checkpointing mode's is refused by time (priced by the plain one's).
    return {"ladder": ("125m",) if quick else ("125m", "350m"), "seq_len": 64 if quick else 256,
            "modes": MODES, "precision": "fp32", "bisect_steps": 0, "warmup_steps": 0,
            "warmup_s": 0.0}


SPEC = ProbeSpec(
    name="memory_fit",
    budget_weight=2.0,
    description="the largest Llama-style model whose full training step (AdamW, mixed "
                "precision) fits on one device, by real steps, plain and with activation "
                "checkpointing, each point beside the closed-form estimate",
    config_cls=MemoryFitConfig,
    run="benchbench.workloads.memory_fit.run",
    gpu_resource="gpu_memory",
    cpu_resource="host_memory",
    defaults=defaults,
)
