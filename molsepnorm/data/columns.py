"""Per-molecule columns of a data set read without building every graph: atoms and targets.

PyG in-memory data sets (the ZINC and molhiv loaders, CSV caches) store all graphs in one
collated storage with public ``slices``; a split made by indexing keeps ``indices()``.
Both are read through that public API; any other sequence of graphs is iterated.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np
import torch


def num_atoms(dataset: Any) -> np.ndarray:
    """Atoms per molecule, ``(M,)`` int64, in data set order."""
    counts = _slice_counts(dataset, "x")
    if counts is not None:
        return counts
    return np.asarray([int(d.num_nodes) for d in dataset], dtype=np.int64)


def targets(dataset: Any) -> np.ndarray:
    """Targets ``(M, T)`` float, NaN where missing, in data set order.

    A whole in-memory data set (not a subset made by indexing, whose ``indices()`` is a
    plain range) hands its collated ``y`` over directly; anything else is iterated.
    """
    from torch_geometric.data import InMemoryDataset

    M = len(dataset)
    if M == 0:
        return np.zeros((0, 0), dtype=np.float32)
    if isinstance(dataset, InMemoryDataset) and isinstance(dataset.indices(), range):
        return torch.as_tensor(dataset.y).reshape(M, -1).float().numpy()
    return torch.cat([torch.as_tensor(d.y).reshape(1, -1).float() for d in dataset], 0).numpy()


def _slice_counts(dataset: Any, key: str) -> Optional[np.ndarray]:
    slices = getattr(dataset, "slices", None)
    if not isinstance(slices, dict) or key not in slices or not hasattr(dataset, "indices"):
        return None
    s = slices[key]
    counts = (s[1:] - s[:-1]).numpy()
    return counts[np.asarray(dataset.indices(), dtype=np.int64)].astype(np.int64)
