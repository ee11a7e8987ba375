"""Probe `allreduce`: torch.distributed all_reduce time, algbw and busbw over a sweep of sizes.

nccl-tests' definitions, so the figures compare with it: algbw = bytes / time, and busbw =
algbw x 2(n-1)/n, the bytes each rank's link carries in a ring all-reduce. At one rank nothing
is exchanged, and the probe skips before it starts a rank. NCCL on GPUs (one rank per GPU),
gloo on CPU ranks. The GPU timer is CUDA events on each rank; the CPU timer a perf_counter
between barriers. Each sample is the slowest rank's, since a collective ends when its last
rank does.
"""

from __future__ import annotations

import glob
import os
import re
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from benchbench.core.results import Measurement
from benchbench.core.units import iec
from benchbench.probes._devices import nccl_version
from benchbench.probes._ranks import RankFailure, run_ranks
from benchbench.probes.allreduce.config import CPU_RANKS, AllreduceConfig
from benchbench.probes.api import (
    ProbeContext,
    ProbeOutput,
    ProbeSkipped,
    median_of,
    peak_of,
    resolved,
)
from benchbench.probes.meter import Meter, can_hold_device, cuda_timer

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def bus_factor(world_size: int) -> float:
    """nccl-tests' all-reduce bus factor 2(n-1)/n: 0 at one rank, where busbw does not apply."""
    return 2.0 * (world_size - 1) / world_size


def choose_backend(requested: str, device: str) -> str:
    if requested == "nccl" and device != "cuda":
        raise ProbeSkipped("NCCL needs CUDA GPUs and this run uses the CPU; set "
                           "allreduce.backend=gloo or auto")
    if requested == "nccl" and not dist.is_nccl_available():
        raise ProbeSkipped("this torch build has no NCCL")
    if requested != "auto":
        return requested
    return "nccl" if device == "cuda" and dist.is_nccl_available() else "gloo"


def nothing_to_exchange(world: int, device: str) -> str | None:
    """Why an all-reduce over `world` ranks would measure nothing (it completes "skipped,
    because …"), or None when it measures a collective. Over one rank no byte leaves the
    device: every size times the same launch floor, and bytes over that floor is no
    bandwidth. Decided before any rank is spawned, so such a run pays no rank start-up."""
    if world > 1:
        return None
    return (f"{'one GPU' if device == 'cuda' else 'one rank'}: there is nothing to exchange "
            "(an all-reduce over one rank moves no data, so it would time only its launch)")


# Host time to queue one all_reduce through torch.distributed (20-40 us on a server CPU), with
# room to spare: the busy-wait below must outlast the queueing of a whole sample.
LAUNCH_S = 100e-6


def _timed(comm: Any, x: torch.Tensor, iters: int) -> float:
    """Seconds for `iters` back-to-back all-reduces on this rank, started together.

    On a GPU, a device busy-wait is queued first (stas00's all_reduce_bench): while the GPU
    spins, the host queues every call of the sample, so the events then time the collectives
    back to back. Without it a small message's sample times torch's per-call host overhead,
    not NCCL."""
    comm.barrier()
    if x.is_cuda:
        Meter().sync(str(x.device))
        timer = cuda_timer(x.device, hold_s=1e-3 + iters * LAUNCH_S)
        return timer(lambda: dist.all_reduce(x), iters)
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(x)
    return time.perf_counter() - t0


def _plan(one_s: float, iters: int, repeats: int, share_s: float) -> tuple[int, int] | None:
    """(iters, repeats) that fit this size's share of the budget; None when even a single
    all-reduce per sample would overrun it threefold."""
    if one_s * repeats > 3 * share_s:
        return None
    fit = int(share_s / max(one_s * repeats, 1e-9))
    return max(1, min(iters, fit)), repeats


