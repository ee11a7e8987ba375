"""Probe `transformer`: training-step throughput of a GPT-style decoder per precision, in
tokens/s, with the FLOP count per token that MFU is derived from.

Synthetic tokens already on the device; AdamW (fused on CUDA). flops_per_token follows the
PaLM appendix and nanoGPT: 6N + 12·L·H·Q·T, with N the parameters without position embeddings,
counted from the shape (models/gpt.py: gpt_n_params).
"""

from __future__ import annotations

from typing import Any

import torch

from benchbench.core.results import Measurement
from benchbench.probes.api import ProbeContext, ProbeOutput, resolved
from benchbench.probes.matmul.run import FP8_MULTIPLE
from benchbench.workloads._training import Precision, Step, TrainingJob, make_step, run_training
from benchbench.workloads.models.gpt import GPT, gpt_n_params, transformer_flops_per_token
from benchbench.workloads.transformer.config import BATCH, BATCH_CAP, TransformerConfig


def float8_eligible(module: torch.nn.Module, fqn: str) -> bool:
    """Whether torchao converts this module: not the output head (tied to the embedding, and
    the layer recipes keep in high precision), and a Linear only where both its dimensions are
    multiples of 16, as scaled_mm takes them (the filter torchao's float8 README gives); the
    rest train in bf16."""
    if fqn == "lm_head":
        return False
    if isinstance(module, torch.nn.Linear):
        return module.in_features % FP8_MULTIPLE == 0 and \
            module.out_features % FP8_MULTIPLE == 0
    return True


def to_float8(model: GPT) -> None:
    """torchao's float8 training on every eligible Linear: dynamic tensor-wise scales, e4m3
    forward, e5m2 for the gradients, as torchao's default recipe does. Eager, it is expected
    to be slower than amp_bf16 below a width of about 2048 (pytorch/ao#685): the guide reads
    the pair by the width and compile recorded in the context."""
    from torchao.float8 import convert_to_float8_training

    convert_to_float8_training(model, module_filter_fn=float8_eligible)


def build_model(dims: dict[str, int], dev: str) -> GPT:
    """The GPT of these dimensions, its weights made and randomly initialised on `dev` itself:
    built on the host and then copied, every build would pay the host's initialisation of
    them (gpt2-124m: 0.5 GB in fp32) and the copy."""
    with torch.device(dev):
        return GPT(dims["n_layers"], dims["d_model"], dims["n_heads"], dims["vocab_size"],
                   dims["max_seq_len"])


def flops_per_token(cfg: TransformerConfig) -> tuple[dict[str, int], Measurement]:
    """The model's shape, and its FLOPs per trained token as a measurement (6N + 12·L·H·Q·T),
    which MFU and the physical limit of the throughput divide by."""
    dims = cfg.shape()
    seq = resolved(cfg.seq_len, "seq_len")
    n_params = gpt_n_params(dims["n_layers"], dims["d_model"], dims["vocab_size"])
    head_dim = dims["d_model"] // dims["n_heads"]
    fpt = transformer_flops_per_token(n_params, dims["n_layers"], dims["n_heads"], head_dim, seq)
    shape = {"n_params": n_params, "n_layers": dims["n_layers"], "d_model": dims["d_model"],
             "n_heads": dims["n_heads"], "head_dim": head_dim, "vocab_size": dims["vocab_size"]}
    return shape, Measurement(metric="flops_per_token", key={"preset": cfg.preset, "seq_len": seq},
                              value=fpt, unit="count", statistic="median", samples=[fpt],
                              higher_is_better=False,
                              context={**shape, "formula": "6N + 12*L*H*Q*T"})


def run(ctx: ProbeContext, cfg: TransformerConfig) -> ProbeOutput:
    dev = "cuda:0" if ctx.device == "cuda" else "cpu"
    dims = cfg.shape()
    seq = resolved(cfg.seq_len, "seq_len")  # at most the preset's maximum: the config checked it

    def build(batch: int, precision: Precision) -> Step:
        gen = torch.Generator(device=dev).manual_seed(batch)
        model = build_model(dims, dev)
        if precision.fp8:
            to_float8(model)
        forward = torch.compile(model) if cfg.compile else model
        optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95),
                                      weight_decay=0.1, fused=dev != "cpu")
        tokens = torch.randint(0, dims["vocab_size"], (batch, seq + 1), device=dev,
                               generator=gen)
        x, y = tokens[:, :-1], tokens[:, 1:]
        return make_step(lambda: forward(x, y), optimizer, precision, dev)

    shape, flops = flops_per_token(cfg)
    context: dict[str, Any] = {**shape, "compile": cfg.compile,
                               "threads": torch.get_num_threads()}
    if dev != "cpu":
        context["gpu_name"] = ctx.meter.device_name(dev)
    job = job_for(cfg, dev, context)
    measurements, notes = run_training(ctx, job, build)
    return ProbeOutput([flops, *measurements] if measurements else [], notes=notes,
                       params={"batch_size": job.batch_size, **shape})


def job_for(cfg: TransformerConfig, dev: str, context: dict[str, Any]) -> TrainingJob:
    """What run_training measures for this config on `dev` (the simulator plans with it too)."""
    # An integer or "auto" (kept apart: mypy would type resolved(int | str | None) as object).
    size = cfg.batch_size
    batch = size if isinstance(size, str) else resolved(size, "batch_size")
    seq = resolved(cfg.seq_len, "seq_len")
    return TrainingJob(
        dev=dev, precisions=resolved(cfg.precisions, "precisions"), batch_size=batch,
        default_batch=BATCH["cpu" if dev == "cpu" else "cuda"],
        batch_cap=BATCH_CAP, steps=resolved(cfg.steps, "steps"), work_per_sample=float(seq),
        unit="tokens/s", min_timed_s=resolved(cfg.min_timed_s, "min_timed_s"),
        key=lambda precision: {"device": dev, "precision": precision, "preset": cfg.preset,
                               "seq_len": seq, "batch_size": batch},
        context=context)
