"""Each probe's planning on the simulated device: its own sweep or training loop, with every
call and step charged to the fake clock at the profile's speed. See simulate.py."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from benchbench.core.results import Measurement
from benchbench.engine.sim_device import (
    GPT_TOKENS,
    RESNET_BATCH,
    DeviceProfile,
    FakeClock,
    SimCopy,
    _charge,
    conv_precision,
    fp8_speedup,
    queue_of,
)
from benchbench.engine.sim_models import _inference, _memory_fit
from benchbench.probes.api import ProbeContext, ProbeOutput, ProbeSkipped, throughput


def scaled_mm_rule(a: Any, b: Any) -> None:
    """CUDA's rule for scaled_mm's operands, raised in torch's words as torch raises it on a
    GPU: fp8 both, `a` row-major and `b` column-major (cuBLASLt runs fp8 GEMMs in the "TN"
    layout only: "To use FP8 kernels ... A must be transposed and B non-transposed", cuBLAS
    docs, cublasLtMatmul), every dimension a multiple of 16 (torch/_meta_registrations.py
    _check_scaled_mm_sizes; aten/src/ATen/native/cuda/Blas.cpp). torch's newer scaled_mm has
    no meta check of these, so the simulator keeps them itself."""
    import torch

    fp8 = (torch.float8_e4m3fn, torch.float8_e5m2)
    if a.dtype not in fp8 or b.dtype not in fp8:
        raise RuntimeError("Expected both inputs to be fp8 types but got self.dtype="
                           f"{a.dtype} and mat2.dtype={b.dtype}")
    if not (a.stride(0) > a.stride(1) and a.stride(1) == 1):
        raise RuntimeError(f"self must be row_major, got stride {a.stride()}")
    if not (b.stride(0) == 1 and b.stride(1) > 1):
        raise RuntimeError(f"mat2 must be col_major, got stride {b.stride()}")
    if a.size(1) % 16:
        raise RuntimeError("Expected self.size(1) to be divisible by 16, but got "
                           f"self.size(1)={a.size(1)}")
    if b.size(0) % 16 or b.size(1) % 16:
        raise RuntimeError("Expected both dimensions of mat2 to be divisible by 16 but got "
                           f"{b.shape}")


def _matmul(p: DeviceProfile, ctx: ProbeContext, cfg: Any, clock: FakeClock) -> ProbeOutput:
    import torch

    from benchbench.probes.matmul import run as matmul

    notes: list[str] = []
    devices = [f"cuda:{i}" for i in range(p.gpus)]
    dtypes = {d: matmul.usable_dtypes(d, cfg.dtypes, notes, ctx.facts) for d in devices}
    started: set[str] = set()

    def measure(dev: str, dt: str, n: int, left: int, warm: bool) -> Measurement:
        if dt == "fp8":
            # The probe's own operands and call on meta tensors (no memory, no time): CUDA's
            # rule for their layout, and this torch's spelling of the call.
            a, b = matmul.fp8_operands(*(torch.empty(n, n, device="meta", dtype=torch.bfloat16)
                                         for _ in range(2)))
            scaled_mm_rule(a, b)
            matmul.fp8_mm(a, b, torch.ones((), device="meta", dtype=torch.float32))()
        # Small matrices leave tensor cores idle: about n / (n + 1024) of the sustained rate.
        rate = p.matmul_flops[dt] * n / (n + 1024)
        first = 0.0 if dev in started else p.first_call_s
        started.add(dev)
        timed = ctx.time_op(lambda: None, dev, left, cfg.min_sample_s,
                            timer=_charge(queue_of(ctx), 2 * n**3 / rate, first), warm=warm)
        context = {"gpu_name": p.gpu_name, **(matmul.fp8_context() if dt == "fp8" else {})}
        return throughput("flops", {"device": dev, "dtype": dt, "size": n}, timed, 2.0 * n**3,
                          "FLOP/s", context)

    def sustain(dev: str, dt: str, n: int, est_call_s: float) -> Measurement:
        rate = p.matmul_flops[dt] * n / (n + 1024)
        return matmul.sustained(ctx, _charge(queue_of(ctx), 2 * n**3 / rate), lambda: None,
                                dev, dt, n, est_call_s, cfg.sustained_s,
                                {"gpu_name": p.gpu_name})

    out = matmul.sweep(ctx, devices, dtypes, sorted(cfg.sizes), measure, notes, sustain,
                       cfg.sustained_s)
    return ProbeOutput(out, notes=notes)


def _memory_bandwidth(p: DeviceProfile, ctx: ProbeContext, cfg: Any, clock: FakeClock
                      ) -> ProbeOutput:
    from benchbench.probes.memory_bandwidth import run as mb

    items, notes = mb.plan(ctx, cfg)

    def measure(item: mb.Item, left: int) -> Measurement:
        host = item.device == "cpu"
        rate = p.host_memory_bandwidth if host else p.memory_bandwidth
        clock.advance(item.size / (1e9 if host else 5e10))  # random fill, pre-touch
        timed = ctx.time_op(lambda: None, item.device, left, cfg.min_sample_s,
                            timer=_charge(queue_of(ctx), 2 * item.size / rate))
        return throughput("copy_bandwidth", {"memory": "host" if host else item.device,
                                             "size_bytes": item.size}, timed, 2.0 * item.size,
                          "B/s")

    return ProbeOutput(mb.sweep(ctx, items, measure, notes), notes=notes)


def _host_device_copy(p: DeviceProfile, ctx: ProbeContext, cfg: Any, clock: FakeClock
                      ) -> ProbeOutput:
    from benchbench.probes.host_device_copy import run as hdc

    notes: list[str] = []
    top = max(cfg.sizes)
    ready: set[str] = set()

    def measure(item: hdc.Item, left: int, warm: bool) -> Measurement:
        devs = [f"cuda:{i}" for i in range(p.gpus)] if item.device == "all" else [item.device]
        for d in devs:
            if d not in ready:  # the pinned buffer (random fill and pinning), the link burst
                ready.add(d)
                clock.advance(top / 2e9 + 16 * top / p.h2d_pinned + hdc.LINK_POLL_S)
        if item.memory == "pageable" and f"{item.device}/pageable" not in ready:
            ready.add(f"{item.device}/pageable")
            clock.advance(top / 2e9)
        if item.device == "all":
            per_call = item.size * item.gpus / p.all_gpus_h2d
        else:
            rate = p.h2d_pinned if item.memory == "pinned" else p.h2d_pageable
            per_call = 10e-6 + item.size / rate
        timed = ctx.time_op(lambda: None, devs[0], left, cfg.min_sample_s,
                            timer=_charge(queue_of(ctx), per_call), warm=warm)
        metric = "aggregate_bandwidth" if item.device == "all" else "copy_bandwidth"
        key = {"device": item.device, "direction": item.direction, "memory": item.memory,
               "size_bytes": item.size}
        return throughput(metric, key, timed, float(item.size * item.gpus), "B/s")

    measured = hdc.sweep(ctx, hdc.plan(list(range(p.gpus)), cfg), measure, notes)
    return ProbeOutput(hdc.with_peaks(measured, {}), notes=notes)


def _steps(ctx: ProbeContext, p: DeviceProfile, step_s: float, first_s: float
           ) -> Callable[[], None]:
    """A built model's training step: each call queues one step of device work (its first
    call first_s more), launched in the profile's host time per step."""
    queue = queue_of(ctx)
    queue.clock.advance(p.model_build_s)
    pending = [first_s]

    def step() -> None:
        queue.launch(step_s + (pending.pop() if pending else 0.0), p.step_kernels,
                     p.step_host_s)

    return step


