"""What a full training step of a Llama-style model needs in memory, in closed form, and what a
memory_fit run's measured points say beyond themselves.

The estimate is the estimators' arithmetic (accelerate's estimate-memory, DeepSpeed's
estimate_zero*), made explicit so that a measured point can be held against it: bytes per
parameter for the weights, their gradients, AdamW's two moments and the low-precision working
copy, plus the activations one step keeps for its backward, counted by layer shape. Those
estimators stop at the first part (16-18 B per parameter) or guess the second; the probe's
measured ÷ estimated ratio says by how much they err.

Pure functions: no torch. Units: B, parameters, tokens, ratio.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from benchbench.core.results import Measurement
from benchbench.core.units import iec


@dataclass(frozen=True)
class Shape:
    """A decoder: RMSNorm, SwiGLU MLP, rotary positions, grouped-query attention, an untied
    output head (Llama's layout)."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int = 32000  # Llama 2's tokenizer, for every rung, so that sizes compare

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    def params(self) -> int:
        """Every parameter: embedding, per layer the fused q/k/v and output projections, the
        fused gate/up and the down projection and two norms, the final norm, the head."""
        attn = self.hidden * (self.hidden + 2 * self.kv_dim) + self.hidden * self.hidden
        mlp = 3 * self.hidden * self.intermediate
        per_layer = attn + mlp + 2 * self.hidden
        return 2 * self.vocab * self.hidden + self.layers * per_layer + self.hidden


# The ladder, 125M to 70B. The named ones follow the published shapes: Llama 2 7B, 13B and 70B
# (Touvron et al. 2023, table 1 and the released configs: 70B uses 8 KV heads), Code Llama 34B
# (8 KV heads), OpenLLaMA 3B; the small rungs follow GPT-2/GPT-3's widths with Llama's MLP
# ratio (8/3 of the width, rounded as Llama rounds it).
LADDER: dict[str, Shape] = {s.name: s for s in (
    Shape("125m", 12, 768, 12, 12, 2048),
    Shape("350m", 24, 1024, 16, 16, 2816),
    Shape("760m", 24, 1536, 16, 16, 4096),
    Shape("1.3b", 24, 2048, 16, 16, 5504),
    Shape("3b", 26, 3200, 32, 32, 8640),
    Shape("7b", 32, 4096, 32, 32, 11008),
    Shape("13b", 40, 5120, 40, 40, 13824),
    Shape("34b", 48, 8192, 64, 8, 22016),
    Shape("70b", 80, 8192, 64, 8, 28672),
)}


def deeper(base: Shape, layers: int) -> Shape:
    """`base`'s width at `layers` layers: a size between two rungs. At one width memory and
    parameters grow with the layers alone, so whether a size fits is monotone in them."""
    return dataclasses.replace(base, name=f"{base.name}@{layers}L", layers=layers)


def layers_to_reach(base: Shape, upper: Shape) -> int:
    """The fewest layers at `base`'s width with at least `upper`'s parameters."""
    per_layer = deeper(base, base.layers + 1).params() - base.params()
    return base.layers + max(0, math.ceil((upper.params() - base.params()) / per_layer))


# Bytes per parameter, by precision, as the estimators count them. Under torch.autocast the
# parameters stay fp32 (the master weights), their gradients are fp32, AdamW keeps two fp32
# moments, and autocast keeps a bf16/fp16 copy of each weight for the backward.
BYTES_PER_PARAM: dict[str, dict[str, float]] = {
    "amp_bf16": {"weights": 4, "gradients": 4, "optimizer": 8, "working_copy": 2},
    "amp_fp16": {"weights": 4, "gradients": 4, "optimizer": 8, "working_copy": 2},
    "fp32": {"weights": 4, "gradients": 4, "optimizer": 8, "working_copy": 0},
}


def activation_bytes(shape: Shape, seq: int, batch: int, precision: str,
                     checkpointing: bool) -> dict[str, float]:
    """Bytes the forward keeps for the backward, by part: per layer, what each op saves (an
    fp32 residual stream and its two RMSNorms, the fused q/k/v input and output, the rotated
    q and k, attention's output, the SwiGLU's gate, up, product and down input, in the
    compute dtype; flash-style attention keeps no seq x seq scores), and the head's logits in
    the compute dtype and fp32 for the loss. With activation checkpointing each layer keeps
    only its input, and one layer is recomputed at a time during the backward."""
    a = 4 if precision == "fp32" else 2  # bytes of an activation in the compute dtype
    h, kv, i = shape.hidden, shape.kv_dim, shape.intermediate
    tokens = seq * batch
    norms = 2 * (4 + 4) * h  # each RMSNorm: its fp32 input and normalised output
    attention = a * (h + (h + 2 * kv) + h + kv + 2 * h)  # qkv in, out, rope q/k, out, proj in
    mlp = a * (h + 4 * i)  # gate/up in; gate, silu(gate), up, down's input
    layer = tokens * (norms + attention + mlp)
    head = tokens * (8 * h + a * h + (a + 4 + 4) * shape.vocab)  # norm, head in, logits, loss
    kept = tokens * 4 * h * shape.layers + layer if checkpointing else layer * shape.layers
    return {"layers": float(kept), "head": float(head)}


@dataclass(frozen=True)
class Estimate:
    """The closed-form bytes of one training step's peak, by part."""

    params: int
    per_param: dict[str, float]  # B per parameter, by part
    activations: dict[str, float]  # B, by part

    @property
    def states(self) -> float:
        """Every per-parameter part together, as the estimators count them (16-18 B)."""
        return self.params * sum(self.per_param.values())

    @property
    def total(self) -> float:
        return peak(self.params, self.per_param, sum(self.activations.values()))

    def to_dict(self) -> dict[str, Any]:
        return {"params": self.params, "bytes_per_param": dict(self.per_param),
                "states_B": self.states, "activations_B": dict(self.activations),
                "total_B": self.total}


def peak(params: float, per_param: dict[str, float], activations: float) -> float:
    """A training step's peak: the weights and AdamW's moments throughout, and the larger end of
    the backward. At its start the forward's saved tensors are all held (the activations and
    autocast's low-precision copies of the weights) and no gradient yet (the step zeroes them
    with set_to_none); at its end every gradient and none of those. Between, each layer's
    gradients take the place of its saved tensors, so the peak is at one end. The estimators'
    sum of all the parts (16-18 B a parameter plus every activation) overstated the first H200
    runs' allocator peaks by 14-25%; this came within 0.5% of all six measured on three H200s
    (7B's width at 32-43 layers, 6.7-9.0 B parameters, plain and checkpointed, seq 2048, bf16
    autocast)."""
    held = params * (per_param["weights"] + per_param["optimizer"])
    forward = params * per_param["working_copy"] + activations
    return held + max(forward, params * per_param["gradients"])


def estimate(shape: Shape, seq: int, batch: int, precision: str, checkpointing: bool
             ) -> Estimate:
    per = BYTES_PER_PARAM.get(precision, BYTES_PER_PARAM["amp_bf16"])
    return Estimate(shape.params(), dict(per),
                    activation_bytes(shape, seq, batch, precision, checkpointing))


# --- what the measured points say beyond themselves ------------------------------------------

def needs(shape: Shape, seq: int, precision: str, checkpointing: bool, ratio: float) -> float:
    """Bytes a full fine-tune of `shape` needs at micro-batch 1: the estimate, corrected by
    the measured ratio."""
    return estimate(shape, seq, 1, precision, checkpointing).total * ratio


def zero3_needs(shape: Shape, seq: int, precision: str, checkpointing: bool, gpus: int
                ) -> float:
    """Bytes per GPU with ZeRO-3 over `gpus` GPUs: the weights, gradients, optimizer states
    and working copy partitioned over them (Rajbhandari et al. 2020, stage 3), activations
    not. All the states together, not `peak`'s larger end of the backward: ZeRO keeps its
    low-precision parameters and gradient partitions for the whole step, and gathers and
    reduces in buffers of their own. The plain estimate: the measured ratio belongs to the
    unpartitioned full fine-tune it was measured on (its allocator's rounding and workspaces
    do not shrink with the states)."""
    e = estimate(shape, seq, 1, precision, checkpointing)
    return e.states / gpus + sum(e.activations.values())


def zero3_largest(seq: int, precision: str, ratio: float | None, memory: float, gpus: int
                  ) -> str | None:
    """The largest rung whose full fine-tune with activation checkpointing fits `memory` per
    GPU under ZeRO-3 over `gpus` GPUs, by the plain estimate. `ratio` is not applied (see
    zero3_needs); the parameter stays for doctor/measured.py's call."""
    return largest(lambda s: zero3_needs(s, seq, precision, True, gpus) <= memory)


# LoRA: the base weights frozen in the compute dtype (2 B a parameter, no gradient, no
# optimizer), adapters of about 1% of the parameters trained in full.
LORA_FROZEN_BPP = 2.0
LORA_TRAINED_SHARE = 0.01


def lora_needs(shape: Shape, seq: int, precision: str, checkpointing: bool) -> float:
    """Bytes a LoRA fine-tune of `shape` needs, by the plain estimate: a ratio measured on a
    full fine-tune, whose states are 18 B a parameter, says nothing of frozen 2 B weights (a
    ratio of 0.9 applied here once fitted 70B on an H200's 150.75e9 B: its frozen weights
    alone are 138 GB, 158 GB with the adapters' states and the activations)."""
    e = estimate(shape, seq, 1, precision, checkpointing)
    trained = e.params * LORA_TRAINED_SHARE * sum(e.per_param.values())
    return e.params * LORA_FROZEN_BPP + trained + sum(e.activations.values())


def largest(fits: Callable[[Shape], bool]) -> str | None:
    """The largest rung of the ladder for which fits(shape) holds (the ladder is ordered)."""
    best = None
    for name, shape in LADDER.items():
        if fits(shape):
            best = name
    return best


def largest_size(fits: Callable[[Shape], bool]) -> Shape | None:
    """The largest size for which fits(shape) holds: the largest rung, then its width at more
    layers, short of the next rung's parameters (the sizes memory_fit bisects on a GPU)."""
    name = largest(fits)
    if name is None:
        return None
    rungs = list(LADDER)
    base = LADDER[name]
    if rungs.index(name) + 1 == len(rungs):
        return base
    upper = LADDER[rungs[rungs.index(name) + 1]]
    between = [deeper(base, n) for n in range(base.layers + 1, layers_to_reach(base, upper))]
    return max((s for s in between if fits(s)), key=Shape.params, default=base)


MiB = 2**20
# An "80 GB" card as the smaller of them, the H100 80GB HBM3, gives it (an A100 80GB shows
# 81,920 MiB). CARD_80GB_TOTAL_B: nvidia-smi's (NVML's) memory.total there, 81,559 MiB
# (85.5e9 B, 79.6 GiB; doctor/checks.py cites the same reading). CARD_80GB_USABLE_B: what
# torch reports it can use, torch.cuda.get_device_properties().total_memory, 81,082-81,090
# MiB on H100 80GB HBM3s in public logs (torch 2.0 with CUDA 11.8 to torch 2.7 with CUDA
# 12.8; torch prints MiB as "MB"), the smallest taken: 79.2 GiB. It is the figure a run
# records of its own GPU (memory_fit's memory_total_B), so "fits an 80 GB card" is judged as
# "fits this GPU" is.
CARD_80GB_TOTAL_B = 81_559 * MiB
CARD_80GB_USABLE_B = 81_082 * MiB
CARD_80GB_NAME = (f"{iec(CARD_80GB_TOTAL_B)}, nvidia-smi's {CARD_80GB_TOTAL_B // MiB:,} MiB, "
                  f"{iec(CARD_80GB_USABLE_B)} of it usable by torch")


def billions(params: int) -> str:
    return f"{params / 1e9:.1f}B" if params >= 1e9 else f"{params / 1e6:,.0f}M"


def derived_lines(seq: int, precision: str, ratio: float, memory: float, gpus: int
                  ) -> list[str]:
    """What the measurements derive for other models and set-ups, each said to be derived: a
    7B model's need and an 80 GB GPU's largest (the buyer's guide: "LLM fine-tuning needs at
    least an A100 80GB"), by the estimate × the measured ratio, which was measured on exactly
    such full fine-tunes; the largest ZeRO-3 and LoRA fine-tunes by the plain estimate."""
    seven = LADDER["7b"]
    plain, ckpt = (needs(seven, seq, precision, c, ratio) for c in (False, True))
    out = [f"a 7B model ({billions(seven.params())}) needs {iec(plain)} plain and {iec(ckpt)} "
           f"with activation checkpointing at seq {seq} (derived: the estimate × the measured "
           f"ratio {ratio:.2f})"]
    over = sorted({gpus, 8} - {0, 1})  # one GPU: the plain figures are the answer
    for n in over:
        z = zero3_largest(seq, precision, None, memory, n)
        out.append(f"ZeRO-3 over {n} such GPU{'s' if n > 1 else ''} would fully fine-tune up to "
                   f"{_rung(z)} with checkpointing (derived from the plain estimate and "
                   "ZeRO-3's partitioning, without the measured ratio, which was measured "
                   "unpartitioned; not measured)")
    lora = largest(lambda s: lora_needs(s, seq, precision, True) <= memory)
    out.append(f"LoRA on one such GPU would fit up to {_rung(lora)} (the plain estimate, "
               "without the measured ratio, which was measured on a full fine-tune: frozen "
               f"weights at {LORA_FROZEN_BPP:g} B a parameter, {LORA_TRAINED_SHARE:.0%} of them "
               "trained; derived, not measured)")

    def on_80(checkpointing: bool) -> Shape | None:
        return largest_size(lambda s: needs(s, seq, precision, checkpointing, ratio)
                            <= CARD_80GB_USABLE_B)

    out.append(f"the guide says LLM fine-tuning needs at least an A100 80GB: at this run's "
               f"bytes, an H100 80GB ({CARD_80GB_NAME}) fully fine-tunes up to "
               f"{_size(on_80(False))} plain and {_size(on_80(True))} with checkpointing "
               "(derived)")
    return out


def _rung(name: str | None) -> str:
    if name is None:
        return "none of the ladder (not even 125M)"
    return f"{name.upper()} ({billions(LADDER[name].params())})"


def _size(shape: Shape | None) -> str:
    if shape is None or shape.name in LADDER:
        return _rung(shape.name if shape else None)
    base = shape.name.split("@")[0]
    return (f"{billions(shape.params())} ({base.upper()}'s width at {shape.layers} layers, "
            f"between the ladder's rungs)")


# A fit that leaves less than this share of the device is at its edge: allocator
# fragmentation, another process or one more token of sequence tips it over.
EDGE_HEADROOM = 0.02


def headroom(m: Measurement) -> tuple[float, str] | None:
    """A largest_model point's share of the device left, and in words: what the allocator
    reserved against the device's total where the run recorded it, else the peak allocated;
    None without the device's total (a CPU)."""
    c = m.context
    total, reserved = c.get("memory_total_B"), c.get("peak_reserved_B")
    used = reserved or c.get("peak_B")
    if not total or not used:
        return None
    left = 1 - used / total
    return left, (f"{iec(used)} {'reserved' if reserved else 'allocated'} of the device's "
                  f"{iec(total)}, {left:.1%} left")


def next_size(m: Measurement) -> str:
    """The size just above a largest_model point: its width at one more layer."""
    return f"{str(m.context['rung']).split('@')[0]}@{int(m.context['layers']) + 1}L"


def at_least(m: Measurement) -> bool:
    """Whether a largest_model point is only a floor on a GPU: the size just above it was not
    tried (a bisection that stopped short of it, or a search stopped for time or RAM)."""
    nxt = m.context.get("next_up") or {}
    if m.context.get("bounded_by") == "the ladder's end":
        return False
    return not (nxt.get("outcome") == "out of memory" and nxt.get("rung") == next_size(m))


def edge_text(m: Measurement) -> str:
    """How a largest_model point fits, and whether the size above it was tried: 'fits at the
    edge: 139 GiB reserved of the device's 140 GiB, 0.6% left; 7b@40L was not tried (…)'."""
    room = headroom(m)
    if room is None:
        return ""
    left, words = room
    fit = "fits at the edge" if left < EDGE_HEADROOM else "fits"
    if not at_least(m):
        return f"{fit}: {words}; {next_size(m)} ran out of memory"
    nxt = (m.context.get("next_up") or {}).get("rung")
    tried = f" (the next tried, {nxt}: {m.context['next_up']['outcome']})" if nxt else ""
    return f"{fit}: {words}; {next_size(m)} was not tried{tried}"
