"""Plan a run at GPU speed on any machine: the probes' own planning against a simulated device.

A run's planning (which precisions, sizes and GPUs fit, how long warm-ups last, how many steps
are timed, when something is skipped) reacts to measured times, and has mostly seen a CPU's.
Here each probe's own planning code (run_training, matmul.sweep, host_device_copy.sweep, the
data loader's and the all-reduce's sweeps) runs against a fake clock: every call or step
advances it by what a `DeviceProfile` says the device takes, so a test asserts what an H200 or
an 8-GPU node would measure, and `estimate_run` gives the wall time of a whole run, runner
overheads included, without the hardware. The profiles are estimates, not measurements; they
come from the issue that asked for them and from the published figures cited beside them.

Imports the probes' modules (and so torch): this is for tests and planning, not for `run`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from benchbench.core.results import Measurement, ProbeResult
from benchbench.core.rounds import default_rounds, merge, schedule, start
from benchbench.engine.catalog import default_registry
from benchbench.engine.runner import probe_budget
from benchbench.engine.sim_device import H100 as H100
from benchbench.engine.sim_device import H100X8 as H100X8
from benchbench.engine.sim_device import H200 as H200
from benchbench.engine.sim_device import PROFILES as PROFILES
from benchbench.engine.sim_device import DeviceProfile as DeviceProfile
from benchbench.engine.sim_device import FakeClock as FakeClock
from benchbench.engine.sim_device import SimMeter as SimMeter
from benchbench.engine.sim_device import context as context
from benchbench.engine.sim_device import facts_for as facts_for
from benchbench.engine.sim_device import profile_for as profile_for
from benchbench.engine.sim_probes import SIMULATORS, _pipeline
from benchbench.probes.api import ProbeOutput, ProbeSkipped
from benchbench.probes.meter import long_lived_frozen


@dataclass
class SimProbe:
    """What one probe would do on the profiled device."""

    name: str
    budget_s: float
    duration_s: float  # what the probe's budget counts
    output: ProbeOutput | None
    notes: list[str] = field(default_factory=list)
    startup_s: float = 0.0  # outside the budget: spawning ranks and starting NCCL
    rounds: int = 1
    round_budget_s: float = 0.0  # each round's share
    longest_round_s: float = 0.0  # the round that took longest

    @property
    def wall_s(self) -> float:
        return self.startup_s + self.duration_s

    @property
    def measurements(self) -> list[Measurement]:
        return self.output.measurements if self.output else []


@dataclass
class RunEstimate:
    profile: str
    quick: bool
    probes: list[SimProbe]
    overhead_s: float  # start-up, workers, dataset, reports

    @property
    def total_s(self) -> float:
        return self.overhead_s + sum(p.wall_s for p in self.probes)

    def table(self) -> str:
        rows = [f"{p.name:18} budget {p.budget_s:6.1f} s  simulated {p.duration_s:6.1f} s"
                + (f" + {p.startup_s:.1f} s start-up" if p.startup_s else "")
                for p in self.probes]
        return "\n".join([*rows, f"{'overheads':18} {self.overhead_s:29.1f} s",
                          f"{'whole run':18} {self.total_s:29.1f} s"])


def simulate_probe(p: DeviceProfile, name: str, quick: bool, budget_s: float,
                   loader_rate: float | None = None,
                   overrides: dict[str, Any] | None = None) -> SimProbe:
    """One probe's planning on the profiled device, within `budget_s`."""
    spec = default_registry().get(name)
    cfg = spec.resolve("cuda", quick, facts_for(p), overrides)
    clock = FakeClock()
    ctx = context(p, quick, budget_s, cfg, clock)
    start = clock()
    # The distributed probes' ranks count their budget from when they have all joined (see
    # probes/_ranks.py): spawning them is start-up, like a worker process's. A probe that
    # skips (one GPU: nothing to exchange) says so before it spawns any, and pays none.
    startup = p.rank_start_s if spec.distributed else 0.0
    with long_lived_frozen():  # as in a probe's worker (engine/worker.py)
        try:
            if name == "pipeline":
                out = _pipeline(p, ctx, cfg, clock, loader_rate or p.dali_gpu_rate)
            else:
                out = SIMULATORS[name](p, ctx, cfg, clock)
        except ProbeSkipped as exc:  # as the worker reports it: skipped, with the reason
            out, startup = ProbeOutput([], notes=[str(exc)]), 0.0
    return SimProbe(name, budget_s, clock() - start, out, list(out.notes), startup)


