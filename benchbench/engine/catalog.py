"""The one ordered list of probes benchbench ships, and the registry that holds them.

Registration is explicit: a probe is a folder under probes/, workloads/ or storage_probes/ and
one line below. The list sits here, above all three, because it imports every one of them:
inside probes/ it would make workloads/ and probes/ import each other. A duplicate name is an
error; nothing registers on import. The specs are light (no torch): the parent process reads
them, and each probe's run module is imported in a worker only.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from benchbench.core.config import ProbeConfig
from benchbench.probes.allreduce.config import SPEC as ALLREDUCE
from benchbench.probes.api import ProbeSpec
from benchbench.probes.dataloader.config import SPEC as DATALOADER
from benchbench.probes.host_device_copy.config import SPEC as HOST_DEVICE_COPY
from benchbench.probes.matmul.config import SPEC as MATMUL
from benchbench.probes.memory_bandwidth.config import SPEC as MEMORY_BANDWIDTH
from benchbench.probes.stability.config import SPEC as STABILITY
from benchbench.storage_probes.storage.config import SPEC as STORAGE
from benchbench.workloads.ddp_scaling.config import SPEC as DDP_SCALING
from benchbench.workloads.inference.config import SPEC as INFERENCE
from benchbench.workloads.memory_fit.config import SPEC as MEMORY_FIT
from benchbench.workloads.pipeline.config import SPEC as PIPELINE
from benchbench.workloads.resnet50.config import SPEC as RESNET50
from benchbench.workloads.transformer.config import SPEC as TRANSFORMER

# The order a run executes them in. stability follows matmul (it runs matmul's best size);
# pipeline follows dataloader (it reuses the best loader) and storage; the distributed probes
# run first under torchrun or srun (engine/runner.py).
PROBES = (
    MATMUL,
    MEMORY_BANDWIDTH,
    HOST_DEVICE_COPY,
    STABILITY,
    RESNET50,
    TRANSFORMER,
    MEMORY_FIT,
    INFERENCE,
    DATALOADER,
    STORAGE,
    PIPELINE,
    ALLREDUCE,
    DDP_SCALING,
)


class Registry:
    def __init__(self, specs: Iterable[ProbeSpec] = ()) -> None:
        self._specs: dict[str, ProbeSpec] = {}
        for spec in specs:
            self.register(spec)

    def register(self, spec: ProbeSpec) -> None:
        if spec.name in self._specs:
            raise ValueError(f"probe {spec.name!r} is registered twice")
        self._specs[spec.name] = spec

    def get(self, name: str) -> ProbeSpec:
        return self._specs[name]

    def names(self) -> list[str]:
        return list(self._specs)

    def __iter__(self) -> Iterator[ProbeSpec]:
        return iter(self._specs.values())

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def config_classes(self) -> dict[str, type[ProbeConfig]]:
        return {s.name: s.config_cls for s in self}


def default_registry() -> Registry:
    """Every probe benchbench ships, in the order a run executes them."""
    return Registry(PROBES)
