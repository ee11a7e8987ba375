"""Explicit registration of probes. A duplicate name is an error; nothing registers on import."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from benchbench.core.config import ProbeConfig
from benchbench.core.results import RESOURCES


def _no_defaults(device: str, quick: bool) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class ProbeSpec:
    """What the runner needs to know about a probe without importing its heavy module."""

    name: str
    description: str
    config_cls: type[ProbeConfig]
    impl: str  # module exposing run(ctx, cfg) -> ProbeOutput; imported in the worker only
    gpu_resource: str
    cpu_resource: str
    requires_gpu: bool = False
    needs_data: bool = False  # reads the dataset (the user's --data-dir or a generated one)
    distributed: bool = False  # runs on every rank of a torchrun/srun launch, not per node
    budget_weight: float = 1.0  # its share of a shared time budget, relative to other probes
    per_gpu: bool = False  # measures every GPU: its budget grows with their number
    repeatable: bool = False  # cheap to run again in a fresh worker: it runs in every round
    # device- and --quick-dependent defaults, applied before --config and --set
    defaults: Callable[[str, bool], dict[str, Any]] = field(default=_no_defaults)

    def __post_init__(self) -> None:
        for r in (self.gpu_resource, self.cpu_resource):
            if r not in RESOURCES:
                raise ValueError(f"probe {self.name}: unknown resource {r!r}")

    def resource(self, device: str) -> str:
        return self.gpu_resource if device == "cuda" else self.cpu_resource

    def skip_reason(self, device: str, no_gpu_reason: str | None) -> str | None:
        """Why this probe would not run on `device`, or None when it would."""
        if self.requires_gpu and device != "cuda":
            return f"it needs a CUDA GPU and {no_gpu_reason or 'the run uses the CPU'}"
        return None


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
    from benchbench.probes.specs import DISTRIBUTED_SPECS, PIPELINE_SPEC
    from benchbench.probes.specs import SPECS as WORKLOAD_SPECS
    from benchbench.probes.storage.config import SPEC as STORAGE_SPEC

    return Registry([*WORKLOAD_SPECS, STORAGE_SPEC, PIPELINE_SPEC, *DISTRIBUTED_SPECS])
