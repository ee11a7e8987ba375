"""Write the sbatch script that runs `benchbench run` on every GPU of N Slurm nodes.

Pure text: nothing here runs Slurm or touches the disk. `benchbench slurm` prints the script,
the user reads it and submits it with sbatch. srun starts one `benchbench run` per GPU; each
finds its rank in srun's SLURM_* variables and the first node in the MASTER_ADDR and
MASTER_PORT this script exports (benchbench/launch.py reads them).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from benchbench.engine.launch import PORT_BASE, PORT_BLOCK, PORT_SLOTS

DEFAULT_TIME = "00:30:00"

_TIME = re.compile(r"(?:(\d+)-)?(\d+):(\d{2}):(\d{2})")
_NAME = re.compile(r"[A-Za-z0-9_.-]+")
_NAME_CHARS = "letters, digits, '_', '.' and '-'"


class SlurmError(ValueError):
    """An option that would make a broken or unsafe sbatch script; one line for the user."""


def validate_options(nodes: int, gpus_per_node: int, partition: str | None = None,
                     time: str | None = None, account: str | None = None,
                     out: str | None = None) -> None:
    """Raise SlurmError naming the first bad option; the flag names are the CLI's."""
    if nodes < 1:
        raise SlurmError("--nodes must be at least 1")
    if gpus_per_node < 1:
        raise SlurmError("--gpus-per-node must be at least 1")
    if time is not None:
        _validate_time(time)
    # These go unquoted into #SBATCH lines, which sbatch reads without a shell.
    if partition is not None and not all(_NAME.fullmatch(p) for p in partition.split(",")):
        raise SlurmError(f"--partition {partition!r}: use {_NAME_CHARS}, and ',' between "
                         "several partitions")
    if account is not None and not _NAME.fullmatch(account):
        raise SlurmError(f"--account {account!r}: use {_NAME_CHARS}")
    if out is not None and not out.strip():
        raise SlurmError("--out must not be empty")


def _validate_time(time: str) -> None:
    m = _TIME.fullmatch(time)
    if not m:
        raise SlurmError(f"--time {time!r}: expected HH:MM:SS or D-HH:MM:SS, e.g. "
                         f"{DEFAULT_TIME} or 1-12:00:00")
    days = int(m[1]) if m[1] else None
    hours, minutes, seconds = int(m[2]), int(m[3]), int(m[4])
    if minutes >= 60 or seconds >= 60 or (days is not None and hours >= 24):
        raise SlurmError(f"--time {time!r}: minutes and seconds run to 59, and hours to 23 "
                         "after a day count")
    if not (days or hours or minutes or seconds):
        # Slurm reads a zero limit as "no limit", which is not what anybody typing it meant.
        raise SlurmError(f"--time {time!r}: the limit must be longer than zero")


def srun_line(gpus_per_node: int, run_args: Sequence[str] = ()) -> str:
    """The command each of the job's tasks runs; "$OUT" is the script's variable."""
    args = " ".join(shlex.quote(a) for a in run_args)
    # --cpu-bind=none: where a site pins each task to its own cores, the data-loading probes
    # on local rank 0 would see only that task's share of the node.
    return (f"srun --kill-on-bad-exit=1 --cpu-bind=none --ntasks-per-node={gpus_per_node} "
            f'python -m benchbench run --out "$OUT"' + (f" {args}" if args else ""))


def sbatch_script(nodes: int, gpus_per_node: int, partition: str | None = None,
                  time: str | None = None, account: str | None = None, out: str | None = None,
                  run_args: Sequence[str] = ()) -> str:
    """The whole batch script, ending in a newline. time None means DEFAULT_TIME; out None
    means runs/slurm-<job id> under the directory sbatch was called from."""
    time = DEFAULT_TIME if time is None else time
    validate_options(nodes, gpus_per_node, partition, time, account, out)
    sbatch = ["--job-name=benchbench", f"--nodes={nodes}",
              f"--ntasks-per-node={gpus_per_node}", f"--gpus-per-node={gpus_per_node}",
              f"--time={time}"]
    sbatch += [f"--partition={partition}"] if partition is not None else []
    sbatch += [f"--account={account}"] if account is not None else []
    sbatch += ["--output=benchbench-%j.out"]
    out_value = shlex.quote(out) if out is not None else '"runs/slurm-${SLURM_JOB_ID}"'
    lines = [
        "#!/bin/bash",
        "# Written by `benchbench slurm`. Submit it with: sbatch FILE",
        *(f"#SBATCH {opt}" for opt in sbatch),
        "# A benchmark must not share its nodes: another job's kernels, memory traffic or I/O",
        "# would be measured as this machine's limits.",
        "#SBATCH --exclusive",
        "# No --cpus-per-task: --exclusive already gives the job every CPU of each node, and srun",
        "# (without --exact) lets each task use all of them. The data-loading probes must see",
        "# the whole node's cores, which a per-task share would hide.",
        "",
        "set -euo pipefail",
        "",
        "# Each task's benchbench run finds its rank in the variables srun sets (SLURM_PROCID,",
        "# SLURM_LOCALID, SLURM_NODEID, ...) and meets the others at MASTER_ADDR:MASTER_PORT.",
        'HOSTS=$(scontrol show hostnames "$SLURM_JOB_NODELIST")',
        "export MASTER_ADDR=${HOSTS%%$'\\n'*}",
        f"# benchbench also listens on MASTER_PORT+1..+{PORT_BLOCK - 1}, so each job id gets its",
        f"# own block of {PORT_BLOCK} ports, below Linux's ephemeral range (32768 and up).",
        f"export MASTER_PORT=$(( {PORT_BASE} + SLURM_JOB_ID % {PORT_SLOTS} * {PORT_BLOCK} ))",
        "# Only global rank 0 writes this folder, on the first node, after gathering every node's",
        "# results over the network. A relative path is under the directory sbatch ran in.",
        f"export OUT={out_value}",
        "",
        "# sbatch passes on the submitting shell's environment by default, so `python` is the",
        "# one benchbench is installed in when that environment was active at submission.",
        "# Exit status 1 means a probe failed and the folder is still written: say where anyway.",
        "status=0",
        srun_line(gpus_per_node, run_args) + " || status=$?",
        'echo "benchbench: results folder $OUT on $MASTER_ADDR (exit status $status)"',
        'exit "$status"',
    ]
    return "\n".join(lines) + "\n"
