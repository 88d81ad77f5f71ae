"""Training, evaluation and checkpoints of a Graphormer on molecular property data.

One module per job:

- :mod:`~molsepnorm.train.config`: :class:`TrainConfig` / :class:`DataConfig` /
  :class:`ExperimentConfig`, read from a YAML preset, overridden by flags, validated whole
  before any data loads, saved resolved;
- :mod:`~molsepnorm.train.step`: :class:`TrainStep`, the optimisation step of every batch;
- :mod:`~molsepnorm.train.loop`: :class:`Trainer`, the epoch / evaluation loop;
- :mod:`~molsepnorm.train.state`: progress and RNG states: what exact resume restores;
- :mod:`~molsepnorm.train.logs`: ``train.log`` and the terminal;
- :mod:`~molsepnorm.train.batching`: batch samplers (random or size-bucketed), sharded per rank;
- :mod:`~molsepnorm.train.schedule`: warm-up then linear decay of the learning rate;
- :mod:`~molsepnorm.train.soup`: ``best.pt`` as the average of the best epochs' weights;
- :mod:`~molsepnorm.train.companion`: the fingerprint model fitted on the training split
  (:func:`add_companion` for a model trained without one);
- :mod:`~molsepnorm.train.blend`: its blend with the Graphormer, chosen on the validation split;
- :mod:`~molsepnorm.train.allocator`: glibc's malloc setting while training on CPU;
- :mod:`~molsepnorm.train.distributed`: torchrun detection, process groups, rank-0 I/O;
- :mod:`~molsepnorm.train.api`: :func:`train`, :func:`resume`.

Checkpoints (:mod:`molsepnorm.checkpoint`), validation (:mod:`molsepnorm.inference`) and
the run directory live below this package, shared with ``predict`` and ``analysis``.

Heavy modules are imported on first use, so importing this package is cheap.
"""
from __future__ import annotations

from molsepnorm._lazy import lazy_exports
_EXPORTS = {
    "TrainConfig": "molsepnorm.train.config",
    "DataConfig": "molsepnorm.train.config",
    "ExperimentConfig": "molsepnorm.train.config",
    "load_experiment_config": "molsepnorm.train.config",
    "TrainStep": "molsepnorm.train.step",
    "NonFiniteLossError": "molsepnorm.train.step",
    "Trainer": "molsepnorm.train.loop",
    "FitResult": "molsepnorm.train.loop",
    "train": "molsepnorm.train.api",
    "resume": "molsepnorm.train.api",
    "add_companion": "molsepnorm.train.companion",
}

__all__ = list(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
