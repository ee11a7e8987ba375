"""The verdict's types: what analysis/verdict.py computes and every renderer reads.

A Verdict is computed once per run or report (analysis/verdict.verdict) and handed to the
renderers, which read its attributes and compute nothing. `to_dict` gives the JSON that
results.json caches under "verdict" (a cache: report and compare recompute it).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from benchbench.analysis.capacities import Capacity


@dataclass(frozen=True)
class FirstEpoch:
    """A training set that fits in RAM: storage limits only its first, cold epoch."""

    limiting_resource: str
    capacity: float | None
    detail: str


@dataclass(frozen=True)
class JudgedDataset:
    """The training set the verdict is about, and where its size came from."""

    samples: int
    bytes: int
    fits_in_ram: bool
    name: str
    basis: str


@dataclass(frozen=True)
class Constraint:
    """Whether a training probe's peak memory fits the GPU."""

    check: str
    status: str  # "ok", "tight", "does not fit", "unknown" or "not applicable"
    detail: str
    peak: float | None = None  # bytes
    total: float | None = None  # bytes of GPU memory
    headroom: float | None = None  # 1 - peak / total

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items()
                if v is not None or k in ("peak", "total") and self.status != "not applicable"}


@dataclass(frozen=True)
class WorkloadVerdict:
    """What limits one workload's training on this machine, the evidence and the fix."""

    analysis_version: int
    workload: str  # "resnet50" or "transformer"
    unit: str  # "samples/s"
    sample: str  # "image" or "token"
    precision: str | None
    limiting_resource: str | None  # None: nothing measured names a bottleneck
    capacity_details: dict[str, Capacity]  # by resource, in the workload's samples/s
    predicted_accelerator_utilisation: float | None
    measured_accelerator_utilisation: float | None  # the real pipeline's, when it ran
    measured_accelerator_utilisation_note: str | None  # its reading: above 100% explained
    evidence: list[str]
    advice: list[str]
    unknown: list[str]  # "resource: why it is unknown"
    constraints: list[Constraint]
    first_epoch: FirstEpoch | None
    dataset: JudgedDataset
    # The limit and the next capacity, where they lie within their measured noise of each
    # other: either may limit (the evidence says what would separate them).
    close_call: tuple[str, str] | None = None

    @property
    def capacities(self) -> dict[str, float | None]:
        return {r: c.value for r, c in self.capacity_details.items()}

    def capacity(self, resource: str | None) -> float | None:
        c = self.capacity_details.get(resource or "")
        return c.value if c else None

    @property
    def on_cpu(self) -> bool:
        """Whether the CPU trains here (no GPU was used): the first screen says so instead
        of an accelerator utilisation."""
        return "cpu_compute" in self.capacity_details

    @property
    def next_limit(self) -> tuple[str, float] | None:
        """The lowest measured capacity other than the limit's: what a faster limit would
        meet next."""
        rest = [(r, c.value) for r, c in self.capacity_details.items()
                if r != self.limiting_resource and c.value is not None]
        return min(rest, key=lambda rc: rc[1]) if rest else None

    def floor_of(self, resource: str | None) -> str | None:
        """Why a capacity is a floor ('DALI (CPU) not measured: …'), None where it is the
        measured capacity."""
        c = self.capacity_details.get(resource or "")
        return c.at_least if c else None

    @property
    def sample_unit(self) -> str:
        """'images/s' or 'tokens/s'."""
        return f"{self.sample}s/s"

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> WorkloadVerdict:
        """A verdict as to_dict wrote it (results.json's cache), for tools that read one."""
        given = d.get("capacity_details") or {}
        values = d.get("capacities")
        details = {}
        for r in values if values is not None else given:
            c = given.get(r) or {}
            value = values[r] if values is not None else c.get("value")
            details[r] = Capacity(r, value, c.get("status") or (
                "measured" if value is not None else "unknown"), c.get("how", ""),
                c.get("missing"), c.get("source"), c.get("spread"), c.get("at_least"))
        first = d.get("first_epoch")
        close = d.get("close_call")
        ds = d.get("dataset") or {}
        return cls(
            analysis_version=int(d.get("analysis_version") or 0),
            workload=str(d.get("workload") or "resnet50"), unit=str(d.get("unit") or "samples/s"),
            sample=str(d.get("sample") or "sample"), precision=d.get("precision"),
            limiting_resource=d.get("limiting_resource"), capacity_details=details,
            predicted_accelerator_utilisation=d.get("predicted_accelerator_utilisation"),
            measured_accelerator_utilisation=d.get("measured_accelerator_utilisation"),
            measured_accelerator_utilisation_note=d.get("measured_accelerator_utilisation_note"),
            evidence=list(d.get("evidence") or []), advice=list(d.get("advice") or []),
            unknown=list(d.get("unknown") or []),
            constraints=[Constraint(**c) for c in d.get("constraints") or []],
            first_epoch=FirstEpoch(first["limiting_resource"], first.get("capacity"),
                                   first.get("detail", "")) if first else None,
            dataset=JudgedDataset(int(ds.get("samples") or 0), int(ds.get("bytes") or 0),
                                  bool(ds.get("fits_in_ram")), str(ds.get("name") or "?"),
                                  str(ds.get("basis") or "?")),
            close_call=(str(close[0]), str(close[1])) if close else None,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "analysis_version": self.analysis_version, "workload": self.workload,
            "unit": self.unit, "sample": self.sample, "precision": self.precision,
            "limiting_resource": self.limiting_resource, "capacities": self.capacities,
            "capacity_details": {r: c.as_dict() for r, c in self.capacity_details.items()},
            "predicted_accelerator_utilisation": self.predicted_accelerator_utilisation,
            "measured_accelerator_utilisation": self.measured_accelerator_utilisation,
            "evidence": list(self.evidence), "advice": list(self.advice),
            "unknown": list(self.unknown),
            "constraints": [c.as_dict() for c in self.constraints],
            "first_epoch": asdict(self.first_epoch) if self.first_epoch else None,
            "dataset": asdict(self.dataset),
            "measured_accelerator_utilisation_note": self.measured_accelerator_utilisation_note,
            "close_call": list(self.close_call) if self.close_call else None,
        }


@dataclass(frozen=True)
class Verdict:
    """The verdict for the run's primary workload, with every workload's beside it."""

    main: WorkloadVerdict
    per_workload: dict[str, WorkloadVerdict]
    # Is this a healthy machine of its GPU model: the headline figures against published
    # references (analysis/reference_check.health), with the causes the run's evidence shows.
    health: str | None = None
    health_causes: list[str] = field(default_factory=list)

    def others(self) -> list[WorkloadVerdict]:
        """The workloads other than the primary one, in order."""
        return [v for w, v in self.per_workload.items() if w != self.main.workload]

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Verdict:
        main = WorkloadVerdict.from_dict(d)
        per = {w: WorkloadVerdict.from_dict({"workload": w, **v})
               for w, v in (d.get("per_workload") or {}).items()}
        return cls(main, {main.workload: main, **{w: v for w, v in per.items()
                                                   if w != main.workload}},
                   d.get("health"), list(d.get("health_causes") or []))

    def to_dict(self) -> dict[str, Any]:
        return {**self.main.to_dict(),
                "per_workload": {w: v.to_dict() for w, v in self.per_workload.items()},
                "health": self.health, "health_causes": list(self.health_causes)}
