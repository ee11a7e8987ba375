"""The simulated device: a fake clock, a device queue, a device profile (H200, an 8x H100 node),
a Meter that charges the profile's times to them, and the context a probe gets on it. See
simulate.py.

The device queues work as CUDA does: a host call returns once its launch is paid (the host
waits only when the queue is full), the device runs the calls in order, an event is stamped
when the device reaches it, and a synchronize waits for everything queued. A probe whose host
loop outruns the device, and only syncs at the end, shows here as it would on the GPU.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from benchbench.analysis.guide import FP8_PAYS_WIDTH
from benchbench.analysis.memory_fit import CARD_80GB_USABLE_B
from benchbench.core.config import ProbeConfig
from benchbench.core.sampling import Budget
from benchbench.core.timing import Timer
from benchbench.probes.api import ProbeContext, RunInputs
from benchbench.probes.meter import Meter, SideStream, Staged

GiB = 1024**3
T = TypeVar("T")


class FakeClock:
    """Time that moves only when the simulated device works."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += max(0.0, seconds)


# CUDA's launch queue holds about a thousand kernels before a launch blocks the host; a launch
# costs the host a few microseconds.
QUEUE_DEPTH = 1024
LAUNCH_S = 5e-6


class SimQueue:
    """One device's stream on the fake clock (the host's)."""

    def __init__(self, clock: FakeClock, depth: int = QUEUE_DEPTH) -> None:
        self.clock, self.depth = clock, depth
        self.busy_until = clock()
        self._queued: deque[tuple[float, int]] = deque()  # (when the call ends, its kernels)
        self._kernels = 0

    def launch(self, device_s: float, kernels: int = 1, host_s: float | None = None) -> None:
        """Queue `device_s` of device work made of `kernels` kernels; the host pays its launch
        (`host_s`, or LAUNCH_S a kernel) and waits first while the queue has no room."""
        while self._queued and self._queued[0][0] <= self.clock():
            self._kernels -= self._queued.popleft()[1]
        while self._queued and self._kernels + kernels > self.depth:
            end, k = self._queued.popleft()
            self.clock.now = max(self.clock.now, end)
            self._kernels -= k
        self.busy_until = max(self.busy_until, self.clock()) + device_s
        self._queued.append((self.busy_until, kernels))
        self._kernels += kernels
        self.clock.advance(LAUNCH_S * kernels if host_s is None else host_s)

    def event(self) -> float:
        """When the device reaches a point recorded now: after all that is queued."""
        return max(self.busy_until, self.clock())

    def sync(self) -> None:
        self.clock.now = max(self.clock.now, self.busy_until)
        self._queued.clear()
        self._kernels = 0


