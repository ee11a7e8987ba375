"""The storage probe's config, its defaults for --quick, and its spec (light: no fio call, no
I/O)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchbench.core.config import ConfigError, ProbeConfig, check_choices, doc_field, size_field
from benchbench.probes.api import Facts, ProbeSpec

MiB, GiB = 1024**2, 1024**3
JOBS = ("seq1m", "rand128k", "rand4k")


@dataclass(frozen=True)
class StorageConfig(ProbeConfig):
    size: int | None = size_field(None, "scratch file size, and the most bytes of a raw device "
                                        "read; auto: 4G, larger than most drive and controller "
                                        "caches (256M with --quick), capped by free space")
    runtime: float | None = doc_field(None, "seconds per fio job (time-based); auto: up to "
                                            "max_runtime, less when the time budget is short, "
                                            "so that every job runs")
    max_runtime: float | None = doc_field(None, "the longest an auto runtime makes a job; "
                                                "auto: 10 (1.5 with --quick)")
    jobs: tuple[str, ...] = doc_field(JOBS, "seq1m, rand128k and/or rand4k")
    iodepth: int = doc_field(32, "outstanding I/Os per job (needs libaio or io_uring)")
    numjobs: int = doc_field(4, "parallel fio jobs for the random reads")
    dataset_read_limit: int = size_field(2 * 1024**3, "most bytes of the dataset read cold")
    raw_device: str | None = doc_field(None, "a block device to read (fio --readonly); only "
                                             "when named here")

    def validate(self) -> None:
        super().validate()
        check_choices("jobs", self.jobs, JOBS)
        if self.iodepth < 1 or self.numjobs < 1:
            raise ConfigError("iodepth and numjobs must be at least 1")
        for name in ("runtime", "max_runtime"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ConfigError(f"{name} must be positive")
        if self.size is not None and self.size < 1024**2:
            raise ConfigError("size must be at least 1M")


def defaults(device: str, quick: bool, facts: Facts) -> dict[str, Any]:
    return {"warmup_steps": 0, "warmup_s": 0.0, "size": 256 * MiB if quick else 4 * GiB,
            "max_runtime": 1.5 if quick else 10.0}


SPEC = ProbeSpec(
    name="storage",
    description="read rates with fio (sequential 1M, random 128k and 4k, direct I/O) on a "
                "scratch file, and the dataset's own cold read rate",
    config_cls=StorageConfig,
    run="benchbench.storage_probes.storage.run",
    gpu_resource="storage",
    cpu_resource="storage",
    needs_data=True,
    budget_weight=2.0,  # three fio jobs with repeated runs, plus the dataset's cold read
    defaults=defaults,
)
