"""Normalization layers for transformers with a [CLS] token: SepNorm and ShareNorm.

Reference: Chen et al., "On Separate Normalization in Self-supervised Transformers",
NeurIPS 2023 (https://arxiv.org/abs/2309.12931).

Every module here is called as ``forward(x, mask=None)``:

* ``x`` is a sequence ``(B, L, D)`` (or, for the token norms of :func:`create_norm`, any
  ``(..., D)``, e.g. flat tokens ``(N, D)``);
* ``mask`` is an optional **boolean mask that is True for real tokens** and False for
  padding, of shape ``x.shape[:-1]`` (``(B, L)`` for a sequence). This is the convention
  of PyTorch Geometric's ``to_dense_batch``; PyTorch's ``src_key_padding_mask`` is the
  opposite (True = padding): pass ``~src_key_padding_mask``.
* Padded positions never enter any statistics (batch statistics, running statistics)
  and come out as exact zeros. They may hold any finite values.

The wrapped torch modules (``nn.BatchNorm1d``, ``nn.LayerNorm``, ``nn.RMSNorm``) are kept
as children named ``bn``, ``ln`` and ``rms``, so state dicts read like torch's own
(``cls_norm.bn.running_mean``, ``token_norm.ln.weight``) and
``nn.SyncBatchNorm.convert_sync_batchnorm`` finds and converts the batch norms.

The layers, one job a module:

* :mod:`~molsepnorm.nn.norm.masked`: the token norms (:class:`MaskedBatchNorm`,
  :class:`MaskedBatchRenorm`, :class:`MaskedLayerNorm`, :class:`MaskedRMSNorm`,
  :class:`MaskedIdentity`) and :func:`create_norm`, which builds one by name;
* :mod:`~molsepnorm.nn.norm.sepnorm`: :class:`SepNorm`, the [CLS] token normalized apart;
* :mod:`~molsepnorm.nn.norm.sharenorm`: :class:`ShareNorm`, one norm for every token.
"""
from molsepnorm.nn.norm.masked import (
    NORM_KINDS,
    MaskedBatchNorm,
    MaskedBatchRenorm,
    MaskedIdentity,
    MaskedLayerNorm,
    MaskedNorm,
    MaskedRMSNorm,
    create_norm,
    in_backward_recompute,
)
from molsepnorm.nn.norm.sepnorm import LAYOUTS, MIN_BATCH_EPS, SepNorm
from molsepnorm.nn.norm.sharenorm import ShareNorm

__all__ = [
    "NORM_KINDS",
    "LAYOUTS",
    "MaskedNorm",
    "MaskedBatchNorm",
    "MaskedBatchRenorm",
    "MaskedLayerNorm",
    "MaskedRMSNorm",
    "MaskedIdentity",
    "create_norm",
    "SepNorm",
    "ShareNorm",
    "in_backward_recompute",
    "MIN_BATCH_EPS",
]
