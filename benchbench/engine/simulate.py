"""Plan a run at GPU speed on any machine: the probes' own planning against a simulated device.

A run's planning (which precisions, sizes and GPUs fit, how long warm-ups last, how many steps
are timed, when something is skipped) reacts to measured times, and has mostly seen a CPU's.
Here each probe's own planning code (run_training, matmul.sweep, host_device_copy.sweep, the
data loader's and the all-reduce's sweeps) runs against a fake clock: every call or step
advances it by what a `DeviceProfile` says the device takes, so a test asserts what an H200 or
an 8-GPU node would measure, and `estimate_run` gives the wall time of a whole run, runner
overheads included, without the hardware. The profiles are estimates, not measurements; they
come from the issue that asked for them and from the published figures cited beside them.

Imports the probes' modules (and so torch): this is for tests and planning, not for `run`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from benchbench.core.config import ProbeConfig
from benchbench.core.results import Measurement, ProbeResult
from benchbench.core.rounds import default_rounds, merge, schedule, start
from benchbench.core.sampling import Budget
from benchbench.core.timing import Timer
from benchbench.engine.runner import probe_budget
from benchbench.probes.api import ProbeContext, ProbeOutput, RunInputs, throughput
from benchbench.probes.catalog import default_registry
from benchbench.probes.meter import Meter

GiB = 1024**3


class FakeClock:
    """Time that moves only when the simulated device works."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += max(0.0, seconds)


@dataclass(frozen=True)
class DeviceProfile:
    """What one machine takes per call or step, as the simulator charges it (seconds, B/s)."""

    name: str
    gpus: int
    gpu_name: str  # as NVML spells it: the peaks table and the precisions go by it
    capability: str  # compute capability: which precisions the tensor cores have
    resnet50_step_s: dict[str, float]  # one step at batch RESNET_BATCH, per precision
    first_step_s: float  # each precision's first step: cuDNN autotuning, allocation
    gpt_step_s: dict[str, float]  # one GPT-2 124M step, batch 16 x 1024 tokens
    gpt_first_step_s: float
    matmul_flops: dict[str, float]  # sustained by a large torch.mm, per dtype
    memory_bandwidth: float  # a device copy, bytes read + written
    h2d_pinned: float
    h2d_pageable: float
    all_gpus_h2d: float  # all GPUs copying at once, together
    allreduce_busbw: float  # at large sizes, across every GPU
    allreduce_latency_s: float  # a small all-reduce
    memory_total: int = 141 * GiB
    l2_cache_bytes: int = 50 * 1024**2
    cores: int = 16
    decode_per_core: float = 220.0  # images/s a torchvision worker decodes and augments at 224
    dali_cpu_per_core: float = 330.0
    dali_gpu_rate: float = 6000.0  # nvJPEG images/s
    host_memory_bandwidth: float = 60e9
    disk_read: float = 3e9
    disk_write: float = 2e9
    process_start_s: float = 2.0  # a probe worker: fork from the forkserver, CUDA context
    rank_start_s: float = 8.0  # spawned ranks: import torch, rendezvous, NCCL communicators
    model_build_s: float = 0.5
    first_call_s: float = 0.3  # cuBLAS handle creation and lazy kernel loading
    dataset_s: float = 0.0  # generating the synthetic set (0: already in the cache)
    report_s: float = 5.0  # results.json, report.md/.html, plots


# ResNet50 at batch 256 and GPT-2 124M on one H200, as the GPU-readiness issue gives them; the
# bf16 matmul rate is its "n=8192 in 1.4 ms" (2 * 8192^3 / 1.4e-3); HBM copy about 85% of the
# 4.8 TB/s datasheet; pinned H2D "1 GiB in 20 ms" over PCIe Gen5 x16.
H200 = DeviceProfile(
    name="1x H200", gpus=1, gpu_name="NVIDIA H200", capability="9.0",
    resnet50_step_s={"fp32": 0.30, "tf32": 0.15, "amp_bf16": 0.085, "amp_fp16": 0.085},
    first_step_s=3.0,
    gpt_step_s={"fp32": 0.20, "tf32": 0.12, "amp_bf16": 0.05, "amp_fp16": 0.05},
    gpt_first_step_s=1.0,
    matmul_flops={"bf16": 7.85e14, "fp16": 7.85e14, "tf32": 3.9e14, "fp32": 5.2e13},
    memory_bandwidth=4.1e12, h2d_pinned=5.37e10, h2d_pageable=2.0e10, all_gpus_h2d=5.37e10,
    allreduce_busbw=2.0e12, allreduce_latency_s=10e-6)
