"""molsepnorm.nn.dropout: F.dropout's contract with a cheaper CPU mask."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from molsepnorm.nn.dropout import dropout, keep_mask


def test_identity_when_not_training_or_p_zero():
    x = torch.randn(4, 5)
    assert dropout(x, 0.1, training=False) is x
    assert dropout(x, 0.0, training=True) is x


@pytest.mark.parametrize("p", [0.1, 0.5, 0.03])
def test_drop_rate_is_p_in_every_16_bit_lane_and_the_output_is_unbiased(p):
    torch.manual_seed(0)
    n = 1 << 22
    keep, p_eff = keep_mask(torch.Size([n]), p)
    assert abs(p_eff - p) <= 2 ** -17
    sigma = math.sqrt(p_eff * (1 - p_eff) / n)
    assert abs((1 - keep.float().mean().item()) - p_eff) < 6 * sigma
    # each of the four 16-bit slices of a 64-bit random word is uniform (no stuck sign bit)
    lanes = 1 - keep.view(-1, 4).float().mean(0)
    assert torch.all((lanes - p_eff).abs() < 6 * sigma * 2), lanes
    x = torch.ones(n)
    y = dropout(x, p)
    assert abs(y.mean().item() - 1.0) < 6 * sigma / (1 - p_eff)  # E[y] = x


def test_values_and_gradient_follow_one_mask():
    torch.manual_seed(1)
    x = torch.randn(3, 5, 7, requires_grad=True)  # 105 elements: not a multiple of 4
    y = dropout(x, 0.2)
    kept = y != 0
    scale = 1 / (1 - round(0.2 * 65536) / 65536)
    torch.testing.assert_close(y[kept], x.detach()[kept] * scale)
    g = torch.randn_like(y)
    y.backward(g)
    torch.testing.assert_close(x.grad, g * kept * scale)


def test_reproducible_under_manual_seed_and_fresh_each_call():
    x = torch.ones(1000)
    torch.manual_seed(7)
    a, b = dropout(x, 0.3), dropout(x, 0.3)
    torch.manual_seed(7)
    assert torch.equal(dropout(x, 0.3), a) and not torch.equal(a, b)


def test_other_cases_fall_back_to_f_dropout():
    x = torch.ones(10)
    assert torch.equal(dropout(x, 1.0), F.dropout(x, 1.0, True))  # all dropped
    with pytest.raises(ValueError):
        dropout(x, 1.5)
    y = dropout(torch.ones(1000, dtype=torch.float64), 0.5)  # other float dtypes: same contract, same dtype
    assert y.dtype == torch.float64 and set(y.unique().tolist()) == {0.0, 2.0}
