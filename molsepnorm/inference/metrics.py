"""Evaluation metrics, computed per target on the labelled entries and averaged.

Regression: ``mae``, ``rmse``, ``r2``.  Binary classification: ``rocauc``, ``prauc``
(average precision) and ``logloss`` (binary cross-entropy of the probabilities, the loss
the model is trained on; NaN for scores outside [0, 1]).  A missing target (NaN) is left
out of its column; a column with no labels (or, for classification, a single class) is
left out of the average, as OGB does.  For ogbg-molhiv, ``rocauc`` comes from OGB's own ``Evaluator``.  With more than
one target the per-target values are reported too, as ``"mae/<target name>"``.
"""
from __future__ import annotations

import math
import os
from typing import Any, Iterable, Mapping, Optional, Sequence

import numpy as np

from molsepnorm.metric_names import BINARY_METRICS, HIGHER_IS_BETTER, REGRESSION_METRICS

OGB_EVALUATORS = {"molhiv": "ogbg-molhiv", "ogbg-molhiv": "ogbg-molhiv"}


def is_better(metric: str, new: float, best: Optional[float]) -> bool:
    """Whether ``new`` improves on ``best`` for ``metric``; a NaN never improves."""
    if new is None or not math.isfinite(new):
        return False
    if best is None or not math.isfinite(best):
        return True
    return new > best if HIGHER_IS_BETTER[metric] else new < best


def is_ahead(metric: str, new: float, new_tiebreak: Optional[float], best: Optional[float],
             best_tiebreak: Optional[float]) -> bool:
    """Whether ``new`` improves on ``best`` for ``metric``, or equals it with a tiebreak
    (another value of the same metric; None: none) that improves on ``best_tiebreak``."""
    if is_better(metric, new, best):
        return True
    return new == best and new_tiebreak is not None and is_better(metric, new_tiebreak, best_tiebreak)


def compute_metrics(
    task: str,
    y_true: np.ndarray,
    y_pred: np.ndarray,
    target_names: Optional[Sequence[str]] = None,
    dataset: Optional[str] = None,
) -> dict[str, float]:
    """Metrics of predictions in original units.

    Args:
        task: ``"regression"`` or ``"binary"``.
        y_true: ``[N, T]`` targets, NaN where missing.
        y_pred: ``[N, T]`` predictions (regression) or probabilities/scores (binary).
        target_names: names of the ``T`` targets, for the per-target keys.
        dataset: data set name; ``molhiv`` uses OGB's Evaluator for ``rocauc``.

    Returns:
        ``{"mae": ..., "rmse": ..., "r2": ...}`` or ``{"rocauc": ..., "prauc": ..., "logloss": ...}``, plus
        ``"<metric>/<target>"`` entries when there are several targets.
    """
    y_true = _as_2d(y_true)
    y_pred = _as_2d(y_pred)
    if y_true.shape != y_pred.shape:
        raise ValueError(f"y_true {y_true.shape} and y_pred {y_pred.shape} differ in shape")
    names = list(target_names) if target_names is not None else [str(i) for i in range(y_true.shape[1])]
    if task == "regression":
        per_target = [_regression_column(y_true[:, t], y_pred[:, t]) for t in range(y_true.shape[1])]
        keys = REGRESSION_METRICS
    elif task == "binary":
        per_target = [_binary_column(y_true[:, t], y_pred[:, t]) for t in range(y_true.shape[1])]
        keys = BINARY_METRICS
    else:
        raise ValueError(f"unknown task {task!r}; expected 'regression' or 'binary'")
    out = {k: _nanmean([m[k] for m in per_target]) for k in keys}
    if task == "binary" and dataset in OGB_EVALUATORS:
        out["rocauc"] = ogb_rocauc(OGB_EVALUATORS[dataset], y_true, y_pred)
    if len(names) > 1:
        for name, m in zip(names, per_target):
            for k in keys:
                out[f"{k}/{name}"] = m[k]
    return out