@dataclass(frozen=True)
class DeviceProfile:
    """What one machine takes per call or step, as the simulator charges it (seconds, B/s)."""

    name: str
    gpus: int
    gpu_name: str  # as NVML spells it: the peaks table and the precisions go by it
    capability: str  # compute capability: which precisions the tensor cores have
    resnet50_step_s: dict[str, float]  # one step at batch RESNET_BATCH, per precision
    first_step_s: float  # a precision's first step: allocation, cuDNN's autotuning
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
    # A training step in eager PyTorch: hundreds of kernels (ResNet50's forward, backward and
    # optimizer; GPT's), launched in this much host time.
    step_kernels: int = 600
    step_host_s: float = 0.01
    # memory_fit: what a step's allocator reserves over the closed-form estimate, by mode
    # (caching allocator rounding and fragmentation, cuBLAS workspaces), as the first H200s
    # measured it (their allocated peaks were 1.00 of it): plain 1.15-1.17 at 7B's width,
    # 32-38 layers; checkpointing 1.04-1.05 at 32 and 43 layers. And the share of the bf16
    # matmul rate a Llama training step reaches.
    memory_fit_ratio: dict[str, float] = dataclasses.field(
        default_factory=lambda: {"plain": 1.16, "checkpointing": 1.04})
    llm_step_efficiency: float = 0.45
    # inference: ResNet50's forward per image at large batch, by precision (about a third of a
    # training step's), and the host's launch time of one forward (~160 kernels): what a
    # batch of one costs however fast the GPU.
    resnet50_infer_s: dict[str, float] = dataclasses.field(default_factory=lambda: {
        "bf16": 0.085 / 256 / 3, "fp16": 0.085 / 256 / 3, "fp32": 0.30 / 256 / 3})
    infer_launch_s: float = 0.0015
    dataset_s: float = 0.0  # generating the synthetic set (0: already in the cache)
    # the SM clock NVML reads under dense load: the third H200's telemetry read a busy
    # median of 1,485-1,500 MHz of its 1,980 at its 700 W limit while its matmuls ran
    sm_clock_Hz: float | None = 1.485e9
    # the power NVML's energy counter accumulates under dense load (None: no counter): the
    # H200s' read 686-696 W through their stability probes at the 700 W limit
    power_W: float | None = 690.0
    report_s: float = 5.0  # results.json, report.md/.html, plots
    # ResNet50's first step by precision where it differs from first_step_s (cuDNN tunes each
    # precision's kernels anew), and what cuDNN's autotuning of fp32 takes on its own: fp32
    # convolutions without TF32 try slow algorithms at batch 256 (a fourth H200 spent about
    # 56 s there before the probe skipped fp32).
    resnet50_first_step_s: dict[str, float] = dataclasses.field(default_factory=dict)
    fp32_autotune_s: float = 0.0
    # The first convolution of a process: cuDNN's libraries and kernels loaded (an H200's
    # first ResNet50 step took 9.3 s where a later precision's took 2.7-4.0 s).
    cudnn_load_s: float = 0.0


# ResNet50 at batch 256 and GPT-2 124M on one H200 as the first four H200 boxes measured them
# (docs/results/2026-12-04-h200*, ../shared/audits/h200-2026-12-04.md section 3): ResNet50
# 4,694 images/s in amp_bf16, 5,745 in amp_fp16, 3,148 in tf32, a warm fp32 step 0.242 s;
# first steps 3.95 s (bf16), 2.7 s (fp16), 4.04 s (tf32), fp32 with cuDNN's heuristics
# estimated from its step and the others' allocation; GPT-2 124M steps 44.4, 45.5, 97.0 and
# 296 ms, first steps about a second. The bf16 matmul rate is its "n=8192 in 1.4 ms"
# (2 * 8192^3 / 1.4e-3); HBM copy about 85% of the 4.8 TB/s datasheet (4.15 TB/s measured);
# pinned H2D "1 GiB in 20 ms" over PCIe Gen5 x16 (55.5 GB/s measured).
H200 = DeviceProfile(
    name="1x H200", gpus=1, gpu_name="NVIDIA H200", capability="9.0",
    resnet50_step_s={"fp32": 0.242, "tf32": 0.0813, "amp_bf16": 0.0545, "amp_fp16": 0.0446},
    first_step_s=3.0,
    resnet50_first_step_s={"amp_bf16": 3.95, "amp_fp16": 2.7, "tf32": 4.04, "fp32": 2.5},
    fp32_autotune_s=56.0, cudnn_load_s=5.3,
    # fp8: amp_bf16's step over fp8_speedup (by the model's width and compile).
    gpt_step_s={"fp32": 0.296, "tf32": 0.097, "amp_bf16": 0.0444, "amp_fp16": 0.0455},
    gpt_first_step_s=1.0,
    # fp8: mamf-finder's ~1.77x of bf16 on H100 (e4m3 scaled_mm against bf16 torch.mm).
    matmul_flops={"bf16": 7.85e14, "fp16": 7.85e14, "tf32": 3.9e14, "fp32": 5.2e13,
                  "fp8": 1.77 * 7.85e14},
    memory_bandwidth=4.15e12, h2d_pinned=5.55e10, h2d_pageable=2.0e10, all_gpus_h2d=5.55e10,
    allreduce_busbw=2.0e12, allreduce_latency_s=10e-6,
    # 16 vCPUs decoding 3,300 images/s with 16 torchvision workers: ~206 a core; a lent box is
    # fresh, so the run generates its synthetic dataset (1.5 s on the third H200).
    decode_per_core=206.0, dataset_s=1.5)