def _as_result(sim: SimProbe) -> ProbeResult:
    out = sim.output or ProbeOutput([])
    return ProbeResult(
        name=sim.name,
        status="ok" if out.measurements else "skipped",
        resource="gpu_compute",
        reason="; ".join(out.notes) or None,
        measurements=out.measurements,
        duration_s=sim.duration_s,
    )


def estimate_run(p: DeviceProfile, quick: bool = False, rounds: int | None = None,
                 overrides: dict[str, dict[str, Any]] | None = None) -> RunEstimate:
    """Every probe of a default (or --quick) CUDA run on the profiled machine, as the runner
    schedules it: each within the budget the runner would give it, the repeatable ones in
    rounds that share it (each round pays its start-up again: cuDNN's autotuning included),
    plus the runner's own costs: the forkserver and the facts worker, the environment
    snapshot, a worker per probe round, the dataset and the reports. `overrides` are the
    --set values, by probe."""
    # What the runner skips before starting a worker (the exchanging probes on one GPU) costs
    # nothing and takes no share of the budget, as in runner.execute.
    registry = default_registry()
    skipped = {s.name: why for s in registry
               if (why := s.skip_reason("cuda", None, p.gpus)) is not None}
    specs = [s for s in registry if s.name not in skipped]
    total_weight = sum(s.weight("cuda") for s in specs)
    times = rounds or default_rounds(quick, "cuda")
    probes: dict[str, SimProbe] = {}
    merged: dict[str, ProbeResult] = {}
    best_loader = None
    plan = schedule(specs, [s.repeatable for s in specs], times)
    for spec, round_no in plan:
        n = times if spec.repeatable else 1
        budget = probe_budget(spec.weight("cuda"), total_weight, quick, None, "cuda",
                              p.gpus if spec.per_gpu else 1)
        sim = simulate_probe(p, spec.name, quick, budget / n, best_loader,
                             (overrides or {}).get(spec.name))
        if spec.name == "dataloader" and round_no == 1 and sim.measurements:
            best_loader = max(m.value for m in sim.measurements if m.metric == "throughput")
        if round_no == 1:
            probes[spec.name] = dataclasses.replace(sim, budget_s=budget, rounds=n,
                                                    round_budget_s=budget / n,
                                                    longest_round_s=sim.duration_s)
            merged[spec.name] = start(_as_result(sim)) if n > 1 else _as_result(sim)
            continue
        prev = probes[spec.name]
        merged[spec.name] = merge(merged[spec.name], _as_result(sim), round_no)
        probes[spec.name] = dataclasses.replace(
            prev, duration_s=prev.duration_s + sim.duration_s,
            longest_round_s=max(prev.longest_round_s, sim.duration_s),
            notes=[*prev.notes, *[f"round {round_no}: {x}" for x in sim.notes]])
    for name, sim in probes.items():
        sim.output = ProbeOutput(merged[name].measurements, notes=sim.notes)
    for name, why in skipped.items():
        probes[name] = SimProbe(name, 0.0, 0.0, None, [why])
    overhead = (3.0 + p.process_start_s + 1.0 + p.dataset_s + p.report_s
                + len(plan) * p.process_start_s)
    return RunEstimate(p.name, quick, list(probes.values()), overhead)
