"""All-pairs shortest paths and the edge paths of Graphormer's multi-hop edge encoding.

Graphormer (Ying et al., "Do Transformers Really Perform Bad for Graph Representation?",
NeurIPS 2021) biases attention with the shortest-path distance (SPD) between every pair of
nodes and, in its multi-hop edge encoding, with the features of the edges along one
shortest path per pair.  The reference implementation runs a Cython Floyd--Warshall per
graph on every epoch and materialises an ``[N, N, 510, F]`` edge-feature array; here one
pass per molecule stores two ``[N, N]`` int16 tables instead:

* ``dist[i, j]``: hop count from ``i`` to ``j``; :data:`UNREACHABLE` (-1) when there is no
  path (salts, mixtures); 0 on the diagonal.
* ``next_hop[i, j]``: the neighbour of ``i`` on the stored shortest path from ``i`` to ``j``;
  -1 on the diagonal and for unreachable pairs.  It is the *lowest-numbered* neighbour
  ``k`` of ``i`` with ``dist[k, j] == dist[i, j] - 1``, so the table is deterministic
  (independent of the method and of the order of ``edge_index``), and following next hops
  from ``i`` reaches ``j`` in exactly ``dist[i, j]`` steps.

:func:`edge_paths` / :func:`edge_paths_batched` expand the tables into edge ids hop by hop.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Optional, Union

import sys

import numpy as np

if TYPE_CHECKING:  # torch is imported by the functions on tensors: the NumPy path needs none
    from torch import Tensor

UNREACHABLE: int = -1
"""Distance stored for a pair with no path between them."""

MAX_NODES: int = int(np.iinfo(np.int16).max)
"""Largest graph the int16 tables can describe (node ids and distances must fit)."""

DENSE_MAX_NODES: int = 40
"""Above this size ``method="auto"`` uses scipy: the dense BFS costs O(N^3) per level, and
this is where scipy overtakes it on NCI molecules (docs/benchmarks.md)."""

_NO_PATH = 1e7  # RDKit's GetDistanceMatrix writes 1e8 between atoms of different fragments

Method = Literal["auto", "dense", "scipy"]
METHODS: tuple[str, ...] = ("auto", "dense", "scipy")


def _as_edge_array(edge_index: Union[np.ndarray, Tensor], num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Validate ``edge_index`` ``[2, E]`` and return ``(src, dst)`` as int64 arrays ``[E]``."""
    torch = sys.modules.get("torch")  # not imported yet: edge_index cannot be a tensor
    if torch is not None and isinstance(edge_index, torch.Tensor):
        edge_index = edge_index.detach().cpu().numpy()
    ei = np.asarray(edge_index)
    if ei.ndim != 2 or ei.shape[0] != 2:
        raise ValueError(f"edge_index must have shape [2, E], got {list(ei.shape)}")
    if ei.size and ei.dtype.kind not in "iu":  # signed or unsigned integers
        raise ValueError(f"edge_index must hold integers, got dtype {ei.dtype}")
    num_nodes = int(num_nodes)
    if num_nodes < 0:
        raise ValueError(f"num_nodes must be >= 0, got {num_nodes}")
    if num_nodes > MAX_NODES:
        raise ValueError(
            f"graph has {num_nodes} nodes; the int16 shortest-path tables support at most {MAX_NODES}"
        )
    ei = ei.astype(np.int64, copy=False)
    if ei.size and (ei.min() < 0 or ei.max() >= num_nodes):
        raise ValueError(f"edge_index refers to nodes outside [0, {num_nodes}): min {ei.min()}, max {ei.max()}")
    return ei[0], ei[1]


def _dist_dense(src: np.ndarray, dst: np.ndarray, n: int) -> np.ndarray:
    """Hop distances ``[n, n]`` int16 by a BFS from all sources at once.

    ``R_k = min(R_{k-1} (I + A), 1)`` marks "reachable within k hops".  Summing
    ``R_0 .. R_{L-1}`` over the ``L`` levels until nothing new is reached counts, per pair,
    the levels at which it was reached, so ``dist = L - sum`` (and a sum of 0 means
    unreachable).  Float32 products go through BLAS, several times faster than bool
    matmul here; the clamp keeps walk counts from overflowing (inf * 0 would give NaN).
    """
    step = np.eye(n, dtype=np.float32)
    step[src, dst] = 1.0
    reach = step.copy()  # R_1
    reached = np.eye(n, dtype=np.float32)  # R_0; exact in float32 (sums <= n + 1)
    levels = 1
    count = n
    while True:
        new_count = int(np.count_nonzero(reach))
        if new_count == count:  # R_k == R_{k-1} (the sets only grow): BFS is over
            break
        count = new_count
        reached += reach
        levels += 1
        reach = reach @ step
        np.minimum(reach, 1.0, out=reach)
    dist = (levels - reached).astype(np.int16)
    dist[reached == 0] = UNREACHABLE
    return dist


