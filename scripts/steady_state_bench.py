"""Steady state on many cores, emulated: the dataloader's figure against the true rate of W
workers whose images each cost t seconds of wall time (a sleep, no CPU: W workers behave like W
cores on a small machine), and the pipeline's AU against the true AU of such a loader feeding
a step of known length. Interleaved in one run, several trials each.

    python scripts/steady_state_bench.py [--trials 3]

Prints, per case, the median ratio (measured / true) with its range over the trials. The
pipeline also runs on a budget that affords no timed step: it then times its fewest.
"""

from __future__ import annotations

import argparse
import statistics
import warnings

from benchbench.core.sampling import Budget, RepeatPolicy
from benchbench.engine.catalog import default_registry
from benchbench.machine.environment import usable_cores
from benchbench.probes.api import ProbeContext
from benchbench.probes.dataloader import run as dataloader
from benchbench.probes.emulated import SleepTrainer, sleep_loader, steady_rate
from benchbench.workloads._training import PRECISIONS
from benchbench.workloads.pipeline import run as pipeline

BATCH = 4


def _ctx(budget_s: float = 120.0) -> ProbeContext:
    return ProbeContext(device="cpu", policy=RepeatPolicy(min_repeats=1, max_repeats=1,
                                                          warmup_s=0.0, warmup_steps=2),
                        budget=Budget(budget_s), facts={"usable_cores": usable_cores()})


def loader_ratio(workers: int) -> float:
    per_image = max(0.2, workers / 100) / BATCH
    cfg = default_registry().get("dataloader").resolve(
        "cpu", False, {"usable_cores": usable_cores()},
        {"loaders": ("torchvision",), "workers": (workers,), "batch_size": BATCH})
    measured, _ = dataloader.sweep(
        _ctx(), cfg, [("torchvision", workers)], "emulated", "cpu", usable_cores(), [],
        make_loader=lambda kind, data, batch, w, image, dev: sleep_loader(per_image, batch, w))
    rate = next(m for m in measured if m.metric == "throughput")
    return rate.value / steady_rate(workers, per_image)


def au(true_au: float, workers: int = 16, batch_s: float = 0.32, budget_s: float = 120.0
       ) -> float:
    """The pipeline's AU against a loader of `workers` emulated cores; a short `budget_s`
    leaves the fewest timed steps (the quick runs on the H200 timed 3 of 16 workers)."""
    job = pipeline.Job("cpu", PRECISIONS["fp32"], BATCH, 8, steps=50)
    h = pipeline.measure(_ctx(budget_s), job,
                         lambda: sleep_loader(batch_s / BATCH, BATCH, workers),
                         # a 1 s first step (allocation, autotuning): the buffer fills
                         lambda: SleepTrainer(true_au * batch_s / workers, first_step_s=1.0))
    steady, _ = h.rounds.steady()
    return steady / (BATCH * len(h.compute_times) / sum(h.compute_times))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=3, help="trials per case (default 3)")
    a = ap.parse_args()
    warnings.filterwarnings("ignore", message="This DataLoader will create")
    rows: dict[str, list[float]] = {}
    for _ in range(a.trials):
        for w in (4, 16, 64):
            rows.setdefault(f"dataloader W={w}: measured / true rate", []).append(
                loader_ratio(w))
        for true in (0.5, 0.8):
            rows.setdefault(f"pipeline AU, true {true}: measured", []).append(au(true))
            rows.setdefault(f"pipeline AU, true {true}, a budget for no timed step: "
                            "measured", []).append(au(true, budget_s=0.5))
    for name, values in rows.items():
        print(f"{name}: {statistics.median(values):.3f} (range {min(values):.3f}-"
              f"{max(values):.3f}, {len(values)} trials)")


if __name__ == "__main__":
    main()
