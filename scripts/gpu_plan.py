"""The GPU check's plan: each step of scripts/gpu-validate.sh with its time limit, derived from
an estimate of that step, so that the whole script fits its 7 minutes on one lent H100 or H200.

    python scripts/gpu_plan.py            # step, limit, estimate and its basis; "total N s"
    python scripts/gpu_plan.py --shell    # the limits and run arguments, for gpu-validate.sh
    python scripts/gpu_plan.py --dry-run  # the same for the CPU dry run (tiny sizes)

The benchbench run is estimated by the simulator (engine/simulate.py: the probes' own planning
against the profile of the GPU that is there, the runner's overheads included); the other
steps are not benchbench runs, and their estimates are stated with their basis. A limit is its
estimate with a margin (LIMIT_FACTOR, plus LIMIT_EXTRA_S for a Python start's noise): a step
that overruns it is killed and reported as timed out, and the steps after it still run. The
limits add up to at most TOTAL_LIMIT_S. The dry run's plan simulates the real run too, and says
its estimate, so that the dry run takes every path the real one takes.

The ground truth (scripts/ground_truth.py: a minute of real training) runs after the planned
steps, before the headline and pack, in what they leave: its limit is the smaller of its own
and what is left of TOTAL_LIMIT_S less the pack's limit, and it runs where that is at least
its minimum (a shorter steady window), so that the script never passes TOTAL_LIMIT_S. The plan
says what the planned steps leave it at their estimates.

gpu-validate.sh runs the first three steps (versions, the box kit, then this plan) with limits
of its own, since it cannot read them from a plan that has not run; FIXED_LIMITS holds them,
and a test holds the script to it. benchbench is not installed on the box: the script puts the
source tree on PYTHONPATH, and where this plan cannot run it falls back to limits of its own.
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
# The dry run: the real run's arguments, every probe, at sizes a 2-core CPU runs in about a
# minute, so that the rehearsal (tests/cli/test_gpu_validate.py) takes each probe's path on the
# box's versions; the transformer keeps the gpt2-124m preset at one narrow-vocabulary layer.
DRY_RUN_SIZES = {"matmul": {"sizes": "64"}, "memory_bandwidth": {"host_size_bytes": "64M"},
                 "stability": {"duration_s": "1"},
                 "resnet50": {"batch_size": "2", "image_size": "32"},
                 "transformer": {"n_layers": "1", "vocab_size": "1024", "seq_len": "32",
                                 "batch_size": "1"},
                 "dataloader": {"batch_size": "8", "image_size": "32"},
                 "storage": {"size": "16M", "max_runtime": "0.5"},
                 "pipeline": {"batch_size": "2", "image_size": "32"},
                 "allreduce": {"sizes": "1024,65536"}}


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


# The first three steps, which gpu-validate.sh times with its own limits (VERSIONS_LIMIT,
# KIT_LIMIT and PLAN_LIMIT there). Versions and the kit read torch's version without importing
# it, so this plan is the first to import torch, cold: 30 s and more on a fresh gVisor box,
# where every read is slow.
def first_steps(dry_run: bool) -> list[Step]:
    return [Step("LIMIT_VERSIONS", "versions", 1, "a Python start without torch: the versions "
                 "from the packages' metadata, and benchbench from the source tree"),
            Step("LIMIT_KIT", "box kit", 3, "where box-kit/ came with the check: two wheels "
                 "(~4 MB) installed --no-deps, by pip (~2 s to start) or unpacked, and a 1 MiB "
                 "fio job"),
            Step("LIMIT_PLAN", "plan (this table)", 44,
                 "the first Python start importing torch, cold (30 s and more on a fresh gVisor "
                 "box), and the simulator (~9 s on 2 cores)" + (
                     ": the real run's estimate, for the dry run" if dry_run else ""))]


FIXED_LIMITS = {dry: {s.var: s.limit_s for s in first_steps(dry)} for dry in (False, True)}


def _sets(fields: dict[str, dict[str, str]]) -> list[str]:
    return [a for probe, kv in fields.items() for k, v in kv.items()
            for a in ("--set", f"{probe}.{k}={v}")]


def run_args() -> list[str]:
    return ["--quick", *_sets(RUN_SET)]


def dry_run_args() -> list[str]:
    return [*run_args(), *_sets(DRY_RUN_SIZES)]


def gpu_here() -> str | None:
    """The name of the GPU this runs beside, or None without one (the CPU dry run)."""
    import torch

    return str(torch.cuda.get_device_name(0)) if torch.cuda.is_available() else None


def simulated_run() -> tuple[float, str]:
    """The quick run's wall time on the GPU that is here (an H100 or an H200; an H200 without
    one), from the simulator."""
    from benchbench.engine import simulate

    profile = simulate.profile_for(gpu_here())
    est = simulate.estimate_run(profile, quick=True, overrides=RUN_SET)
    ran = [p for p in est.probes if p.wall_s > 0 or p.measurements]
    return est.total_s, (f"simulated: {len(ran)} probes on {profile.name} at "
                         f"{' '.join(run_args())} (overheads {est.overhead_s:.0f} s)")


# The ground truth's steady window (scripts/ground_truth.py --seconds) and the shortest one
# worth running: twelve 5 s windows, or four at least.
TRUTH_WINDOW_S = 60
TRUTH_MIN_WINDOW_S = 20
# Its start on an H200, from the runs' own figures: Python and torch (~4 s warm), 16 workers
# forked, CUDA's start, the first amp_bf16 step with cuDNN's autotune (~4 s in the pipeline),
# and the warm-up (the workers' prefetched batches drained, 48 batches of 256 at ~3,300 img/s,
# ~4 s, and at least 5 s); then the workers' shut-down.
TRUTH_START_S = 20


def ground_truth(dry_run: bool = False) -> tuple[Step, Step]:
    """The ground truth step in full, and at its shortest (the smallest limit it runs with)."""
    if dry_run:
        # Its start (torch, the loader's forkserver, the first step) took 13-30 s on 2 loaded
        # cores in the rehearsal.
        full = Step("LIMIT_GROUND_TRUTH", "ground truth", 40, "CPU dry run: ResNet50 at 32 px "
                    "and batch 2, a 2 s window after the warm-up")
        return full, Step("GROUND_TRUTH_MIN", "ground truth, shortest", 25, full.basis)
    basis = (f"ResNet50 amp_bf16 on the run's dataset through torchvision's loader, "
             f"{TRUTH_START_S} s to start and warm up (torch, the workers, CUDA, cuDNN's "
             "autotune, the prefetched batches drained)")
    return (Step("LIMIT_GROUND_TRUTH", "ground truth", TRUTH_START_S + TRUTH_WINDOW_S,
                 f"{basis}, then {TRUTH_WINDOW_S} s timed"),
            Step("GROUND_TRUTH_MIN", "ground truth, shortest", TRUTH_START_S + TRUTH_MIN_WINDOW_S,
                 f"{basis}, then {TRUTH_MIN_WINDOW_S} s timed"))


def truth_room(steps: list[Step]) -> float:
    """What the planned steps leave the ground truth when each takes its estimate: the total
    less their estimates, less the pack's limit (the pack runs after it)."""
    pack = next(s.limit_s for s in steps if s.var == "LIMIT_PACK")
    return TOTAL_LIMIT_S - sum(s.estimate_s for s in steps if s.var != "LIMIT_PACK") - pack


