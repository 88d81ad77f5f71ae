"""The weights of a run's k best epochs and their uniform average (a checkpoint soup).

Wortsman et al., "Model soups: averaging weights of multiple fine-tuned models improves
accuracy without increasing inference time" (ICML 2022): models fine-tuned from one
pretrained start lie in one basin of the loss, so the average of their weights is a model
of its own, often better than each.  Here the ingredients are the epochs of one run with
the best validation metric (as stochastic weight averaging averages a run's last epochs,
Izmailov et al. 2018, but chosen by validation):

    θ_soup = (1 / k) Σ_{e ∈ best k epochs} θ_e

Floating-point buffers (the graph token's BatchNorm running statistics) are averaged the
same way; integer buffers (``num_batches_tracked``) come from the best epoch.  The kept
weights go into ``last.pt`` for an exact resume: k more copies of the (small) model.
"""
from __future__ import annotations

from typing import Any, Optional

import torch
from torch import Tensor

from molsepnorm.inference.metrics import is_ahead, is_better


def average_weights(states: list[dict[str, Tensor]]) -> dict[str, Tensor]:
    """The uniform average of state dicts with the same keys: floating-point tensors are
    averaged, integer ones (``num_batches_tracked``) taken from the first."""
    out: dict[str, Tensor] = {}
    for name, first in states[0].items():
        out[name] = torch.stack([s[name] for s in states]).mean(dim=0) if first.is_floating_point() else first.clone()
    return out


class TopEpochs:
    """The ``k`` epochs with the best validation ``metric`` so far, with their weights.

    Args:
        k: how many epochs to keep (at least 1).
        metric: the validation metric that ranks them (its direction from
            :data:`~molsepnorm.metric_names.HIGHER_IS_BETTER`).
    """

    def __init__(self, k: int, metric: str) -> None:
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        self.k, self.metric = k, metric
        # (value, tiebreak, epoch, weights), best first
        self._kept: list[tuple[float, Optional[float], int, dict[str, Tensor]]] = []

    def __len__(self) -> int:
        return len(self._kept)

    @property
    def epochs(self) -> list[int]:
        """The kept epochs (1-based), best first."""
        return [epoch for _, _, epoch, _ in self._kept]

    def offer(self, value: float, epoch: int, state_dict: dict[str, Tensor], tiebreak: Optional[float] = None) -> bool:
        """Keep this epoch's weights (a CPU copy) if ``value`` ranks among the ``k`` best;
        a NaN never does.  Of equal values the better ``tiebreak`` (with train.monitor_blend:
        the Graphormer's own metric) ranks ahead, then the earlier epoch.  Returns whether it was kept."""
        place = len(self._kept)
        while place > 0 and is_ahead(self.metric, value, tiebreak, *self._kept[place - 1][:2]):
            place -= 1
        if place >= self.k or not is_better(self.metric, value, None):
            return False
        weights = {name: t.detach().to("cpu", copy=True) for name, t in state_dict.items()}
        self._kept.insert(place, (float(value), tiebreak, int(epoch), weights))
        del self._kept[self.k:]
        return True

    def average(self) -> Optional[dict[str, Tensor]]:
        """The uniform average of the kept weights (module docstring); None when none is kept."""
        return average_weights([weights for _, _, _, weights in self._kept]) if self._kept else None

    def state_dict(self) -> list[dict[str, Any]]:
        """Plain data for ``last.pt``: an exact resume keeps the same ingredients."""
        return [{"value": value, "tiebreak": tiebreak, "epoch": epoch, "weights": weights}
                for value, tiebreak, epoch, weights in self._kept]

    def load_state_dict(self, state: list[dict[str, Any]]) -> None:
        self._kept = [(float(s["value"]), s.get("tiebreak"), int(s["epoch"]), s["weights"]) for s in state][: self.k]
