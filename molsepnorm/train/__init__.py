"""Training, evaluation and checkpoints of a Graphormer on molecular property data.

One module per job:

- :mod:`~molsepnorm.train.config`: :class:`TrainConfig` / :class:`DataConfig` /
  :class:`ExperimentConfig`, read from a YAML preset, overridden by flags, saved resolved;
- :mod:`~molsepnorm.train.scaling`: per-target standardization of regression targets;
- :mod:`~molsepnorm.train.metrics`: MAE / RMSE / R², ROC-AUC / PR-AUC, NaN targets masked;
- :mod:`~molsepnorm.train.checkpoint`: self-describing, atomically written, weights-only
  loaded checkpoints;
- :mod:`~molsepnorm.train.batching`: batch samplers (random or size-bucketed), sharded per rank;
- :mod:`~molsepnorm.train.schedule`: warm-up then linear decay of the learning rate;
- :mod:`~molsepnorm.train.run_dir`: the run directory (config, split, metrics, log, summary);
- :mod:`~molsepnorm.train.distributed`: torchrun detection, process groups, rank-0 I/O;
- :mod:`~molsepnorm.train.loop`: :class:`Trainer` (fit, evaluate, resume);
- :mod:`~molsepnorm.train.api`: :func:`train`, :func:`resume`, :func:`evaluate_checkpoint`.

Heavy modules are imported on first use, so importing this package is cheap.
"""
from __future__ import annotations

from molsepnorm._lazy import lazy_exports
_EXPORTS = {
    "TrainConfig": "molsepnorm.train.config",
    "DataConfig": "molsepnorm.train.config",
    "ExperimentConfig": "molsepnorm.train.config",
    "load_experiment_config": "molsepnorm.train.config",
    "TargetScaler": "molsepnorm.train.scaling",
    "compute_metrics": "molsepnorm.train.metrics",
    "CheckpointError": "molsepnorm.train.checkpoint",
    "save_checkpoint": "molsepnorm.train.checkpoint",
    "load_checkpoint": "molsepnorm.train.checkpoint",
    "model_from_checkpoint": "molsepnorm.train.checkpoint",
    "Trainer": "molsepnorm.train.loop",
    "FitResult": "molsepnorm.train.loop",
    "NonFiniteLossError": "molsepnorm.train.loop",
    "train": "molsepnorm.train.api",
    "resume": "molsepnorm.train.api",
    "evaluate_checkpoint": "molsepnorm.train.api",
}

__all__ = list(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
