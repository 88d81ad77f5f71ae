"""An exponential moving average of the weights, evaluated and saved instead of the raw ones.

Polyak averaging (Polyak & Juditsky 1992) in its exponential form, as TensorFlow's
``ExponentialMovingAverage`` and timm's ``ModelEmaV2`` use it: after every optimizer step

    θ̄ ← d_t · θ̄ + (1 − d_t) · θ,    d_t = min(decay, (1 + t) / (10 + t)),

where ``t`` counts the updates so far.  The warm-up of ``d_t`` keeps a short run from being
dominated by its random initialisation.  Buffers (the graph token's BatchNorm running
statistics) are averaged the same way, so the averaged model is evaluated with statistics
that match its weights.

Built on :class:`torch.optim.swa_utils.AveragedModel` (``use_buffers=True``); only the
decay schedule is ours.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn
from torch.optim.swa_utils import AveragedModel


def _warmed_decay(decay: float, updates: int) -> float:
    """``d_t`` of the module docstring for ``updates`` = t updates so far."""
    return min(decay, (1.0 + updates) / (10.0 + updates))


class WeightEMA:
    """The moving average of ``model``'s parameters and buffers (module docstring).

    Args:
        model: the model being trained (not DDP-wrapped); it is deep-copied once.
        decay: the long-run decay ``d`` in (0, 1); the horizon is about ``1 / (1 - d)`` steps.

    ``module`` is the averaged copy (evaluate it); :meth:`update` follows each step.
    """

    def __init__(self, model: nn.Module, decay: float) -> None:
        if not 0.0 < decay < 1.0:
            raise ValueError(f"EMA decay must be in (0, 1), got {decay}")
        self.decay = decay
        self._averaged = AveragedModel(model, multi_avg_fn=self._average, use_buffers=True)
        self._averaged.requires_grad_(False)

    @property
    def module(self) -> nn.Module:
        """The averaged model (a copy with the same class and state-dict keys as the original)."""
        return self._averaged.module

    @property
    def updates(self) -> int:
        return int(self._averaged.n_averaged.item())

    def _average(self, averaged: list[Tensor], current: list[Tensor], num_averaged: Tensor) -> None:
        # AveragedModel copies the weights at its first update (num_averaged 0) and calls this after
        weight = 1.0 - _warmed_decay(self.decay, int(num_averaged.item()))
        floats = [(a, c) for a, c in zip(averaged, current) if a.is_floating_point()]
        if floats:
            torch._foreach_lerp_([a for a, _ in floats], [c for _, c in floats], weight)
        for a, c in zip(averaged, current):  # integer buffers (BatchNorm's num_batches_tracked)
            if not a.is_floating_point():
                a.copy_(c)

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        """Fold ``model``'s current parameters and buffers into the average."""
        self._averaged.update_parameters(model)

    def state_dict(self) -> dict[str, Any]:
        """The averaged weights with the update count (for ``last.pt``: an exact resume)."""
        return self._averaged.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._averaged.load_state_dict(state)
