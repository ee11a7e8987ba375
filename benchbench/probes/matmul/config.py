"""The matmul probe's config, its defaults for every device and --quick, and its spec."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchbench.core.config import (
    ConfigError,
    SamplingConfig,
    check_choices,
    check_positive,
    doc_field,
)
from benchbench.probes._config import every_gpu, sampling_defaults
from benchbench.probes.api import Facts, ProbeSpec

DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8")


@dataclass(frozen=True)
class MatmulConfig(SamplingConfig):
    sizes: tuple[int, ...] | None = doc_field(
        None, "square matrix sizes n (n x n @ n x n); auto: 2048..16384 on GPU, 256..2048 on CPU")
    dtypes: tuple[str, ...] | None = doc_field(
        None, "fp32 (TF32 off), tf32, bf16, fp16, fp8 (e4m3 inputs, bf16 output, tensor-wise "
              "scales; compute capability 8.9 and later; sizes in multiples of 16, as cuBLASLt "
              "takes them: others are skipped with the reason); auto: all five on GPU, fp32 "
              "and bf16 on CPU (fp8 listed to say why it is skipped)")
    devices: tuple[int, ...] | None = doc_field(None, "GPU indices to measure; auto: every GPU")
    sustained_s: float | None = doc_field(
        None, "seconds the best size of each dtype then runs back to back on the first device, "
              "in ~0.1 s windows: the sustained figure the run is judged by (a GPU at its power "
              "limit holds a lower clock than a 20 ms burst runs at); 0 leaves it out; auto: "
              "1.0 on a GPU, 0.2 on a CPU")

    def validate(self) -> None:
        super().validate()
        check_choices("dtypes", self.dtypes, DTYPES)
        check_positive("sizes", self.sizes)
        if self.sustained_s is not None and self.sustained_s < 0:
            raise ConfigError("sustained_s must be 0 or more")


def defaults(device: str, quick: bool, facts: Facts) -> dict[str, Any]:
    if device == "cuda":
        # 16384 is needed to saturate H100/H200-class tensor cores for fp32; 4096 suffices for
        # smaller parts, so the sweep shows where each GPU reaches its plateau.
        sizes = (4096, 8192) if quick else (2048, 4096, 8192, 16384)
        dtypes: tuple[str, ...] = DTYPES
    else:
        sizes = (256, 512) if quick else (256, 512, 1024, 2048)
        # TF32 is a GPU tensor-core mode and fp16 GEMM on a CPU is emulated; fp8 is asked for so
        # that the run says why a CPU has none.
        dtypes = ("fp32", "bf16", "fp8")
    # A second: a GPU at its power limit settles its clock within it (NVML's power reading is
    # itself a 1 s average). A CPU has no such limit to settle at; a fifth keeps --quick short.
    sustained_s = 1.0 if device == "cuda" else 0.2
    return {**sampling_defaults(device, quick), **every_gpu(device, facts), "sizes": sizes,
            "dtypes": dtypes, "sustained_s": sustained_s}


SPEC = ProbeSpec(
    name="matmul",
    repeatable=True,
    description="dense matrix-multiply throughput per dtype (FLOP/s), every GPU or the CPU",
    config_cls=MatmulConfig,
    run="benchbench.probes.matmul.run",
    gpu_resource="gpu_compute",
    cpu_resource="cpu_compute",
    per_gpu=True,
    defaults=defaults,
)
