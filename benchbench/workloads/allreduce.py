"""Probe `allreduce`: torch.distributed all_reduce time, algbw and busbw over a sweep of sizes.

nccl-tests' definitions, so the figures compare with it: algbw = bytes / time, and busbw =
algbw x 2(n-1)/n, the bytes each rank's link carries in a ring all-reduce. At one rank the
factor is 0 and busbw does not apply. NCCL on GPUs (one rank per GPU), gloo on CPU ranks. The
GPU timer is CUDA events on each rank; the CPU timer a perf_counter between barriers. Each
sample is the slowest rank's, since a collective ends when its last rank does.
"""

from __future__ import annotations

import glob
import os
import re
import time
from typing import Any

import torch
import torch.distributed as dist

from benchbench.probe import ProbeContext, ProbeOutput, ProbeSkipped, peak_of
from benchbench.probe_configs import AllreduceConfig
from benchbench.reports.format import iec
from benchbench.results import Measurement
from benchbench.stats import median
from benchbench.workloads._ranks import RankFailure, run_ranks

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


def _timed(comm: Any, x: torch.Tensor, iters: int) -> float:
    """Seconds for `iters` back-to-back all-reduces on this rank, started together."""
    comm.barrier()
    if x.is_cuda:
        torch.cuda.synchronize(x.device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            dist.all_reduce(x)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3
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


def sweep(comm: Any, job: dict[str, Any]) -> dict[str, Any]:
    """The rank function: every rank runs the same sizes, as rank 0 planned them."""
    dtype = DTYPES[job["dtype"]]
    # One intra-op thread: the reduction runs in gloo's or NCCL's own threads, and an OpenMP
    # pool left spinning after the buffer restore below would steal a small box's cores from
    # them (7% of busbw on 2 cores).
    torch.set_num_threads(1)
    deadline = time.monotonic() + job["work_s"]
    gen = torch.Generator(device=comm.device).manual_seed(comm.rank)
    rows, notes = [], []
    sizes = job["sizes"]
    for i, size in enumerate(sizes):
        comm.progress(iec(size), i, len(sizes))
        count = max(1, size // dtype.itemsize)
        x = torch.randn(count, generator=gen, device=comm.device).to(dtype)
        original = x.clone()
        for _ in range(job["warmup"]):
            dist.all_reduce(x)
        one = max(comm.max_over_ranks([_timed(comm, x, 1)]))
        share = max(0.0, deadline - time.monotonic()) / (len(sizes) - i)
        plan = comm.decide(_plan(one, job["iters"], job["repeats"], share))
        if plan is None:
            notes.append(f"sizes from {iec(size)} up skipped, because one all-reduce takes "
                         f"~{one:.3g} s, beyond the time budget")
            break
        iters, repeats = plan
        samples = []
        for _ in range(repeats):
            # Sums grow every call; start each sample from the same random values.
            x.copy_(original)
            samples.append(_timed(comm, x, iters) / iters)
        rows.append({"bytes": count * dtype.itemsize, "iters": iters,
                     "time_s": comm.max_over_ranks(samples)})
        del x, original
    comm.progress("done", len(sizes), len(sizes))
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


def _measurements(rows: list[dict], key: dict, n: int, context: dict) -> list[Measurement]:
    out: list[Measurement] = []
    busbw: list[Measurement] = []
    for row in rows:
        k = {**key, "size_bytes": row["bytes"]}
        times = row["time_s"]
        ctx = {**context, "iters_per_sample": row["iters"]}
        algbw = [row["bytes"] / t for t in times]
        out.append(Measurement("allreduce_time", k, median(times), "s", "median", times,
                               False, ctx))
        out.append(Measurement("algbw", k, median(algbw), "B/s", "median", algbw, True, ctx))
        if n > 1:
            bus = [a * bus_factor(n) for a in algbw]
            busbw.append(Measurement("busbw", k, median(bus), "B/s", "median", bus, True,
                                     {**ctx, "bus_factor": bus_factor(n)}))
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
        local = min(cfg.ranks or gpus, gpus)
    else:
        local = cfg.ranks or 2
    world = launched["world_size"] if launched else local
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
        answer = run_ranks(ctx, "allreduce", "benchbench.workloads.allreduce:sweep", job,
                           backend, local, cfg.timeout_s, ctx.budget.remaining(), env)
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
    artifacts = []
    if backend == "nccl":
        v = torch.cuda.nccl.version()  # a tuple in torch 2.x, an int in older releases
        context["nccl_version"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
        if log_pattern:
            files = sorted(glob.glob(log_pattern.replace("%h", "*").replace("%p", "*")))
            text = "".join(open(f, errors="replace").read() for f in files)
            context["nccl"] = nccl_facts(text)
            artifacts = [os.path.basename(f) for f in files]
    key = {"backend": backend, "dtype": cfg.dtype, "world_size": world, "nodes": nodes}
    notes = list(answer["notes"])
    if world == 1:
        notes.append("busbw skipped, because at world size 1 the bus factor 2(n-1)/n is 0: "
                     "nothing crosses a link, and algbw is a local copy")
    return ProbeOutput(_measurements(answer["rows"], key, world, context), params=params,
                       notes=notes, artifacts=artifacts)