def resnet50_first_step(p: DeviceProfile, ctx: ProbeContext, runs_in: str) -> float:
    """A ResNet50 precision's first step: allocation and cuDNN's kernel choice for its
    precision, plus fp32's exhaustive search where cuDNN's autotuner is on for it."""
    first = p.resnet50_first_step_s.get(runs_in, p.first_step_s)
    if runs_in == "fp32" and ctx.meter.cudnn_benchmark("cuda:0"):
        first += p.fp32_autotune_s
    return first


def _resnet50(p: DeviceProfile, ctx: ProbeContext, cfg: Any, clock: FakeClock) -> ProbeOutput:
    from benchbench.workloads import _training
    from benchbench.workloads.resnet50 import run as resnet50

    job = resnet50.job_for(cfg, "cuda:0", {"gpu_name": p.gpu_name})

    loaded: list[bool] = []  # the process loaded cuDNN with its first precision

    def build(batch: int, precision: _training.Precision) -> Callable[[], None]:
        resnet50.cudnn_mode(ctx, "cuda:0", precision)
        scale = batch / RESNET_BATCH * (cfg.image_size / 224) ** 2
        runs_in = conv_precision(ctx.meter, precision.name)
        first = resnet50_first_step(p, ctx, runs_in) + (0.0 if loaded else p.cudnn_load_s)
        loaded.append(True)
        return _steps(ctx, p, p.resnet50_step_s[runs_in] * scale, first)

    out, notes = _training.run_training(ctx, job, build)
    return ProbeOutput(out, notes=notes)