# One H100 SXM 80GB: the H200's compute (the same GH100 and datasheet peaks, so the same step
# times: an estimate, no H100 run yet), HBM3 at 3.35 TB/s (the H200's measured share of its
# datasheet, about 2.9 TB/s) and what torch can allocate of the card (memory_fit's figure).
H100 = dataclasses.replace(
    H200, name="1x H100", gpu_name="NVIDIA H100 80GB HBM3", memory_total=CARD_80GB_USABLE_B,
    memory_bandwidth=4.15e12 * 3.35 / 4.8)
# Eight H100 SXM on NVSwitch: the same per-GPU figures; all-reduce of 1 GiB about 5 ms at
# ~360 GB/s busbw; four PCIe switches, two GPUs behind each, for the copies to all at once.
H100X8 = dataclasses.replace(
    H100, name="8x H100", gpus=8, all_gpus_h2d=4 * 5.37e10, allreduce_busbw=3.6e11,
    allreduce_latency_s=25e-6, cores=96, rank_start_s=15.0, dataset_s=0.0)
# One A100 SXM 80GB (an estimate, no A100 run yet): NVIDIA's DeepLearningExamples ResNet50
# v1.5 on an A100 80GB trains about 2,500 images/s in mixed precision and 1,000 in TF32 (so
# amp steps of ~0.1 s and a TF32 step of ~0.26 s at batch 256); GPT's steps and the matmul
# rates scaled from the H200's by the datasheets' tensor-core ratio (312 against 989.5
# TFLOP/s dense bf16); HBM2e at about 85% of its 2,039 GB/s; PCIe Gen4 x16 at about 25 GB/s
# pinned; no fp8 tensor cores (capability 8.0).
A100 = dataclasses.replace(
    H100, name="1x A100", gpu_name="NVIDIA A100-SXM4-80GB", capability="8.0",
    resnet50_step_s={"fp32": 0.64, "tf32": 0.256, "amp_bf16": 0.102, "amp_fp16": 0.098},
    gpt_step_s={"fp32": 1.0, "tf32": 0.29, "amp_bf16": 0.115, "amp_fp16": 0.118},
    matmul_flops={"bf16": 2.8e14, "fp16": 2.8e14, "tf32": 1.4e14, "fp32": 1.9e13},
    memory_bandwidth=1.73e12, h2d_pinned=2.5e10, h2d_pageable=1.0e10, all_gpus_h2d=2.5e10,
    resnet50_infer_s={"bf16": 0.27 / 256 / 3, "fp16": 0.27 / 256 / 3, "fp32": 0.95 / 256 / 3})
PROFILES = {"h200": H200, "h100": H100, "a100": A100, "8xh100": H100X8}


def profile_for(gpu_name: str | None) -> DeviceProfile:
    """The one-GPU profile of the GPU this is (an H100 or an H200), else the H200's."""
    return H100 if gpu_name and "H100" in gpu_name else H200

# fp8 training (torchao's float8: dynamic tensor-wise scales) against amp_bf16, the whole step,
# on Hopper. Eager float8 launches an amax, a scale and a cast around each of a Linear's three
# GEMMs; below a width of about 2048 they cost more than the fp8 GEMMs save, and the step is
# slower than bf16 (pytorch/ao#685; pytorch/ao#572: "fp8 will be slower for tiny models
# because of overhead"). torch.compile fuses them (torchtitan's float8 docs make compile
# required), and at large widths torchao publishes 1.1-1.25x end to end ("up to 1.25x at
# 8 GPU / 8B parameter scale", docs.pytorch.org/ao, Quantized Training); its per-shape table
# shows compiled float8 below 1x for K, N of 1024 too.
# (compiled, d_model >= FP8_PAYS_WIDTH: the guide's one width where fp8 can pay) -> fp8's speed
# over amp_bf16's
FP8_SPEEDUP = {(False, False): 0.85, (False, True): 1.0, (True, False): 0.95, (True, True): 1.15}


