"""Sums of gathered table rows by segment, with a cheaper backward pass on CPU.

``gather_segment_sum(table, index, segment, num_segments)`` is

    out[s] = sum over m with segment[m] == s of table[index[m]],      out (S, H),

i.e. ``zeros(S, H).index_add_(0, segment, table.index_select(0, index))``.  Graphormer's
multi-hop edge encoding (:class:`~molsepnorm.nn.encoders.EdgePathEncoder`) is such a sum:
one segment per atom pair, one gathered row per hop of its shortest path.  On CPU the
gradient of that expression, ``index_add_`` of M rows into the table, runs as a scalar
scatter, element by element, and was the largest single operation of a training step on
small molecules (figures in ``docs/benchmarks.md``, "The small-molecule step").

Here the sum is a sparse-dense product instead: a CSR matrix ``A`` (S, R) with a one at
``(segment[m], index[m])`` for each m gives ``out = A @ table``, and the gradient of the
table is ``A^T @ grad``, with ``A^T`` built as a second CSR matrix (its rows are the table
rows: the entries sorted by ``index``).  Both products run in PyTorch's sparse CPU kernels.
The sums are the same; only the order of the floating-point additions differs, so results
agree with the ``index_add_`` form to rounding.  On other devices (where ``index_add_``
is a parallel atomic kernel) and for other dtypes, the ``index_add_`` form runs unchanged.
Without a gradient to compute (validation, ``predict``) the forward product alone runs,
still faster than ``index_add_``.
"""
from __future__ import annotations

import warnings
from typing import Any, Optional

import numpy as np
import torch
from torch import Tensor

__all__ = ["gather_segment_sum", "scatter_rows"]


def _quiet_beta_warning() -> None:
    """PyTorch warns once per process, at the first CSR tensor, that sparse CSR support is in
    beta: not the user's concern.  That first tensor is made here, when the module is
    imported, so no forward pass touches the warning filters, which are global to the
    process (ensemble members run in threads: :func:`molsepnorm.inference.runner.run`)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        torch.sparse_csr_tensor(torch.zeros(2, dtype=torch.int32), torch.zeros(0, dtype=torch.int32),
                                torch.zeros(0), (1, 1))


_quiet_beta_warning()


def _csr(row: Tensor, col: Tensor, num_rows: int, num_cols: int) -> Tensor:
    """A CSR matrix (num_rows, num_cols) of ones at (row[m], col[m]); ``row`` sorted."""
    crow = torch.zeros(num_rows + 1, dtype=torch.int32)
    torch.cumsum(torch.bincount(row, minlength=num_rows), 0, out=crow[1:])
    return torch.sparse_csr_tensor(crow, col.to(torch.int32), torch.ones(row.numel(), dtype=torch.float32),
                                   (num_rows, num_cols), check_invariants=False)  # not the caller's default dtype


def _argsort(key: Tensor, bound: int) -> Tensor:
    """A stable argsort of ``key`` (M,) long, values in [0, bound).  NumPy sorts 16-bit
    integers by radix sort, several times faster than a comparison sort of int64."""
    if bound <= np.iinfo(np.uint16).max + 1:
        return torch.from_numpy(np.argsort(key.numpy().astype(np.uint16), kind="stable"))
    return torch.sort(key, stable=True).indices


def _segment_product(table: Tensor, index: Tensor, segment: Tensor, num_segments: int) -> Tensor:
    """``A @ table``: the forward sum as a CSR product (A: see the module docstring)."""
    return torch.sparse.mm(_csr(segment, index, num_segments, table.size(0)), table)


class _GatherSegmentSum(torch.autograd.Function):
    """out = A @ table; grad_table = A^T @ grad (A: CSR of ones, see the module docstring)."""

    @staticmethod
    def forward(ctx: Any, table: Tensor, index: Tensor, segment: Tensor,  # type: ignore[override]
                num_segments: int) -> Tensor:
        ctx.save_for_backward(index, segment)
        ctx.rows = table.size(0)
        return _segment_product(table, index, segment, num_segments)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None, None]:  # type: ignore[override]
        index, segment = ctx.saved_tensors
        return scatter_rows(grad, index, segment, ctx.rows), None, None, None


def scatter_rows(source: Tensor, index: Tensor, segment: Optional[Tensor], num_rows: int) -> Tensor:
    """``zeros(num_rows, H).index_add_(0, index, source[segment])`` as the product ``A^T @ source``
    (A: the CSR matrix of ones at ``(segment[m], index[m])``; ``segment`` None: ``m``):
    source (S, H), index (M,) long in [0, num_rows) -> (num_rows, H), on CPU in float32.

    The gradient of a gather: of :func:`gather_segment_sum`, and of an embedding lookup
    (:func:`molsepnorm.nn.embedding.embedding`) whose rows are too narrow for ``index_add_``."""
    order = _argsort(index, num_rows)
    col = order if segment is None else segment.index_select(0, order)
    transposed = _csr(index.index_select(0, order), col, num_rows, source.size(0))
    return torch.sparse.mm(transposed, source.contiguous())


def gather_segment_sum(table: Tensor, index: Tensor, segment: Tensor, num_segments: int) -> Tensor:
    """Sum the rows of ``table`` (R, H) at ``index`` (M,) long into ``num_segments`` segments
    by ``segment`` (M,) long, sorted ascending: (num_segments, H).  See the module docstring."""
    if table.device.type != "cpu" or table.dtype != torch.float32:
        return table.new_zeros(num_segments, table.size(1)).index_add_(0, segment, table.index_select(0, index))
    if table.requires_grad and torch.is_grad_enabled():
        return _GatherSegmentSum.apply(table, index, segment, num_segments)
    return _segment_product(table, index, segment, num_segments)
