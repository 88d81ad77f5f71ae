"""Graphormer's structural encodings (Ying et al., NeurIPS 2021), computed once per graph.

* :func:`shortest_paths`: all-pairs hop distances and a next-hop table, int16 ``[N, N]``.
* :func:`edge_paths` / :func:`edge_paths_batched`: edge ids along one shortest path per
  pair, for the multi-hop edge encoding.
* :class:`GraphormerEncoding` / :func:`encode`: a PyG ``pre_transform`` storing
  ``degree``, flat ``spd`` and flat ``path_next`` on each ``Data``;
  :func:`structural_encodings`: the same three as NumPy arrays.
"""
from .shortest_paths import (
    DENSE_MAX_NODES,
    MAX_NODES,
    METHODS,
    UNREACHABLE,
    edge_paths,
    edge_paths_batched,
    edge_paths_batched_numpy,
    shortest_paths,
)
from .transform import ENCODING_VERSION, GraphormerEncoding, encode, structural_encodings

__all__ = [
    "DENSE_MAX_NODES",
    "ENCODING_VERSION",
    "GraphormerEncoding",
    "MAX_NODES",
    "METHODS",
    "UNREACHABLE",
    "edge_paths",
    "edge_paths_batched",
    "edge_paths_batched_numpy",
    "encode",
    "shortest_paths",
    "structural_encodings",
]
