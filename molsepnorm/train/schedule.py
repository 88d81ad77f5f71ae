"""Learning-rate schedule of the Graphormer recipe: linear warm-up, then linear decay.

``lr(step) = peak * step / warmup`` for ``step < warmup``, then a straight line from
``peak`` down to ``end_lr`` at ``total`` steps (fairseq's ``polynomial_decay`` with power 1,
which the reference Graphormer uses), constant at ``end_lr`` afterwards.
"""
from __future__ import annotations

from typing import Callable

import torch


def warmup_linear_decay(peak_lr: float, end_lr: float, warmup_steps: int, total_steps: int) -> Callable[[int], float]:
    """The multiplier of ``peak_lr`` after ``step`` optimizer steps (``LambdaLR``'s ``lr_lambda``)."""
    if total_steps < 1:
        raise ValueError(f"total_steps must be >= 1, got {total_steps}")
    warmup_steps = min(max(0, warmup_steps), total_steps)
    end_ratio = end_lr / peak_lr

    def multiplier(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps  # the first update already has a non-zero lr
        if step >= total_steps:
            return end_ratio
        remaining = (total_steps - step) / max(1, total_steps - warmup_steps)
        return end_ratio + (1.0 - end_ratio) * remaining

    return multiplier


def make_scheduler(
    optimizer: torch.optim.Optimizer, peak_lr: float, end_lr: float, warmup_steps: int, total_steps: int
) -> torch.optim.lr_scheduler.LambdaLR:
    """A ``LambdaLR`` over :func:`warmup_linear_decay`; its state dict is plain data."""
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, warmup_linear_decay(peak_lr, end_lr, warmup_steps, total_steps)
    )


def resolve_warmup(warmup_steps: int | None, warmup_fraction: float, total_steps: int) -> int:
    """Warm-up steps: the explicit number, else ``warmup_fraction`` of all steps."""
    if warmup_steps is not None:
        return min(int(warmup_steps), total_steps)
    return int(round(warmup_fraction * total_steps))
