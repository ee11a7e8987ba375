"""The ground truth: ResNet50 trained on the run's own dataset through the real torchvision
pipeline for a steady minute, the rate a user's trainer would see, which the GPU check holds
the run's verdict against (scripts/gpu_headline.py --ground-truth).

    python scripts/ground_truth.py RUN_DIR [--device cuda] [--seconds 60] [--window 5]
                                   [--budget S] [--out ground-truth.json]

The loop is the one a user writes, as NVIDIA's DeepLearningExamples train ResNet50:
torchvision's model in channels_last, SGD with momentum, autocast at --precision (amp_bf16),
cuDNN's autotuner on, and each batch copied from pinned memory to the GPU on a side stream
while the step before it computes. The batches come from the probes' own loader
(probes/_loaders.build_loader) over the run's dataset, at batch 256 and 224 px, with the
worker count the run's dataloader probe found best.

Warm-up: the first step (cuDNN's autotune), then until every worker has delivered and the
batches they prefetched meanwhile are drained, and at least --warmup-s. Then timed windows of
--window seconds, each closed by a device sync, over --seconds (shortened to what --budget
leaves, and skipped, with the reason, under --min-seconds): images/s over all of them and in
each window.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

FORMAT = 1  # the JSON this writes: gpu_headline.py reads it
# What the workers' shut-down and writing the JSON take, kept free at the end of --budget.
CLOSE_S = 5.0
T0 = time.monotonic()


def best_workers(run: Any) -> tuple[int | None, str]:
    """The worker count of the dataloader probe's best torchvision configuration (the loader
    the box has), and where it came from."""
    pr = run.probe("dataloader")
    rates = [m for m in (pr.measurements if pr else []) if m.metric == "throughput"
             and m.key.get("loader") == "torchvision"]
    best = max(rates, key=lambda m: m.value, default=None)
    if best is None:
        return None, "the run's dataloader probe measured no torchvision configuration"
    return int(best.key["workers"]), (f"the dataloader probe's best torchvision configuration "
                                      f"({best.value:,.0f} img/s at batch "
                                      f"{best.key.get('batch_size')})")


def dataset_path(run: Any) -> tuple[str | None, str]:
    """The folder the run's probes read, and what it is."""
    given = run.config.get("data_dir")
    if given:
        return str(given), "the run's --data-dir"
    ds = run.extra.get("dataset") or {}
    if ds.get("path") and Path(ds["path"]).is_dir():
        return str(ds["path"]), f"the run's synthetic dataset ({ds.get('num_images')} images)"
    return None, "the run recorded no dataset that is still on disk"


def on_device(batches: Iterable[Any], dev: str, channels_last: bool) -> Iterator[Any]:
    """Each (images, labels) batch on the device, in the model's memory format. On a GPU the
    next batch's copy runs on a side stream while the current one trains, as
    DeepLearningExamples' data prefetcher does."""
    import torch

    fmt = torch.channels_last if channels_last else torch.contiguous_format
    if not dev.startswith("cuda"):
        for x, y in batches:
            yield x.contiguous(memory_format=fmt), y
        return
    side = torch.cuda.Stream(dev)

    def copy(x: Any, y: Any) -> tuple[Any, Any]:
        with torch.cuda.stream(side):
            return (x.to(dev, non_blocking=True).contiguous(memory_format=fmt),
                    y.to(dev, non_blocking=True))

    it = iter(batches)
    ahead = copy(*next(it))
    for x, y in it:
        main = torch.cuda.current_stream(dev)
        main.wait_stream(side)
        ready = ahead
        for t in ready:  # the caching allocator must not reuse them until main is done
            t.record_stream(main)
        ahead = copy(x, y)
        yield ready


def steady_seconds(budget: float, elapsed: float, planned: float, least: float
                   ) -> tuple[float, str | None]:
    """The steady window that the budget leaves after `elapsed` seconds (at most `planned`),
    or why there is none: less than `least` is left once CLOSE_S is kept for the end."""
    left = budget - elapsed - CLOSE_S
    if left < least:
        return 0.0, (f"skipped, because after the warm-up {max(left, 0):.0f} s of its "
                     f"{budget:.0f} s budget were left, under the {least:g} s window it needs")
    return min(planned, left), None


def timed_windows(step: Callable[[Any], int], batches: Iterator[Any], seconds: float,
                  window: float, sync: Callable[[], None],
                  clock: Callable[[], float] = time.perf_counter) -> list[tuple[int, float]]:
    """(images, seconds) per window of about `window` seconds, each closed by a sync, until
    `seconds` have passed; `step` trains on one batch and returns its images."""
    out: list[tuple[int, float]] = []
    sync()
    start = begun = clock()
    images = 0
    for batch in batches:
        images += step(batch)
        if clock() - begun < window:
            continue
        sync()
        now = clock()
        out.append((images, now - begun))
        images, begun = 0, now
        if now - start >= seconds:
            break
    return out


def summary(windows: list[tuple[int, float]]) -> dict[str, Any]:
    images = sum(n for n, _ in windows)
    seconds = sum(s for _, s in windows)
    rates = [n / s for n, s in windows]
    return {"images": images, "seconds": seconds, "rate": images / seconds, "unit": "samples/s",
            "windows": [{"images": n, "seconds": round(s, 4)} for n, s in windows],
            "window_rates": [round(r, 1) for r in rates],
            "spread": {"min": min(rates), "median": statistics.median(rates), "max": max(rates)}}


