"""Self-supervised pretraining of the SepNorm Graphormer on unlabelled molecules.

SepNorm was introduced for self-supervised transformers (Chen et al., NeurIPS 2023), and
transformers on small molecular data sets gain most from pretraining.  One module per job:

- :mod:`~molsepnorm.pretrain.config`: :class:`PretrainExperiment` (``model`` /
  ``pretrain`` / ``corpus`` sections), read from YAML, overridden by flags;
- :mod:`~molsepnorm.pretrain.corpus`: named corpora (moses, molhiv, nci) and files, as records;
- :mod:`~molsepnorm.pretrain.stream`: the corpus as resumable batches, featurized a chunk at a time;
- :mod:`~molsepnorm.pretrain.objectives`: masked-atom prediction and graph-token InfoNCE;
- :mod:`~molsepnorm.pretrain.loop`: :class:`Pretrainer`, steps, logs and checkpoints;
- :mod:`~molsepnorm.pretrain.api`: :func:`pretrain`, :func:`resume`.

The optimizer step, schedule, RNG capture, DDP set-up, run directory and checkpoint
format are ``molsepnorm train``'s own; the encoder checkpoint (task ``"pretrained"``)
starts a fine-tuning with ``molsepnorm train --init``.
"""
from __future__ import annotations

from molsepnorm._lazy import lazy_exports

_EXPORTS = {
    "PretrainExperiment": "molsepnorm.pretrain.config",
    "PretrainOptions": "molsepnorm.pretrain.config",
    "CorpusConfig": "molsepnorm.pretrain.config",
    "load_pretrain_config": "molsepnorm.pretrain.config",
    "CORPORA": "molsepnorm.pretrain.corpus",
    "open_corpus": "molsepnorm.pretrain.corpus",
    "PretextModel": "molsepnorm.pretrain.objectives",
    "Pretrainer": "molsepnorm.pretrain.loop",
    "PretrainResult": "molsepnorm.pretrain.loop",
    "PRETRAINED": "molsepnorm.checkpoint.checkpoint",
    "pretrain": "molsepnorm.pretrain.api",
    "resume": "molsepnorm.pretrain.api",
}

__all__ = list(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
