"""Probe `ddp_scaling`: DistributedDataParallel ResNet50 throughput at 1, 2, 4 ... ranks.

Weak scaling, as data-parallel training runs: every rank trains its own batch of synthetic
images on its own GPU, and DDP all-reduces the gradients (overlapped with the backward pass).
The ranks start once; each count trains on a sub-group of the first N ranks while the others
wait. A step's time is the slowest rank's. Efficiency and the cost knee are derived from these
throughputs in analysis/scaling.py. At one rank there is nothing to exchange, and the probe
skips before it starts a rank. On CPU ranks that share a few cores this is a functional check.
"""

from __future__ import annotations

import os
import time
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from benchbench.core.names import counted
from benchbench.core.results import Measurement
from benchbench.probes._ranks import RankFailure, run_ranks
from benchbench.probes.api import ProbeContext, ProbeOutput, ProbeSkipped, resolved
from benchbench.probes.meter import Meter, free_memory
from benchbench.workloads._training import (
    PRECISIONS,
    Step,
    plan_steps,
    step_measurements,
    usable_precisions,
)
from benchbench.workloads.ddp_scaling.config import DdpScalingConfig
from benchbench.workloads.models.resnet import ResNetTrainer


def counts_for(world: int, requested: tuple[int, ...] | None) -> list[int]:
    """1, 2, 4 ... and the world size itself, or the requested counts that fit, in the order
    they are measured: the fewest and the most first (scaling efficiency needs those two),
    then the ones between, so that a budget that runs short loses the knee's detail, not the
    whole node."""
    if requested:
        wanted = sorted({n for n in requested if n <= world})
    else:
        wanted, n = [], 1
        while n < world:
            wanted.append(n)
            n *= 2
        wanted.append(world)
    ends = list(dict.fromkeys([wanted[0], wanted[-1]])) if wanted else []
    return ends + [n for n in wanted if n not in ends]


def nothing_to_exchange(counts: list[int], device: str) -> str | None:
    """Why DDP at these rank counts would measure nothing of the interconnect (it completes
    "skipped, because …"), or None. At one rank DDP exchanges no gradient: the step is
    resnet50's own, which that probe measures, and one point has no scaling or cost knee.
    Decided before any rank is spawned, so such a run pays no rank start-up."""
    if max(counts) > 1:
        return None
    return (f"{'one GPU' if device == 'cuda' else 'one rank'}: there is nothing to exchange "
            "(DDP over one rank trains as resnet50 does alone, and one rank count has no "
            "scaling to read)")


def train(comm: Any, job: dict[str, Any]) -> dict[str, Any]:
    """The rank function: for each count, the first N ranks train while the rest wait."""
    if job.get("threads"):
        torch.set_num_threads(job["threads"])
    precision = PRECISIONS[job["precision"]]
    meter = Meter()
    meter.set_tf32(precision.tf32)
    meter.set_cudnn_benchmark(comm.device, True)  # fixed shapes: cuDNN picks its fastest kernels
    deadline = time.monotonic() + job["work_s"]
    rows, notes = [], []
    counts = job["counts"]
    for i, n in enumerate(counts):
        comm.progress(counted(n, "rank"), i, len(counts))
        group = dist.new_group(list(range(n)))
        member = comm.rank < n
        step: Step | None = None
        trainer: ResNetTrainer | None = None
        est = 0.0
        if member:
            trainer = ResNetTrainer(comm.device, job["channels_last"], False)
            trainer.forward = DistributedDataParallel(
                trainer.forward, process_group=group,
                device_ids=[torch.device(comm.device)] if comm.device != "cpu" else None)
            trainer.set_synthetic_batch(job["batch"], job["image_size"])
            step = trainer.step(precision)
            for _ in range(max(1, job["warmup_steps"])):
                step()
            est = max(meter.step_times(step, 1, comm.device))
        est = max(comm.max_over_ranks([est]))
        share = max(0.0, deadline - time.monotonic()) / (len(counts) - i)
        planned = comm.decide(plan_steps(est, job["steps"], share))
        if planned is None:
            rest = ", ".join(map(str, counts[i:]))
            notes.append(f"{rest} ranks skipped, because one step takes ~{est:.3g} s, beyond "
                         "the time budget")
            break
        # Only a member has a step; the other ranks just join the collectives.
        times = [0.0] * planned if step is None else meter.step_times(step, planned, comm.device)
        rows.append({"ranks": n, "step_s": comm.max_over_ranks(times)})
        step = trainer = None  # noqa: F841 - free the model before the next count
        dist.destroy_process_group(group)
        free_memory()
    comm.progress("done", len(counts), len(counts))
    return {"rows": rows, "notes": notes, "hosts": comm.gather([comm.host, comm.node])}


