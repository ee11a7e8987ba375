"""The stability probe's config, its defaults for every device and --quick, and its spec."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchbench.core.config import ConfigError, ProbeConfig, check_choices, doc_field
from benchbench.probes.api import Facts, ProbeSpec

DTYPES = ("fp32", "bf16", "fp16")


@dataclass(frozen=True)
class StabilityConfig(ProbeConfig):
    duration_s: float | None = doc_field(
        None, "seconds the kernel runs back to back (less when the time budget is shorter); "
              "auto: 60 on GPU, 20 on CPU; with --quick 5 on GPU, 4 on CPU")
    window_s: float = doc_field(0.1, "length of one throughput window in seconds")
    dtype: str | None = doc_field(None, "matmul dtype; auto: bf16 on GPU, fp32 on CPU")
    size: int | None = doc_field(None, "square matmul size n; auto: the size at which the "
                                        "matmul probe peaked in that dtype, else 8192 on GPU "
                                        "and 512 on CPU")

    def validate(self) -> None:
        super().validate()
        if self.duration_s is not None and self.duration_s <= 0:
            raise ConfigError("duration_s must be positive")
        if not 0.01 <= self.window_s <= 10:
            raise ConfigError("window_s must be from 0.01 to 10 seconds")
        if self.dtype is not None:
            check_choices("dtype", (self.dtype,), DTYPES)
        if self.size is not None and self.size < 16:
            raise ConfigError("size must be at least 16")


def defaults(device: str, quick: bool, facts: Facts) -> dict[str, Any]:
    gpu = device == "cuda"
    # --quick on a CPU: 3.5 s, within the ~3.9 s its weight gets of the 40 s quick CPU budget.
    quick_s = 5.0 if gpu else 3.5
    return {"duration_s": quick_s if quick else (60.0 if gpu else 20.0), "warmup_steps": 3,
            "warmup_s": 0.5 if gpu else 0.2, "dtype": "bf16" if gpu else "fp32"}


SPEC = ProbeSpec(
    name="stability",
    # Its share covers its duration: 60 s of a default GPU run, 20 s on a CPU, 5 and 4 with
    # --quick.
    budget_weight=2.0,
    description="a fixed matmul back to back in ~100 ms windows: median, CV, worst 1%, drift "
                "and drops, lined up with the telemetry: stable, throttling or noisy",
    config_cls=StabilityConfig,
    run="benchbench.probes.stability.run",
    gpu_resource="gpu_compute",
    cpu_resource="cpu_compute",
    defaults=defaults,
)
