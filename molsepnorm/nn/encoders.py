"""Graphormer's input encodings (Ying et al., "Do Transformers Really Perform Bad for
Graph Representation?", NeurIPS 2021).

Node side, added to the token embeddings:

* :class:`AtomEncoder` -- integer atom features, one offset per column into one table,
  the column embeddings summed.
* :class:`DegreeEncoder` -- centrality encoding, an embedding of the node degree.  Molecules
  are undirected (in-degree = out-degree), so there is one table, not two.

Pair side, added to the attention logits, shape ``(B, H, N+1, N+1)``:

* :class:`SpatialEncoder` -- a learned scalar per head for each shortest-path distance.
* :class:`EdgePathEncoder` -- the multi-hop edge encoding.
* :class:`GraphAttentionBias` -- both of the above plus the virtual graph token's distance
  and the padding mask, built once per batch and shared by every layer.
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch
from torch import Tensor, nn

from molsepnorm.nn.embedding import embedding
from molsepnorm.nn.segment import gather_segment_sum

__all__ = ["AtomEncoder", "DegreeEncoder", "SpatialEncoder", "EdgePathEncoder", "GraphAttentionBias", "hop_entries"]


def _column_offsets(dims: Sequence[int]) -> Tensor:
    """Start row of each feature column in a table holding all columns: (F,) long."""
    return torch.tensor([0, *list(dims)[:-1]], dtype=torch.long).cumsum(0)


class AtomEncoder(nn.Module):
    """``h_i = sum_f E[offset_f + x_if]``: (B, N, F) long -> (B, N, D).

    Args:
        dims: cardinality of each atom feature column (OGB: 9 columns; ZINC: ``[28]``).
        dim: embedding width D.
    """

    def __init__(self, dims: Sequence[int], dim: int):
        super().__init__()
        self.dims = list(dims)
        self.embedding = nn.Embedding(sum(self.dims), dim)
        self.register_buffer("offsets", _column_offsets(self.dims), persistent=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.normal_(self.embedding.weight, std=0.02)

    def forward(self, x: Tensor) -> Tensor:
        return embedding(x + self.offsets, self.embedding.weight).sum(-2)  # (B, N, F, D) -> (B, N, D)


class DegreeEncoder(nn.Module):
    """Centrality encoding ``z[deg(i)]``, degrees clipped to ``num_degree - 1``: (B, N) -> (B, N, D)."""

    def __init__(self, num_degree: int, dim: int):
        super().__init__()
        self.num_degree = num_degree
        self.embedding = nn.Embedding(num_degree, dim)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.normal_(self.embedding.weight, std=0.02)

    def forward(self, degree: Tensor) -> Tensor:
        return embedding(degree.clamp(0, self.num_degree - 1), self.embedding.weight)


class SpatialEncoder(nn.Module):
    """Spatial encoding ``b[phi(i, j)]``, one scalar per head: (B, N, N) -> (B, H, N, N).

    Distances are clipped to ``num_spatial - 2``; unreachable pairs (``spd < 0``, e.g. the
    two ions of a salt) get the last bucket, ``num_spatial - 1``, of their own.
    """

    def __init__(self, num_spatial: int, num_heads: int):
        super().__init__()
        if num_spatial < 3:
            raise ValueError(f"num_spatial must be >= 3 (0, 1, unreachable), got {num_spatial}")
        self.num_spatial = num_spatial
        self.embedding = nn.Embedding(num_spatial, num_heads)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.normal_(self.embedding.weight, std=0.02)

    def forward(self, spd: Tensor) -> Tensor:
        unreachable = self.num_spatial - 1
        bucket = torch.where(spd < 0, unreachable, spd.clamp(max=self.num_spatial - 2))
        return embedding(bucket, self.embedding.weight).permute(0, 3, 1, 2)  # (B, N, N, H) -> (B, H, N, N)


def hop_entries(edge_path: Tensor, num_edges: int) -> tuple[Tensor, Tensor]:
    """The real (pair, hop) entries of ``edge_path`` (B, N, N, K) (-1 = none), for the
    hop table of :class:`EdgePathEncoder` ((K * E, H), row n * E + e = edge e at hop n):
    the table row ``n * E + e`` and the pair ``(b * N + i) * N + j`` of each, pairs ascending."""
    K = edge_path.size(-1)
    flat = edge_path.reshape(-1)  # (B*N*N*K,), entry p*K + n = hop n of pair p
    entry = (flat >= 0).nonzero().squeeze(1)  # the real hops only
    return flat.index_select(0, entry) + (entry % K) * num_edges, entry // K


class EdgePathEncoder(nn.Module):
    """Multi-hop edge encoding of Graphormer: (B, N, N, K) edge ids -> (B, H, N, N).

    For a pair (i, j) with shortest path e_1 ... e_d (d = SPD),

        c_ij = 1 / clip(d, 1, K) * sum_{n <= min(d, K)} x_{e_n} W_n,

    where x_e (H,) is the embedding of edge e's feature columns averaged over columns and
    W_n (H, H) a learned matrix per hop index.  Rather than materializing a
    (B, N, N, K, H) tensor, each hop's product ``x_e W_n`` is tabulated once per edge
    ((K * E, H), small) and only the real (pair, hop) entries -- about a tenth of the
    padded B * N * N * K on ZINC with K = 20 -- are gathered and summed into their pair
    (:func:`~molsepnorm.nn.segment.gather_segment_sum`: on CPU a sparse-dense product).
    This is faster forward + backward than ``F.embedding_bag`` over the padded index,
    whose backward sorts every slot (figures in docs/benchmarks.md).
    """

    def __init__(self, dims: Sequence[int], num_heads: int, max_hops: int):
        super().__init__()
        self.dims = list(dims)
        self.num_heads = num_heads
        self.max_hops = max_hops
        self.embedding = nn.Embedding(sum(self.dims), num_heads)
        self.hop_weight = nn.Parameter(torch.empty(max_hops, num_heads, num_heads))  # (K, H, H)
        self.register_buffer("offsets", _column_offsets(self.dims), persistent=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.normal_(self.embedding.weight, std=0.02)
        nn.init.normal_(self.hop_weight, std=0.02)

    def forward(self, edge_attr: Tensor, edge_path: Tensor, spd: Tensor,
                entries: Optional[tuple[Tensor, Tensor]] = None) -> Tensor:
        """edge_attr (E, F_e) long, edge_path (B, N, N, K') long (-1 = none), spd (B, N, N);
        ``entries``: :func:`hop_entries` of ``edge_path`` cut to ``min(K', max_hops)`` hops,
        if already known (the members of an ensemble share them)."""
        B, N, _, K = edge_path.shape
        if K > self.max_hops:
            edge_path, K = edge_path[..., : self.max_hops], self.max_hops
        E, H = edge_attr.size(0), self.num_heads
        edge = embedding(edge_attr + self.offsets, self.embedding.weight).mean(1)  # (E, F_e, H) -> (E, H)
        table = torch.einsum("eh,khg->keg", edge, self.hop_weight[:K]).reshape(K * E, H)  # row n*E+e: x_e W_n
        rows, pairs = entries if entries is not None else hop_entries(edge_path, E)
        summed = gather_segment_sum(table, rows, pairs, B * N * N)  # (B*N*N, H)
        length = spd.clamp(1, self.max_hops).unsqueeze(-1).to(summed.dtype)  # (B, N, N, 1)
        return (summed.view(B, N, N, H) / length).permute(0, 3, 1, 2)  # (B, H, N, N)


class GraphAttentionBias(nn.Module):
    """The attention bias shared by all layers: (B, H, N+1, N+1), float32.

    Token 0 is the virtual graph token; its bias to and from every node (and itself) is a
    learned per-head scalar, the "virtual distance" (one value for both directions, as
    in the reference code).  Node pairs get spatial + edge encodings.  Padded keys get
    ``-inf``; the graph-token key is always real, so no row is ever entirely ``-inf``
    and softmax never yields NaN.  It is built in float32 with autocast off so the
    ``-inf`` mask and small encodings survive bf16 / fp16 training.
    """

    def __init__(
        self,
        bond_dims: Sequence[int],
        num_heads: int,
        num_spatial: int,
        max_hops: int,
    ):
        super().__init__()
        self.num_heads = num_heads
        self.spatial = SpatialEncoder(num_spatial, num_heads)
        self.edges = EdgePathEncoder(bond_dims, num_heads, max_hops)
        self.virtual_distance = nn.Parameter(torch.empty(num_heads))  # (H,)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.spatial.reset_parameters()
        self.edges.reset_parameters()
        nn.init.normal_(self.virtual_distance, std=0.02)

    def forward(self, spd: Tensor, edge_attr: Tensor, edge_path: Tensor, node_mask: Tensor,
                hop_entries: Optional[tuple[Tensor, Tensor]] = None) -> Tensor:
        """spd (B, N, N), edge_attr (E, F_e), edge_path (B, N, N, K), node_mask (B, N) bool;
        ``hop_entries``: see :meth:`EdgePathEncoder.forward`."""
        B, N = node_mask.shape
        H = self.num_heads
        with torch.autocast(device_type=spd.device.type, enabled=False):
            pair = self.spatial(spd) + self.edges(edge_attr, edge_path, spd, hop_entries)  # (B, H, N, N)
            t = self.virtual_distance.float()
            to_graph = t.view(1, H, 1, 1).expand(B, H, N, 1)  # node i -> graph token
            from_graph = t.view(1, H, 1, 1).expand(B, H, 1, N + 1)  # graph token -> all
            bias = torch.cat([from_graph, torch.cat([to_graph, pair.float()], -1)], -2)  # (B, H, N+1, N+1)
            key_real = torch.cat([node_mask.new_ones(B, 1), node_mask], 1)  # (B, N+1)
            return bias.masked_fill(~key_real.view(B, 1, 1, N + 1), float("-inf"))
