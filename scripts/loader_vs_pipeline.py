"""The loader alone against the loader inside the pipeline, on the run's own dataset: on a third
H200 one whole round of the pipeline trained at 4,427 img/s (AU 0.94) where the dataloader probe
alone read 3,318 img/s with the same 16 torchvision workers, and a fourth read 3,081 at the
pipeline's batch of 256. This script measures both, interleaved, each in a fresh process as the
run's probes are, so that the next GPU run can tell which figure is the loader's.

    python scripts/loader_vs_pipeline.py [--device cpu|cuda] [--workers N] [--batch B]
                                         [--trials 2] [--rounds 3] [--budget 120]

Per trial, in alternating order: "alone" is the dataloader probe's own measurement (its warm-up
and whole rounds of the workers, pinned memory on a GPU); "pipeline" is the pipeline probe's
real half, ResNet50 at amp_bf16 on a GPU (fp32 on a CPU, or `--sleep-step` seconds a step),
over `--rounds` timed rounds. It prints, for each: img/s, how the workers started (fork or
forkserver), and for the pipeline each round's img/s, its data waits and the loader's rate
implied by its first warm wait (the workers' batch time after the drain). The synthetic
dataset is the run's (generated into the cache when missing). `--budget` bounds the whole
script; a measurement that would not fit is left out and said so.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

SELF = Path(__file__).resolve()


def _one(a: argparse.Namespace) -> dict[str, Any]:
    """One measurement, in this (fresh) process."""
    from benchbench.core.sampling import Budget, RepeatPolicy
    from benchbench.machine.environment import usable_cores
    from benchbench.probes._config import DatasetConfig
    from benchbench.probes._loaders import build_loader
    from benchbench.probes.api import ProbeContext
    from benchbench.probes.dataset import ensure_synthetic, loader_samples

    warnings.filterwarnings("ignore", message="This DataLoader will create")
    gpu = a.device == "cuda"
    dev = "cuda:0" if gpu else "cpu"
    samples = loader_samples(ensure_synthetic(DatasetConfig(), True)["path"])
    ctx = ProbeContext(device=a.device, policy=RepeatPolicy(min_repeats=1, max_repeats=1,
                                                            warmup_s=0.0, warmup_steps=1),
                       budget=Budget(a.share), facts={"usable_cores": usable_cores()})
    if a.one == "alone":
        from benchbench.engine.catalog import default_registry
        from benchbench.probes.dataloader import run as dataloader

        cfg = default_registry().get("dataloader").resolve(
            a.device, False, {"usable_cores": usable_cores()},
            {"loaders": ("torchvision",), "workers": (a.workers,), "batch_size": a.batch,
             "image_size": a.image_size, "batches": a.rounds * a.workers})
        measured, _ = dataloader.sweep(ctx, cfg, [("torchvision", a.workers)], samples, dev,
                                       usable_cores(), [])
        m = next(m for m in measured if m.metric == "throughput")
        return {"what": "alone", "img_s": m.value, "rounds": m.samples,
                "start": m.context.get("worker_start")}

    from benchbench.probes.emulated import SleepTrainer
    from benchbench.workloads._training import PRECISIONS
    from benchbench.workloads.models.resnet import ResNetTrainer
    from benchbench.workloads.pipeline import run as pipeline

    precision = PRECISIONS["amp_bf16" if gpu else "fp32"]
    job = pipeline.Job(dev, precision, a.batch, a.image_size, a.rounds * a.workers)

    def trainer() -> Any:
        if a.sleep_step:
            # A first step as long as a GPU's allocation and autotuning make it (4 s on an
            # H200, here 1 s): the workers fill their buffer meanwhile, as on the GPU box.
            return SleepTrainer(a.sleep_step, first_step_s=max(1.0, 4 * a.sleep_step))
        return ResNetTrainer(dev, gpu, False)

    h = pipeline.measure(ctx, job, lambda: build_loader("torchvision", samples, a.batch,
                                                        a.workers, a.image_size, dev), trainer)
    w = a.workers
    per_round = [n / t for n, t in zip(h.rounds.images, h.rounds.walls, strict=True)]
    warm = h.context.get("warmup_waits_s") or []
    # The first warm wait is the workers' batch time only where the first step outlasted the
    # buffer's filling (two batches each, and a margin): else the workers were still busy.
    first_s = float(h.context.get("first_step_s") or 0.0)
    readable = bool(warm) and warm[0] > 0 and first_s > 3 * warm[0]
    compute = len(h.compute_times) * a.batch / sum(h.compute_times)
    total, by = h.rounds.steady()
    return {"what": "pipeline", "img_s": total, "rounds": per_round, "compute_img_s": compute,
            "au": total / compute, "steady_by": by, "made_img_s": h.rounds.made,
            "waits_ms": [round(x * 1e3, 1) for ws in h.rounds.waits for x in ws],
            "first_warm_wait_s": warm[0] if warm else None,
            "implied_loader_img_s": w * a.batch / warm[0] if readable else None,
            "first_step_s": h.context.get("first_step_s"), "start": h.context.get("worker_start")}


def measure_one(payload: dict[str, Any], progress: Any) -> dict[str, Any]:
    """The isolated child's entry point: one measurement (engine.isolation calls it)."""
    return _one(argparse.Namespace(**payload))


