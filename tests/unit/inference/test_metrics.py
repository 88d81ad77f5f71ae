"""Metrics: agree with scikit-learn and OGB, mask NaN targets, know their direction."""
from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import average_precision_score, log_loss, mean_absolute_error, r2_score, roc_auc_score

from molsepnorm.inference.metrics import compute_metrics, is_ahead, is_better


def test_regression_matches_sklearn_and_masks_nan():
    rng = np.random.default_rng(0)
    y = rng.normal(size=(50, 2))
    p = y + rng.normal(scale=0.3, size=(50, 2))
    y[3, 0] = np.nan
    y[10:20, 1] = np.nan
    m = compute_metrics("regression", y, p, ["a", "b"])
    ok0, ok1 = ~np.isnan(y[:, 0]), ~np.isnan(y[:, 1])
    mae_a = mean_absolute_error(y[ok0, 0], p[ok0, 0])
    mae_b = mean_absolute_error(y[ok1, 1], p[ok1, 1])
    assert m["mae/a"] == pytest.approx(mae_a)
    assert m["mae/b"] == pytest.approx(mae_b)
    assert m["mae"] == pytest.approx((mae_a + mae_b) / 2)
    assert m["r2/a"] == pytest.approx(r2_score(y[ok0, 0], p[ok0, 0]))
    assert m["rmse/b"] == pytest.approx(math.sqrt(np.mean((y[ok1, 1] - p[ok1, 1]) ** 2)))


def test_single_target_has_no_per_target_keys():
    m = compute_metrics("regression", np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.0, 4.0]))
    assert set(m) == {"mae", "rmse", "r2"}
    assert m["mae"] == pytest.approx(1 / 3)


def test_binary_matches_sklearn_and_skips_single_class_targets():
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, size=(80, 2)).astype(float)
    y[:, 1] = 0.0  # one class only: left out of the average
    y[5, 0] = np.nan
    s = rng.random((80, 2))
    m = compute_metrics("binary", y, s, ["t0", "t1"])
    ok = ~np.isnan(y[:, 0])
    assert m["rocauc"] == pytest.approx(roc_auc_score(y[ok, 0], s[ok, 0]))
    assert m["prauc"] == pytest.approx(average_precision_score(y[ok, 0], s[ok, 0]))
    assert m["logloss"] == pytest.approx(log_loss(y[ok, 0], s[ok, 0]))
    assert math.isnan(m["rocauc/t1"]) and math.isnan(m["logloss/t1"])


def test_log_loss_needs_probabilities_and_survives_certainty():
    y = np.array([0.0, 1.0, 1.0, 0.0])
    scores = compute_metrics("binary", y, np.array([-2.0, 3.0, 0.5, 0.1]))  # logits, not probabilities
    assert scores["rocauc"] == 1.0 and math.isnan(scores["logloss"])
    certain = compute_metrics("binary", y, np.array([0.0, 1.0, 0.0, 0.0]))  # one confident mistake
    assert math.isfinite(certain["logloss"]) and certain["logloss"] > 3.0


def test_molhiv_uses_ogb_evaluator_with_the_same_value():
    rng = np.random.default_rng(2)
    y = rng.integers(0, 2, size=(200, 1)).astype(float)
    s = rng.random((200, 1))
    m = compute_metrics("binary", y, s, dataset="molhiv")
    assert m["rocauc"] == pytest.approx(roc_auc_score(y[:, 0], s[:, 0]))


def test_all_missing_gives_nan_not_an_error():
    m = compute_metrics("regression", np.full((3, 1), np.nan), np.zeros((3, 1)))
    assert math.isnan(m["mae"])


def test_shape_mismatch_and_unknown_task():
    with pytest.raises(ValueError, match="shape"):
        compute_metrics("regression", np.zeros((3, 1)), np.zeros((3, 2)))
    with pytest.raises(ValueError, match="task"):
        compute_metrics("multiclass", np.zeros((3, 1)), np.zeros((3, 1)))


def test_is_better_directions_and_nan():
    assert is_better("mae", 0.1, 0.2) and not is_better("mae", 0.3, 0.2)
    assert is_better("rocauc", 0.8, 0.7) and not is_better("rocauc", 0.6, 0.7)
    assert is_better("mae", 0.5, None)
    assert not is_better("mae", float("nan"), None)
    assert not is_better("rocauc", float("nan"), 0.5)


def test_is_ahead_breaks_equal_values_by_the_tiebreak_in_the_metric_direction():
    assert is_ahead("mae", 0.1, None, 0.2, None)  # a better value needs no tiebreak
    assert not is_ahead("mae", 0.2, 0.1, 0.1, 0.5)  # a worse value loses whatever its tiebreak
    assert is_ahead("mae", 0.2, 0.3, 0.2, 0.4) and not is_ahead("mae", 0.2, 0.4, 0.2, 0.3)
    assert is_ahead("rocauc", 0.8, 0.7, 0.8, 0.6) and not is_ahead("rocauc", 0.8, 0.6, 0.8, 0.7)
    assert not is_ahead("mae", 0.2, None, 0.2, 0.4)  # no tiebreak: an equal value is not ahead
    assert is_ahead("mae", 0.2, 0.4, 0.2, None)  # the first tiebreak recorded


def test_an_ensembles_spread_against_its_errors():
    from scipy.stats import spearmanr

    from molsepnorm.inference.metrics import spread_ranks_errors

    y = np.zeros(6)
    pred = np.array([0.1, -0.2, 0.3, -0.4, 0.5, -0.6])  # errors grow down the rows
    assert spread_ranks_errors(y, pred, np.arange(6.0))["spearman"] == pytest.approx(1.0)
    assert spread_ranks_errors(y, pred, -np.arange(6.0))["spearman"] == pytest.approx(-1.0)
    rng = np.random.default_rng(0)
    spread = rng.random(6)
    y2 = np.stack([y, np.r_[y[:5], np.nan]], 1)  # a second target, its last molecule unlabelled
    two = spread_ranks_errors(y2, np.stack([pred, pred], 1), np.stack([spread, spread], 1), ["a", "b"])
    assert two["spearman/a"] == pytest.approx(spearmanr(spread, np.abs(pred)).statistic)
    assert two["spearman/b"] == pytest.approx(spearmanr(spread[:5], np.abs(pred[:5])).statistic)
    assert two["spearman"] == pytest.approx((two["spearman/a"] + two["spearman/b"]) / 2)
    assert np.isnan(spread_ranks_errors(y[:2], pred[:2], spread[:2])["spearman"])  # too few molecules
    assert np.isnan(spread_ranks_errors(y, pred, np.ones(6))["spearman"])  # members that always agree