def measure(a: argparse.Namespace, run: Any, out: dict[str, Any]) -> dict[str, Any]:
    import torch
    import torchvision
    from torch import nn

    from benchbench.machine.environment import usable_cores
    from benchbench.probes._loaders import build_loader

    gpu = a.device == "cuda"
    dev = "cuda:0" if gpu else "cpu"
    workers, workers_from = best_workers(run)
    if a.workers is not None:
        workers, workers_from = a.workers, "--workers"
    elif workers is None:
        workers, workers_from = usable_cores(), f"one per usable core, because {workers_from}"
    data, data_from = dataset_path(run)
    if data is None:
        from benchbench.probes._config import DatasetConfig
        from benchbench.probes.dataset import ensure_synthetic

        data = ensure_synthetic(DatasetConfig(), True)["path"]
        data_from = f"the quick run's synthetic dataset, because {data_from}"
    channels_last = gpu
    amp = a.precision == "amp_bf16"
    out.update(device=dev, gpu=torch.cuda.get_device_name(dev) if gpu else None,
               torch=torch.__version__, precision=a.precision, batch=a.batch,
               image_size=a.image_size, channels_last=channels_last, loader="torchvision",
               workers=workers, workers_from=workers_from, dataset=data, dataset_from=data_from)
    print(f"ground truth: ResNet50 {a.precision} on {dev} ({out['gpu'] or 'CPU'}), batch "
          f"{a.batch}, {a.image_size} px, torchvision with {workers} workers ({workers_from}), "
          f"{data} ({data_from})", flush=True)
    if gpu:
        torch.backends.cudnn.benchmark = True  # fixed shapes: a user's trainer autotunes too
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    model = torchvision.models.resnet50(weights=None).to(dev, memory_format=fmt)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    loss_fn = nn.CrossEntropyLoss()

    def step(batch: Any) -> int:
        x, y = batch
        with torch.autocast("cuda" if gpu else "cpu", dtype=torch.bfloat16, enabled=amp):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return int(x.shape[0])

    def sync() -> None:
        if gpu:
            torch.cuda.synchronize(dev)

    warnings.filterwarnings("ignore", message="This DataLoader will create")
    with build_loader("torchvision", data, a.batch, workers, a.image_size, dev) as loader:
        batches = on_device(loader.stream(), dev, channels_last)
        t = time.perf_counter()
        step(next(batches))
        sync()
        first = time.perf_counter() - t
        # Until every worker has delivered and whatever they queued during the first step is
        # trained on: past it, each batch waits for a worker as it would all epoch long.
        need, warm = loader.parallel + loader.prefetch, 0
        t = time.perf_counter()
        while warm < need or time.perf_counter() - t < a.warmup_s:
            step(next(batches))
            warm += 1
            if time.monotonic() - T0 > a.budget - CLOSE_S - a.min_seconds:
                break
        sync()
        out.update(first_step_s=round(first, 3), warmup_batches=warm,
                   warmup_s=round(time.perf_counter() - t, 3), start=loader.start)
        seconds, why = steady_seconds(a.budget, time.monotonic() - T0, a.seconds,
                                      a.min_seconds)
        if why:
            return {**out, "status": "skipped", "reason": why}
        if seconds < a.seconds:
            print(f"ground truth: a {seconds:.0f} s window, not {a.seconds:g} s, because the "
                  f"{a.budget:.0f} s budget leaves no more", flush=True)
        windows = timed_windows(step, batches, seconds, a.window, sync)
    return {**out, "status": "ok", "planned_s": a.seconds, **summary(windows)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", help="the run folder or its results.json (dataset, workers)")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                    help="cuda (default), the first GPU, or cpu for a dry run")
    ap.add_argument("--precision", default="amp_bf16", choices=["amp_bf16", "fp32"],
                    help="amp_bf16 (default) or fp32 (the CPU dry run's)")
    ap.add_argument("--batch", type=int, default=256, help="images per step (default 256)")
    ap.add_argument("--image-size", type=int, default=224, help="default 224")
    ap.add_argument("--workers", type=int, default=None,
                    help="loader workers (default: the dataloader probe's best)")
    ap.add_argument("--seconds", type=float, default=60.0, help="steady window (default 60)")
    ap.add_argument("--window", type=float, default=5.0, help="one timed window (default 5)")
    ap.add_argument("--min-seconds", type=float, default=20.0,
                    help="the shortest steady window worth running (default 20)")
    ap.add_argument("--warmup-s", type=float, default=5.0,
                    help="the warm-up lasts at least this long (default 5)")
    ap.add_argument("--budget", type=float, default=120.0,
                    help="seconds for the whole script, start-up included (default 120)")
    ap.add_argument("--out", default="ground-truth.json", help="the JSON written")
    a = ap.parse_args(argv)
    from benchbench.core import results

    try:
        run = results.load(a.run)
    except results.ResultsError as exc:
        print(f"ground_truth: {exc}", file=sys.stderr)
        return 2
    out: dict[str, Any] = {"ground_truth": FORMAT, "run": str(a.run)}
    try:
        out = measure(a, run, out)
    except Exception as exc:  # a failure is written down: the headline says why it is missing
        out.update(status="failed", reason=f"{type(exc).__name__}: {exc}")
        Path(a.out).write_text(json.dumps(out, indent=1) + "\n")
        raise
    Path(a.out).write_text(json.dumps(out, indent=1) + "\n")
    if out["status"] != "ok":
        print(f"ground truth: {out['reason']}")
        return 0
    lo, hi = out["spread"]["min"], out["spread"]["max"]
    print(f"ground truth: {out['rate']:,.0f} img/s over {out['seconds']:.1f} s of steady "
          f"training ({len(out['windows'])} windows of ~{a.window:g} s: {lo:,.0f}-{hi:,.0f} "
          f"img/s); first step {out['first_step_s']:.1f} s, warm-up {out['warmup_batches']} "
          f"batches in {out['warmup_s']:.1f} s; written to {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