def _transformer(p: DeviceProfile, ctx: ProbeContext, cfg: Any, clock: FakeClock
                 ) -> ProbeOutput:
    from benchbench.workloads import _training
    from benchbench.workloads.transformer import run as transformer

    dims = cfg.shape()
    # The shape and compile, as the probe's context records them: the guide reads fp8 by them.
    job = transformer.job_for(cfg, "cuda:0", {
        "gpu_name": p.gpu_name, "compile": cfg.compile,
        **{k: dims[k] for k in ("n_layers", "d_model", "n_heads", "vocab_size")}})
    # Steps scale with the tokens a step trains and the parameters: GPT-2 124M is the unit.
    params = {"small": 0.1, "gpt2-124m": 1.0, "gpt2-350m": 2.9, "1.3b": 10.5}
    size = params.get(cfg.preset or "small", 1.0)
    d_model = dims["d_model"]

    def build(batch: int, precision: _training.Precision) -> Callable[[], None]:
        scale = batch * cfg.seq_len / GPT_TOKENS * size
        step_s = p.gpt_step_s["amp_bf16"] / fp8_speedup(d_model, cfg.compile) if precision.fp8 \
            else p.gpt_step_s[precision.name]
        return _steps(ctx, p, step_s * scale, p.gpt_first_step_s)

    out, notes = _training.run_training(ctx, job, build)
    return ProbeOutput([transformer.flops_per_token(cfg)[1], *out] if out else [], notes=notes)


class _SimLoader:
    """A loader that yields empty batches at the profiled decode rate. Its workers decode in
    the background: batch k is ready one interval after batch k-1, but no earlier than one
    interval after a slot of its buffer (parallel + prefetch batches) was freed; taking a
    batch waits until it is ready. `made` stamps each batch when it was ready, as the real
    loader's workers stamp theirs, on the fake clock."""

    def __init__(self, clock: FakeClock, batch: int, rate: float, start_s: float,
                 parallel: int = 1, prefetch: int = 0) -> None:
        self.clock, self.batch, self.rate = clock, batch, rate
        self.output_device, self.threads, self.corrupt = "cpu", 1, 0
        self.parallel, self.prefetch, self.start = parallel, prefetch, "simulated"
        self.corrupt_files: dict[str, str] = {}
        self.made: list[tuple[float, int, int]] = []
        clock.advance(start_s)

    def made_clock(self) -> float:
        return self.clock()

    def stream(self) -> Iterator[tuple[list[int], list[int]]]:
        interval, room = self.batch / self.rate, self.parallel + self.prefetch
        taken: deque[float] = deque(maxlen=room)
        ready = self.clock()
        while True:
            freed = taken[0] if len(taken) == room else ready
            ready = max(ready, freed) + interval
            self.clock.now = max(self.clock.now, ready)
            taken.append(self.clock())
            self.made.append((ready, self.batch, len(self.made) % self.parallel))
            yield [0] * self.batch, [0] * self.batch

    def __enter__(self) -> _SimLoader:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def _sim_loader(p: DeviceProfile, clock: FakeClock, kind: str, batch: int, w: int,
                rate: float | None = None) -> _SimLoader:
    from benchbench.probes._loaders import batching

    parallel, prefetch = batching(kind, w)  # as the real loaders deliver and queue
    loader = _SimLoader(clock, batch, rate or _loader_rate(p, kind, w), 0.5 + 0.05 * w,
                        parallel, prefetch)
    loader.threads = max(1, w)
    return loader


def _loader_rate(p: DeviceProfile, kind: str, workers: int) -> float:
    used = min(max(1, workers), p.cores)
    if kind == "dali_gpu":
        return p.dali_gpu_rate
    return used * (p.dali_cpu_per_core if kind == "dali_cpu" else p.decode_per_core)


