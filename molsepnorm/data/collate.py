"""Padded batches of molecular graphs for the Graphormer.

A :class:`GraphBatch` holds ``B`` graphs padded to the largest one, ``N`` atoms:

====================  ==================  =============================================
field                 shape, dtype        meaning
====================  ==================  =============================================
``x``                 (B, N, F) long      atom features, padding 0
``node_mask``         (B, N) bool         True = real atom, False = padding
``degree``            (B, N) long         node degree, padding 0
``spd``               (B, N, N) long      shortest-path distance, -1 = unreachable
                                          (salts) *or* padding; ``node_mask`` tells
``edge_attr``         (E, F_e) long       the graphs' edge features, concatenated
``edge_path``         (B, N, N, K) long   ids into ``edge_attr`` of the edges on one
                                          shortest path i -> j, hop by hop; -1 = none
``num_nodes``         (B,) long           atoms per graph
``y``                 (B, T) float        targets, NaN = missing; None if unlabelled
``smiles``            list[str] | None    input SMILES when every graph carries one
====================  ==================  =============================================

``K`` is ``multi_hop_max_dist``: the Graphormer edge encoding (Ying et al., NeurIPS 2021)
reads at most K hops of each path.  Unlike the reference collator, no graph is ever
dropped, whatever its size.

Each graph must carry the attributes written by
:class:`molsepnorm.encodings.GraphormerEncoding` (``degree``, and ``spd`` / ``path_next``
flattened row-major to ``num_nodes**2`` entries).  Everything is placed with vectorized
index assignment (in NumPy); the only Python loop gathers the per-graph arrays.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Optional, Sequence, Union

import numpy as np
import torch
from torch import Tensor

if TYPE_CHECKING:  # importing torch_geometric costs seconds, and a batch only reads the graphs' fields
    from torch_geometric.data import Data

__all__ = ["GraphBatch", "GraphCollator", "collate_graphs"]

_PAD = -1  # spd / edge_path value of "no distance" and "no edge"


@dataclass
class GraphBatch:
    """A padded batch of graphs; see the module docstring for every field's shape."""

    x: Tensor  # (B, N, F) long
    node_mask: Tensor  # (B, N) bool
    degree: Tensor  # (B, N) long
    spd: Tensor  # (B, N, N) long
    edge_attr: Tensor  # (E, F_e) long
    edge_path: Tensor  # (B, N, N, K) long
    num_nodes: Tensor  # (B,) long
    y: Optional[Tensor] = None  # (B, T) float
    smiles: Optional[list[str]] = None

    @property
    def num_graphs(self) -> int:
        return self.x.size(0)

    def __len__(self) -> int:
        return self.num_graphs

    def _map(self, fn) -> "GraphBatch":
        changes = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Tensor):
                changes[f.name] = fn(value)
        return replace(self, **changes)

    def to(self, device: Union[str, torch.device], non_blocking: bool = False) -> "GraphBatch":
        """A copy with every tensor on ``device``."""
        return self._map(lambda t: t.to(device, non_blocking=non_blocking))

    def pin_memory(self) -> "GraphBatch":
        """Called by ``DataLoader(pin_memory=True)``."""
        return self._map(lambda t: t.pin_memory())


def _require(data: Data, name: str, index: int) -> Tensor:
    value = getattr(data, name, None)
    if value is None:
        smiles = getattr(data, "smiles", None)
        what = f"graph {index}" + (f" ({smiles!r})" if smiles else "")
        raise ValueError(
            f"{what} has no '{name}': apply molsepnorm.encodings.GraphormerEncoding "
            "(pre_transform) before collating"
        )
    return value


def _array(value) -> np.ndarray:
    """A NumPy view of a graph's tensor (``Data``) or array (``MolGraph``), without a copy."""
    return value.numpy() if isinstance(value, Tensor) else np.asarray(value)


def _targets(data_list: Sequence[Data]) -> Optional[Tensor]:
    ys = [getattr(d, "y", None) for d in data_list]
    labelled = [y is not None for y in ys]
    if not any(labelled):
        return None
    if not all(labelled):
        raise ValueError("some graphs of the batch have targets 'y' and others do not")
    # (1,), (T,), (1, T) -> (1, T); integer labels become float so NaN can mark missing
    return torch.from_numpy(np.concatenate([_array(y).reshape(1, -1) for y in ys], 0).astype(np.float32))