def measure_sizes(sizes: list[int], time_left: Callable[[], float],
                  prepare: Callable[[int], Any], one: Callable[[Any], float],
                  samples: Callable[[Any, int, int], list[float]], iters: int, repeats: int,
                  decide: Callable[[Any], Any], progress: Callable[[str, int, int], None]
                  ) -> tuple[list[dict[str, Any]], list[str]]:
    """The sweep's plan, size by size: `prepare` a buffer (and warm up), time `one` call,
    fit (iters, repeats) to the size's share of what is left, and take the `samples` (seconds
    per call, the slowest rank's). Rank 0's plan is every rank's (`decide`), or the ranks
    would not meet in the same collectives. Stops at the first size that cannot fit."""
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    for i, size in enumerate(sizes):
        progress(iec(size), i, len(sizes))
        buf = prepare(size)
        one_s = one(buf)
        plan = decide(_plan(one_s, iters, repeats, time_left() / (len(sizes) - i)))
        if plan is None:
            notes.append(f"sizes from {iec(size)} up skipped, because one all-reduce takes "
                         f"~{one_s:.3g} s, beyond the time budget")
            break
        it, rep = plan
        rows.append({"size": size, "iters": it, "time_s": samples(buf, it, rep)})
    progress("done", len(sizes), len(sizes))
    return rows, notes


