"""Probes that run on the accelerator or the CPU: their specs and device defaults.

This module stays light (no torch): the specs are read by `list` and by the runner's parent
process. Each probe's implementation lives in its own module and is imported in the worker.
"""

from __future__ import annotations

from typing import Any

from benchbench.probes.catalog import ProbeSpec
from benchbench.probes.configs import (
    AllreduceConfig,
    DataloaderConfig,
    DdpScalingConfig,
    HostDeviceCopyConfig,
    MatmulConfig,
    MemoryBandwidthConfig,
    PipelineConfig,
    ResNet50Config,
    TransformerConfig,
)

MiB = 1024**2


def _sampling_defaults(device: str, quick: bool) -> dict[str, Any]:
    # GPU samples of ~20 ms are far above event resolution (~0.5 us); CPU samples are longer
    # because perf_counter around a Python loop carries scheduler noise on small boxes.
    if device == "cuda":
        return {"warmup_s": 0.2 if quick else 0.5, "min_sample_s": 0.02}
    return {"warmup_s": 0.1 if quick else 0.3, "min_sample_s": 0.02 if quick else 0.05}


def _matmul_defaults(device: str, quick: bool) -> dict[str, Any]:
    if device == "cuda":
        # 16384 is needed to saturate H100/H200-class tensor cores for fp32; 4096 suffices for
        # smaller parts, so the sweep shows where each GPU reaches its plateau.
        sizes = (4096, 8192) if quick else (2048, 4096, 8192, 16384)
        dtypes = ("fp32", "tf32", "bf16", "fp16")
    else:
        sizes = (256, 512) if quick else (256, 512, 1024, 2048)
        dtypes = ("fp32", "bf16")
    return {**_sampling_defaults(device, quick), "sizes": sizes, "dtypes": dtypes}


def _copy_defaults(device: str, quick: bool) -> dict[str, Any]:
    sizes = (1 * MiB, 16 * MiB, 256 * MiB) if quick else tuple(MiB * 4**i for i in range(6))
    return {**_sampling_defaults(device, quick), "sizes": sizes}


def _training_defaults(device: str, quick: bool) -> dict[str, Any]:
    if device == "cuda":
        # Five warm-up steps cover allocator growth and the clocks' ramp after the first
        # step's cuDNN autotuning; every round warms up again.
        return {"precisions": ("fp32", "tf32", "amp_bf16", "amp_fp16"),
                "steps": 20 if quick else 50, "warmup_steps": 5, "warmup_s": 0.0}
    # --quick on a CPU trains in fp32 only: amp_bf16 is emulated on most CPUs, and its first
    # steps there cost more than a quick run's share; the default run measures both.
    return {"precisions": ("fp32",) if quick else ("fp32", "amp_bf16"),
            "steps": 3 if quick else 5, "warmup_steps": 1, "warmup_s": 0.0}


def _resnet50_defaults(device: str, quick: bool) -> dict[str, Any]:
    cpu_quick = device == "cpu" and quick
    # batch_size stays None on a GPU: the probe uses DLE's 256. On a CPU a 224 px step at
    # batch 8 takes about two seconds on a small machine, and each round pays a cold one too.
    return {**_training_defaults(device, quick), "image_size": 64 if cpu_quick else 224,
            "channels_last": device == "cuda",
            **({"batch_size": 8} if device == "cpu" else {})}


def _transformer_defaults(device: str, quick: bool) -> dict[str, Any]:
    base = {**_training_defaults(device, quick)}
    if device == "cuda" and not quick:
        return {**base, "preset": "gpt2-124m", "seq_len": 1024}
    if device == "cuda":
        return {**base, "preset": "small", "seq_len": 1024}
    return {**base, "preset": "small", "seq_len": 128 if quick else 256,
            **({"batch_size": 4} if quick else {})}


def _dataloader_defaults(device: str, quick: bool) -> dict[str, Any]:
    return {"batches": 5 if quick else 20, "warmup_steps": 1 if quick else 2}


def _pipeline_defaults(device: str, quick: bool) -> dict[str, Any]:
    # The best precision the device has: bf16 where the tensor cores do it, else fp16 (V100,
    # T4); fp32 on a CPU, where bf16 is usually emulated and far slower.
    precisions = ("amp_bf16", "amp_fp16") if device == "cuda" else ("fp32",)
    # On a CPU a 224 px step at batch 16 takes seconds; 8 keeps both halves within budget.
    cpu_batch = {"batch_size": 8} if device == "cpu" else {}
    return {**_resnet50_defaults(device, quick), "precisions": precisions, **cpu_batch}


def _allreduce_defaults(device: str, quick: bool) -> dict[str, Any]:
    # nccl-tests' usual sweep is 8 B to 8 GB; 1K..1G x4 covers the latency- and the
    # bandwidth-bound ends. CPU ranks stop lower: gloo moves ~1 GB/s on a small box.
    top = 1024**3 if device == "cuda" else (64 if quick else 256) * MiB
    sizes = []
    size = 1024
    while size <= top:
        sizes.append(size)
        size *= 4
    return {"sizes": tuple(sizes), "timeout_s": 30.0 if quick else 60.0}


