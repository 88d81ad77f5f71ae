"""Running a model over molecules: one path from padded batches to outputs, and the metrics.

- :mod:`~molsepnorm.inference.runner`: :class:`Runner` (a model plus the un-scaling /
  sigmoid of its head) and :func:`run` (size-sorted batches -> one row per molecule);
  used by validation during training, ``evaluate``, ``predict``, ``embed`` and ``analyze``;
- :mod:`~molsepnorm.inference.metrics`: MAE / RMSE / R², ROC-AUC (OGB's Evaluator for
  molhiv) / PR-AUC;
- :mod:`~molsepnorm.inference.evaluate`: :func:`evaluate_checkpoint`, and
  :func:`evaluation_frame` (each molecule's labels and predictions);
- :mod:`~molsepnorm.inference.device`: device names.
"""
from __future__ import annotations

from molsepnorm._lazy import lazy_exports

_EXPORTS = {
    "Runner": "molsepnorm.inference.runner",
    "RunOutput": "molsepnorm.inference.runner",
    "run": "molsepnorm.inference.runner",
    "compute_metrics": "molsepnorm.inference.metrics",
    "summary_table": "molsepnorm.inference.metrics",
    "evaluate_checkpoint": "molsepnorm.inference.evaluate",
    "evaluation_frame": "molsepnorm.inference.evaluate",
    "resolve_device": "molsepnorm.inference.device",
}

__all__ = list(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