def _dataloader(p: DeviceProfile, ctx: ProbeContext, cfg: Any, clock: FakeClock
                ) -> ProbeOutput:
    from benchbench.probes.dataloader import run as dataloader

    plan = dataloader.configurations(list(cfg.loaders), tuple(sorted(set(cfg.workers))))
    clock.advance(2000 * 110e3 / p.disk_read)  # the page-cache warm-up of the synthetic set

    def make(kind: str, data_dir: str, batch: int, w: int, image: int, device: str
             ) -> _SimLoader:
        return _sim_loader(p, clock, kind, batch, w)

    notes: list[str] = []
    measured, _ = dataloader.sweep(ctx, cfg, plan, "/simulated", "cuda:0", p.cores,
                                   notes, make_loader=make)
    return ProbeOutput(measured, notes=notes)


def _storage(p: DeviceProfile, ctx: ProbeContext, cfg: Any, clock: FakeClock) -> ProbeOutput:
    from benchbench.storage_probes.storage.run import plan_runtime

    size = cfg.size
    deadline = max(5.0, ctx.budget.remaining() / 3)
    clock.advance(min(2000 * 110e3 / p.disk_read, deadline))  # the dataset's cold read
    clock.advance(size / p.disk_write + 0.5)  # the scratch file; fio's engine trial
    _, repeats, run_s = plan_runtime(cfg, ctx.budget.remaining(), ctx.policy.min_repeats)
    notes = []
    for j, name in enumerate(cfg.jobs):
        if j and ctx.budget.remaining() < repeats * run_s / 2:
            notes.append(f"{name} skipped, because the time budget ran out")
            continue
        clock.advance(ctx.policy.warmup_s + repeats * (run_s + 0.2))
    return ProbeOutput([], notes=notes)


class _SimTrainer:
    """ResNet50 on the simulated device: a batch's copy goes on the side stream, a step
    queues device work."""

    def __init__(self, ctx: ProbeContext, p: DeviceProfile, step_s: float, batch: int,
                 image: int) -> None:
        self.copy_s = batch * 3 * image * image * 4 / p.h2d_pinned  # fp32 images, pinned
        self.step_fn = _steps(ctx, p, step_s, p.cudnn_load_s + p.first_step_s)

    def prepare(self, x: Any, y: Any) -> SimCopy:
        return SimCopy(self.copy_s)  # run beside the step, on the side stream

    def use(self, batch: Any) -> None:
        return None

    def set_synthetic_batch(self, batch: int, image: int) -> None:
        return None

    def step(self, precision: Any) -> Callable[[], None]:
        return self.step_fn


def _pipeline(p: DeviceProfile, ctx: ProbeContext, cfg: Any, clock: FakeClock,
              loader_rate: float) -> ProbeOutput:
    from benchbench.workloads import _training
    from benchbench.workloads.pipeline import run as pipeline

    batch, image = cfg.batch_size, cfg.image_size
    name = _training.precision_order("cuda:0", _training.usable_precisions(
        "cuda:0", cfg.precisions, [], ctx.facts))[0]
    kind, workers, _ = pipeline.choose_loader(cfg, {}, p.cores)
    step_s = p.resnet50_step_s[name] * batch / RESNET_BATCH * (image / 224) ** 2
    job = pipeline.Job("cuda:0", _training.PRECISIONS[name], batch, image, cfg.steps)
    halves = pipeline.measure(
        ctx, job, lambda: _sim_loader(p, clock, kind, batch, workers, loader_rate),
        lambda: _SimTrainer(ctx, p, step_s, batch, image))
    key = {"device": "cuda:0", "precision": name, "batch_size": batch, "loader": kind,
           "workers": workers}
    return ProbeOutput(pipeline.measurements_of(halves, key, batch, halves.context),
                       notes=halves.notes)


