"""The simulator's memory_fit and inference: each workload's own search and serving code, with
the profile's memory model and per-call times in place of the models, and for inference's
LoadGen a harness that prices each run on the fake clock. See simulate.py."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from benchbench.engine.sim_device import DeviceProfile, FakeClock, conv_precision, queue_of
from benchbench.probes.api import ProbeContext, ProbeOutput

if TYPE_CHECKING:
    from benchbench.workloads.inference.search import Outcome, Settings


def _memory_fit(p: DeviceProfile, ctx: ProbeContext, cfg: Any, clock: FakeClock
                ) -> ProbeOutput:
    """memory_fit's own search and attempt skeleton (workloads/memory_fit/search.py), with
    the profile's memory model in place of building a model and timing two steps."""
    from benchbench.analysis.memory_fit import Shape
    from benchbench.workloads.memory_fit import search
    from benchbench.workloads.memory_fit.output import output

    seq, precision, dev = cfg.seq_len, cfg.precision, "cuda:0"
    est = search.estimator(seq, precision)
    queue = queue_of(ctx)

    def two_steps(shape: Shape, mode: str) -> search.Ran:
        """Out of memory when the estimate, times the allocator's ratio, is over the GPU's
        memory; else the build and two steps at the profile's speed. The simulated
        allocator has no fragmentation: it reserves what it hands out."""
        e = est(shape, mode)
        need = e.total * p.memory_fit_ratio[mode]
        # Building writes the fp32 weights; an attempt that does not fit fails as it fills up.
        build_s = ctx.meter.timed_once(lambda: clock.advance(
            min(need, p.memory_total) / p.memory_bandwidth + p.model_build_s), dev)
        if need > p.memory_total:
            raise RuntimeError(f"CUDA out of memory (simulated: {need / 1e9:,.1f} GB needed, "
                               f"{p.memory_total / 1e9:,.1f} GB on the device)")
        work = 6 * e.params * seq * (4 / 3 if mode == "checkpointing" else 1)
        step = (work / (p.matmul_flops["bf16"] * p.llm_step_efficiency)
                + 16 * e.params / p.memory_bandwidth)  # AdamW reads and writes its states

        def launch(device_s: float) -> Callable[[], None]:
            return lambda: queue.launch(device_s, p.step_kernels, p.step_host_s)

        step_s = [ctx.meter.timed_once(launch(s), dev) for s in (step + p.first_step_s, step)]
        return search.Ran(build_s, step_s, peak_B=need, reserved_B=need)

    points = search.search_modes(ctx, list(cfg.ladder), list(cfg.modes),
                                 search.attempt_with(ctx, dev, est, two_steps),
                                 search.refusal(ctx, dev, est, cfg.ram_share), dev, est,
                                 float(p.memory_total), cfg.bisect_steps)
    return output(points, dev, seq, precision, float(p.memory_total), [], p.gpu_name)


# cuDNN's autotuning of one new inference shape: about ten candidate algorithms, each timed
# on a forward of that batch, and the search's own fixed cost (an estimate: no GPU run has
# timed it apart from the forward it precedes).
AUTOTUNE_TRIALS = 10
AUTOTUNE_FIXED_S = 0.25


class _SimModels:
    """inference's models on the simulated device: each call queues the profile's time."""

    def __init__(self, ctx: ProbeContext, p: DeviceProfile, preset: str) -> None:
        from benchbench.workloads.transformer.config import PRESETS

        self.queue, self.p, self.dims = queue_of(ctx), p, PRESETS[preset]
        self.meter = ctx.meter
        self.tuned: set[tuple[str, int]] = set()

    def classify(self, precision: str, batch: int) -> Callable[[], None]:
        device_s = batch * self.p.resnet50_infer_s[precision]
        if conv_precision(self.meter, precision) == "tf32":  # TF32 convolutions: as training's
            step = self.p.resnet50_step_s
            device_s *= step["tf32"] / step["fp32"]
        # cuDNN's autotuner times its candidates at each new shape, once per process: an
        # estimate of AUTOTUNE_TRIALS forwards and a fixed cost (no GPU run has timed it).
        tunes = (precision, batch) not in self.tuned and self.meter.cudnn_benchmark("cuda:0")
        pending = [AUTOTUNE_FIXED_S + AUTOTUNE_TRIALS * device_s] if tunes else []
        self.tuned.add((precision, batch))

        def call() -> None:
            self.queue.launch(device_s + (pending.pop() if pending else 0.0), 160,
                              self.p.infer_launch_s)

        return call

    def generate(self, precision: str, batch: int, prompt: int, new: int
                 ) -> tuple[Callable[[], None], Callable[[], None]]:
        d = self.dims
        params = 12 * d["n_layers"] * d["d_model"] ** 2 + d["vocab_size"] * d["d_model"]
        rate = self.p.matmul_flops["bf16" if precision != "fp32" else "fp32"]
        prefill = 2 * params * batch * prompt / (rate * self.p.llm_step_efficiency)
        # A decode step reads every weight once; its ~10 kernels a layer bound it from below.
        step = max(2 * params / self.p.memory_bandwidth, 10 * d["n_layers"] * 5e-6)
        kernels = 10 * d["n_layers"]

        def first() -> None:
            self.queue.launch(prefill, kernels)

        def decode() -> None:
            self.queue.launch(step * (1 + batch / 256), kernels)

        return first, decode

    def release(self) -> None:
        return None