def _dist_scipy(src: np.ndarray, dst: np.ndarray, n: int) -> np.ndarray:
    """Hop distances ``[n, n]`` int16 by ``scipy.sparse.csgraph`` (BFS-like Dijkstra, O(N E log N))."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import shortest_path

    # Building CSR directly is cheaper than going through COO for molecule-sized graphs.
    order = np.argsort(src, kind="stable")
    indptr = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.bincount(src, minlength=n), out=indptr[1:])
    graph = csr_matrix(
        (np.ones(src.shape[0], dtype=np.float64), dst[order].astype(np.int32), indptr), shape=(n, n)
    )
    d = shortest_path(graph, method="D", directed=True, unweighted=True)
    out = np.full((n, n), UNREACHABLE, dtype=np.int16)
    finite = np.isfinite(d)
    out[finite] = d[finite]
    return out


def _next_hop(dist: np.ndarray, src: np.ndarray, dst: np.ndarray, n: int) -> np.ndarray:
    """Next-hop table ``[n, n]`` int16 from distances, vectorised over edges x targets.

    Edge ``u -> v`` is a first step toward ``j`` iff ``dist[v, j] == dist[u, j] - 1``
    (an ``[E, n]`` test).  Edges are written in order of decreasing ``v`` so the
    lowest-numbered candidate is written last and wins: NumPy applies repeated 1-D
    fancy-index assignments in order (not a documented guarantee; the tests check the
    tie-break), which is cheaper than ``np.minimum.at`` (docs/benchmarks.md).
    """
    out = np.full(n * n, -1, dtype=np.int16)
    if src.size == 0:
        return out.reshape(n, n)
    order = np.argsort(-dst, kind="stable")
    s, d = src[order], dst[order]
    e, j = np.nonzero(dist[d] == dist[s] - 1)
    out[s[e] * n + j] = d[e]
    # dist[v, u] == UNREACHABLE == dist[u, u] - 1 also passes the test when the graph is
    # directed and v cannot reach back to u; the diagonal is the only such false positive.
    out[:: n + 1] = -1
    return out.reshape(n, n)


def shortest_paths(
    edge_index: Union[np.ndarray, Tensor], num_nodes: int, method: Method = "auto",
    distances: Optional[np.ndarray] = None,
) -> tuple[np.ndarray, np.ndarray]:
    """All-pairs shortest paths of an unweighted graph.

    Args:
        edge_index: ``[2, E]`` integer array or tensor of directed edges ``src -> dst``
            (PyG stores a molecule with both directions of every bond).  Self loops and
            duplicate edges are harmless.
        num_nodes: ``N``, at most :data:`MAX_NODES`.
        method: ``"dense"`` (numpy BFS by float32 matrix products, fastest for
            molecule-sized graphs), ``"scipy"`` (``scipy.sparse.csgraph``, better for large
            sparse graphs) or ``"auto"`` (dense up to :data:`DENSE_MAX_NODES` nodes).
            All give identical results.
        distances: hop distances ``[N, N]`` already known for this graph, e.g. RDKit's
            ``Chem.GetDistanceMatrix(mol)`` (C++, cheaper than this function's own search;
            values >= 1e7, RDKit's "no path", and negative ones become :data:`UNREACHABLE`).
            Then only the next-hop table is computed.  They must be this graph's
            distances: that is the caller's promise, not checked here.

    Returns:
        ``(dist, next_hop)``, both int16 ``[N, N]``: hop distances (:data:`UNREACHABLE`
        for no path, 0 on the diagonal) and the neighbour of ``i`` on the stored shortest
        path toward ``j`` (-1 on the diagonal and for unreachable pairs).

    Raises:
        ValueError: bad shape, node ids out of range, ``N > MAX_NODES`` or unknown method.
    """
    src, dst = _as_edge_array(edge_index, num_nodes)
    return _tables(src, dst, int(num_nodes), method, distances)


def _tables(src: np.ndarray, dst: np.ndarray, n: int, method: Method,
            distances: Optional[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """:func:`shortest_paths` on validated int64 edge ends (the method is checked here)."""
    if method not in METHODS:
        raise ValueError(f"unknown shortest-path method {method!r}; choose one of {METHODS}")
    if distances is not None:
        d = np.asarray(distances)
        if d.shape != (n, n):
            raise ValueError(f"distances must have shape [{n}, {n}], got {list(d.shape)}")
        dist = np.where((d >= 0) & (d < _NO_PATH), d, UNREACHABLE).astype(np.int16)
    elif method == "dense" or (method == "auto" and n <= DENSE_MAX_NODES):
        dist = _dist_dense(src, dst, n)
    else:
        dist = _dist_scipy(src, dst, n)
    return dist, _next_hop(dist, src, dst, n)


def edge_paths_batched(spd: Tensor, path_next: Tensor, edge_id: Tensor, max_hops: int) -> Tensor:
    """Edge ids along the stored shortest path of every pair of a padded batch.

    This is what the multi-hop edge encoding of Graphormer (Ying et al., NeurIPS 2021)
    gathers edge features with; the reference builds the same from a Python walk.

    Args:
        spd: ``[B, N, N]`` integer distances; :data:`UNREACHABLE` (-1) for no path and for
            padding.
        path_next: ``[B, N, N]`` integer next hops (local node ids within each graph), -1
            for none, as returned by :func:`shortest_paths`.
        edge_id: ``[B, N, N]`` long, the (batch-global) id of the edge ``u -> v`` of graph
            ``b`` at ``[b, u, v]``, -1 where there is none.
        max_hops: number of hops kept per pair (``multi_hop_max_dist``), ``>= 0``.

    The walk runs in NumPy (:func:`edge_paths_batched_numpy`, what the collator calls):
    on molecule-sized batches its small array operations cost a fraction of PyTorch's
    per-operation overhead.  The result is on the device of ``spd``.

    Returns:
        ``[B, N, N, max_hops]`` long: at ``[b, i, j, h]`` the id of the ``h``-th edge on the
        path from ``i`` to ``j`` for ``h < min(spd, max_hops)``, else -1.  Computed with one
        vectorised gather per hop over the pairs whose path is still running.
    """
    import torch

    out = edge_paths_batched_numpy(*(t.detach().cpu().numpy() for t in (spd, path_next, edge_id)), max_hops)
    return torch.from_numpy(out).to(spd.device)


def edge_paths_batched_numpy(spd: np.ndarray, path_next: np.ndarray, edge_id: np.ndarray,
                             max_hops: int) -> np.ndarray:
    """:func:`edge_paths_batched` on NumPy arrays ``[B, N, N]``: int64 ``[B, N, N, max_hops]``."""
    if spd.ndim != 3 or spd.shape != path_next.shape or spd.shape != edge_id.shape:
        raise ValueError(
            "spd, path_next and edge_id must all have shape [B, N, N], got "
            f"{list(spd.shape)}, {list(path_next.shape)}, {list(edge_id.shape)}"
        )
    if max_hops < 0:
        raise ValueError(f"max_hops must be >= 0, got {max_hops}")
    b, n, _ = spd.shape
    out = np.full((b * n * n, max_hops), -1, dtype=np.int64)
    if out.size == 0:
        return out.reshape(b, n, n, max_hops)
    nxt = path_next.reshape(-1).astype(np.int64, copy=False)
    eid = edge_id.reshape(-1).astype(np.int64, copy=False)
    flat_spd = spd.reshape(-1)
    # Walk only the pairs that have a path (in a batch padded to its largest molecule most
    # pairs are padding), all of them for every hop: a pair whose path has ended walks on
    # from a clamped next hop and its entry is masked, which is cheaper than dropping
    # finished pairs hop by hop (docs/benchmarks.md).
    pair = np.flatnonzero(flat_spd > 0)  # flat id (b * n + i) * n + j
    if pair.size == 0:
        return out.reshape(b, n, n, max_hops)
    remaining = flat_spd[pair].astype(np.int64)
    cur = pair // n  # row b * n + (current node); starts at i
    col = pair - cur * n  # target j
    graph_row0 = cur - cur % n  # b * n
    hops = min(max_hops, int(remaining.max()))
    walked = np.empty((pair.size, hops), dtype=np.int64)
    for h in range(hops):
        step = np.maximum(nxt[cur * n + col], 0)  # next node, local id (-1 past the end: clamped)
        walked[:, h] = np.where(remaining > h, eid[cur * n + step], -1)
        cur = graph_row0 + step
    out[pair, :hops] = walked
    return out.reshape(b, n, n, max_hops)


def edge_paths(
    spd: Tensor, path_next: Tensor, edge_index: Tensor, num_nodes: int, max_hops: int
) -> Tensor:
    """Edge ids along the stored shortest path of every pair of one graph.

    Args:
        spd: ``[N, N]`` or flat ``[N * N]`` distances (:data:`UNREACHABLE` for no path).
        path_next: ``[N, N]`` or flat ``[N * N]`` next hops, -1 for none.
        edge_index: ``[2, E]``; edge ids are its column numbers (when an edge ``u -> v``
            appears several times one of its columns is used).
        num_nodes: ``N``.
        max_hops: hops kept per pair (Graphormer's ``multi_hop_max_dist``).

    Returns:
        ``[N, N, max_hops]`` long: ``[i, j, h]`` is the column of ``edge_index`` of the
        ``h``-th edge on the path from ``i`` toward ``j`` for ``h < min(spd[i, j],
        max_hops)``, -1 elsewhere (diagonal, unreachable, beyond the path).
    """
    import torch

    n = int(num_nodes)
    spd_t = torch.as_tensor(spd).reshape(n, n)
    nxt_t = torch.as_tensor(path_next).reshape(n, n)
    ei = torch.as_tensor(edge_index).long()
    eid = torch.full((n, n), -1, dtype=torch.long, device=spd_t.device)
    if ei.numel():
        eid[ei[0], ei[1]] = torch.arange(ei.shape[1], device=spd_t.device)
    return edge_paths_batched(spd_t[None], nxt_t[None], eid[None], max_hops)[0]