def _allreduce(p: DeviceProfile, ctx: ProbeContext, cfg: Any, clock: FakeClock
               ) -> ProbeOutput:
    from benchbench.probes.allreduce import run as allreduce

    n = p.gpus
    if why := allreduce.nothing_to_exchange(n, "cuda"):
        raise ProbeSkipped(why)  # as the probe does, before it spawns a rank
    deadline = clock() + ctx.budget.remaining()

    def call_s(size: int) -> float:
        return p.allreduce_latency_s + size * 2 * (n - 1) / n / p.allreduce_busbw

    def prepare(size: int) -> int:
        clock.advance(cfg.warmup * call_s(size) + size / 5e10)
        return size

    def samples(size: int, iters: int, repeats: int) -> list[float]:
        clock.advance(repeats * (iters * call_s(size) + 1e-3))
        return [call_s(size)] * repeats

    rows, notes = allreduce.measure_sizes(
        list(cfg.sizes), lambda: max(0.0, deadline - clock()), prepare, call_s, samples,
        cfg.iters, ctx.policy.min_repeats, lambda plan: plan, lambda *a: None)
    # The probe's own measurements (times, algbw, busbw and its peak) from the sweep's rows.
    key = {"backend": "nccl", "dtype": cfg.dtype, "world_size": n, "nodes": 1}
    out = allreduce._measurements(
        [{"bytes": r["size"], "iters": r["iters"], "time_s": r["time_s"]} for r in rows], key,
        n, {"backend": "nccl", "timer": "simulated"})
    return ProbeOutput(out, params={"backend": "nccl", "world_size": n, "local_ranks": n},
                       notes=notes)


def _ddp_scaling(p: DeviceProfile, ctx: ProbeContext, cfg: Any, clock: FakeClock
                 ) -> ProbeOutput:
    from benchbench.workloads import _training
    from benchbench.workloads.ddp_scaling import run as ddp_scaling

    counts = ddp_scaling.counts_for(p.gpus, cfg.counts)
    if why := ddp_scaling.nothing_to_exchange(counts, "cuda"):
        raise ProbeSkipped(why)  # as the probe does, before it spawns a rank
    deadline = clock() + ctx.budget.remaining()
    step_s = p.resnet50_step_s[cfg.precision] * cfg.batch_size / RESNET_BATCH
    out, notes = [], []
    for i, n in enumerate(counts):
        # cuDNN tunes once per rank process: the later counts reuse its choice.
        clock.advance(p.model_build_s + (p.first_step_s if i == 0 else 0.0)
                      + max(1, cfg.warmup_steps) * step_s * (1.05 if n > 1 else 1.0))
        est = step_s * (1.05 if n > 1 else 1.0)
        clock.advance(est)
        planned = _training.plan_steps(est, cfg.steps, max(0.0, deadline - clock())
                                       / (len(counts) - i))
        if planned is None:
            notes.append(f"{', '.join(map(str, counts[i:]))} ranks skipped")
            break
        clock.advance(planned * est)
        out += _training.step_measurements({"ranks": n}, [est] * planned,
                                           float(cfg.batch_size * n), "samples/s", {})
    return ProbeOutput(out, notes=notes)


def _stability(p: DeviceProfile, ctx: ProbeContext, cfg: Any, clock: FakeClock
               ) -> ProbeOutput:
    from benchbench.probes.stability import run as stability

    n, _ = stability.chosen_size(cfg, {}, "cuda:0", cfg.dtype)
    per_call_s = 2 * n**3 / (p.matmul_flops[cfg.dtype] * n / (n + 1024))
    queue = queue_of(ctx)

    def step() -> None:
        queue.launch(per_call_s)

    notes: list[str] = []
    stability.warm_up(ctx, step, "cuda:0", cfg.warmup_s or 0.0, cfg.warmup_steps)
    seconds = stability.timed_seconds(ctx, cfg, notes)
    _, per_call = stability.windows(ctx, step, "cuda:0", seconds, cfg.window_s)
    rates = [2.0 * n**3 / s for s in per_call]
    return ProbeOutput([Measurement(
        metric="sustained_flops", key={"device": "cuda:0", "dtype": cfg.dtype, "size": n},
        value=rates[len(rates) // 2], unit="FLOP/s", statistic="median", samples=rates,
        higher_is_better=True, context={"seconds": seconds})], notes=notes)


SIMULATORS: dict[str, Callable[..., ProbeOutput]] = {
    "matmul": _matmul, "memory_bandwidth": _memory_bandwidth,
    "host_device_copy": _host_device_copy, "resnet50": _resnet50, "transformer": _transformer,
    "dataloader": _dataloader, "storage": _storage, "allreduce": _allreduce,
    "ddp_scaling": _ddp_scaling, "stability": _stability, "memory_fit": _memory_fit,
    "inference": _inference,
}