class _SimHarness:
    """LoadGen against the simulated device (search.Harness). A run's latencies come from the
    simulated server's queue model (workloads/inference/server.py) on the profile's batch
    times, and its length, what LoadGen would take, moves the fake clock. LoadGen's early
    stopping is reduced to its floor: a Server run is VALID when its p99 is within the bound
    and it issued EARLY_STOPPING_QUERIES or more; an Offline run when it lasted min_duration;
    a SingleStream run answers each image in the profile's batch-1 time."""

    def __init__(self, ctx: ProbeContext, models: _SimModels, precision: str,
                 clock: FakeClock) -> None:
        self.ctx, self.models, self.precision, self.clock = ctx, models, precision, clock
        self.times: dict[int, float] = {}

    def service_s(self, batch: int) -> float:
        call = self.models.classify(self.precision, batch)
        self.ctx.meter.timed_once(call, "cuda:0")  # warm, as the probe's harness does
        self.times[batch] = min(self.ctx.meter.timed_once(call, "cuda:0") for _ in range(3))
        return self.times[batch]

    def _batch_s(self, k: int) -> float:
        from benchbench.workloads.inference.scenarios import bucket

        b = bucket(self.times, k)
        return self.times[b] if b in self.times else self.service_s(k)

    def run(self, s: Settings) -> Outcome:
        from benchbench.workloads.inference import search, server

        if s.scenario == "Server":
            n = max(s.min_query_count, math.ceil(s.rate * s.min_duration_s))
            load = server.offer(s.rate, n, s.batch, self._batch_s, seed=n)
            p99 = load.percentile(0.99)
            wall = max(s.min_duration_s, n / s.rate) + max(load.latencies)
            valid = p99 <= s.bound_s and n >= search.EARLY_STOPPING_QUERIES
            result = {"p50_s": load.percentile(0.5), "p90_s": load.percentile(0.9),
                      "p99_s": p99, "max_s": max(load.latencies), "queries": n,
                      "completed_per_s": n / wall, "why_invalid": None if valid else
                      "p99 over the bound (simulated)"}
            latencies, batches = load.latencies, load.batches
        elif s.scenario == "SingleStream":  # one at a time, the next when it is answered
            one = self._batch_s(1)
            n = max(s.min_query_count, math.ceil(s.min_duration_s / one))
            wall, valid = n * one, True
            result = {"p50_s": one, "p90_s": one, "queries": n, "why_invalid": None}
            latencies, batches = [one] * n, n
        else:
            n = max(s.min_query_count, int(1.1 * s.min_duration_s * s.rate))
            full, rest = divmod(n, s.batch)
            wall = full * self._batch_s(s.batch) + (self._batch_s(rest) if rest else 0.0)
            valid = wall >= s.min_duration_s
            result = {"samples_per_s": n / wall, "samples_per_query": n, "why_invalid": None
                      if valid else "its min duration was not met (simulated)"}
            latencies, batches = [wall], full + bool(rest)
        wall += search.RUN_OVERHEAD_S
        self.clock.advance(wall)
        result["loadgen_version"] = "simulated"
        return search.Outcome(s, valid, result, latencies, batches, n, wall)

    def close(self) -> None:
        return None


def _inference(p: DeviceProfile, ctx: ProbeContext, cfg: Any, clock: FakeClock
               ) -> ProbeOutput:
    from benchbench.workloads.inference import run as inference

    notes: list[str] = []
    models = _SimModels(ctx, p, cfg.preset)

    def harness(precision: str, shapes: list[int]) -> _SimHarness:
        return _SimHarness(ctx, models, precision, clock)

    out = inference.measure(ctx, cfg, models, "cuda:0", list(cfg.precisions), notes,
                            harness if cfg.loadgen else None)
    return ProbeOutput(out, notes=notes)
