"""The storage probe's spec (light: no fio call, no I/O), registered by registry.py."""

from __future__ import annotations

from typing import Any

from benchbench.probes.catalog import ProbeSpec
from benchbench.probes.configs import StorageConfig


def _storage_defaults(device: str, quick: bool) -> dict[str, Any]:
    # The runtime stays auto: 10 s a job (1.5 s with --quick), less when the budget is short.
    return {"warmup_steps": 0}


SPEC = ProbeSpec(
    name="storage",
    description="read rates with fio (sequential 1M, random 128k and 4k, direct I/O) on a "
                "scratch file, and the dataset's own cold read rate",
    config_cls=StorageConfig,
    impl="benchbench.probes.storage.run",
    gpu_resource="storage",
    cpu_resource="storage",
    needs_data=True,
    budget_weight=2.0,  # three fio jobs with repeated runs, plus the dataset's cold read
    defaults=_storage_defaults,
)