def _isolated(isolator: Any, a: argparse.Namespace, what: str, share: float
              ) -> dict[str, Any] | None:
    """One measurement in a fresh process from the run's own forkserver, as a probe runs: one
    thread when it starts its loader, so its workers fork as the probes' do."""
    payload = {**vars(a), "one": what, "share": share}
    out = isolator.call(f"{SELF.stem}:measure_one", payload, timeout_s=3 * share + 60)
    if not out.ok:
        print(f"  {what}: failed: {out.error}", flush=True)
        return None
    return dict(out.value)


def _show(r: dict[str, Any]) -> str:
    if r["what"] == "alone":
        lo, hi = min(r["rounds"]), max(r["rounds"])
        return (f"alone {r['img_s']:,.0f} img/s ({len(r['rounds'])} rounds, {lo:,.0f}-{hi:,.0f}; "
                f"workers by {r['start']})")
    rounds = ", ".join(f"{x:,.0f}" for x in r["rounds"])
    implied = r["implied_loader_img_s"]
    waits = r["waits_ms"]
    return (f"pipeline {r['img_s']:,.0f} img/s over {len(waits)} steps (rounds {rounds}), "
            f"compute {r['compute_img_s']:,.0f}, AU {r['au']:.2f}; data waits median "
            f"{statistics.median(waits):.1f} ms, max {max(waits):.1f} ms; first warm wait "
            f"{r['first_warm_wait_s'] or 0:.3f} s, so the loader inside "
            + (f"{implied:,.0f} img/s" if implied else "not read (the first step was too "
               "short for the workers to fill their buffer)")
            + f"; first step {r['first_step_s'] or 0:.1f} s; workers by {r['start']}")


def main() -> None:
    from benchbench.machine.environment import usable_cores

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                    help="cpu (default) or cuda, the first GPU")
    ap.add_argument("--workers", type=int, default=None,
                    help="torchvision workers (default: one per usable core, as the run)")
    ap.add_argument("--batch", type=int, default=None,
                    help="batch size (default 256 on a GPU, the pipeline's; 16 on a CPU)")
    ap.add_argument("--image-size", type=int, default=None,
                    help="image side (default 224 on a GPU, 64 on a CPU)")
    ap.add_argument("--trials", type=int, default=2, help="interleaved pairs (default 2)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="timed rounds of the workers per measurement (default 3)")
    ap.add_argument("--budget", type=float, default=120.0,
                    help="seconds for the whole script (default 120)")
    ap.add_argument("--sleep-step", type=float, default=0.0,
                    help="a step of this many seconds instead of ResNet50 (default: ResNet50)")
    a = ap.parse_args()
    gpu = a.device == "cuda"
    a.workers = a.workers or usable_cores()
    a.batch = a.batch or (256 if gpu else 16)
    a.image_size = a.image_size or (224 if gpu else 64)
    start = time.monotonic()
    print(f"{a.workers} torchvision workers, batch {a.batch}, {a.image_size} px, on {a.device}; "
          f"{a.trials} trials, {a.rounds} timed rounds each", flush=True)
    # Each trial's share, less ~10 s for two processes' start and set-up, a third to the loader
    # alone and two to the pipeline, whose real half (half its share) holds a first step of
    # ~4 s on an H200, a warm round and the timed rounds.
    alone_s = max(4.0, (a.budget / a.trials - 10) / 3)
    shares = {"alone": alone_s, "pipeline": 2 * alone_s}
    rows: dict[str, list[dict[str, Any]]] = {"alone": [], "pipeline": []}
    sys.path.insert(0, str(SELF.parent))  # the children import this script by its name
    from benchbench.engine.isolation import Isolator

    isolator = Isolator()
    for trial in range(a.trials):
        for what in (("alone", "pipeline") if trial % 2 == 0 else ("pipeline", "alone")):
            share = shares[what]
            if time.monotonic() - start + share + 5 > a.budget:
                print(f"  {what} of trial {trial + 1} left out, because the {a.budget:g} s "
                      "budget would not fit it", flush=True)
                continue
            r = _isolated(isolator, a, what, share)
            if r is not None:
                rows[what].append(r)
                print(f"trial {trial + 1}: {_show(r)}", flush=True)
    alone = [r["img_s"] for r in rows["alone"]]
    inside = [r["implied_loader_img_s"] for r in rows["pipeline"] if r["implied_loader_img_s"]]
    total = [r["img_s"] for r in rows["pipeline"]]
    if not (alone and total):
        sys.exit("loader_vs_pipeline: nothing to compare: the loader alone measured "
                 f"{len(alone)} time(s) and the pipeline {len(total)} (see above)")
    print(f"loader alone {statistics.median(alone):,.0f} img/s; pipeline "
          f"{statistics.median(total):,.0f} img/s"
          + (f"; the loader inside the pipeline, by its first warm wait, "
             f"{statistics.median(inside):,.0f} img/s" if inside else "")
          + f" (medians of {len(alone)} and {len(total)}; {time.monotonic() - start:.0f} s)")


if __name__ == "__main__":
    main()
