"""Data sets: every benchmark and a user's CSV or SDF behind :func:`load_dataset`.

* :func:`load_dataset` / :class:`DatasetSplits` - :mod:`molsepnorm.data.registry`
* ZINC (PyG), ogbg-molhiv (OGB), nci-tpsa (RDKit's wheel), CSV / TSV tables, SD files
  with targets in data fields (one shared path: :mod:`~molsepnorm.data.labelled`)
* :mod:`~molsepnorm.data.splits` - random, scaffold and column splits
* :mod:`~molsepnorm.data.cache` - processed caches, locking, atomic builds
"""
from molsepnorm.data.registry import (
    DatasetSplits,
    SkippedRow,
    available_datasets,
    load_dataset,
    register_dataset,
)

__all__ = ["DatasetSplits", "SkippedRow", "available_datasets", "load_dataset", "register_dataset"]
