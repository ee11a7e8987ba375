"""A compact GPT-style decoder for the `transformer` probe: pre-norm blocks, causal SDPA
attention, GELU MLP, tied input/output embeddings, no biases (as in nanoGPT with bias=False).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.proj = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        # (b, t, c) -> (b, heads, t, head_dim)
        q, k, v = (z.view(b, t, self.n_heads, c // self.n_heads).transpose(1, 2)
                   for z in (q, k, v))
        # SDPA picks flash or memory-efficient attention kernels where the device has them.
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))


class MLP(nn.Module):
    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.fc = nn.Linear(d_model, 4 * d_model, bias=False)
        self.proj = nn.Linear(4 * d_model, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(F.gelu(self.fc(x)))


class Block(nn.Module):
    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model, bias=False)
        self.attn = CausalSelfAttention(d_model, n_heads)
        self.ln2 = nn.LayerNorm(d_model, bias=False)
        self.mlp = MLP(d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, n_layers: int, d_model: int, n_heads: int, vocab_size: int,
                 max_seq_len: int) -> None:
        super().__init__()
        self.max_seq_len = max_seq_len
        self.wte = nn.Embedding(vocab_size, d_model)
        self.wpe = nn.Embedding(max_seq_len, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_heads) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d_model, bias=False)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # tied embeddings
        self.apply(self._init)

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        if t > self.max_seq_len:
            raise ValueError(f"sequence of {t} tokens exceeds the model's {self.max_seq_len}")
        pos = torch.arange(t, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)).float(), targets.reshape(-1))


def gpt_n_params(n_layers: int, d_model: int, vocab_size: int) -> int:
    """GPT's parameters without position embeddings (PaLM's and nanoGPT's N), from its shape:
    the token embedding, counted once for the output head it is tied to; per block two
    LayerNorm weights, the attention's qkv and output projections (4·d²) and the MLP's two
    (8·d²), none with a bias; the final LayerNorm. The heads split d_model and add nothing."""
    return vocab_size * d_model + n_layers * (12 * d_model**2 + 2 * d_model) + d_model


def transformer_flops_per_token(n_params: int, n_layers: int, n_heads: int, head_dim: int,
                                seq_len: int) -> float:
    """Training FLOPs per token: 6N for the weights' forward and backward, and 12·L·H·Q·T for
    attention (PaLM, Chowdhery et al. 2022, appendix B; nanoGPT's estimate_mfu)."""
    return 6.0 * n_params + 12.0 * n_layers * n_heads * head_dim * seq_len
