"""Fidelity check: each training probe against a bare hand-written loop on the same model,
batch, size and precision, interleaved in one process so both see the same conditions.

    python scripts/bare_loops.py [--device cpu|cuda] [--trials 8] [--steps 10]
                                 [--transformer-steps 100]

Prints each pair and the ratio of medians; the probes should land within 3% of the loop. A GPU
runs the small transformer's step in ~6 ms (an H200): over 10 steps its ratio read 1.119,
1.103 and 0.980 on three boxes, too short a window to tell; --transformer-steps lengthens it.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torchvision
from torch import nn

from benchbench.core.sampling import Budget, RepeatPolicy
from benchbench.machine.environment import torch_facts
from benchbench.probes.api import ProbeContext
from benchbench.workloads.models.gpt import GPT
from benchbench.workloads.resnet50 import run as resnet50
from benchbench.workloads.resnet50.config import SPEC as RESNET50
from benchbench.workloads.transformer import run as transformer
from benchbench.workloads.transformer.config import SPEC as TRANSFORMER


def sync(dev: str) -> None:
    if dev.startswith("cuda"):
        torch.cuda.synchronize(dev)


def bare_resnet(dev: str, batch: int, image: int, steps: int, amp: bool) -> float:
    fmt = torch.channels_last if dev != "cpu" else torch.contiguous_format
    model = torchvision.models.resnet50(weights=None).to(dev, memory_format=fmt)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    x = torch.randn(batch, 3, image, image, device=dev).contiguous(memory_format=fmt)
    y = torch.randint(0, 1000, (batch,), device=dev)
    loss_fn = nn.CrossEntropyLoss()
    device_type = "cuda" if dev != "cpu" else "cpu"

    def step() -> None:
        with torch.autocast(device_type, dtype=torch.bfloat16, enabled=amp):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    timed(step, dev, steps)  # warm-up
    return batch * steps / timed(step, dev, steps)


def bare_gpt(dev: str, batch: int, seq: int, steps: int, amp: bool) -> float:
    model = GPT(4, 256, 4, 8192, 1024).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1,
                            fused=dev != "cpu")
    tokens = torch.randint(0, 8192, (batch, seq + 1), device=dev)
    x, y = tokens[:, :-1], tokens[:, 1:]
    device_type = "cuda" if dev != "cpu" else "cpu"

    def step() -> None:
        with torch.autocast(device_type, dtype=torch.bfloat16, enabled=amp):
            loss = model(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    timed(step, dev, steps)  # warm-up
    return batch * seq * steps / timed(step, dev, steps)


def timed(step, dev: str, steps: int) -> float:
    """The first call is the warm-up (same count as the probe's); the second is measured."""
    sync(dev)
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    sync(dev)
    return time.perf_counter() - t0


def probe_value(module, cfg, dev: str) -> float:
    ctx = ProbeContext(device="cuda" if dev != "cpu" else "cpu",
                       policy=RepeatPolicy(min_repeats=3, max_repeats=3, warmup_s=0.0,
                                           warmup_steps=cfg.warmup_steps),
                       budget=Budget(600.0), facts=torch_facts())
    out = module.run(ctx, cfg)
    return next(m.value for m in out.measurements if m.metric == "throughput")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                    help="cpu (default) or cuda, the first GPU")
    ap.add_argument("--trials", type=int, default=8,
                    help="interleaved pairs per probe (default 8)")
    ap.add_argument("--steps", type=int, default=10,
                    help="timed training steps per measurement (default 10)")
    ap.add_argument("--transformer-steps", type=int, default=None,
                    help="the transformer's timed steps (default: --steps)")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "amp_bf16"],
                    help="default fp32")
    a = ap.parse_args()
    dev = "cuda:0" if a.device == "cuda" else "cpu"
    amp = a.precision == "amp_bf16"
    gpu = dev != "cpu"
    batch_r, image = (256, 224) if gpu else (8, 64)
    batch_t, seq = (16, 1024) if gpu else (4, 128)
    rows: dict[str, list[tuple[float, float]]] = {"resnet50": [], "transformer": []}
    device, facts = ("cuda" if gpu else "cpu"), torch_facts()
    rcfg = RESNET50.resolve(device, False, facts, dict(
        precisions=(a.precision,), batch_size=batch_r, image_size=image, steps=a.steps,
        warmup_steps=a.steps - 1, channels_last=gpu))
    t_steps = a.transformer_steps or a.steps
    tcfg = TRANSFORMER.resolve(device, False, facts, dict(
        precisions=(a.precision,), preset="small", seq_len=seq, batch_size=batch_t,
        steps=t_steps, warmup_steps=t_steps - 1))
    for trial in range(a.trials):
        # The probe runs its warm-up plus one synchronized estimate step, then its steps timed;
        # the bare loop gets as many untimed then as many timed steps. The order flips
        # every trial so that drift on a shared machine does not favour either side.
        pairs = [
            ("resnet50", lambda: probe_value(resnet50, rcfg, dev),
             lambda: bare_resnet(dev, batch_r, image, a.steps, amp)),
            ("transformer", lambda: probe_value(transformer, tcfg, dev),
             lambda: bare_gpt(dev, batch_t, seq, t_steps, amp)),
        ]
        for name, probe, bare in pairs:
            if trial % 2:
                b = bare()
                rows[name].append((probe(), b))
            else:
                p = probe()
                rows[name].append((p, bare()))
    for name, pairs in rows.items():
        probe = statistics.median(p for p, _ in pairs)
        bare = statistics.median(b for _, b in pairs)
        print(f"{name} {a.precision} on {dev}: probe {probe:.1f}/s, bare loop {bare:.1f}/s, "
              f"ratio {probe / bare:.3f}; pairs "
              + ", ".join(f"{p:.1f}/{b:.1f}" for p, b in pairs))


if __name__ == "__main__":
    main()