# Eight H100 SXM on NVSwitch: the same per-GPU figures; all-reduce of 1 GiB about 5 ms at
# ~360 GB/s busbw; four PCIe switches, two GPUs behind each, for the copies to all at once.
H100X8 = dataclasses.replace(
    H200, name="8x H100", gpus=8, gpu_name="NVIDIA H100 80GB HBM3", memory_total=80 * GiB,
    all_gpus_h2d=4 * 5.37e10, allreduce_busbw=3.6e11, allreduce_latency_s=25e-6, cores=96,
    rank_start_s=15.0)
PROFILES = {"h200": H200, "8xh100": H100X8}

RESNET_BATCH = 256
GPT_TOKENS = 16 * 1024


@dataclass
class SimProbe:
    """What one probe would do on the profiled device."""

    name: str
    budget_s: float
    duration_s: float  # what the probe's budget counts
    output: ProbeOutput | None
    notes: list[str] = field(default_factory=list)
    startup_s: float = 0.0  # outside the budget: spawning ranks and starting NCCL
    rounds: int = 1
    round_budget_s: float = 0.0  # each round's share
    longest_round_s: float = 0.0  # the round that took longest

    @property
    def wall_s(self) -> float:
        return self.startup_s + self.duration_s

    @property
    def measurements(self) -> list[Measurement]:
        return self.output.measurements if self.output else []


@dataclass
class RunEstimate:
    profile: str
    quick: bool
    probes: list[SimProbe]
    overhead_s: float  # start-up, workers, dataset, reports

    @property
    def total_s(self) -> float:
        return self.overhead_s + sum(p.wall_s for p in self.probes)

    def table(self) -> str:
        rows = [f"{p.name:18} budget {p.budget_s:6.1f} s  simulated {p.duration_s:6.1f} s"
                + (f" + {p.startup_s:.1f} s start-up" if p.startup_s else "")
                for p in self.probes]
        return "\n".join([*rows, f"{'overheads':18} {self.overhead_s:29.1f} s",
                          f"{'whole run':18} {self.total_s:29.1f} s"])


