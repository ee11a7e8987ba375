"""Fidelity check: the allreduce probe against a bare torch.distributed loop timed by hand,
same ranks, size and backend, interleaved so that both see the same machine.

    python scripts/bare_allreduce.py [--ranks 2] [--size-mib 64] [--trials 4]

Prints each pair and the ratio of medians; the probe should land within 10% of the loop.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import time

from benchbench.core.sampling import Budget, RepeatPolicy
from benchbench.engine.launch import free_port
from benchbench.machine.environment import torch_facts
from benchbench.probes.allreduce import run as allreduce
from benchbench.probes.allreduce.config import SPEC as ALLREDUCE
from benchbench.probes.api import ProbeContext


def _bare_rank(rank: int, world: int, port: int, size: int, iters: int, out: object) -> None:
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    x = torch.randn(size // 4)
    for _ in range(5):
        dist.all_reduce(x)
    times = []
    for _ in range(5):
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(x)
        times.append((time.perf_counter() - t0) / iters)
    t = torch.tensor(times, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    if rank == 0:
        out.put(statistics.median(t.tolist()))  # type: ignore[attr-defined]
    dist.destroy_process_group()


def bare(world: int, size: int, iters: int) -> float:
    """busbw in B/s of a hand-written loop: barrier, `iters` all-reduces, perf_counter."""
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_bare_rank, args=(r, world, port, size, iters, q))
             for r in range(world)]
    for p in procs:
        p.start()
    t = q.get(timeout=300)
    for p in procs:
        p.join()
    return size / t * allreduce.bus_factor(world)


def probe(world: int, size: int, iters: int) -> float:
    ctx = ProbeContext(device="cpu",
                       policy=RepeatPolicy(min_repeats=5, max_repeats=5, warmup_s=0.0),
                       budget=Budget(120.0), facts=torch_facts())
    cfg = ALLREDUCE.resolve("cpu", False, ctx.facts, dict(sizes=(size,), iters=iters, warmup=5,
                                                          ranks=world))
    out = allreduce.run(ctx, cfg)
    return next(m.value for m in out.measurements if m.metric == "busbw")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, default=2, help="gloo ranks (default 2)")
    p.add_argument("--size-mib", type=int, default=64,
                   help="the tensor all-reduced, MiB (default 64)")
    p.add_argument("--iters", type=int, default=5,
                   help="all-reduces timed per trial (default 5)")
    p.add_argument("--trials", type=int, default=4,
                   help="interleaved pairs, bare loop then probe (default 4)")
    a = p.parse_args()
    size = a.size_mib * 1024**2
    pairs = []
    for i in range(a.trials):
        b, q = bare(a.ranks, size, a.iters), probe(a.ranks, size, a.iters)
        pairs.append((b, q))
        print(f"trial {i}: bare {b / 1e9:.3f} GB/s  probe {q / 1e9:.3f} GB/s  "
              f"ratio {q / b:.3f}", flush=True)
    mb, mq = statistics.median(b for b, _ in pairs), statistics.median(q for _, q in pairs)
    print(f"median busbw at {a.size_mib} MiB, {a.ranks} gloo ranks: bare {mb / 1e9:.3f} GB/s, "
          f"probe {mq / 1e9:.3f} GB/s, ratio {mq / mb:.3f}")


if __name__ == "__main__":
    main()