def _ddp_defaults(device: str, quick: bool) -> dict[str, Any]:
    if device == "cuda":
        return {"steps": 10 if quick else 20, "warmup_steps": 3 if quick else 5,
                "image_size": 224, "batch_size": 256, "channels_last": True}
    # A functional check on CPU: two ranks share the cores, so the figures are contention.
    return {"steps": 2 if quick else 3, "warmup_steps": 1, "image_size": 32,
            "batch_size": 4, "channels_last": False, "counts": (1, 2),
            "timeout_s": 60.0 if quick else 120.0}


SPECS = (
    ProbeSpec(
        name="matmul",
        repeatable=True,
        description="dense matrix-multiply throughput per dtype (FLOP/s), every GPU or the CPU",
        config_cls=MatmulConfig,
        impl="benchbench.probes.matmul.run",
        gpu_resource="gpu_compute",
        cpu_resource="cpu_compute",
        per_gpu=True,
        defaults=_matmul_defaults,
    ),
    ProbeSpec(
        name="memory_bandwidth",
        repeatable=True,
        description="copy bandwidth of GPU memory and host memory (bytes read + written)",
        config_cls=MemoryBandwidthConfig,
        impl="benchbench.probes.memory_bandwidth.run",
        gpu_resource="gpu_memory",
        cpu_resource="host_memory",
        per_gpu=True,
        defaults=_sampling_defaults,
    ),
    ProbeSpec(
        name="host_device_copy",
        repeatable=True,
        description="host<->device copy bandwidth over PCIe, pinned and pageable, per GPU",
        config_cls=HostDeviceCopyConfig,
        impl="benchbench.probes.host_device_copy.run",
        gpu_resource="host_device_link",
        cpu_resource="host_device_link",
        requires_gpu=True,
        per_gpu=True,
        defaults=_copy_defaults,
    ),
    ProbeSpec(
        name="resnet50",
        repeatable=True,
        budget_weight=2.0,
        description="ResNet50 training-step throughput per precision (images/s), synthetic "
                    "data on the device",
        config_cls=ResNet50Config,
        impl="benchbench.probes.resnet50.run",
        gpu_resource="gpu_compute",
        cpu_resource="cpu_compute",
        defaults=_resnet50_defaults,
    ),
    ProbeSpec(
        name="transformer",
        repeatable=True,
        budget_weight=2.0,
        description="GPT-style decoder training throughput per precision (tokens/s) and "
                    "FLOPs per token for MFU",
        config_cls=TransformerConfig,
        impl="benchbench.probes.transformer.run",
        gpu_resource="gpu_compute",
        cpu_resource="cpu_compute",
        defaults=_transformer_defaults,
    ),
    ProbeSpec(
        name="dataloader",
        repeatable=True,
        # Each round starts its loaders afresh (worker processes, DALI's import): a fixed
        # cost that a share of weight 1 left no time after, on a small machine.
        budget_weight=2.0,
        description="decode + augment throughput (images/s) of torchvision and DALI loaders "
                    "over a worker sweep, files already in the page cache",
        config_cls=DataloaderConfig,
        impl="benchbench.probes.dataloader.run",
        gpu_resource="cpu_dataloading",
        cpu_resource="cpu_dataloading",
        needs_data=True,
        defaults=_dataloader_defaults,
    ),
)


# Distributed probes: they run first under torchrun or srun, where every rank must reach them
# together (see runner.py).
DISTRIBUTED_SPECS = (
    ProbeSpec(
        name="allreduce",
        description="torch.distributed all_reduce time, algbw and busbw (nccl-tests' "
                    "definitions) from 1K to 1G, NCCL across GPUs or gloo across CPU ranks",
        config_cls=AllreduceConfig,  # type: ignore[arg-type]
        impl="benchbench.probes.allreduce.run",
        gpu_resource="interconnect",
        cpu_resource="interconnect",
        distributed=True,
        defaults=_allreduce_defaults,
    ),
    ProbeSpec(
        name="ddp_scaling",
        budget_weight=2.0,
        description="DistributedDataParallel ResNet50 throughput at 1, 2, 4 ... GPUs: scaling "
                    "efficiency and the cost knee",
        config_cls=DdpScalingConfig,
        impl="benchbench.probes.ddp_scaling.run",
        gpu_resource="interconnect",
        cpu_resource="interconnect",
        distributed=True,
        defaults=_ddp_defaults,
    ),
)


# Runs after dataloader (it reuses the best loader configuration) and after storage.
PIPELINE_SPEC = ProbeSpec(
    name="pipeline",
    budget_weight=2.0,
    description="the real input pipeline feeding the ResNet50 training step: total_ips against "
                "compute_ips (accelerator utilisation), data wait and compute per step",
    config_cls=PipelineConfig,
    impl="benchbench.probes.pipeline.run",
    gpu_resource="cpu_dataloading",
    cpu_resource="cpu_dataloading",
    needs_data=True,
    defaults=_pipeline_defaults,
)