def spread_ranks_errors(
    y_true: np.ndarray,
    y_pred: np.ndarray,
    spread: np.ndarray,
    target_names: Optional[Sequence[str]] = None,
) -> dict[str, float]:
    """Whether an ensemble's spread ranks its errors: Spearman's rank correlation between the
    members' standard deviation and the absolute error of their mean, per regression target
    on its labelled molecules, and their mean (``"spearman"``; ``"spearman/<target>"`` with
    several targets).  1: the larger the spread, the larger the error, always; 0: the spread
    says nothing (chemprop's ``spearman`` uncertainty evaluator measures the same).  NaN for a
    target with fewer than three labelled molecules, or with a constant spread or error.

    A binary task's spread is left out: there the members' spread grows with the probability
    itself, so it ranks the errors of the negatives and, inversely, of the positives, which
    says more about the probability than about the uncertainty.
    """
    from scipy.stats import spearmanr

    y_true, y_pred, spread = _as_2d(y_true), _as_2d(y_pred), _as_2d(spread)
    names = list(target_names) if target_names is not None else [str(i) for i in range(y_true.shape[1])]
    values = []
    for t in range(y_true.shape[1]):
        error = np.abs(y_pred[:, t] - y_true[:, t])
        rows = np.isfinite(error) & np.isfinite(spread[:, t])
        constant = rows.sum() < 3 or np.ptp(error[rows]) == 0 or np.ptp(spread[rows, t]) == 0
        values.append(float("nan") if constant else float(spearmanr(spread[rows, t], error[rows]).statistic))
    out = {"spearman": _nanmean(values)}
    if len(names) > 1:
        out.update((f"spearman/{name}", value) for name, value in zip(names, values))
    return out


def ogb_rocauc(name: str, y_true: np.ndarray, y_score: np.ndarray) -> float:
    """ROC-AUC from OGB's ``Evaluator(name)`` (NaN when no target has both classes)."""
    os.environ.setdefault("OUTDATED_IGNORE", "1")  # ogb's background PyPI check, offline here
    from ogb.graphproppred import Evaluator

    try:
        return float(Evaluator(name).eval({"y_true": y_true, "y_pred": y_score})["rocauc"])
    except RuntimeError:  # OGB: no positively and negatively labelled data
        return float("nan")


def _regression_column(y: np.ndarray, p: np.ndarray) -> dict[str, float]:
    mask = np.isfinite(y)
    if not mask.any():
        return {k: float("nan") for k in REGRESSION_METRICS}
    y, p = y[mask].astype(np.float64), p[mask].astype(np.float64)
    err = p - y
    ss_tot = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float((err**2).sum()) / ss_tot if ss_tot > 0 else float("nan")
    return {"mae": float(np.abs(err).mean()), "rmse": float(np.sqrt((err**2).mean())), "r2": r2}


def _binary_column(y: np.ndarray, s: np.ndarray) -> dict[str, float]:
    from sklearn.metrics import average_precision_score, log_loss, roc_auc_score

    mask = np.isfinite(y)
    y, s = y[mask], s[mask]
    if y.size == 0 or len(np.unique(y)) < 2:
        return {k: float("nan") for k in BINARY_METRICS}
    probabilities = bool(((s >= 0) & (s <= 1)).all())
    logloss = float(log_loss(y, np.clip(s, 1e-7, 1 - 1e-7), labels=[0, 1])) if probabilities else float("nan")
    return {"rocauc": float(roc_auc_score(y, s)), "prauc": float(average_precision_score(y, s)), "logloss": logloss}


def _nanmean(values: Sequence[float]) -> float:
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return float(np.mean(finite)) if finite else float("nan")


def _as_2d(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    return a[:, None] if a.ndim == 1 else a


def summary_table(rows: Mapping[str, Mapping[str, float]], metrics: Optional[Iterable[str]] = None) -> str:
    """A fixed-width table, one row per split, one column per metric::

        split    mae     rmse    r2
        val      0.1234  0.2345  0.9512
        test     0.1301  0.2410  0.9488
    """
    if metrics is None:
        metrics = []
        for values in rows.values():
            metrics.extend(k for k in values if "/" not in k and k not in metrics)
    metrics = list(metrics)
    header = ["split", *metrics]
    body = [[split, *(_fmt(values.get(m)) for m in metrics)] for split, values in rows.items()]
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in [header, *body]]
    return "\n".join(lines)


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4f}"
    return str(value)

