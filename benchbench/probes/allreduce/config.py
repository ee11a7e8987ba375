"""The allreduce probe's config, its defaults for every device and --quick, and its spec."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from benchbench.core.config import ConfigError, check_choices, check_positive, doc_field
from benchbench.core.sampling import RepeatPolicy
from benchbench.probes.api import Facts, ProbeSpec

MiB, GiB = 1024**2, 1024**3
DTYPES = ("fp32", "fp16", "bf16")
BACKENDS = ("auto", "nccl", "gloo")
CPU_RANKS = 2  # gloo ranks on a CPU: enough to exercise the collective on a small box


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
    timeout_s: float | None = doc_field(None, "a rendezvous or collective that takes longer "
                                              "fails, naming the rank; auto: 60 (30 with "
                                              "--quick)")

    def validate(self) -> None:
        check_positive("sizes", self.sizes)
        check_choices("dtype", (self.dtype,), DTYPES)
        check_choices("backend", (self.backend,), BACKENDS)
        if self.iters < 1 or self.warmup < 0:
            raise ConfigError("iters must be at least 1 and warmup not negative")
        if self.ranks is not None and self.ranks < 1:
            raise ConfigError("ranks must be at least 1")
        if self.timeout_s is not None and self.timeout_s <= 0:
            raise ConfigError("timeout_s must be positive")

    def repeat_policy(self, min_repeats: int) -> RepeatPolicy:
        return RepeatPolicy(min_repeats=min_repeats, max_repeats=min_repeats, warmup_s=0.0,
                            warmup_steps=self.warmup)


def defaults(device: str, quick: bool, facts: Facts) -> dict[str, Any]:
    # nccl-tests' usual sweep is 8 B to 8 GB; 1K..1G x4 covers the latency- and the
    # bandwidth-bound ends. CPU ranks stop lower: gloo moves ~1 GB/s on a small box.
    top = GiB if device == "cuda" else (64 if quick else 256) * MiB
    sizes = []
    size = 1024
    while size <= top:
        sizes.append(size)
        size *= 4
    gpus = int(facts.get("cuda_device_count") or 0)
    ranks = (gpus or None) if device == "cuda" else CPU_RANKS
    return {"sizes": tuple(sizes), "timeout_s": 30.0 if quick else 60.0, "ranks": ranks}


# A distributed probe: it runs first under torchrun or srun, where every rank must reach it
# together (see engine/runner.py).
SPEC = ProbeSpec(
    name="allreduce",
    description="torch.distributed all_reduce time, algbw and busbw (nccl-tests' "
                "definitions) from 1K to 1G, NCCL across GPUs or gloo across CPU ranks",
    config_cls=AllreduceConfig,  # type: ignore[arg-type]
    run="benchbench.probes.allreduce.run",
    gpu_resource="interconnect",
    cpu_resource="interconnect",
    distributed=True,
    exchanges=True,
    defaults=defaults,
)