class SimMeter(Meter):
    """A Meter whose every wait and step is the fake clock's."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock)

    def sync(self, device: str) -> None:
        return None

    def step_times(self, step: Callable[[], Any], n: int, device: str) -> list[float]:
        return self.clock_step_times(step, n)

    def reset_peak_memory(self, device: str) -> None:
        return None

    def peak_memory(self, device: str) -> float | None:
        return None


def _charge(clock: FakeClock, per_call_s: float, first_s: float = 0.0) -> Timer:
    """A timer that charges per_call_s a call, and first_s more on its very first call."""
    pending = [first_s]

    def timed(fn: Callable[[], Any], inner: int) -> float:
        spent = per_call_s * inner + pending.pop() if pending else per_call_s * inner
        clock.advance(spent)
        return spent

    return timed


def facts_for(p: DeviceProfile) -> dict[str, Any]:
    return {"cuda_available": True, "cuda_device_count": p.gpus, "host_llc_bytes": 64 * 2**20,
            "usable_cores": p.cores,
            "gpus": [{"index": i, "name": p.gpu_name, "capability": p.capability,
                      "memory_total": p.memory_total, "l2_cache_bytes": p.l2_cache_bytes,
                      "uuid": f"sim-{i}"} for i in range(p.gpus)]}


def context(p: DeviceProfile, quick: bool, budget_s: float, cfg: ProbeConfig,
            clock: FakeClock, repeats: int | None = None) -> ProbeContext:
    policy = cfg.repeat_policy(repeats or (3 if quick else 5))
    return ProbeContext(device="cuda", policy=policy,
                        budget=Budget(budget_s, clock=clock), facts=facts_for(p),
                        clock=clock, meter=SimMeter(clock),
                        inputs=RunInputs(data_dir="/simulated", run_dir="/simulated"))


# --- the probes -------------------------------------------------------------------------------

def _matmul(p: DeviceProfile, ctx: ProbeContext, cfg: Any, clock: FakeClock) -> ProbeOutput:
    from benchbench.probes.matmul import run as matmul

    notes: list[str] = []
    devices = [f"cuda:{i}" for i in range(p.gpus)]
    dtypes = {d: matmul.usable_dtypes(d, cfg.dtypes, notes, ctx.facts) for d in devices}
    started: set[str] = set()

    def measure(dev: str, dt: str, n: int, left: int, warm: bool) -> Measurement:
        # Small matrices leave tensor cores idle: about n / (n + 1024) of the sustained rate.
        rate = p.matmul_flops[dt] * n / (n + 1024)
        first = 0.0 if dev in started else p.first_call_s
        started.add(dev)
        timed = ctx.time_op(lambda: None, dev, left, cfg.min_sample_s,
                            timer=_charge(clock, 2 * n**3 / rate, first), warm=warm)
        return throughput("flops", {"device": dev, "dtype": dt, "size": n}, timed, 2.0 * n**3,
                          "FLOP/s", {"gpu_name": p.gpu_name})

    out = matmul.sweep(ctx, devices, dtypes, sorted(cfg.sizes), measure, notes)
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
                            timer=_charge(clock, 2 * item.size / rate))
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
                            timer=_charge(clock, per_call), warm=warm)
        metric = "aggregate_bandwidth" if item.device == "all" else "copy_bandwidth"
        key = {"device": item.device, "direction": item.direction, "memory": item.memory,
               "size_bytes": item.size}
        return throughput(metric, key, timed, float(item.size * item.gpus), "B/s")

    measured = hdc.sweep(ctx, hdc.plan(list(range(p.gpus)), cfg), measure, notes)
    return ProbeOutput(hdc.with_peaks(measured, {}), notes=notes)


def _steps(clock: FakeClock, p: DeviceProfile, step_s: float, first_s: float) -> Callable[[], None]:
    clock.advance(p.model_build_s)
    pending = [first_s]

    def step() -> None:
        clock.advance(step_s + (pending.pop() if pending else 0.0))

    return step


def _resnet50(p: DeviceProfile, ctx: ProbeContext, cfg: Any, clock: FakeClock) -> ProbeOutput:
    from benchbench.probes import _training
    from benchbench.probes.resnet50 import run as resnet50

    job = resnet50.job_for(cfg, "cuda:0", {"gpu_name": p.gpu_name})

    def build(batch: int, precision: _training.Precision) -> Callable[[], None]:
        scale = batch / RESNET_BATCH * (cfg.image_size / 224) ** 2
        return _steps(clock, p, p.resnet50_step_s[precision.name] * scale, p.first_step_s)

    out, notes = _training.run_training(ctx, job, build)
    return ProbeOutput(out, notes=notes)


def _transformer(p: DeviceProfile, ctx: ProbeContext, cfg: Any, clock: FakeClock
                 ) -> ProbeOutput:
    from benchbench.probes import _training
    from benchbench.probes.transformer import run as transformer

    job = transformer.job_for(cfg, "cuda:0", {"gpu_name": p.gpu_name})
    # Steps scale with the tokens a step trains and the parameters: GPT-2 124M is the unit.
    params = {"small": 0.1, "gpt2-124m": 1.0, "gpt2-350m": 2.9, "1.3b": 10.5}
    size = params.get(cfg.preset or "small", 1.0)

    def build(batch: int, precision: _training.Precision) -> Callable[[], None]:
        scale = batch * cfg.seq_len / GPT_TOKENS * size
        return _steps(clock, p, p.gpt_step_s[precision.name] * scale, p.gpt_first_step_s)

    out, notes = _training.run_training(ctx, job, build)
    return ProbeOutput(out, notes=notes)


class _SimLoader:
    """A loader that yields empty batches at the profiled decode rate."""

    def __init__(self, clock: FakeClock, batch: int, rate: float, start_s: float) -> None:
        self.clock, self.batch, self.rate = clock, batch, rate
        self.output_device, self.threads, self.corrupt, self.corrupt_files = "cpu", 1, 0, {}
        clock.advance(start_s)

    def stream(self) -> Iterator[tuple[list[int], list[int]]]:
        while True:
            self.clock.advance(self.batch / self.rate)
            yield [0] * self.batch, [0] * self.batch

    def __enter__(self) -> _SimLoader:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


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
        loader = _SimLoader(clock, batch, _loader_rate(p, kind, w), 0.5 + 0.05 * w)
        loader.threads = max(1, w)
        return loader

    notes: list[str] = []
    measured, _ = dataloader.sweep(ctx, cfg, plan, "/simulated", "cuda:0", p.cores,
                                   notes, make_loader=make)
    return ProbeOutput(measured, notes=notes)


def _storage(p: DeviceProfile, ctx: ProbeContext, cfg: Any, clock: FakeClock) -> ProbeOutput:
    from benchbench.probes.storage.run import plan_runtime

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


def _pipeline(p: DeviceProfile, ctx: ProbeContext, cfg: Any, clock: FakeClock,
              loader_rate: float) -> ProbeOutput:
    from benchbench.probes import _training

    batch = cfg.batch_size
    name = _training.precision_order("cuda:0", _training.usable_precisions(
        "cuda:0", cfg.precisions, [], ctx.facts))[0]
    step_s = p.resnet50_step_s[name] * batch / RESNET_BATCH
    step = _steps(clock, p, step_s, p.first_step_s)
    warm = _training.warm_up(step, ctx, "cuda:0", ctx.budget.remaining() / 2)
    n = _training.plan_steps(warm.step_s, cfg.steps, ctx.budget.remaining() / 2)
    if n is None:
        return ProbeOutput([], notes=["compute skipped: one step beyond the budget"])
    compute = ctx.meter.step_times(step, n, "cuda:0")
    clock.advance(1.0)  # the loader's workers start
    real = max(step_s, batch / loader_rate)
    clock.advance(real * (max(1, ctx.policy.warmup_steps) + n))
    key = {"device": "cuda:0", "precision": name, "batch_size": batch}
    return ProbeOutput(_training.step_measurements(key, compute, batch, "samples/s", {}))


def _allreduce(p: DeviceProfile, ctx: ProbeContext, cfg: Any, clock: FakeClock
               ) -> ProbeOutput:
    from benchbench.probes.allreduce import run as allreduce

    n = p.gpus
    deadline = clock() + ctx.budget.remaining()

    def call_s(size: int) -> float:
        moved = size * 2 * (n - 1) / n if n > 1 else size
        return p.allreduce_latency_s + moved / (p.allreduce_busbw if n > 1 else
                                                p.memory_bandwidth / 2)

    def prepare(size: int) -> int:
        clock.advance(cfg.warmup * call_s(size) + size / 5e10)
        return size

    def samples(size: int, iters: int, repeats: int) -> list[float]:
        clock.advance(repeats * (iters * call_s(size) + 1e-3))
        return [call_s(size)] * repeats

    rows, notes = allreduce.measure_sizes(
        list(cfg.sizes), lambda: max(0.0, deadline - clock()), prepare, call_s, samples,
        cfg.iters, ctx.policy.min_repeats, lambda plan: plan, lambda *a: None)
    out = [Measurement(metric="allreduce_time", key={"size_bytes": r["size"]},
                       value=r["time_s"][0], unit="s", statistic="median",
                       samples=r["time_s"], higher_is_better=False) for r in rows]
    return ProbeOutput(out, notes=notes)


def _ddp_scaling(p: DeviceProfile, ctx: ProbeContext, cfg: Any, clock: FakeClock
                 ) -> ProbeOutput:
    from benchbench.probes import _training
    from benchbench.probes.ddp_scaling import run as ddp_scaling

    deadline = clock() + ctx.budget.remaining()
    counts = ddp_scaling.counts_for(p.gpus, cfg.counts)
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


SIMULATORS: dict[str, Callable[..., ProbeOutput]] = {
    "matmul": _matmul, "memory_bandwidth": _memory_bandwidth,
    "host_device_copy": _host_device_copy, "resnet50": _resnet50, "transformer": _transformer,
    "dataloader": _dataloader, "storage": _storage, "allreduce": _allreduce,
    "ddp_scaling": _ddp_scaling,
}


def simulate_probe(p: DeviceProfile, name: str, quick: bool, budget_s: float,
                   loader_rate: float | None = None,
                   overrides: dict[str, Any] | None = None) -> SimProbe:
    """One probe's planning on the profiled device, within `budget_s`."""
    spec = default_registry().get(name)
    cfg = spec.resolve("cuda", quick, facts_for(p), overrides)
    clock = FakeClock()
    ctx = context(p, quick, budget_s, cfg, clock)
    start = clock()
    if name == "pipeline":
        out = _pipeline(p, ctx, cfg, clock, loader_rate or p.dali_gpu_rate)
    else:
        out = SIMULATORS[name](p, ctx, cfg, clock)
    # The distributed probes' ranks count their budget from when they have all joined (see
    # workloads/_ranks.py): spawning them is start-up, like a worker process's.
    startup = p.rank_start_s if spec.distributed else 0.0
    return SimProbe(name, budget_s, clock() - start, out, list(out.notes), startup)


