"""The GPU check's plan: each step of scripts/gpu-validate.sh with its time limit, derived from
an estimate of that step, so that the whole script fits its 7 minutes on one lent H200.

    python scripts/gpu_plan.py            # step, limit, estimate and its basis; "total N s"
    python scripts/gpu_plan.py --shell    # the limits and run arguments, for gpu-validate.sh
    python scripts/gpu_plan.py --dry-run  # the same for the CPU dry run (tiny sizes)

The benchbench run is estimated by the simulator (engine/simulate.py: the probes' own planning
against an H200 profile, the runner's overheads included); the other steps are not benchbench
runs, and their estimates are stated with their basis. A limit is its estimate with a margin
(LIMIT_FACTOR, plus LIMIT_EXTRA_S for a Python start's noise): a step that overruns it is killed
and reported as timed out, and the steps after it still run. The dry run's plan simulates the
real run too, and says its estimate, so that the dry run takes every path the real one takes.

gpu-validate.sh runs the first two steps (versions, then this plan) with limits of its own,
since it cannot read them from a plan that has not run; FIXED_LIMITS holds them, and a test
holds the script to it. benchbench is not installed on the box: the script puts the source tree
on PYTHONPATH, and where this plan cannot run it falls back to limits of its own.
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
import time
from dataclasses import dataclass

# The lent machine: 15 minutes of device time, its start and a second run included, so one
# run of the script must fit about 7.
TOTAL_LIMIT_S = 420
LIMIT_FACTOR = 1.25
LIMIT_EXTRA_S = 5
# A step that starts no Python (df, nvidia-smi) has no import to wait for.
NO_PYTHON_EXTRA_S = 1

# What the run measures: a quick run of every probe (so each one is exercised on the GPU), with
# the transformer at gpt2-124m, the preset the GPT MFU headline is stated for. The quick run's
# matmul (4096 and 8192), copies (512 MiB on the GPU, 256 MiB pinned), and ResNet50 at batch
# 256 and 224 px are the headline figures' sizes already.
RUN_SET = {"transformer": {"preset": "gpt2-124m"}}
DRY_RUN_ARGS = ["--quick", "--only", "matmul,memory_bandwidth,resnet50", "--time-budget", "4",
                "--set", "matmul.sizes=64", "--set", "resnet50.batch_size=2",
                "--set", "resnet50.image_size=32", "--set", "resnet50.precisions=fp32",
                "--set", "memory_bandwidth.host_size_bytes=64M"]


@dataclass(frozen=True)
class Step:
    var: str  # the shell variable that carries its limit
    name: str
    estimate_s: float
    basis: str
    extra_s: float = LIMIT_EXTRA_S

    @property
    def limit_s(self) -> int:
        return math.ceil(self.estimate_s * LIMIT_FACTOR + self.extra_s)


# The first two steps, which gpu-validate.sh times with its own limits (VERSIONS_LIMIT and
# PLAN_LIMIT there). Versions reads torch's version without importing it, so this plan is the
# first to import torch, cold: 30 s and more on a fresh gVisor box, where every read is slow.
def first_steps(dry_run: bool) -> list[Step]:
    return [Step("LIMIT_VERSIONS", "versions", 1, "a Python start without torch: the versions "
                 "from the packages' metadata, and benchbench from the source tree"),
            Step("LIMIT_PLAN", "plan (this table)", 44,
                 "the first Python start importing torch, cold (30 s and more on a fresh gVisor "
                 "box), and the simulator (~9 s on 2 cores)" + (
                     ": the real run's estimate, for the dry run" if dry_run else ""))]


FIXED_LIMITS = {dry: {s.var: s.limit_s for s in first_steps(dry)} for dry in (False, True)}


def run_args() -> list[str]:
    return ["--quick", *[a for probe, fields in RUN_SET.items() for k, v in fields.items()
                         for a in ("--set", f"{probe}.{k}={v}")]]


def simulated_run() -> tuple[float, str]:
    """The quick run's wall time on one H200, from the simulator."""
    from benchbench.engine import simulate

    est = simulate.estimate_run(simulate.H200, quick=True, overrides=RUN_SET)
    return est.total_s, (f"simulated: {len(est.probes)} probes on 1x H200 at "
                         f"{' '.join(run_args())} (overheads {est.overhead_s:.0f} s)")


