"""TopEpochs keeps the k best epochs by a metric's direction and averages their weights."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from molsepnorm.train.soup import TopEpochs


def weights(value: float) -> dict[str, torch.Tensor]:
    return {"w": torch.full((2, 3), float(value)), "bn.running_var": torch.full((3,), value + 1.0),
            "bn.num_batches_tracked": torch.tensor(int(value))}


def test_keeps_the_k_best_in_the_metrics_direction_best_first():
    top = TopEpochs(3, "logloss")  # lower is better
    for epoch, value in enumerate([0.9, 0.5, 0.7, float("nan"), 0.6, 0.8, 0.5], start=1):
        top.offer(value, epoch, weights(epoch))
    assert top.epochs == [2, 7, 5]  # the tie at 0.5 keeps the earlier epoch ahead; NaN never kept
    high = TopEpochs(2, "rocauc")
    for epoch, value in enumerate([0.7, 0.8, 0.75], start=1):
        high.offer(value, epoch, weights(epoch))
    assert high.epochs == [2, 3]


def test_the_average_is_the_mean_of_floats_and_the_best_epochs_integers():
    top = TopEpochs(3, "rocauc")
    for epoch, value in [(1, 0.6), (2, 0.9), (3, 0.8), (4, 0.7)]:
        top.offer(value, epoch, weights(epoch))
    soup = top.average()
    assert torch.equal(soup["w"], torch.full((2, 3), (2 + 3 + 4) / 3))
    assert torch.equal(soup["bn.running_var"], torch.full((3,), (3 + 4 + 5) / 3))
    assert soup["bn.num_batches_tracked"].item() == 2  # the best epoch's
    assert TopEpochs(2, "mae").average() is None


def test_kept_weights_are_copies_and_survive_a_round_trip():
    model = nn.Linear(3, 1)
    top = TopEpochs(2, "mae")
    top.offer(1.0, 1, model.state_dict())
    before = model.weight.detach().clone()
    with torch.no_grad():
        model.weight.add_(1.0)  # training goes on: the kept copy must not move
    assert torch.equal(top.average()["weight"], before)
    again = TopEpochs(2, "mae")
    again.load_state_dict(top.state_dict())
    assert again.epochs == [1] and torch.equal(again.average()["weight"], before)


def test_k_must_be_positive():
    with pytest.raises(ValueError, match="at least 1"):
        TopEpochs(0, "mae")