def fp8_speedup(d_model: int, compiled: bool) -> float:
    """fp8's training-step speed over amp_bf16's (above 1: faster) for a GPT of this width."""
    return FP8_SPEEDUP[(compiled, d_model >= FP8_PAYS_WIDTH)]

RESNET_BATCH = 256
GPT_TOKENS = 16 * 1024


class SimMeter(Meter):
    """A Meter whose device is a SimQueue on the fake clock: events and syncs as on CUDA, and
    CUDA's documented rules for the state a probe sets and reads, so that a probe which breaks
    one fails here, in CI, rather than on the one lent GPU run."""

    def __init__(self, clock: FakeClock, sm_clock_Hz: float | None = None,
                 power_W: float | None = None) -> None:
        super().__init__(clock)
        self.queue = SimQueue(clock)
        self.sm_clock_Hz = sm_clock_Hz  # what the modelled GPU's NVML reads; None: no NVML
        self.power_W = power_W  # what its energy counter accumulates; None: no counter
        self.initialised = False
        # What the probe set through set_tf32, for matmuls and convolutions alike; None: it
        # never said, and CUDA's defaults hold: off for fp32 matmuls (torch's default since
        # 1.12), on for cuDNN convolutions ("torch.backends.cudnn.allow_tf32 ... defaults to
        # True", PyTorch's notes on TF32 on Ampere).
        self.tf32_set: bool | None = None
        self.benchmark = False  # cuDNN's autotuner, off unless a probe turns it on

    def timer_for(self, device: str) -> Timer:
        """As meter.cuda_timer: events around the calls, which queue their own work."""
        queue = self.queue

        def timed(fn: Callable[[], Any], inner: int) -> float:
            start = queue.event()
            for _ in range(inner):
                fn()
            end = queue.event()
            queue.sync()
            return end - start

        return timed

    def sync(self, device: str) -> None:
        self.queue.sync()

    def event(self, device: str) -> float:
        return self.queue.event()

    def step_times(self, step: Callable[[], Any], n: int, device: str) -> list[float]:
        marks = [self.queue.event()]
        for _ in range(n):
            step()
            marks.append(self.queue.event())
        self.queue.sync()
        return [b - a for a, b in zip(marks, marks[1:], strict=False)]

    def init(self, device: str) -> None:
        self.initialised = True

    def device_name(self, device: str) -> str | None:
        self.initialised = True
        return "simulated"

    def set_tf32(self, enabled: bool) -> None:
        self.tf32_set = enabled

    def tf32(self) -> bool:
        return bool(self.tf32_set)

    def convolutions_in_tf32(self) -> bool:
        """Whether an fp32 convolution runs in TF32 now: cuDNN does unless told otherwise."""
        return self.tf32_set is not False

    def set_cudnn_benchmark(self, device: str, enabled: bool) -> None:
        self.benchmark = enabled

    def cudnn_benchmark(self, device: str) -> bool | None:
        return self.benchmark

    def side_stream(self, device: str) -> SimSideStream:
        return SimSideStream(self.queue)

    def free(self, device: str | None = None) -> None:
        return None

    def sm_clock_reader(self, device: str, uuid: str | None
                        ) -> Callable[[], float | None] | None:
        """The modelled GPU's SM clock, where the profile gives one (None: no NVML, as on a
        box whose NVML cannot be read), so that the probes' samples carry a clock each as
        on the GPU, and CI sees them line up."""
        held = self.sm_clock_Hz
        if held is None or not device.startswith("cuda") or not uuid:
            return None
        return lambda: held

    def energy_reader(self, device: str, uuid: str | None
                      ) -> Callable[[], float | None] | None:
        """The modelled GPU's energy counter in J: its power over the fake clock's seconds, so
        that two reads around timed steps give the energy a real counter would (None: no
        NVML, as sm_clock_reader)."""
        power = self.power_W
        if power is None or self.sm_clock_Hz is None or not device.startswith("cuda") \
                or not uuid:
            return None
        clock = self.clock
        return lambda: power * clock()

    def _statistics(self, what: str) -> None:
        # The caching allocator has no device until CUDA is initialised: reading or resetting
        # its statistics first raises "Invalid device argument : did you call init?"
        # (pytorch/pytorch#49952; torch.cuda.memory's functions do not initialise CUDA).
        if not self.initialised:
            raise RuntimeError(f"{what}: Invalid device argument : did you call init? "
                               "(the simulated CUDA is not initialised: call meter.init first)")

    def reset_peak_memory(self, device: str) -> None:
        self._statistics("reset_peak_memory_stats")

    def peak_memory(self, device: str) -> float | None:
        self._statistics("max_memory_allocated")
        return None

    def peak_reserved(self, device: str) -> float | None:
        self._statistics("max_memory_reserved")
        return None


