"""molsepnorm: molecular property prediction with a SepNorm Graphormer.

The path of data, one subpackage per step:

    SMILES ──chem──▶ RDKit Mol ──chem──▶ graph (PyG ``Data``)
          ──encodings──▶ + degree, shortest paths (once, cached with the data set)
          ──data──▶ splits, size-bucketed padded batches
          ──nn──▶ Graphormer with SepNorm ──▶ head
          ──inference──▶ predictions in the data's units, metrics

    checkpoint: the trained model as a file (below train, predict and analysis)
    train / predict / analysis: the verbs; cli: the command line over them

Heavy dependencies (torch, RDKit, PyG) are imported on first use, so ``import
molsepnorm`` and ``molsepnorm --help`` stay fast.
"""
from __future__ import annotations

from molsepnorm._lazy import lazy_exports
from molsepnorm.version import __version__

# public name -> module that defines it
_EXPORTS = {
    "featurize": "molsepnorm.chem",
    "featurize_graph": "molsepnorm.chem",
    "MolGraph": "molsepnorm.chem",
    "parse_molecule": "molsepnorm.chem",
    "GraphormerEncoding": "molsepnorm.encodings",
    "load_dataset": "molsepnorm.data",
    "DatasetSplits": "molsepnorm.data",
    "SizeBucketBatchSampler": "molsepnorm.data.sampler",
    "Predictor": "molsepnorm.predict",
    "Checkpoint": "molsepnorm.checkpoint",
    "evaluate_checkpoint": "molsepnorm.inference",
    "InvalidMoleculeError": "molsepnorm.errors",
    "DatasetNotFoundError": "molsepnorm.errors",
    "DatasetFormatError": "molsepnorm.errors",
    "MolsepnormError": "molsepnorm.errors",
    "ConfigError": "molsepnorm.errors",
}

__all__ = ["__version__", *_EXPORTS]

# the subpackages, each imported on first use (``molsepnorm.train.train(...)`` after ``import molsepnorm``)
_SUBPACKAGES = ("analysis", "checkpoint", "chem", "data", "encodings", "inference", "nn", "predict", "pretrain",
                "train")

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals(), _SUBPACKAGES)
