"""The ranks of a distributed probe: spawned here on one node, or this process when torchrun or
srun launched the run. Rendezvous through a TCPStore with a bounded timeout that names the
ranks that never joined; every rank's failure names its rank and backend.

A rank function is called as fn(comm, payload) in every rank and returns plain data; rank 0's
return value is the probe's answer (the ranks agree through collectives).
"""

from __future__ import annotations

import importlib
import os
import socket
import time
import traceback
from dataclasses import dataclass, field, replace
from datetime import timedelta
from multiprocessing.connection import Connection
from typing import Any

import torch
import torch.distributed as dist

from benchbench.engine.isolation import describe_exit, die_with_parent, poll_message, stop_processes
from benchbench.engine.launch import PORT_OFFSETS, free_port
from benchbench.probes._devices import device_count, process_context, select_device
from benchbench.probes.api import ProbeContext, Progress
from benchbench.probes.meter import long_lived_frozen

# Spawned ranks import torch before they join: allow for that on a loaded 2-core box.
START_SLACK_S = 60.0


class RankFailure(RuntimeError):
    """A rank failed, died or timed out; the message names the rank and the backend."""


class PortInUse(RankFailure):
    pass


@dataclass(frozen=True)
class RankSpec:
    target: str  # "module:function", called as fn(comm, payload)
    payload: Any
    rank: int
    world_size: int
    local_rank: int
    backend: str  # "gloo" or "nccl"
    device: str  # "cpu" or "cuda"
    master_addr: str
    port: int
    timeout_s: float
    prefix: str  # store keys of this step, so that no stale key from another step is read
    env: tuple[tuple[str, str], ...] = ()  # variables set before the backend starts (NCCL_*)
    node_rank: int | None = None  # the launcher's node index, when it gives one