def shell_vars(dry_run: bool, steps: list[Step]) -> dict[str, int]:
    """The limits gpu-validate.sh reads: each step's, and the ground truth's full and least."""
    full, least = ground_truth(dry_run)
    return {**{s.var: s.limit_s for s in steps}, full.var: full.limit_s,
            least.var: least.limit_s}


def plan(dry_run: bool = False) -> list[Step]:
    if dry_run:  # the CPU dry run in CI: tiny sizes, limits that only catch a hang
        return [*first_steps(True),
                Step("LIMIT_SMI", "nvidia-smi -L", 2, "CPU dry run: not run without a GPU",
                     NO_PYTHON_EXTRA_S),
                Step("LIMIT_DF", "df -h /dev/shm", 2, "CPU dry run", NO_PYTHON_EXTRA_S),
                Step("LIMIT_GPU_TESTS", "GPU tests", 60, "CPU dry run: collected, skipped"),
                Step("LIMIT_RUN", "benchbench run", 90, "CPU dry run: every probe at tiny sizes "
                     "(the quick run's 60 s plan, and the dataset's generation)"),
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
        Step("LIMIT_DOCTOR", "benchbench doctor", 3,
             "read-only checks on the run's file: 0-1 s on three H200s"),
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
    full, least = ground_truth(a.dry_run)
    room = truth_room(steps)
    print(f"{mark}then, in what is left of the {TOTAL_LIMIT_S} s less the pack's limit:")
    print(f"{mark}{full.name:38} limit {full.limit_s:4d} s  estimate {full.estimate_s:6.1f} s  "
          f"({full.basis}; runs with at least {least.limit_s} s, its window shortened)")
    fits = ("it runs in full" if room >= full.limit_s else
            "it runs with a shorter window" if room >= least.limit_s else
            "it does not fit")
    print(f"{mark}at the estimates the steps leave it {room:.0f} s: {fits}")
    if a.dry_run:  # the real run's estimate too: the dry run exercises the simulator
        run_s, run_basis = simulated_run()
        print(f"{mark}the real run's benchbench run, estimated: {run_s:.1f} s ({run_basis})")
    if a.shell:
        for var, limit in shell_vars(a.dry_run, steps).items():
            print(f"{var}={limit}")
        args = dry_run_args() if a.dry_run else run_args()
        print(f"RUN_ARGS=({' '.join(shlex.quote(x) for x in args)})")
    if not a.dry_run and total > TOTAL_LIMIT_S:
        print(f"gpu_plan: the limits add up to {total} s, over the {TOTAL_LIMIT_S} s the "
              "lent machine allows", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