def _as_result(sim: SimProbe) -> ProbeResult:
    out = sim.output or ProbeOutput([])
    return ProbeResult(sim.name, "ok" if out.measurements else "skipped", "gpu_compute",
                       reason="; ".join(out.notes) or None, measurements=out.measurements,
                       duration_s=sim.duration_s)


def estimate_run(p: DeviceProfile, quick: bool = False, rounds: int | None = None
                 ) -> RunEstimate:
    """Every probe of a default (or --quick) CUDA run on the profiled machine, as the runner
    schedules it: each within the budget the runner would give it, the repeatable ones in
    rounds that share it (each round pays its start-up again: cuDNN's autotuning included),
    plus the runner's own costs: the forkserver and the facts worker, the environment
    snapshot, a worker per probe round, the dataset and the reports."""
    specs = list(default_registry())
    total_weight = sum(s.budget_weight for s in specs)
    times = rounds or default_rounds(quick, "cuda")
    probes: dict[str, SimProbe] = {}
    merged: dict[str, ProbeResult] = {}
    best_loader = None
    plan = schedule(specs, [s.repeatable for s in specs], times)
    for spec, round_no in plan:
        n = times if spec.repeatable else 1
        budget = probe_budget(spec.budget_weight, total_weight, quick, None, "cuda",
                              p.gpus if spec.per_gpu else 1)
        sim = simulate_probe(p, spec.name, quick, budget / n, best_loader)
        if spec.name == "dataloader" and round_no == 1 and sim.measurements:
            best_loader = max(m.value for m in sim.measurements if m.metric == "throughput")
        if round_no == 1:
            probes[spec.name] = dataclasses.replace(sim, budget_s=budget, rounds=n,
                                                    round_budget_s=budget / n,
                                                    longest_round_s=sim.duration_s)
            merged[spec.name] = start(_as_result(sim)) if n > 1 else _as_result(sim)
            continue
        prev = probes[spec.name]
        merged[spec.name] = merge(merged[spec.name], _as_result(sim), round_no)
        probes[spec.name] = dataclasses.replace(
            prev, duration_s=prev.duration_s + sim.duration_s,
            longest_round_s=max(prev.longest_round_s, sim.duration_s),
            notes=[*prev.notes, *[f"round {round_no}: {x}" for x in sim.notes]])
    for name, sim in probes.items():
        sim.output = ProbeOutput(merged[name].measurements, notes=sim.notes)
    overhead = (3.0 + p.process_start_s + 1.0 + p.dataset_s + p.report_s
                + len(plan) * p.process_start_s)
    return RunEstimate(p.name, quick, list(probes.values()), overhead)
