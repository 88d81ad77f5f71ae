"""Re-estimate the running statistics of the [CLS] batch norms ("precise BatchNorm").

A [CLS] BatchNorm's running statistics are an exponential average over training
batches taken while the weights moved; after converting a pretrained model they are
fresh (mean 0, variance 1) and describe nothing. :func:`recalibrate_cls_norms` recomputes
them as a plain average over a few batches with the weights fixed (Wu & Johnson,
"Rethinking 'Batch' in BatchNorm", 2021, section 3: precise BatchNorm), with the rest
of the model in eval mode (no dropout).
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Optional

import torch
from torch import nn

from molsepnorm.nn.norm import SepNorm
from molsepnorm.nn.token_layout import call_model

__all__ = ["recalibrate_cls_norms", "cls_batch_norms"]


def cls_batch_norms(model: nn.Module) -> list[nn.modules.batchnorm._BatchNorm]:
    """The torch BatchNorm modules that normalize special tokens in ``model``'s SepNorms."""
    return [bn for module in model.modules() if isinstance(module, SepNorm) for bn in module.batch_norms()]


@torch.no_grad()
def recalibrate_cls_norms(
    model: nn.Module,
    batches: Iterable[Any],
    forward: Optional[Callable[[nn.Module, Any], Any]] = None,
    max_batches: Optional[int] = None,
) -> int:
    """Recompute the running mean and variance of every [CLS] BatchNorm over ``batches``.

    Args:
        model: a model holding SepNorms (a converted transformer, a Graphormer).
        batches: inputs of the model: a tensor, a tuple of positional arguments or a dict
            of keyword arguments per batch (or anything ``forward`` takes).
        forward: ``forward(model, batch)``; default: calls the model with the batch.
        max_batches: stop after this many batches.

    Returns:
        the number of batches used. The statistics become the average of the batches'
        (each with equal weight; ``momentum=None``); the model's train/eval modes and
        the BatchNorms' momenta are restored afterwards. A batch with a single real
        [CLS] adds nothing (a warning says so). A model without a [CLS] BatchNorm, or
        no batch, raises ``ValueError``; so does any error of the model's forward: in
        every such case the statistics are left as they were before the call.
    """
    norms = cls_batch_norms(model)
    if not norms:
        raise ValueError("recalibrate_cls_norms: the model has no SepNorm with a batch [CLS] norm")
    modes = {m: m.training for m in model.modules()}
    momenta = [bn.momentum for bn in norms]
    before = [{k: v.clone() for k, v in bn.state_dict().items() if k in _STATISTICS} for bn in norms]
    used, done = 0, False
    try:
        model.eval()
        for bn in norms:
            bn.reset_running_stats()
            bn.momentum = None  # cumulative average
            bn.train()
        for batch in batches:
            if max_batches is not None and used >= max_batches:
                break
            (forward or call_model)(model, batch)
            used += 1
        done = used > 0
    finally:
        for bn, momentum, stats in zip(norms, momenta, before):
            bn.momentum = momentum
            if not done:  # a failed or empty recalibration leaves the statistics it found
                bn.load_state_dict(stats, strict=False)
        for m, mode in modes.items():
            m.training = mode
    if used == 0:
        raise ValueError("recalibrate_cls_norms: no batch was given")
    return used


_STATISTICS = ("running_mean", "running_var", "num_batches_tracked")
