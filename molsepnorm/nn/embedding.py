"""Embedding lookup with a cheaper backward pass on CPU.

``embedding(index, weight)`` is ``F.embedding(index, weight)``: rows of ``weight``
``(V, D)`` gathered at ``index`` (any shape), giving ``index.shape + (D,)``.  On CPU the
gradient of ``weight`` is accumulated with one ``index_add_`` over the gathered rows,
where PyTorch's ``embedding_dense_backward`` first sorts the indices.  Graphormer's
encoders look up many indices in small tables -- the spatial encoding one per atom pair
(B * N * N lookups into a few dozen rows), the atom encoding nine per atom -- and there
the sort is most of the backward pass (figures in ``docs/benchmarks.md``).

The gradient is the same sum; only the order of the floating-point additions differs
(index order instead of sorted order), so results agree with ``F.embedding`` to rounding.
CPU ``index_add_`` is deterministic.  Rows narrower than :data:`INDEX_ADD_MIN_WIDTH`
floats -- the spatial encoding's one scalar per head -- are summed by a sparse product
instead (:func:`molsepnorm.nn.segment.scatter_rows`), as ``index_add_`` adds them element
by element.  On other devices (where ``index_add_`` uses atomic
additions) and without a gradient to compute, ``F.embedding`` runs unchanged.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from molsepnorm.nn.segment import scatter_rows

__all__ = ["embedding"]

#: Rows narrower than this (floats) get their gradient from a CSR product
#: (:func:`molsepnorm.nn.segment.scatter_rows`): CPU ``index_add_`` adds such rows
#: element by element, and on more than one thread several times slower than on one
#: (docs/benchmarks.md, "The small-molecule step").
INDEX_ADD_MIN_WIDTH = 16


class _Embedding(torch.autograd.Function):
    """rows = weight[index]; grad_weight = zeros(V, D).index_add_(0, index, grad_rows)."""

    @staticmethod
    def forward(ctx: Any, index: Tensor, weight: Tensor) -> Tensor:  # type: ignore[override]
        flat = index.reshape(-1)
        ctx.save_for_backward(flat)
        ctx.rows = weight.size(0)
        return weight.index_select(0, flat).view(*index.shape, weight.size(1))

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[None, Tensor]:  # type: ignore[override]
        (flat,) = ctx.saved_tensors
        D = grad.size(-1)
        if D < INDEX_ADD_MIN_WIDTH and grad.dtype == torch.float32:
            return None, scatter_rows(grad.reshape(-1, D), flat, None, ctx.rows)
        return None, grad.new_zeros(ctx.rows, D).index_add_(0, flat, grad.reshape(-1, D))


def embedding(index: Tensor, weight: Tensor) -> Tensor:
    """``F.embedding(index, weight)`` with the cheaper CPU backward (see the module docstring):
    index (...) long, weight (V, D) -> (..., D)."""
    if weight.device.type != "cpu" or not weight.requires_grad or not torch.is_grad_enabled():
        return F.embedding(index, weight)
    return _Embedding.apply(index, weight)
