"""Probe `dataloader`: images per second the host can decode and augment for ImageNet training.

For each loader (torchvision, DALI on the CPU, DALI on the GPU) and each worker count it times
the standard training pipeline (decode, RandomResizedCrop, flip, normalize; see _loaders.py)
over the run's ImageFolder dataset in steady state: after a warm-up in which every worker has
delivered and the batches prefetched during start-up have drained, it times whole rounds of
the workers (see _measure). Nothing consumes the batches: this is the input pipeline's own
ceiling.

The dataset's files are read once, untimed, before anything is measured so that they sit in the
page cache: this isolates the CPU's decode cost from storage (the storage probe measures cold
reads). A dataset larger than half the free memory is only partly cached, and a note says so.

Measurements, keyed by loader, workers, batch_size and image_size:
- throughput: images / total time of the timed rounds; samples are each round's images/s (a
  round is one batch from every worker; one batch for workers 0 and for DALI).
- throughput_per_core: the same divided by the cores decoding: torchvision's worker processes
  (the main process when workers=0) or DALI's threads, capped at the usable cores, because
  eight workers on two cores still only have two. dali_gpu divides by its CPU threads too,
  although nvJPEG does most of its decoding on the GPU.
- best_throughput: the best configuration's throughput (statistic max over every
  configuration's throughput; its loader and workers in the context).
For DALI, "workers" is its CPU thread count, so 0 and 1 are the same configuration: it runs once.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import psutil

from benchbench.core.names import counted
from benchbench.core.results import Measurement
from benchbench.probes._loaders import LoaderError, build_loader, unavailable
from benchbench.probes.api import ProbeContext, ProbeOutput, ProbeSkipped, resolved, total_over_time
from benchbench.probes.dataloader.config import DataloaderConfig
from benchbench.probes.dataset import IMAGE_EXTENSIONS, Samples, run_samples

_READ_CHUNK = 1 << 20


# NVIDIA's DALI examples give a GPU-decoding pipeline a handful of CPU threads: nvJPEG does the
# decoding, and past 8 threads a dali_gpu sweep measures nothing new.
DALI_GPU_MAX_THREADS = 8


def configurations(kinds: list[str], workers: tuple[int, ...]) -> list[tuple[str, int]]:
    """(loader, workers) pairs to measure: first each loader at its most workers (the likely
    best, which the pipeline probe goes on to use), then the rest of the sweep, fewest workers
    first, so that a budget that runs out costs the per-core curve, not a loader. DALI's
    thread count is max(1, workers): workers 0 and 1 would measure the same thing, so DALI
    runs it once."""
    counts = {}
    for k in kinds:
        ws = workers if k == "torchvision" else sorted({max(1, w) for w in workers})
        if k == "dali_gpu":
            ws = sorted({min(w, DALI_GPU_MAX_THREADS) for w in ws})
        counts[k] = list(ws)
    tops = [(k, counts[k][-1]) for k in kinds if counts[k]]
    return tops + [(k, w) for k in kinds for w in counts[k][:-1]]


def measured_before(previous: dict[str, Any]) -> set[tuple[str, int]]:
    """The (loader, workers) configurations an earlier round of this run measured."""
    return {(m["key"]["loader"], m["key"]["workers"])
            for m in (previous.get("dataloader") or {}).get("measurements", [])
            if m["metric"] == "throughput"}


def rotated(plan: list[tuple[str, int]], before: set[tuple[str, int]]
            ) -> list[tuple[str, int]]:
    """The plan with what no earlier round measured first: a later round measures what the
    budget left out of the earlier ones (a quick run's DALI after a slow torchvision) before
    it measures anything again."""
    return [c for c in plan if c not in before] + [c for c in plan if c in before]


def run(ctx: ProbeContext, cfg: DataloaderConfig) -> ProbeOutput:
    data_dir = ctx.inputs.data_dir
    if not data_dir:
        raise ProbeSkipped("there is no dataset: no --data-dir was given and none was generated")
    cores = int(ctx.facts["usable_cores"])
    loaders, counts = resolved(cfg.loaders, "loaders"), resolved(cfg.workers, "workers")
    device = "cuda:0" if ctx.device == "cuda" else "cpu"
    notes: list[str] = []
    kinds = []
    for kind in loaders:
        # Installed is enough to plan DALI: its import (~0.7 s on 2 cores, every round) waits
        # for its configuration, which a quick run's budget often ends before.
        reason = unavailable(kind, device, imported=False)
        if reason:
            notes.append(f"{kind} skipped, because {reason}")
        else:
            kinds.append(kind)
    workers = tuple(sorted(set(counts)))
    before = measured_before(ctx.inputs.previous)
    plan = rotated(configurations(kinds, workers), before)
    dataset = ctx.inputs.dataset or {}
    params: dict[str, Any] = {
        "loaders": kinds, "workers": list(workers), "batches": cfg.batches,
        "batch_size": resolved(cfg.batch_size, "batch_size"), "image_size": cfg.image_size,
        "usable_cores": cores,
        "dataset_mean_file_size": dataset.get("mean_file_size"),
        "dataset_source": dataset.get("source")}

    ctx.progress("reading the dataset into the page cache", 0, len(plan) + 1)
    params["page_cache_bytes"] = _warm_page_cache(ctx, data_dir, notes)
    samples = listed(data_dir, params, notes)

    left_out: dict[str, str] = {}
    measured, corrupt = sweep(ctx, cfg, plan, samples, device, cores, notes, left_out=left_out)
    got = {m.key["loader"] for m in measured} | {k for k, _ in before}
    not_measured = {k: why for k, why in left_out.items() if k not in got}

    params["corrupt_files"] = len({p for files in corrupt.values() for p in files})
    params["corrupt_by_loader"] = {k: len(v) for k, v in corrupt.items()}
    for kind, files in corrupt.items():
        path, reason = next(iter(files.items()))
        notes.append(f"{counted(len(files), 'image')} that "
                     f"{'fails' if len(files) == 1 else 'fail'} to decode skipped and counted "
                     f"by {kind}, e.g. {path} ({reason})")
    if not measured:
        raise ProbeSkipped("no loader could run: " + ("; ".join(notes) or "nothing was planned"))
    return ProbeOutput(measured + [_best(measured, cfg, not_measured)], params=params,
                       notes=notes)


def listed(data_dir: str, params: dict[str, Any], notes: list[str]) -> Samples:
    """The files every loader reads (one list, so that they count the same files), with what
    the dataset holds recorded in `params` and what was left out in `notes`. Raises
    DatasetVanished when the dataset went since the run scanned it."""
    samples = run_samples(data_dir)
    params.update(dataset_files=samples.in_dataset, files_read=len(samples.files),
                  file_kinds=samples.kinds, not_images=len(samples.rejected))
    if samples.rejected:
        path, why = next(iter(samples.rejected.items()))
        notes.append(f"{counted(len(samples.rejected), 'file')} with an image extension left "
                     f"out, because {'it is' if len(samples.rejected) == 1 else 'they are'} no "
                     f"image: e.g. {path} ({why})")
    if samples.in_dataset > len(samples.files) + len(samples.rejected):
        notes.append(f"the loaders read an even sample of {len(samples.files):,} of the "
                     f"{samples.in_dataset:,} images")
    return samples


def sweep(ctx: ProbeContext, cfg: DataloaderConfig, plan: list[tuple[str, int]],
          data: Samples | str, device: str, cores: int, notes: list[str],
          make_loader: Callable[..., Any] = build_loader,
          left_out: dict[str, str] | None = None
          ) -> tuple[list[Measurement], dict[str, dict[str, str]]]:
    """Each (loader, workers) configuration in turn, with an equal share of what is left of
    the budget; a loader that fails is dropped with a note. (measurements, corrupt files by
    loader: path -> reason). `left_out` gets each loader a configuration of which was not
    measured, and why."""
    left_out = {} if left_out is None else left_out
    measured: list[Measurement] = []
    corrupt: dict[str, dict[str, str]] = {}
    failed: set[str] = set()
    cost: dict[str, float] = {}  # the shortest configuration of each loader so far
    paced: dict[str, float] = {}  # ... from its first batch on: what every loader pays alike
    for i, (kind, w) in enumerate(plan):
        if kind in failed:
            continue
        ctx.progress(f"{kind} workers={w}", i + 1, len(plan) + 1)
        left = [f"{k} workers={x}" for k, x in plan[i:] if k not in failed]
        # A configuration costs at least its start-up, warm-up and timed rounds: as this
        # loader's cheapest one did so far. A loader not started yet costs at least what
        # followed the first batch in the cheapest of another: the warm-up and timed rounds,
        # which the config sets for every loader alike. Start-up is each loader's own.
        # Priced at another's whole cost, DALI (CPU) was measured in 1 of 6 quick runs beside
        # a CPU hog; priced so, and first in a later round that lacked it, in 6 of 6 (issue
        # 70: 2 and 7 of their 12 rounds).
        floor = cost.get(kind, min(paced.values(), default=0.0))
        if ctx.budget.remaining() <= floor:
            notes.append(f"{', '.join(left)} skipped, because the time budget ran out")
            for k, _ in plan[i:]:
                if k not in failed:
                    left_out.setdefault(k, "the time budget ran out before it")
            break
        share = ctx.budget.remaining() / len(left)
        key = {"loader": kind, "workers": w, "batch_size": resolved(cfg.batch_size, "batch_size"),
               "image_size": cfg.image_size}
        t0 = ctx.clock()
        try:
            got = _measure(ctx, cfg, key, data, device, share, cores,
                           corrupt.setdefault(kind, {}), make_loader)
            measured += got
            spent = ctx.clock() - t0
            cost[kind] = min(cost.get(kind, spent), spent)
            after = spent - got[0].context["first_batch_s"]
            paced[kind] = min(paced.get(kind, after), after)
        except LoaderError as exc:
            failed.add(kind)
            left_out[kind] = f"it failed at workers={w}"
            notes.append(f"{kind} skipped, because it failed at workers={w}: {exc}")
    ctx.progress("done", len(plan) + 1, len(plan) + 1)
    return measured, {k: v for k, v in corrupt.items() if v}


def _measure(ctx: ProbeContext, cfg: DataloaderConfig, key: dict[str, Any],
             data: Samples | str, device: str, share: float, cores: int,
             corrupt: dict[str, str], make_loader: Callable[..., Any] = build_loader
             ) -> list[Measurement]:
    """The loader's steady rate. Warm up until every worker has delivered and what start-up
    queued has drained (Loader.parallel + Loader.prefetch batches), then time whole rounds of
    the workers (a multiple of Loader.parallel batches): at least `batches` and three rounds,
    and at least `min_seconds`, stopping at the end of a round once `share` is spent. A
    count that is no multiple of the workers would time a burst: with 16 workers, 20 batches
    after a warm-up of 2 span 1.25 rounds in the time of one. Each sample is one round's rate.
    Adds the corrupt files the loader met to `corrupt` (path -> reason)."""
    wanted = resolved(cfg.batches, "batches")
    min_s = resolved(cfg.min_seconds, "min_seconds")
    start = ctx.clock()
    with make_loader(key["loader"], data, key["batch_size"], key["workers"], cfg.image_size,
                     device) as loader:
        group = max(1, loader.parallel)
        warmup = max(ctx.policy.warmup_steps, group + loader.prefetch, 1)
        rounds = max(3, -(-wanted // group))  # whole rounds, at least `batches` batches
        stream = loader.stream()
        next(stream)
        first_batch = ctx.clock() - start  # the loader's start-up and first batch
        warmed = 1
        while warmed < warmup or ctx.clock() - start < ctx.policy.warmup_s:
            next(stream)
            warmed += 1
        ctx.meter.sync(loader.output_device)
        stopped_by = "batches"
        times: list[float] = []  # seconds per round of `group` batches
        sizes: list[int] = []  # images per round
        t_round, n_round, began = ctx.clock(), 0, ctx.clock()
        batches = 0
        for images, _ in stream:
            batches += 1
            n_round += len(images)
            if batches % group:
                continue
            ctx.meter.sync(loader.output_device)
            now = ctx.clock()
            times.append(now - t_round)
            sizes.append(n_round)
            t_round, n_round = now, 0
            if len(times) >= rounds and now - began >= min_s:
                break
            if now - start > share and batches >= 2:
                stopped_by = "budget"
                break
        threads, start = loader.threads, loader.start
        corrupt.update(loader.corrupt_files)
        seen_corrupt = loader.corrupt
    if not times or sum(times) <= 0:
        raise LoaderError("no batch was timed")
    used = min(threads, cores)
    rates = [n / t for n, t in zip(sizes, times, strict=True) if t > 0]
    value = sum(sizes) / sum(times)
    context = {"batches": batches, "rounds": len(times), "batches_per_round": group,
               "warmup_batches": warmed, "stopped_by": stopped_by, "images": sum(sizes),
               "seconds": round(sum(times), 4), "cores_used": used, "threads": threads,
               "worker_start": start, "first_batch_s": round(first_batch, 4),
               "corrupt_files": seen_corrupt}
    return [
        total_over_time("throughput", key, value, rates, "samples/s", context),
        total_over_time("throughput_per_core", key, value / used, [r / used for r in rates],
                        "samples/s", context),
    ]


def _best(measured: list[Measurement], cfg: DataloaderConfig,
          not_measured: dict[str, str] | None = None) -> Measurement:
    """The best configuration's rate; `not_measured` (loader -> why) makes it a floor: a
    loader that did not run might have been faster."""
    rates = [m for m in measured if m.metric == "throughput"]
    best = max(rates, key=lambda m: m.value)
    return Measurement(
        metric="best_throughput",
        key={"batch_size": resolved(cfg.batch_size, "batch_size"), "image_size": cfg.image_size},
        value=best.value,
        unit="samples/s",
        statistic="max",
        samples=[m.value for m in rates],
        higher_is_better=True,
        context={
            "loader": best.key["loader"],
            "workers": best.key["workers"],
            "configurations": [f"{m.key['loader']}/{m.key['workers']}" for m in rates],
            **({"not_measured": not_measured} if not_measured else {}),
        },
    )


def _warm_page_cache(ctx: ProbeContext, data_dir: str, notes: list[str]) -> int:
    """Read the dataset's files once so that the timed passes decode from memory.

    Stops at half the available memory (more would evict the files read first) or a quarter of
    the time budget, with a note: the loaders may then read some files from storage.
    """
    limit = psutil.virtual_memory().available // 2
    deadline = ctx.clock() + ctx.budget.remaining() / 4
    done = 0
    for dirpath, _, files in os.walk(data_dir, followlinks=True):
        for name in sorted(f for f in files if f.lower().endswith(IMAGE_EXTENSIONS)):
            if done >= limit or ctx.clock() > deadline:
                why = "half the free memory" if done >= limit else "a quarter of its time budget"
                notes.append(f"page cache warmed with {done} bytes of the dataset only (stopped "
                             f"at {why}); some timed reads may come from storage")
                return done
            try:
                with open(os.path.join(dirpath, name), "rb", buffering=0) as fh:
                    while chunk := fh.read(_READ_CHUNK):
                        done += len(chunk)
            except OSError:
                continue  # unreadable: the loaders will report it in their own way
    return done