def sweep(comm: Any, job: dict[str, Any]) -> dict[str, Any]:
    """The rank function: every rank runs the same sizes, as rank 0 planned them."""
    dtype = DTYPES[job["dtype"]]
    # One intra-op thread: the reduction runs in gloo's or NCCL's own threads, and an OpenMP
    # pool left spinning after the buffer restore below would steal a small box's cores from
    # them (7% of busbw on 2 cores).
    torch.set_num_threads(1)
    deadline = time.monotonic() + job["work_s"]
    gen = torch.Generator(device=comm.device).manual_seed(comm.rank)
    bufs: dict[str, torch.Tensor] = {}

    def prepare(size: int) -> torch.Tensor:
        bufs.clear()  # free the previous size first
        count = max(1, size // dtype.itemsize)
        x = torch.randn(count, generator=gen, device=comm.device).to(dtype)
        bufs["original"] = x.clone()
        for _ in range(job["warmup"]):
            dist.all_reduce(x)
        return x

    def samples(x: torch.Tensor, iters: int, repeats: int) -> list[float]:
        per_call = []
        for _ in range(repeats):
            # Sums grow every call; start each sample from the same random values.
            x.copy_(bufs["original"])
            per_call.append(_timed(comm, x, iters) / iters)
        return comm.max_over_ranks(per_call)

    rows, notes = measure_sizes(
        job["sizes"], lambda: max(0.0, deadline - time.monotonic()), prepare,
        lambda x: max(comm.max_over_ranks([_timed(comm, x, 1)])), samples, job["iters"],
        job["repeats"], comm.decide, comm.progress)
    for row in rows:  # the bytes a call really moved: whole elements of the dtype
        row["bytes"] = max(1, row.pop("size") // dtype.itemsize) * dtype.itemsize
    bufs.clear()
    return {"rows": rows, "notes": notes, "hosts": comm.gather([comm.host, comm.node])}


# NCCL's INFO log, as NCCL 2.1x-2.2x writes it; every field is optional.
_NCCL_PATTERNS = {
    "version": re.compile(r"NCCL version (\S+)"),
    "nvls": re.compile(r"NVLS multicast support is (not )?available"),
    "channels": re.compile(r"Channel (\d+)/(\d+) :"),
    "transport": re.compile(r"via (P2P/[\w ]+|SHM[\w/]*|NET/[\w/]+|NVLS|CollNet\w*)"),
    "algo": re.compile(r"\b(?:Algo|algorithm)\s+(\w+)\s+(?:proto|protocol)\s+(\w+)"),
}


def nccl_facts(text: str) -> dict[str, Any]:
    """What NCCL's debug log says about this communicator. Release builds of NCCL log their
    per-call algorithm and protocol choice only at TRACE level, so those are often absent."""
    p = _NCCL_PATTERNS
    out: dict[str, Any] = {}
    if m := p["version"].search(text):
        out["version"] = m.group(1)
    nvls = [m.group(1) is None for m in p["nvls"].finditer(text)]
    if nvls:
        out["nvls_available"] = all(nvls)
    channels = {int(m.group(1)) for m in p["channels"].finditer(text)}
    if channels:
        out["ring_channels"] = len(channels)
    transports = sorted({m.group(1).strip() for m in p["transport"].finditer(text)})
    if transports:
        out["transports"] = transports
    algos = sorted({f"{a}/{b}" for a, b in p["algo"].findall(text)})
    out["algorithms"] = algos or None
    if "NVLS comm" in text:
        out["nvls_used"] = True
    return out


def _measurements(rows: list[dict[str, Any]], key: dict[str, Any], n: int,
                  context: dict[str, Any]) -> list[Measurement]:
    out: list[Measurement] = []
    busbw: list[Measurement] = []
    for row in rows:
        k = {**key, "size_bytes": row["bytes"]}
        times = row["time_s"]
        ctx = {**context, "iters_per_sample": row["iters"]}
        algbw = [row["bytes"] / t for t in times]
        out.append(median_of("allreduce_time", k, times, "s", higher_is_better=False,
                             context=ctx))
        out.append(median_of("algbw", k, algbw, "B/s", higher_is_better=True, context=ctx))
        if n > 1:
            bus = [a * bus_factor(n) for a in algbw]
            busbw.append(median_of("busbw", k, bus, "B/s", higher_is_better=True,
                                   context={**ctx, "bus_factor": bus_factor(n)}))
    out += busbw
    if busbw:
        out.append(peak_of("peak_busbw", key, busbw, "size_bytes", "B/s"))
    return out


def run(ctx: ProbeContext, cfg: AllreduceConfig) -> ProbeOutput:
    backend = choose_backend(cfg.backend, ctx.device)
    launched = ctx.inputs.distributed
    if ctx.device == "cuda":
        gpus = int(ctx.facts.get("cuda_device_count", 0))
        if gpus == 0:
            raise ProbeSkipped("no CUDA GPU is visible to torch")
        local = min(cfg.ranks or gpus, gpus)  # never more ranks than GPUs
    else:
        local = cfg.ranks or CPU_RANKS
    world = launched["world_size"] if launched else local
    if why := nothing_to_exchange(world, ctx.device):
        raise ProbeSkipped(why)
    env = {}
    log_pattern = None
    if backend == "nccl" and ctx.inputs.run_dir:
        log_pattern = os.path.join(ctx.inputs.run_dir, "allreduce-nccl.%h.%p.log")
        env = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,GRAPH,ENV,TUNING",
               "NCCL_DEBUG_FILE": log_pattern}
    job = {"sizes": list(cfg.sizes or ()), "dtype": cfg.dtype, "iters": cfg.iters,
           "warmup": cfg.warmup, "repeats": ctx.policy.min_repeats,
           "work_s": ctx.budget.remaining()}
    try:
        answer = run_ranks(ctx, "allreduce", "benchbench.probes.allreduce.run:sweep", job,
                           backend, local, resolved(cfg.timeout_s, "timeout_s"),
                           ctx.budget.remaining(), env)
    except RankFailure as exc:
        raise RuntimeError(str(exc)) from None
    params: dict[str, Any] = {"backend": backend, "world_size": world, "local_ranks": local}
    if launched and launched["rank"] != 0:
        return ProbeOutput([], params=params, notes=["measured on rank 0"])
    placed = answer["hosts"] or []
    nodes = len({node for _, node in placed}) or 1
    context: dict[str, Any] = {"backend": backend, "hosts": sorted({h for h, _ in placed}),
                               "timer": "cuda_events" if ctx.device == "cuda" else
                               "perf_counter between barriers", "warmup": cfg.warmup,
                               "sample": "slowest rank"}
    if ctx.device == "cuda":
        context["launch_overhead"] = (
            "hidden: a device busy-wait is queued before each sample's calls"
            if can_hold_device() else
            "included: small sizes time torch's per-call host overhead, not only NCCL")
    artifacts = []
    if backend == "nccl":
        context["nccl_version"] = nccl_version()
        if log_pattern:
            files = sorted(glob.glob(log_pattern.replace("%h", "*").replace("%p", "*")))
            text = "".join(open(f, errors="replace").read() for f in files)
            context["nccl"] = nccl_facts(text)
            artifacts = [os.path.basename(f) for f in files]
    key = {"backend": backend, "dtype": cfg.dtype, "world_size": world, "nodes": nodes}
    return ProbeOutput(_measurements(answer["rows"], key, world, context), params=params,
                       notes=list(answer["notes"]), artifacts=artifacts)
