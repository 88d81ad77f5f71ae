"""The metrics' names and which way each improves: one table, read by a data set (its
metric), training (``--monitor``) and evaluation (:mod:`molsepnorm.inference.metrics`,
which computes them). Imports nothing, so every layer may read it."""
from __future__ import annotations

#: metric name -> True if larger is better
HIGHER_IS_BETTER = {"mae": False, "rmse": False, "r2": True, "rocauc": True, "prauc": True, "logloss": False,
                    "loss": False}
REGRESSION_METRICS = ("mae", "rmse", "r2")
BINARY_METRICS = ("rocauc", "prauc", "logloss")