def _precision(cfg: DdpScalingConfig, dev: str, facts: dict[str, Any], notes: list[str]
               ) -> str:
    """The config's precision, when this device has it."""
    precision = resolved(cfg.precision, "precision")
    if not usable_precisions(dev, (precision,), notes, facts):
        raise ProbeSkipped(notes[-1].split("because ", 1)[-1])
    return precision


def run(ctx: ProbeContext, cfg: DdpScalingConfig) -> ProbeOutput:
    launched = ctx.inputs.distributed
    if ctx.device == "cuda":
        local = int(ctx.facts.get("cuda_device_count", 0))
        if local == 0:
            raise ProbeSkipped("no CUDA GPU is visible to torch")
        backend = "nccl" if dist.is_nccl_available() else "gloo"
    else:
        local, backend = 2, "gloo"
    world = launched["world_size"] if launched else local
    batch, image = resolved(cfg.batch_size, "batch_size"), resolved(cfg.image_size, "image_size")
    steps, timeout_s = resolved(cfg.steps, "steps"), resolved(cfg.timeout_s, "timeout_s")
    notes: list[str] = []
    precision = _precision(cfg, "cuda:0" if ctx.device == "cuda" else "cpu", ctx.facts, notes)
    counts = counts_for(world, cfg.counts)
    if not counts:
        raise ProbeSkipped(f"no requested count fits {world} ranks")
    if why := nothing_to_exchange(counts, ctx.device):
        raise ProbeSkipped(why)
    job = {"counts": counts, "precision": precision, "batch": batch,
           "image_size": image, "channels_last": bool(cfg.channels_last),
           "steps": steps, "warmup_steps": cfg.warmup_steps,
           "work_s": ctx.budget.remaining(),
           # CPU ranks split the cores between them instead of oversubscribing them.
           "threads": max(1, (os.cpu_count() or 1) // local) if ctx.device == "cpu" else None}
    try:
        answer = run_ranks(ctx, "ddp_scaling", "benchbench.workloads.ddp_scaling.run:train", job,
                           backend, local, timeout_s, ctx.budget.remaining())
    except RankFailure as exc:
        raise RuntimeError(str(exc)) from None
    params = {"precision": precision, "counts": counts, "backend": backend,
              "world_size": world}
    if launched and launched["rank"] != 0:
        return ProbeOutput([], params=params, notes=["measured on rank 0"])
    hosts = sorted({host for host, _ in answer["hosts"] or []})
    context: dict[str, Any] = {"backend": backend, "hosts": hosts, "weak_scaling": True,
                               "batch_per_rank": batch, "sample": "slowest rank"}
    if ctx.device == "cpu":
        context["functional_check_only"] = (
            f"{world if not launched else 'the'} CPU ranks share each node's {os.cpu_count()} "
            "cores: the figures show CPU contention, not the interconnect")
    out: list[Measurement] = []
    for row in sorted(answer["rows"], key=lambda r: r["ranks"]):
        key = {"ranks": row["ranks"], "precision": precision, "batch_per_rank": batch,
               "image_size": image, "backend": backend}
        samples_per_step = float(batch * row["ranks"])
        out += step_measurements(key, row["step_s"], samples_per_step, "samples/s",
                                 {**context, "steps": len(row["step_s"])})
    return ProbeOutput(out, params=params, notes=notes + list(answer["notes"]))
