"""Dropout (Srivastava et al., JMLR 2014) with a cheaper random mask on CPU.

``dropout(x, p, training)`` is ``F.dropout``'s contract -- each element is zeroed with
probability ``p`` and the survivors are scaled by ``1 / (1 - p)`` -- but on CPU the mask is
drawn 16 bits per element from 64-bit random words (one ``random_`` call fills four
elements' worth), instead of one Bernoulli draw per element.  ``p`` is thereby rounded to
a multiple of 2^-16 (0.1 -> 0.100006) and the scale uses the rounded value, so the output
stays unbiased: E[dropout(x)] = x exactly.

Why: in Graphormer-slim training on CPU, ``F.dropout``'s per-element ``bernoulli_`` is the
single most expensive operation of a step (attention dropout acts on every (B, H, L, L)
probability), and the 16-bit mask is several times cheaper to draw; figures in
``docs/benchmarks.md``.  On other devices (GPU dropout is a fused kernel) or for other
dtypes, ``F.dropout`` runs unchanged.

The draws come from torch's default generator, so ``torch.manual_seed`` and the RNG
state saved in checkpoints make runs reproducible exactly as with ``F.dropout``.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["dropout", "keep_mask"]

_LEVELS = 1 << 16


def _threshold(p: float) -> int:
    """Number of the 2^16 levels that drop an element: round(p * 2^16), within [1, 2^16 - 1]."""
    return min(max(round(p * _LEVELS), 1), _LEVELS - 1)


def keep_mask(shape: torch.Size, p: float, device: torch.device | str = "cpu") -> tuple[Tensor, float]:
    """A bool mask of ``shape`` (True = keep) with P(False) = round(p * 2^16) / 2^16, and that probability."""
    n = 1
    for s in shape:
        n *= int(s)
    words = torch.empty((n + 3) // 4, dtype=torch.int64, device=device)
    # to is exclusive: 2^64 - 1 equally likely values, i.e. 64 uniform bits up to a 2^-64 bias
    words.random_(-(2 ** 63), 2 ** 63 - 1)
    levels = words.view(torch.int16)[:n].view(shape)  # uniform over [-2^15, 2^15)
    t = _threshold(p)
    return levels >= (t - (_LEVELS >> 1)), t / _LEVELS


class _Dropout(torch.autograd.Function):
    """y = x * m with m = keep / (1 - p); m is kept for the backward pass, grad_x = grad * m.

    Multiplying by a float mask is several times faster on CPU than ``masked_fill`` or
    ``where`` with the bool mask.  Keeping the float mask (4 bytes an element, against the
    bool mask's 1) spares the backward pass rebuilding it (docs/benchmarks.md).
    """

    @staticmethod
    def forward(ctx: Any, x: Tensor, p: float) -> Tensor:  # type: ignore[override]
        keep, p_eff = keep_mask(x.shape, p, x.device)
        scaled = keep.to(x.dtype).mul_(1.0 / (1.0 - p_eff))
        ctx.save_for_backward(scaled)
        return x * scaled

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:  # type: ignore[override]
        (scaled,) = ctx.saved_tensors
        return grad * scaled, None


def dropout(x: Tensor, p: float, training: bool = True) -> Tensor:
    """``F.dropout(x, p, training)`` with the cheaper CPU mask (see the module docstring)."""
    if not training or p == 0.0:
        return x
    if not 0.0 <= p < 1.0 or x.device.type != "cpu" or not x.is_floating_point():
        return F.dropout(x, p, training)
    return _Dropout.apply(x, p)
