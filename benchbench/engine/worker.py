"""Entry points that run inside an isolated worker process: gather device facts, run a probe.

Each is called as fn(payload, progress) by isolation.Isolator and returns plain data that
pickles back to the parent.
"""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass, field
from typing import Any

from benchbench.core.config import ProbeConfig
from benchbench.core.sampling import Budget
from benchbench.probes.api import (
    ProbeContext,
    ProbeFailed,
    ProbeOutput,
    ProbeSkipped,
    Progress,
    RunInputs,
)
from benchbench.probes.meter import long_lived_frozen


@dataclass(frozen=True)
class ProbeJob:
    """Everything a worker needs to run one probe."""

    name: str
    run: str  # the probe's run module
    device: str
    min_repeats: int
    budget_s: float
    config: ProbeConfig
    facts: dict[str, Any]
    inputs: RunInputs = field(default_factory=RunInputs)


def collect_facts(payload: Any, progress: Progress) -> dict[str, Any]:
    from benchbench.machine.environment import torch_facts

    return torch_facts()


def run_probe(job: ProbeJob, progress: Progress) -> dict[str, Any]:
    """Run one probe; returns {'status', 'reason', 'resource', 'params', 'measurements'}."""
    cfg = job.config
    policy = cfg.repeat_policy(job.min_repeats)
    # Imported before the budget starts: importing torchvision or DALI is this worker's
    # start-up, like the process's own, and every round of a probe pays it again.
    module = importlib.import_module(job.run)
    ctx = ProbeContext(device=job.device, policy=policy,
                       budget=Budget(job.budget_s), facts=job.facts, progress=progress,
                       inputs=job.inputs)
    try:
        with long_lived_frozen():
            out: ProbeOutput = module.run(ctx, cfg)
    except ProbeSkipped as exc:
        return {"status": "skipped", "reason": str(exc), "resource": None, "params": {},
                "measurements": [], "artifacts": []}
    except ProbeFailed as exc:
        return {"status": "failed", "reason": str(exc), "resource": None, "params": {},
                "measurements": [], "artifacts": []}
    if not out.measurements:
        return {"status": "skipped", "reason": "; ".join(out.notes) or "nothing was measured",
                "resource": out.resource, "params": out.params, "measurements": [],
                "artifacts": out.artifacts}
    return {
        "status": "ok",
        "reason": "; ".join(out.notes) or None,
        "resource": out.resource,
        "params": out.params,
        "measurements": [dataclasses.asdict(m) for m in out.measurements],
        "artifacts": out.artifacts,
    }


def exchange(payload: dict[str, Any], progress: Progress) -> list[str] | None:
    """All ranks' strings, through rank 0's store (see workloads/_ranks.exchange)."""
    from benchbench.probes._ranks import exchange as store_exchange

    return store_exchange(payload["launched"], payload["step"], payload["value"],
                          payload["timeout_s"], payload["to_all"])
