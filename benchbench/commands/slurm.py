"""`benchbench slurm`: an sbatch script for a multi-node run, its run flags checked now."""

from __future__ import annotations

import argparse

from benchbench.commands.common import UsageError, build_run_config
from benchbench.engine.catalog import default_registry


def main(args: argparse.Namespace) -> int:
    from benchbench.engine.slurm import SlurmError, sbatch_script

    try:
        script = sbatch_script(args.nodes, args.gpus_per_node, partition=args.partition,
                               time=args.time, account=args.account, out=args.out,
                               run_args=args.run_args)
    except SlurmError as exc:
        raise UsageError(str(exc)) from None
    run_args = args.parse_run_args(args.run_args)
    if run_args.out is not None:
        raise UsageError("give the run folder as `benchbench slurm --out DIR`, before --")
    build_run_config(run_args, default_registry())  # now, not after the job has queued
    print(script, end="")
    return 0