@dataclass
class Comm:
    """What a rank function gets: its place, its device, and the collectives it agrees by."""

    rank: int
    world_size: int
    local_rank: int
    backend: str
    device: str  # "cpu" or "cuda:N"
    host: str
    node: str  # which node this rank runs on: the launcher's node index, else the host name
    progress: Progress = field(default=lambda desc, done, total: None)  # rank 0 reports

    def barrier(self) -> None:
        dist.barrier()

    def max_over_ranks(self, values: list[float]) -> list[float]:
        """Element-wise maximum over ranks: the slowest rank decides a collective's time."""
        t = torch.tensor(values, dtype=torch.float64, device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return t.tolist()

    def decide(self, obj: Any) -> Any:
        """Rank 0's `obj`, on every rank: plans must match, or the collectives would not."""
        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def gather(self, obj: Any) -> list[Any] | None:
        """Every rank's `obj` on rank 0 (None elsewhere)."""
        out: list[Any] | None = [None] * self.world_size if self.rank == 0 else None
        dist.gather_object(obj, out, dst=0)
        return out


def _who(spec: RankSpec) -> str:
    return f"rank {spec.rank} ({spec.backend})"


def _connect(spec: RankSpec) -> Any:
    timeout = timedelta(seconds=spec.timeout_s)
    try:
        # torch.distributed imports its stores from torch._C without declaring them exported
        # (public API all the same): hence attr-defined here and for PrefixStore below.
        store = dist.TCPStore(spec.master_addr, spec.port,  # type: ignore[attr-defined]
                              spec.world_size, is_master=spec.rank == 0, timeout=timeout,
                              wait_for_workers=False)
    except Exception as exc:  # DistNetworkError / DistStoreError / RuntimeError by version
        text = str(exc).lower()
        if "address already in use" in text or "errno 98" in text:
            raise PortInUse(f"{_who(spec)}: port {spec.port} on {spec.master_addr} is already "
                            "in use") from None
        raise RankFailure(f"{_who(spec)}: could not reach the rendezvous at "
                          f"{spec.master_addr}:{spec.port} within {spec.timeout_s:g} s "
                          f"(did rank 0 start?): {str(exc).splitlines()[0]}") from None
    keys = [f"{spec.prefix}/joined/{r}" for r in range(spec.world_size)]
    store.set(keys[spec.rank], socket.gethostname())
    try:
        store.wait(keys)
    except Exception:
        missing = [r for r, k in enumerate(keys) if not store.check([k])]
        raise RankFailure(f"{_who(spec)}: {'rank' if len(missing) == 1 else 'ranks'} "
                          f"{', '.join(map(str, missing))} did not join "
                          f"within {spec.timeout_s:g} s at {spec.master_addr}:{spec.port}"
                          ) from None
    return store


def run_rank(spec: RankSpec, progress: Progress | None = None) -> Any:
    """Join the group, run the rank function, leave. Raises RankFailure naming this rank."""
    for k, v in spec.env:
        os.environ.setdefault(k, v)
    device = "cpu"
    if spec.device == "cuda":
        device = select_device(spec.local_rank % device_count())
    store = _connect(spec)
    timeout = timedelta(seconds=spec.timeout_s)
    try:
        # device_id binds NCCL to this rank's GPU and starts its communicator now, so that a
        # broken NCCL fails here, naming the rank, rather than in the first collective.
        extra: dict[str, Any] = {"device_id": torch.device(device)} \
            if spec.backend == "nccl" else {}
        prefixed = dist.PrefixStore(spec.prefix, store)  # type: ignore[attr-defined]
        dist.init_process_group(spec.backend, store=prefixed,
                                rank=spec.rank, world_size=spec.world_size, timeout=timeout,
                                **extra)
        module, _, func = spec.target.partition(":")
        fn = getattr(importlib.import_module(module), func)
        host = socket.gethostname()
        comm = Comm(spec.rank, spec.world_size, spec.local_rank, spec.backend, device, host,
                    host if spec.node_rank is None else f"node {spec.node_rank}")
        if progress is not None and spec.rank == 0:
            comm.progress = progress
        with long_lived_frozen():  # as a probe's worker runs it (engine/worker.py)
            value = fn(comm, spec.payload)
        dist.barrier()
    except RankFailure:
        raise
    except Exception as exc:
        line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        if "timed out" in line.lower() or "timeout" in line.lower():
            line = f"a collective timed out after {spec.timeout_s:g} s: {line}"
        raise RankFailure(f"{_who(spec)}: {line}") from exc
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    # Rank 0 hosts the store: it leaves last, so no rank loses the store while leaving.
    store.set(f"{spec.prefix}/done/{spec.rank}", "1")
    if spec.rank == 0:
        try:
            store.wait([f"{spec.prefix}/done/{r}" for r in range(spec.world_size)])
        except Exception:
            pass  # they finished their work; a late leaver does not change the answer
    return value


def _rank_entry(conn: Connection, spec: RankSpec) -> None:
    die_with_parent()
    try:
        conn.send(("result", run_rank(
            spec, lambda desc, done, total: conn.send(("progress", (desc, done, total))))))
    except BaseException as exc:
        kind = "port" if isinstance(exc, PortInUse) else "error"
        msg = str(exc) if isinstance(exc, RankFailure) else f"{_who(spec)}: {exc!r}"
        conn.send((kind, (msg, traceback.format_exc())))
    finally:
        conn.close()


def _join(procs: list[Any], conns: list[Connection], specs: list[RankSpec],
          deadline: float, on_progress: Progress) -> list[Any]:
    results: dict[int, Any] = {}
    while len(results) < len(procs):
        if time.monotonic() > deadline:
            pending = [s.rank for s in specs if s.rank not in results]
            raise RankFailure(f"{'rank' if len(pending) == 1 else 'ranks'} "
                              f"{', '.join(map(str, pending))} ({specs[0].backend}) did "
                              "not finish in time: a collective hung, and they were stopped")
        for spec, proc, conn in zip(specs, procs, conns, strict=True):
            if spec.rank in results:
                continue
            try:
                message = poll_message(conn, 0.05, on_progress)
            except EOFError:
                proc.join(2)
                raise RankFailure(f"{_who(spec)}: {describe_exit(proc.exitcode)}") from None
            if message is not None:
                kind, body = message
                if kind == "result":
                    results[spec.rank] = body
                elif kind == "port":
                    raise PortInUse(body[0])
                else:
                    raise RankFailure(body[0])
            elif not proc.is_alive() and not conn.poll(0):
                raise RankFailure(f"{_who(spec)}: {describe_exit(proc.exitcode)}")
    return [results[r] for r in range(len(procs))]


def spawn_local(base: RankSpec, work_s: float, on_progress: Progress | None = None,
                attempts: int = 3) -> Any:
    """Start base.world_size ranks on this machine and return rank 0's answer.

    The whole step must end within its work time plus the collective timeout and start-up
    slack; ranks that hang are stopped. A rendezvous port that another process took between
    choosing and binding is replaced by a fresh one.
    """
    ctx = process_context()
    for attempt in range(attempts):
        spec0 = replace(base, port=free_port(base.master_addr))
        specs = [replace(spec0, rank=r, local_rank=r) for r in range(base.world_size)]
        procs, conns = [], []
        try:
            for spec in specs:
                parent, child = ctx.Pipe(duplex=False)
                proc = ctx.Process(target=_rank_entry, args=(child, spec), daemon=False)
                proc.start()
                child.close()
                procs.append(proc)
                conns.append(parent)
            deadline = time.monotonic() + work_s + base.timeout_s + START_SLACK_S
            return _join(procs, conns, specs, deadline,
                         on_progress or (lambda desc, done, total: None))[0]
        except PortInUse:
            if attempt == attempts - 1:
                raise
        finally:
            stop_processes(procs)
            for c in conns:
                c.close()
    raise AssertionError("unreachable")


def run_ranks(ctx: ProbeContext, step: str, target: str, payload: Any, backend: str,
              local_ranks: int, timeout_s: float, work_s: float,
              env: dict[str, str] | None = None) -> Any:
    """Run target in every rank: this process when a launcher started the run (each process
    is one rank), else `local_ranks` spawned here. Returns this rank's answer; rank 0's is
    the probe's."""
    launched = ctx.inputs.distributed
    base = RankSpec(target=target, payload=payload, rank=0, world_size=local_ranks,
                    local_rank=0, backend=backend, device=ctx.device,
                    master_addr="127.0.0.1", port=0, timeout_s=timeout_s,
                    prefix=f"benchbench/{step}", env=tuple((env or {}).items()))
    if not launched:
        return spawn_local(base, work_s, ctx.progress)
    spec = replace(base, rank=launched["rank"], world_size=launched["world_size"],
                   local_rank=launched["local_rank"], master_addr=launched["master_addr"],
                   port=launched["master_port"] + PORT_OFFSETS[step],
                   env=base.env if launched["rank"] == 0 else (),
                   node_rank=launched.get("node_rank"))
    try:
        return run_rank(spec, ctx.progress)
    except PortInUse as exc:
        raise PortInUse(f"{exc}; benchbench needs MASTER_PORT+1 to +{max(PORT_OFFSETS.values())} "
                        "free on the master node: choose another MASTER_PORT") from None


def exchange(launched: dict[str, Any], step: str, value: str, timeout_s: float,
             to_all: bool) -> list[str] | None:
    """Every rank's `value` (a string) in rank order: on rank 0, and on every rank when
    `to_all`. A rank that has not posted within timeout_s is named in the RankFailure."""
    spec = RankSpec(target="", payload=None, rank=launched["rank"],
                    world_size=launched["world_size"], local_rank=launched["local_rank"],
                    backend="store", device="cpu", master_addr=launched["master_addr"],
                    port=launched["master_port"] + PORT_OFFSETS[step], timeout_s=timeout_s,
                    prefix=f"benchbench/{step}")
    store = _connect(spec)  # every rank has posted once this returns
    store.set(f"{spec.prefix}/value/{spec.rank}", value)
    keys = [f"{spec.prefix}/value/{r}" for r in range(spec.world_size)]
    read = [f"{spec.prefix}/read/{r}" for r in range(spec.world_size)]
    values = None
    if spec.rank == 0 or to_all:
        store.wait(keys)
        values = [store.get(k).decode() for k in keys]
    store.set(read[spec.rank], "1")
    if spec.rank == 0:  # it hosts the store: the others must be done with it first
        try:
            store.wait(read)
        except Exception:
            pass
    return values
