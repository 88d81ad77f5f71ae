"""Prediction and embeddings with trained (or bundled) models, for notebooks and the CLI.

* :class:`~molsepnorm.predict.predictor.Predictor`: ``Predictor.load(path_or_name)``,
  ``.predict(smiles | list | Series | Mol)`` -> DataFrame, ``.embed(...)`` -> numpy;
* :mod:`~molsepnorm.chem.readers`: streaming records of .smi / .csv / .tsv / .sdf (.gz, stdin);
* :mod:`~molsepnorm.predict.writer`: atomic CSV / NPZ outputs;
* :mod:`~molsepnorm.predict.pipeline`: :func:`predict_file`, :func:`embed_file`;
* :mod:`~molsepnorm.predict.distributed`: :func:`predict_partitioned`, one file across the
  workers of a Dask cluster (optional extra ``molsepnorm[dask]``).

Models are read through :mod:`molsepnorm.checkpoint` (a path or a bundled name) and run
through :mod:`molsepnorm.inference`, as in training and analysis.

Heavy modules (torch, RDKit) are imported on first use.
"""
from __future__ import annotations

from molsepnorm._lazy import lazy_exports
_EXPORTS = {
    "Predictor": "molsepnorm.predict.predictor",
    "ChunkResult": "molsepnorm.predict.predictor",
    "Record": "molsepnorm.chem.readers",
    "RecordReader": "molsepnorm.chem.readers",
    "InputFormatError": "molsepnorm.chem.readers",
    "predict_file": "molsepnorm.predict.pipeline",
    "embed_file": "molsepnorm.predict.pipeline",
    "RunSummary": "molsepnorm.predict.pipeline",
    "predict_partitioned": "molsepnorm.predict.distributed",
}

__all__ = list(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
