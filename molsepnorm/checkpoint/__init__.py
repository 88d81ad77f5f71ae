"""Checkpoints: the one place that writes, reads and resolves trained models.

- :mod:`~molsepnorm.checkpoint.checkpoint`: :class:`Checkpoint` (typed fields; ``save``
  atomic, ``load`` weights-only with format / version checks, by path or bundled name);
- :mod:`~molsepnorm.checkpoint.bundled`: the models shipped in ``molsepnorm/models``;
- :mod:`~molsepnorm.checkpoint.scaling`: the target standardization a checkpoint carries;
- :mod:`~molsepnorm.checkpoint.domain`: the applicability domain a checkpoint carries (what
  the training split looked like; the per-molecule warnings of ``predict`` and ``embed``);
- :mod:`~molsepnorm.checkpoint.data`: the data a checkpoint is evaluated on (its own split);
- :mod:`~molsepnorm.checkpoint.run_dir`: the run directory that holds checkpoints and the
  run's records.

Below ``train``, ``predict`` and ``analysis``, which all read models through it.
"""
from __future__ import annotations

from molsepnorm._lazy import lazy_exports

_EXPORTS = {
    "Checkpoint": "molsepnorm.checkpoint.checkpoint",
    "CheckpointError": "molsepnorm.checkpoint.checkpoint",
    "FeaturizerSpec": "molsepnorm.checkpoint.checkpoint",
    "TaskSpec": "molsepnorm.checkpoint.checkpoint",
    "DataProvenance": "molsepnorm.checkpoint.checkpoint",
    "save_checkpoint": "molsepnorm.checkpoint.checkpoint",
    "check_ensemble": "molsepnorm.checkpoint.checkpoint",
    "TargetScaler": "molsepnorm.checkpoint.scaling",
    "ApplicabilityDomain": "molsepnorm.checkpoint.domain",
    "check_domains": "molsepnorm.checkpoint.domain",
    "distinct_domains": "molsepnorm.checkpoint.domain",
    "domain_warning": "molsepnorm.checkpoint.domain",
    "BUNDLED": "molsepnorm.checkpoint.bundled",
    "DEFAULT_MODEL": "molsepnorm.checkpoint.bundled",
    "UnknownModelError": "molsepnorm.checkpoint.bundled",
    "bundled_models": "molsepnorm.checkpoint.bundled",
    "resolve_model": "molsepnorm.checkpoint.bundled",
    "resolve_models": "molsepnorm.checkpoint.bundled",
    "checkpoint_data": "molsepnorm.checkpoint.data",
    "default_split": "molsepnorm.checkpoint.data",
    "RunDir": "molsepnorm.checkpoint.run_dir",
}

__all__ = list(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