def plan(dry_run: bool = False) -> list[Step]:
    if dry_run:  # the CPU dry run in CI: tiny sizes, limits that only catch a hang
        return [*first_steps(True),
                Step("LIMIT_SMI", "nvidia-smi -L", 2, "CPU dry run: not run without a GPU",
                     NO_PYTHON_EXTRA_S),
                Step("LIMIT_DF", "df -h /dev/shm", 2, "CPU dry run", NO_PYTHON_EXTRA_S),
                Step("LIMIT_GPU_TESTS", "GPU tests", 60, "CPU dry run: collected, skipped"),
                Step("LIMIT_RUN", "benchbench run", 90, "CPU dry run: three probes, 4 s each"),
                Step("LIMIT_DOCTOR", "benchbench doctor", 20, "CPU dry run"),
                Step("LIMIT_BARE", "bare loops", 60, "CPU dry run: one trial of two steps"),
                Step("LIMIT_PACK", "headline and pack", 10, "CPU dry run")]
    run_s, run_basis = simulated_run()
    return [
        *first_steps(False),
        Step("LIMIT_SMI", "nvidia-smi -L", 2, "one NVML query", NO_PYTHON_EXTRA_S),
        Step("LIMIT_DF", "df -h /dev/shm", 1, "one statfs", NO_PYTHON_EXTRA_S),
        Step("LIMIT_GPU_TESTS", "GPU tests", 25,
             "pytest's start and the collection of the two files that hold them (~8 s on 2 "
             "CPU cores), CUDA's start, and four GPU tests of 1-3 s each (a fifth needs DALI)"),
        Step("LIMIT_RUN", "benchbench run", run_s, run_basis),
        Step("LIMIT_DOCTOR", "benchbench doctor", 6, "read-only checks on the run's file"),
        Step("LIMIT_BARE", "bare loops", 40,
             "2 trials of ResNet50 (10 steps) and GPT (100 steps of ~6 ms), probe and bare "
             "loop, each after a warm-up; 26-30 s on three H200s at 10 GPT steps"),
        Step("LIMIT_PACK", "headline and pack", 4, "one results.json read, one tar.gz"),
    ]


def torch_import() -> str:
    """torch's first import, timed: on the box, the cold start this step's estimate allows."""
    t0 = time.perf_counter()
    import torch

    return (f"torch {torch.__version__} (CUDA {torch.version.cuda}) imported in "
            f"{time.perf_counter() - t0:.1f} s")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shell", action="store_true", help="NAME=value lines for the script")
    ap.add_argument("--dry-run", action="store_true", help="the CPU dry run's plan")
    a = ap.parse_args(argv)
    if a.shell:  # for the script's log: the first step that imports torch says how long it took
        print(f"# {torch_import()}")
    steps = plan(a.dry_run)
    total = sum(s.limit_s for s in steps)
    # With --shell the table comes too, as comments: the script keeps it and evals the rest.
    mark = "# " if a.shell else ""
    for s in steps:
        print(f"{mark}{s.name:38} limit {s.limit_s:4d} s  estimate {s.estimate_s:6.1f} s  "
              f"({s.basis})")
    print(f"{mark}total {total} s")
    if a.dry_run:  # the real run's estimate too: the dry run exercises the simulator
        run_s, run_basis = simulated_run()
        print(f"{mark}the real run's benchbench run, estimated: {run_s:.1f} s ({run_basis})")
    if a.shell:
        for s in steps:
            print(f"{s.var}={s.limit_s}")
        args = DRY_RUN_ARGS if a.dry_run else run_args()
        print(f"RUN_ARGS=({' '.join(shlex.quote(x) for x in args)})")
    if not a.dry_run and total > TOTAL_LIMIT_S:
        print(f"gpu_plan: the limits add up to {total} s, over the {TOTAL_LIMIT_S} s the "
              "lent machine allows", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
