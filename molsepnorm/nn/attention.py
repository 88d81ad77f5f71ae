"""Multi-head self-attention with an additive bias (Graphormer, Ying et al., NeurIPS 2021):

    A = softmax(Q K^T / sqrt(d) + bias) V,   bias (B, H, L, L), -inf on padded keys.

Two interchangeable implementations, chosen by ``impl``:

* ``"math"`` -- the expression above written out, softmax in float32 (the default).
* ``"sdpa"`` -- ``F.scaled_dot_product_attention`` with the float bias as ``attn_mask``.
  A mask that needs a gradient sends PyTorch to its math kernel anyway; on GPU it may
  still win.  Under autocast the bias is cast to the query dtype.

"math" is the default because it is the faster of the two on CPU (forward + backward of a
Graphormer-slim layer stack, ``scripts/bench_attention.py``; ``torch.compile`` of the
stack is slower still, its graph breaking at the norms' mask checks).  In float32 it
computes the scale, Q K^T and the bias add with one ``baddbmm`` (one (B, H, L, L) tensor
instead of three), which matters on long padded sequences (ogbg-molhiv batches) and little
on short ones (ZINC).  Figures in ``docs/benchmarks.md``.  Under autocast the product
stays in reduced precision and the bias is added in float32, so neither its -inf mask nor
its small values are rounded.  Attention dropout uses :func:`molsepnorm.nn.dropout.dropout`.

Small molecules make short attention rows, and PyTorch's CPU softmax takes a scalar path
for a last dimension shorter than one SIMD vector (16 floats with AVX-512), several times
slower than for a full row; :func:`softmax_last` pads such rows with -inf to the vector
width first (figures in ``docs/benchmarks.md``).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from molsepnorm.nn.dropout import dropout

__all__ = ["ATTENTION_IMPLS", "BiasedSelfAttention", "softmax_last"]

ATTENTION_IMPLS = ("math", "sdpa")


def _cpu_vector_floats() -> int:
    """Floats in one SIMD vector of the CPU kernels PyTorch dispatches to here."""
    capability = torch.backends.cpu.get_cpu_capability()
    return 16 if "AVX512" in capability else 8 if capability.startswith("AVX") else 4


CPU_SOFTMAX_MIN_WIDTH = _cpu_vector_floats()


def softmax_last(scores: Tensor) -> Tensor:
    """``torch.softmax(scores, -1)``; on CPU, rows shorter than ``CPU_SOFTMAX_MIN_WIDTH``
    are padded with -inf (exp(-inf) = 0, so the values are the same) and cut back."""
    L = scores.shape[-1]
    if scores.device.type != "cpu" or L >= CPU_SOFTMAX_MIN_WIDTH:
        return torch.softmax(scores, dim=-1)
    padded = F.pad(scores, (0, CPU_SOFTMAX_MIN_WIDTH - L), value=float("-inf"))
    return torch.softmax(padded, dim=-1)[..., :L]


class BiasedSelfAttention(nn.Module):
    """Self-attention with a per-head additive bias: (B, L, D), (B, H, L, L) -> (B, L, D)."""

    def __init__(self, dim: int, num_heads: int, dropout: float = 0.0, impl: str = "math"):
        super().__init__()
        if dim % num_heads != 0:
            raise ValueError(f"hidden dim {dim} is not divisible by {num_heads} heads")
        if impl not in ATTENTION_IMPLS:
            raise ValueError(f"attention impl must be one of {ATTENTION_IMPLS}, got {impl!r}")
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.dropout = dropout
        self.impl = impl
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for linear in (self.qkv, self.out):
            nn.init.normal_(linear.weight, std=0.02)
            nn.init.zeros_(linear.bias)

    def forward(self, x: Tensor, bias: Tensor) -> Tensor:
        B, L, D = x.shape
        H, d = self.num_heads, self.head_dim
        # heads to the front in one copy: (B, L, 3D) -> (3, B*H, L, d), so q, k, v are views
        q, k, v = self.qkv(x).view(B, L, 3, H, d).permute(2, 0, 3, 1, 4).reshape(3, B * H, L, d).unbind(0)
        p = self.dropout if self.training else 0.0
        if self.impl == "sdpa":
            q, k, v = (t.view(B, H, L, d) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(q.dtype), dropout_p=p).view(B * H, L, d)
        else:
            scale = 1.0 / math.sqrt(d)
            if q.dtype == bias.dtype and not torch.is_autocast_enabled(q.device.type):
                # scale, Q K^T and the bias add in one kernel: one (B, H, L, L) tensor instead of three
                scores = torch.baddbmm(bias.reshape(B * H, L, L), q, k.transpose(1, 2), alpha=scale)
            else:  # reduced precision: Q K^T in it, the bias added in float32 (keeps -inf, small values)
                scores = torch.bmm(q * scale, k.transpose(1, 2)).float() + bias.reshape(B * H, L, L)
            att = softmax_last(scores)  # (B*H, L, L), float32: sums exact
            att = dropout(att, p, training=self.training).to(v.dtype)
            y = torch.bmm(att, v)  # (B*H, L, d)
        return self.out(y.view(B, H, L, d).transpose(1, 2).reshape(B, L, D))
