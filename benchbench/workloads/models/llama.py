"""A Llama-style decoder for the memory_fit workload: RMSNorm, rotary positions, grouped-query
attention through SDPA, a SwiGLU MLP, an untied output head; optionally each block under
activation checkpointing. Its shapes are analysis/memory_fit.py's ladder, whose closed-form
estimate counts what this module's forward keeps: the q/k/v and the gate/up projections are
fused, as the estimate assumes.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from benchbench.analysis.memory_fit import Shape

ROPE_BASE = 10000.0  # Llama 2's rotary base


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.float()  # the residual stream and its norm in fp32, as Llama's reference does
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


class Attention(nn.Module):
    def __init__(self, s: Shape) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = s.heads, s.kv_heads, s.head_dim
        self.qkv = nn.Linear(s.hidden, s.hidden + 2 * s.kv_dim, bias=False)
        self.out = nn.Linear(s.hidden, s.hidden, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        kv = self.kv_heads * self.head_dim
        q, k, v = self.qkv(x).split((c, kv, kv), dim=2)
        q = q.view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = k.view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = v.view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        if self.kv_heads != self.heads:  # grouped-query attention: each kv head serves a group
            k = k.repeat_interleave(self.heads // self.kv_heads, dim=1)
            v = v.repeat_interleave(self.heads // self.kv_heads, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).contiguous().view(b, t, c))


class SwiGLU(nn.Module):
    def __init__(self, s: Shape) -> None:
        super().__init__()
        self.gate_up = nn.Linear(s.hidden, 2 * s.intermediate, bias=False)
        self.down = nn.Linear(s.intermediate, s.hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return self.down(F.silu(gate) * up)


class Block(nn.Module):
    def __init__(self, s: Shape) -> None:
        super().__init__()
        self.attn_norm, self.mlp_norm = RMSNorm(s.hidden), RMSNorm(s.hidden)
        self.attn, self.mlp = Attention(s), SwiGLU(s)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.mlp(self.mlp_norm(x))


class Llama(nn.Module):
    def __init__(self, s: Shape, seq_len: int, checkpointing: bool = False) -> None:
        super().__init__()
        self.checkpointing = checkpointing
        self.embed = nn.Embedding(s.vocab, s.hidden)
        self.blocks = nn.ModuleList(Block(s) for _ in range(s.layers))
        self.norm = RMSNorm(s.hidden)
        self.head = nn.Linear(s.hidden, s.vocab, bias=False)
        inv = 1.0 / ROPE_BASE ** (torch.arange(0, s.head_dim, 2).float() / s.head_dim)
        angles = torch.outer(torch.arange(seq_len).float(), inv)
        angles = torch.cat((angles, angles), dim=-1)
        # Buffers, not parameters: they move with the model and are not trained.
        self.cos: torch.Tensor
        self.sin: torch.Tensor
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        cos, sin = self.cos[:t], self.sin[:t]
        x = self.embed(idx)
        for block in self.blocks:
            if self.checkpointing:
                x = checkpoint(block, x, cos, sin, use_reentrant=False)
            else:
                x = block(x, cos, sin)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)).float(), targets.reshape(-1))