def collate_graphs(data_list: Sequence[Data], multi_hop_max_dist: int) -> GraphBatch:
    """Pad a list of encoded graphs into one :class:`GraphBatch`.

    Args:
        data_list: graphs carrying ``x``, ``edge_index``, ``edge_attr``, ``degree``,
            ``spd`` and ``path_next`` (see :class:`molsepnorm.encodings.GraphormerEncoding`):
            PyG ``Data``, or :class:`molsepnorm.chem.MolGraph` samples (NumPy arrays).
        multi_hop_max_dist: K, the number of hops of ``edge_path`` (>= 1).

    The padding runs in NumPy, whose per-operation cost on arrays of this size is a
    fraction of PyTorch's; the batch's tensors share the arrays' memory.
    """
    from molsepnorm.encodings import edge_paths_batched_numpy

    if len(data_list) == 0:
        raise ValueError("cannot collate an empty list of graphs")
    if multi_hop_max_dist < 1:
        raise ValueError(f"multi_hop_max_dist must be >= 1, got {multi_hop_max_dist}")
    B = len(data_list)

    xs, degrees, spds, nexts, edge_indices, edge_attrs = [], [], [], [], [], []
    for i, d in enumerate(data_list):
        x = _array(d.x)
        xs.append(x.reshape(-1, 1) if x.ndim == 1 else x)
        degrees.append(_array(_require(d, "degree", i)))
        spds.append(_array(_require(d, "spd", i)))
        nexts.append(_array(_require(d, "path_next", i)))
        edge_indices.append(_array(d.edge_index).reshape(2, -1))
        ea = _array(d.edge_attr)
        edge_attrs.append(ea.reshape(-1, 1) if ea.ndim == 1 else ea)
    n = np.array([x.shape[0] for x in xs], dtype=np.int64)  # (B,)
    e = np.array([ei.shape[1] for ei in edge_indices], dtype=np.int64)  # (B,)
    N = max(int(n.max()), 1)
    graph = np.arange(B)

    # nodes: graph b's atom k goes to dense slot (b, k)
    node_graph = np.repeat(graph, n)  # (sum n,)
    node_pos = np.arange(node_graph.size) - (np.cumsum(n) - n)[node_graph]
    x_cat = np.concatenate(xs, 0).astype(np.int64, copy=False)
    x = np.zeros((B, N, x_cat.shape[1]), dtype=np.int64)
    x[node_graph, node_pos] = x_cat
    node_mask = np.zeros((B, N), dtype=bool)
    node_mask[node_graph, node_pos] = True
    degree = np.zeros((B, N), dtype=np.int64)
    degree[node_graph, node_pos] = np.concatenate(degrees)

    # pairs: the flat row-major entry k of graph b goes to (b, k // n_b, k % n_b)
    sq = n * n
    pair_graph = np.repeat(graph, sq)  # (sum n^2,)
    k = np.arange(pair_graph.size) - (np.cumsum(sq) - sq)[pair_graph]
    n_pair = n[pair_graph]
    row = k // n_pair
    col = k - row * n_pair
    spd = np.full((B, N, N), _PAD, dtype=np.int64)
    spd[pair_graph, row, col] = np.concatenate(spds)
    path_next = np.full((B, N, N), _PAD, dtype=np.int64)
    path_next[pair_graph, row, col] = np.concatenate(nexts)

    # edges: global id of edge u -> v of graph b at (b, u, v)
    edge_graph = np.repeat(graph, e)  # (E,)
    src, dst = np.concatenate(edge_indices, 1).astype(np.int64, copy=False)
    edge_id = np.full((B, N, N), _PAD, dtype=np.int64)
    edge_id[edge_graph, src, dst] = np.arange(edge_graph.size)
    edge_path = edge_paths_batched_numpy(spd, path_next, edge_id, multi_hop_max_dist)  # (B, N, N, K)

    smiles = [getattr(d, "smiles", None) for d in data_list]
    return GraphBatch(
        x=torch.from_numpy(x),
        node_mask=torch.from_numpy(node_mask),
        degree=torch.from_numpy(degree),
        spd=torch.from_numpy(spd),
        edge_attr=torch.from_numpy(np.concatenate(edge_attrs, 0).astype(np.int64, copy=False)),
        edge_path=torch.from_numpy(edge_path),
        num_nodes=torch.from_numpy(n),
        y=_targets(data_list),
        smiles=smiles if all(s is not None for s in smiles) else None,
    )


class GraphCollator:
    """``collate_fn`` for a ``DataLoader``; picklable, so it works with worker processes.

    >>> loader = DataLoader(dataset, batch_size=256, collate_fn=GraphCollator(20))
    """

    def __init__(self, multi_hop_max_dist: int):
        self.multi_hop_max_dist = int(multi_hop_max_dist)

    def __call__(self, data_list: Sequence[Data]) -> GraphBatch:
        return collate_graphs(data_list, self.multi_hop_max_dist)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(multi_hop_max_dist={self.multi_hop_max_dist})"
