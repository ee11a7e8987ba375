"""Generation with a KV cache on the transformer workload's GPT: a prefill over the prompt that
fills the cache, then one token at a time, each attending to every cached key. It runs the
GPT module's own blocks and weights (models/gpt.py), so the model served is the one trained.

The cache is allocated once for the prompt and every new token (no concatenation per step, whose
copies would grow with the sequence), as serving engines do. Greedy decoding: the benchmark
times the work, not the text.

Attention runs on FlashAttention or the memory-efficient kernel (the math path where neither
can), never cuDNN's: recent PyTorch puts cuDNN first on Hopper and Blackwell (cuDNN newer than
9.15, compute capability 9.0, 10.0 or 10.3), and cuDNN builds a graph for every new key length and
layout, so that every decode step, one key longer than the last, would build one. On two
H200s, with cuDNN allowed, each GPT-2 124M token took 35-58 ms and the first 46-80 ms, flat
from step to step (34-38 ms over the first box's 127 steps), where its ~300 kernels, a ResNet-50
forward's 176 taking 3-5 ms there, should take a few: the cost of a graph build per call, not
of the GPU. On a third H200, with cuDNN left out: 2.2 ms a token, 2.7 ms to the first. Serving
engines use decode kernels that take any length.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from benchbench.workloads.models.gpt import GPT, Block

# The attention kernels generation may use: none that compiles per sequence length.
BACKENDS = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


class KVCache:
    """Per block, keys and values of shape (batch, heads, capacity, head_dim)."""

    def __init__(self, model: GPT, batch: int, capacity: int, dtype: torch.dtype,
                 device: torch.device) -> None:
        first = model.blocks[0]
        assert isinstance(first, Block)
        heads = first.attn.n_heads
        head_dim = model.wte.weight.shape[1] // heads
        shape = (batch, heads, capacity, head_dim)
        self.k = [torch.empty(shape, dtype=dtype, device=device) for _ in model.blocks]
        self.v = [torch.empty(shape, dtype=dtype, device=device) for _ in model.blocks]
        self.length = 0


def _attend(block: Block, x: torch.Tensor, cache: KVCache, layer: int, start: int
            ) -> torch.Tensor:
    attn = block.attn
    b, t, c = x.shape
    q, k, v = attn.qkv(block.ln1(x)).split(c, dim=2)
    q, k, v = (z.view(b, t, attn.n_heads, c // attn.n_heads).transpose(1, 2) for z in (q, k, v))
    cache.k[layer][:, :, start:start + t] = k
    cache.v[layer][:, :, start:start + t] = v
    keys, values = cache.k[layer][:, :, :start + t], cache.v[layer][:, :, :start + t]
    # The prompt attends causally within itself; a new token attends to all that came before.
    y = F.scaled_dot_product_attention(q, keys, values, is_causal=start == 0 and t > 1)
    x = x + attn.proj(y.transpose(1, 2).contiguous().view(b, t, c))
    return x + block.mlp(block.ln2(x))


@torch.inference_mode()
def forward_cached(model: GPT, idx: torch.Tensor, cache: KVCache) -> torch.Tensor:
    """Logits of the last position, after running `idx` through the blocks at the cache's
    current length and appending its keys and values."""
    start, t = cache.length, idx.shape[1]
    pos = torch.arange(start, start + t, device=idx.device)
    x = model.wte(idx) + model.wpe(pos)
    with sdpa_kernel(BACKENDS):
        for layer, block in enumerate(model.blocks):
            assert isinstance(block, Block)
            x = _attend(block, x, cache, layer, start)
    cache.length = start + t
    return model.lm_head(model.ln_f(x[:, -1:]))


def next_token(logits: torch.Tensor) -> torch.Tensor:
    """Greedy: the most likely token, shaped (batch, 1) to feed the next step."""
    return logits.argmax(dim=-1)
