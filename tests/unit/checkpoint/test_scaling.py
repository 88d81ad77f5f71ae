"""TargetScaler: statistics ignore NaN, transforms invert, plain-data round trip."""
from __future__ import annotations

import numpy as np
import torch

from molsepnorm.checkpoint.scaling import TargetScaler


def test_fit_ignores_missing_targets():
    y = np.array([[1.0, np.nan], [3.0, 10.0], [np.nan, 20.0], [5.0, 30.0]])
    s = TargetScaler.fit(y)
    assert s.mean == (3.0, 20.0)
    np.testing.assert_allclose(s.std, [np.std([1, 3, 5]), np.std([10, 20, 30])])


def test_transform_and_inverse_round_trip_keep_nan():
    y = torch.tensor([[1.0, 7.0], [2.0, float("nan")], [4.0, 9.0]])
    s = TargetScaler.fit(y)
    z = s.transform(y)
    assert torch.isnan(z[1, 1])
    torch.testing.assert_close(z[:, 0].mean(), torch.tensor(0.0), atol=1e-6, rtol=0)
    back = s.inverse_transform(z)
    torch.testing.assert_close(back, y, equal_nan=True)


def test_constant_or_empty_column_gets_unit_std():
    s = TargetScaler.fit(np.array([[2.0, np.nan], [2.0, np.nan]]))
    assert s.std == (1.0, 1.0)
    assert s.mean == (2.0, 0.0)


def test_plain_dict_round_trip():
    s = TargetScaler.fit(np.array([[1.0], [2.0], [6.0]]))
    assert TargetScaler.from_dict(s.to_dict()) == s
    assert TargetScaler.from_dict(None, num_targets=2) == TargetScaler.identity(2)
