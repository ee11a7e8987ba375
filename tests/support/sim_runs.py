"""Whole simulated GPU runs as RunResults (benchbench/engine/simulate.py's estimates, with the
NVML facts of the profiled machine), for renderers and analysis to be held to GPU figures that
no committed run has: an H100, an A100 and an 8-GPU node."""

from typing import Any

from benchbench.core.results import ProbeResult, RunResult
from benchbench.engine import simulate
from benchbench.engine.sim_device import DeviceProfile

# PCIe link by GPU generation: Hopper Gen5 x16, Ampere Gen4 x16.
_PCIE = {"9.0": 5, "8.0": 4}
# An 8-GPU HGX H100 board: each GPU reaches the others through NVSwitch over 18 NVLink 4 links
# of 25 GB/s a direction.
_NVSWITCH_PER_DIRECTION = 18 * 25e9


def _environment(p: DeviceProfile) -> dict[str, Any]:
    gen = _PCIE.get(p.capability, 4)
    gpus = [{"index": i, "torch_index": i, "name": p.gpu_name, "capability": p.capability,
             "uuid": f"GPU-sim-{p.name}-{i}", "memory_total": p.memory_total,
             "pcie_gen_current": gen, "pcie_width_current": 16, "pcie_gen_max": gen,
             "pcie_width_max": 16, "persistence_mode": True, "power_limit": 700.0,
             "power_limit_default": 700.0, "other_processes": []} for i in range(p.gpus)]
    pairs = [{"a": a, "b": b, "path": "NVSwitch", "per_direction": _NVSWITCH_PER_DIRECTION}
             for a in range(p.gpus) for b in range(a + 1, p.gpus)]
    return {"host": {"hostname": f"sim-{p.name}", "cpu_model": "simulated",
                     "physical_cores": p.cores, "logical_cores": p.cores,
                     "usable_cores": p.cores, "ram_total": 2 * p.gpus * p.memory_total},
            "gpus": gpus, "topology": {"gpus": [], "pairs": pairs}}


def _params(ms: list[Any]) -> dict[str, Any]:
    """The all-reduce's parameters, which its measurements' keys repeat."""
    key = next((m.key for m in ms if "world_size" in m.key), None)
    return {"backend": key["backend"], "world_size": key["world_size"]} if key else {}


def simulated_run(p: DeviceProfile, quick: bool = True) -> RunResult:
    """The run `estimate_run` plans on profile `p`, with its machine's facts."""
    estimate = simulate.estimate_run(p, quick=quick)
    probes = [ProbeResult(name=s.name, status="ok" if s.measurements else "skipped",
                          resource="gpu_compute", reason="; ".join(s.notes) or None,
                          measurements=s.measurements, duration_s=s.duration_s,
                          params=_params(s.measurements))
              for s in estimate.probes]
    return RunResult(tool={"name": "benchbench", "version": "sim"},
                     started_at="2026-12-06T00:00:00+00:00",
                     finished_at="2026-12-06T00:10:00+00:00", environment=_environment(p),
                     config={"device_resolved": "cuda", "quick": quick}, argv=[],
                     label=f"simulated {p.name}", probes=probes)
