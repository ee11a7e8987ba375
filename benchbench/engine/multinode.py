"""A run that torchrun or srun launched: start the ranks together, and gather them on rank 0.

No torch here: the store exchanges run in isolated workers (worker.exchange). Every rank
checks its own input first; when any rank refuses its input, every rank stops with that
rank's message, instead of waiting for a peer that will never come.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import asdict
from typing import Any

from benchbench.core.results import RunResult
from benchbench.engine.isolation import Isolator
from benchbench.engine.launch import DistEnv

# Node leaders may first generate the synthetic dataset (about a minute on a small box).
START_TIMEOUT_S = 600.0


class RankError(Exception):
    """Another rank (or the rendezvous) failed; the message names it."""


def _exchange(isolator: Isolator, launched: DistEnv, step: str, value: dict[str, Any],
              timeout_s: float, to_all: bool) -> list[dict[str, Any]] | None:
    payload = {"launched": launched.to_dict(), "step": step, "value": json.dumps(value),
               "timeout_s": timeout_s, "to_all": to_all}
    got = isolator.call("benchbench.engine.worker:exchange", payload, timeout_s=timeout_s + 60)
    if not got.ok:
        raise RankError(f"rank {launched.rank}: {step} with the other ranks failed: "
                        f"{got.error}")
    return None if got.value is None else [json.loads(v) for v in got.value]


def start_together(isolator: Isolator, launched: DistEnv, error: str | None) -> set[int]:
    """Wait until every rank has checked its input; raise RankError when one refused it.
    Returns the process ids of the ranks on this host: their CUDA contexts (and their
    workers') are this run's own, not another user's processes on the GPUs."""
    host = socket.gethostname()
    values = _exchange(isolator, launched, "start",
                       {"host": host, "error": error, "pid": os.getpid()}, START_TIMEOUT_S,
                       True)
    bad = [(r, v) for r, v in enumerate(values or []) if v["error"]]
    if bad and error is None:
        r, v = bad[0]
        raise RankError(f"rank {r} on {v['host']} refused its input: {v['error']}")
    return {int(v["pid"]) for v in values or [] if v.get("host") == host and v.get("pid")}


def rank_report(run: RunResult, launched: DistEnv) -> dict[str, Any]:
    return {"rank": launched.rank, "local_rank": launched.local_rank,
            "node_rank": launched.node_rank, "host": socket.gethostname(),
            "environment": run.environment if launched.is_node_leader else None,
            "dataset": run.extra.get("dataset"),
            "telemetry": run.extra.get("telemetry") if launched.is_node_leader else None,
            "probes": [asdict(p) for p in run.probes]}


def gather(isolator: Isolator, launched: DistEnv, run: RunResult,
           timeout_s: float) -> list[dict[str, Any]] | None:
    """Every rank's report on rank 0 (None elsewhere)."""
    return _exchange(isolator, launched, "gather", rank_report(run, launched), timeout_s,
                     False)


def merge(run: RunResult, launched: DistEnv, reports: list[dict[str, Any]],
          distributed: set[str]) -> None:
    """Record every rank's outcome, and the other nodes' environment and per-node probes."""
    hosts = sorted({r["host"] for r in reports})
    nodes = {r["host"] if r["node_rank"] is None else r["node_rank"] for r in reports}
    run.extra["distributed"] = {
        "launcher": launched.launcher, "world_size": launched.world_size,
        "nodes": len(nodes), "hosts": hosts, "master": launched.master_addr,
        "ranks": [{"rank": r["rank"], "host": r["host"], "local_rank": r["local_rank"],
                   "probes": {p["name"]: p["status"] for p in r["probes"]}}
                  for r in reports],
    }
    run.extra["nodes"] = [
        {k: r.get(k) for k in ("host", "node_rank", "rank", "environment", "dataset",
                                "telemetry")}
        | {"probes": [p for p in r["probes"] if p["name"] not in distributed]}
        for r in reports if r["local_rank"] == 0 and r["rank"] != 0
    ]


def failed_elsewhere(reports: list[dict[str, Any]]) -> list[str]:
    """'rank r (host): probe: reason' for every failed probe on another rank."""
    return [f"rank {r['rank']} ({r['host']}): {p['name']}: {p.get('reason')}"
            for r in reports if r["rank"] != 0 for p in r["probes"] if p["status"] == "failed"]
