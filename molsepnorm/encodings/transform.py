"""A PyG transform that stores Graphormer's structural encodings on each graph, once.

Graphormer (Ying et al., NeurIPS 2021) needs, per graph, node degrees (centrality
encoding), all-pairs shortest-path distances (spatial encoding) and one shortest path per
pair (multi-hop edge encoding).  The reference recomputes them every epoch in its
collator; here they are computed once as a ``pre_transform`` and cached with the dataset.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import numpy as np

from .shortest_paths import METHODS, Method, _as_edge_array, _tables

if TYPE_CHECKING:  # importing torch_geometric costs seconds; the transform only needs duck typing
    from torch_geometric.data import Data

ENCODING_VERSION: int = 1
"""Bump when the stored encodings change in content or layout; it keys processed caches
and appears in :class:`GraphormerEncoding`'s repr, which PyG records for a pre_transform."""


def structural_encodings(edge_index: np.ndarray, num_nodes: int, method: Method = "auto",
                         distances: Optional[np.ndarray] = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Graphormer's structural encodings of one graph as NumPy arrays (see :func:`encode`).

    Args:
        edge_index: int ``[2, E]`` directed edges.
        num_nodes: ``N``.
        method, distances: as for :func:`~molsepnorm.encodings.shortest_paths`.

    Returns:
        ``(degree, spd, path_next)``: int64 ``[N]`` in-degrees, int16 ``[N * N]`` distances
        and int16 ``[N * N]`` next hops, both flattened row-major.
    """
    src, dst = _as_edge_array(edge_index, num_nodes)  # validated and int64 once, for both
    n = int(num_nodes)
    dist, next_hop = _tables(src, dst, n, method, distances)
    return np.bincount(dst, minlength=n), dist.reshape(-1), next_hop.reshape(-1)


def encode(data: Data, method: Method = "auto", distances: Optional[np.ndarray] = None) -> Data:
    """Add Graphormer's structural encodings to ``data`` in place and return it.

    Adds, for a graph of ``N`` nodes with ``edge_index`` ``[2, E]``:

    * ``degree``: long ``[N]``, number of incoming edges per node (``edge_index[1]``);
      for molecules stored with both bond directions, in-degree equals out-degree.
    * ``spd``: int16 ``[N * N]``, the shortest-path distance matrix flattened row-major
      (``spd.view(N, N)``), :data:`~molsepnorm.encodings.UNREACHABLE` for no path.
    * ``path_next``: int16 ``[N * N]``, the next-hop matrix flattened row-major, -1 on the
      diagonal and for unreachable pairs.

    ``distances`` (``[N, N]``, e.g. RDKit's distance matrix of the molecule the graph was
    built from) skips the search; see :func:`~molsepnorm.encodings.shortest_paths`.

    The matrices are flat so that PyG's ``InMemoryDataset`` and ``Batch`` concatenate
    graphs of different sizes along dim 0; no name contains "index", so batching does not
    offset them.
    """
    num_nodes = int(data.num_nodes or 0)
    edge_index = data.edge_index
    edges = np.zeros((2, 0), dtype=np.int64) if edge_index is None else edge_index.detach().cpu().numpy()
    import torch

    degree, spd, path_next = structural_encodings(edges, num_nodes, method=method, distances=distances)
    data.degree = torch.from_numpy(degree)
    data.spd = torch.from_numpy(spd)
    data.path_next = torch.from_numpy(path_next)
    return data


class GraphormerEncoding:
    """Callable transform adding ``degree``, ``spd`` and ``path_next`` (see :func:`encode`).

    Use as ``pre_transform`` of a PyG dataset so the work happens once per molecule.

    Args:
        method: shortest-path algorithm (``"auto"``, ``"dense"``, ``"scipy"``).  Every
            method yields identical tables, so it is left out of the repr: switching it
            does not invalidate a processed cache.
    """

    def __init__(self, method: Method = "auto") -> None:
        if method not in METHODS:
            raise ValueError(f"unknown shortest-path method {method!r}; choose one of {METHODS}")
        self.method: Method = method

    def __call__(self, data: Data) -> Data:
        return encode(data, method=self.method)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(version={ENCODING_VERSION})"