@dataclass(frozen=True)
class SimCopy:
    """A host-to-device copy as a simulated trainer issues it: how long the link takes."""

    seconds: float


class SimSideStream(SideStream):
    """meter.SideStream on the simulated device: a second stream on the fake clock whose
    copies run beside the compute queue; `take` holds the compute queue's next work until the
    copy it waits for is done, as a stream waiting on an event does."""

    def __init__(self, queue: SimQueue) -> None:
        self.queue, self.busy_until = queue, queue.clock()

    def put(self, copy: Callable[[], T]) -> Staged[T]:
        value = copy()
        seconds = value.seconds if isinstance(value, SimCopy) else 0.0
        self.busy_until = max(self.busy_until, self.queue.clock()) + seconds
        return Staged(value, self.busy_until)

    def take(self, staged: Staged[T]) -> T:
        if staged.done is not None:
            self.queue.busy_until = max(self.queue.busy_until, float(staged.done))
        return staged.value


def queue_of(ctx: ProbeContext) -> SimQueue:
    """The simulated device's queue, which the context's SimMeter times."""
    assert isinstance(ctx.meter, SimMeter)
    return ctx.meter.queue


def conv_precision(meter: Meter, precision: str) -> str:
    """The precision an fp32 convolution really runs in on the simulated device: "tf32" where
    cuDNN was never told otherwise (see SimMeter), else `precision` as asked."""
    if precision == "fp32" and isinstance(meter, SimMeter) and meter.convolutions_in_tf32():
        return "tf32"
    return precision


def _charge(queue: SimQueue, per_call_s: float, first_s: float = 0.0) -> Timer:
    """A CUDA-event timer whose every call queues per_call_s of device work (first_s more on
    its very first call): events around the calls, then a sync, as meter.cuda_timer does."""
    pending = [first_s]

    def timed(fn: Callable[[], Any], inner: int) -> float:
        start = queue.event()
        for i in range(inner):
            queue.launch(per_call_s + (pending.pop() if pending and i == 0 else 0.0))
        end = queue.event()
        queue.sync()
        return end - start

    return timed


def facts_for(p: DeviceProfile) -> dict[str, Any]:
    # torchao as the [fp8] extra installs it: the simulator plans fp8 training too.
    return {"cuda_available": True, "cuda_device_count": p.gpus, "host_llc_bytes": 64 * 2**20,
            "usable_cores": p.cores, "torchao": "simulated",
            "gpus": [{"index": i, "name": p.gpu_name, "capability": p.capability,
                      "memory_total": p.memory_total, "l2_cache_bytes": p.l2_cache_bytes,
                      "uuid": f"sim-{i}"} for i in range(p.gpus)]}


def context(p: DeviceProfile, quick: bool, budget_s: float, cfg: ProbeConfig,
            clock: FakeClock, repeats: int | None = None) -> ProbeContext:
    policy = cfg.repeat_policy(repeats or (3 if quick else 5))
    return ProbeContext(device="cuda", policy=policy,
                        budget=Budget(budget_s, clock=clock), facts=facts_for(p),
                        clock=clock, meter=SimMeter(clock, p.sm_clock_Hz, p.power_W),
                        inputs=RunInputs(data_dir="/simulated", run_dir="/simulated"))


