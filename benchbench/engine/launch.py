"""Who this process is in a multi-process run: read torchrun's or Slurm's variables, pick ports.

No torch here: the CLI reads this before any worker starts. A process that no launcher started
(or a launcher with one process) is a single-node run, and benchbench spawns its own ranks.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from benchbench.core.config import ConfigError

# benchbench's own rendezvous stores sit just above MASTER_PORT on the master node, one per
# distributed step, so they never meet torchrun's agent store or a previous step's keys.
PORT_OFFSETS = {"start": 1, "allreduce": 2, "ddp_scaling": 3, "gather": 4}

# Under Slurm each job takes a block of PORT_BLOCK ports, MASTER_PORT and the ones benchbench
# listens on above it (PORT_OFFSETS). The blocks start at PORT_BASE and stay below 32768, where
# Linux's default ephemeral range begins (net.ipv4.ip_local_port_range = 32768 60999), so an
# outgoing connection on the master node cannot already hold one of them. `benchbench slurm`
# writes this rule into its script, and a run under srun without MASTER_PORT applies it.
PORT_BASE = 20000
PORT_BLOCK = 1 + max(PORT_OFFSETS.values())
PORT_SLOTS = 2500  # PORT_BASE + PORT_SLOTS * PORT_BLOCK <= 32500


def master_port(job_id: int) -> int:
    """The MASTER_PORT of a Slurm job: its block of ports (the script's arithmetic)."""
    return PORT_BASE + job_id % PORT_SLOTS * PORT_BLOCK


@dataclass(frozen=True)
class DistEnv:
    """This process's place in a run that torchrun or srun launched."""

    launcher: str  # "torchrun" or "slurm"
    rank: int
    world_size: int
    local_rank: int
    node_rank: int | None
    master_addr: str
    master_port: int

    @property
    def is_master(self) -> bool:
        return self.rank == 0

    @property
    def is_node_leader(self) -> bool:
        """Local rank 0 runs the per-node probes (ceilings, loaders, storage)."""
        return self.local_rank == 0

    def port_for(self, step: str) -> int:
        return self.master_port + PORT_OFFSETS[step]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _int(env: Mapping[str, str], name: str) -> int:
    raw = env.get(name)
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise ConfigError(f"{name}={raw!r} in the environment is not an integer") from None
    if value < 0:
        raise ConfigError(f"{name}={raw!r} in the environment must not be negative")
    return value


def first_host(nodelist: str) -> str:
    """The first host of a Slurm node list: 'gpu[03-05,9],cpu1' -> 'gpu03'."""
    m = re.match(r"\s*([^,\[\s]+)(?:\[([^\]]+)\])?", nodelist)
    if not m:
        raise ConfigError(f"cannot read a host name from SLURM_JOB_NODELIST={nodelist!r}")
    prefix, ranges = m.group(1), m.group(2)
    if not ranges:
        return prefix
    return prefix + ranges.split(",")[0].split("-")[0].strip()


def _master(env: Mapping[str, str], launcher: str) -> tuple[str, int]:
    addr = env.get("MASTER_ADDR")
    if not addr and launcher == "slurm":
        nodes = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST")
        addr = first_host(nodes) if nodes else None
    if not addr:
        raise ConfigError(f"{launcher} launched this run but MASTER_ADDR is not set; export "
                          "the master node's address (see `benchbench slurm`)")
    if "MASTER_PORT" in env:
        port = _int(env, "MASTER_PORT")
    elif launcher == "slurm" and "SLURM_JOB_ID" in env:
        port = master_port(_int(env, "SLURM_JOB_ID"))
    else:
        raise ConfigError(f"{launcher} launched this run but MASTER_PORT is not set")
    last = port + max(PORT_OFFSETS.values())
    if port < 1 or last > 65535:
        raise ConfigError(f"MASTER_PORT={port}: benchbench needs ports {port + 1}..{last}, "
                          "which must lie below 65536")
    return addr, port


def from_environ(env: Mapping[str, str] | None = None) -> DistEnv | None:
    """The launcher's view of this process, or None when no launcher started several.

    torchrun sets RANK/WORLD_SIZE/LOCAL_RANK (it wins when it runs inside srun). srun sets
    SLURM_PROCID/SLURM_STEP_NUM_TASKS/SLURM_LOCALID; a batch script that calls benchbench
    without srun has no SLURM_STEP_NUM_TASKS, and is a single-node run.
    """
    env = os.environ if env is None else env
    if "RANK" in env and "WORLD_SIZE" in env:
        launcher, rank, world = "torchrun", _int(env, "RANK"), _int(env, "WORLD_SIZE")
        local = _int(env, "LOCAL_RANK") if "LOCAL_RANK" in env else 0
        node = _int(env, "GROUP_RANK") if "GROUP_RANK" in env else None
    elif "SLURM_PROCID" in env and "SLURM_STEP_NUM_TASKS" in env:
        launcher, rank, world = "slurm", _int(env, "SLURM_PROCID"), _int(
            env, "SLURM_STEP_NUM_TASKS")
        local = _int(env, "SLURM_LOCALID") if "SLURM_LOCALID" in env else 0
        node = _int(env, "SLURM_NODEID") if "SLURM_NODEID" in env else None
    else:
        return None
    if world < 1 or rank >= world:
        raise ConfigError(f"{launcher}: rank {rank} does not fit a world of {world} processes")
    if world == 1:
        return None
    addr, port = _master(env, launcher)
    return DistEnv(launcher, rank, world, local, node, addr, port)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now (the OS picks it). Another process can still
    take it before we bind; the rank launcher retries on 'address already in use'."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
