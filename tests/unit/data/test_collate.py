"""collate_graphs / GraphBatch on real molecules: shapes, masks, padding, edge paths, targets."""
from __future__ import annotations

import math
import pickle

import networkx as nx
import pytest
import torch
from torch.utils.data import DataLoader

from molsepnorm.chem import featurize
from molsepnorm.data.collate import GraphBatch, GraphCollator, collate_graphs
from molsepnorm.encodings import UNREACHABLE, GraphormerEncoding, edge_paths

ENCODE = GraphormerEncoding()
SMILES = [
    "C",  # one atom, no edges
    "C[NH3+].CC(=O)[O-]",  # salt (zinc vocabulary): two components
    "CC(=O)Oc1ccccc1C(=O)O",  # aspirin
    "CC(C)CCCC(C)C1CCC2C1(CCC3C2CC=C4C3(CCC(C4)O)C)C",  # cholesterol: fused rings
]
BIG = "N" + "C(=O)c1ccc(cc1)N" * 67  # 604 atoms, beyond the reference collator's 512


def graph(smiles: str, vocab: str = "zinc"):
    return ENCODE(featurize(smiles, vocab=vocab))


@pytest.fixture(scope="module")
def graphs():
    return [graph(s) for s in SMILES]


@pytest.mark.parametrize("vocab, f_atom, f_bond", [("zinc", 1, 1), ("ogb", 9, 3)])
def test_shapes_masks_and_padding(vocab, f_atom, f_bond):
    data = [graph(s, vocab) for s in SMILES]
    K = 4
    b = collate_graphs(data, multi_hop_max_dist=K)
    n = [d.num_nodes for d in data]
    B, N = len(data), max(n)
    assert isinstance(b, GraphBatch) and b.num_graphs == B == len(b)
    assert b.x.shape == (B, N, f_atom) and b.x.dtype == torch.long
    assert b.node_mask.shape == (B, N) and b.node_mask.dtype == torch.bool
    assert b.degree.shape == (B, N) and b.spd.shape == (B, N, N)
    assert b.edge_path.shape == (B, N, N, K) and b.edge_path.dtype == torch.long
    assert b.edge_attr.dim() == 2 and b.edge_attr.shape == (sum(d.edge_index.size(1) for d in data), f_bond)
    assert b.num_nodes.tolist() == n
    assert b.smiles == [d.smiles for d in data]
    assert b.y is None
    for i, d in enumerate(data):
        k = n[i]
        assert b.node_mask[i].tolist() == [True] * k + [False] * (N - k)
        assert torch.equal(b.x[i, :k], d.x.view(k, -1))
        assert torch.equal(b.degree[i, :k], d.degree)
        assert torch.equal(b.spd[i, :k, :k], d.spd.long().view(k, k))
        # padding values
        assert (b.x[i, k:] == 0).all() and (b.degree[i, k:] == 0).all()
        assert (b.spd[i, k:, :] == -1).all() and (b.spd[i, :, k:] == -1).all()
        assert (b.edge_path[i, k:] == -1).all() and (b.edge_path[i, :, k:] == -1).all()
    e0 = 0
    for d in data:  # edge_attr is the plain concatenation
        e = d.edge_index.size(1)
        assert torch.equal(b.edge_attr[e0:e0 + e], d.edge_attr.reshape(e, f_bond))
        e0 += e


def test_unreachable_is_kept_apart_from_padding(graphs):
    b = collate_graphs(graphs, 3)
    i = 1  # the salt
    k = int(b.num_nodes[i])
    real = b.node_mask[i].view(-1, 1) & b.node_mask[i].view(1, -1)
    salt = b.spd[i][real].view(k, k)
    assert (salt == UNREACHABLE).any(), "the two ions must be unreachable from each other"
    assert (salt.diagonal() == 0).all()
    # unreachable pairs have no path
    assert (b.edge_path[i, :k, :k][salt == UNREACHABLE] == -1).all()


def test_no_graph_dropped_however_large(graphs):
    big = graph(BIG)
    assert big.num_nodes > 600
    b = collate_graphs([graphs[0], big, graphs[2]], 5)
    assert b.num_graphs == 3
    assert b.num_nodes.tolist() == [1, big.num_nodes, graphs[2].num_nodes]
    assert b.x.shape[1] == big.num_nodes
    assert int(b.node_mask.sum()) == 1 + big.num_nodes + graphs[2].num_nodes
    # a path of 5 hops exists in the big molecule and is fully listed
    assert (b.edge_path[1] >= 0).sum(-1).max() == 5


def _edge_offsets(data):
    return torch.tensor([0] + [d.edge_index.size(1) for d in data]).cumsum(0)


def test_edge_path_matches_per_graph_edge_paths(graphs):
    K = 6
    b = collate_graphs(graphs, K)
    offsets = _edge_offsets(graphs)
    for i, d in enumerate(graphs):
        k = d.num_nodes
        ref = edge_paths(d.spd, d.path_next, d.edge_index, k, K)  # local edge ids
        ref = torch.where(ref >= 0, ref + offsets[i], -1)
        assert torch.equal(b.edge_path[i, :k, :k], ref)


def test_edge_path_walks_a_shortest_path_networkx(graphs):
    """Independent check: the listed edges chain from i toward j along a shortest path."""
    K = 5
    b = collate_graphs(graphs, K)
    src, dst = torch.cat([d.edge_index for d in graphs], 1)  # local node ids, global edge ids
    offsets = _edge_offsets(graphs)
    for g, d in enumerate(graphs):
        G = nx.Graph()
        G.add_nodes_from(range(d.num_nodes))
        G.add_edges_from(d.edge_index.t().tolist())
        lengths = dict(nx.all_pairs_shortest_path_length(G))
        for i in range(d.num_nodes):
            for j in range(d.num_nodes):
                path = b.edge_path[g, i, j]
                if j not in lengths[i]:
                    assert b.spd[g, i, j] == UNREACHABLE and (path == -1).all()
                    continue
                dist = lengths[i][j]
                assert b.spd[g, i, j] == dist
                hops = path[path >= 0]
                assert len(hops) == min(dist, K) and (path[len(hops):] == -1).all()
                assert ((hops >= offsets[g]) & (hops < offsets[g + 1])).all(), "edge of another graph"
                at = i
                for e in hops.tolist():
                    assert src[e] == at
                    at = int(dst[e])
                    assert lengths[at][j] == dist - 1 - hops.tolist().index(e)
                if dist <= K:
                    assert at == j


def test_targets_nan_survives_and_are_float():
    a, c = graph("CCO"), graph("CCN")
    a.y = torch.tensor([[1.5, float("nan")]])
    c.y = torch.tensor([[float("nan"), 0.0]])
    b = collate_graphs([a, c], 3)
    assert b.y.shape == (2, 2) and b.y.dtype == torch.float32
    assert b.y[0, 0] == 1.5 and math.isnan(b.y[0, 1]) and math.isnan(b.y[1, 0]) and b.y[1, 1] == 0
    # molhiv-style long labels [1, 1] and ZINC-style [1] both become (B, 1) float
    a.y, c.y = torch.tensor([[1]]), torch.tensor([0.25])
    assert collate_graphs([a, c], 3).y.tolist() == [[1.0], [0.25]]
    c.y = None
    with pytest.raises(ValueError, match="targets"):
        collate_graphs([a, c], 3)


def test_missing_encoding_is_named():
    with pytest.raises(ValueError, match="has no 'degree'.*GraphormerEncoding"):
        collate_graphs([featurize("CCO", vocab="zinc")], 3)


def test_to_and_dataloader_with_workers(graphs):
    collator = GraphCollator(4)
    assert pickle.loads(pickle.dumps(collator)).multi_hop_max_dist == 4
    loader = DataLoader(graphs, batch_size=2, collate_fn=collator, num_workers=1)
    batches = list(loader)
    assert [bt.num_graphs for bt in batches] == [2, 2]
    direct = collate_graphs(graphs[:2], 4)
    assert torch.equal(batches[0].edge_path, direct.edge_path)
    moved = batches[0].to("cpu")
    assert moved.x.device.type == "cpu" and moved.smiles == batches[0].smiles


@pytest.mark.parametrize("vocab", ["zinc", "ogb"])
def test_molgraph_samples_collate_like_data(vocab):
    """MolGraph samples (NumPy arrays, what predict feeds) give the very batch Data gives."""
    from dataclasses import fields

    from molsepnorm.chem import MolGraph, featurize_graph

    samples = [featurize_graph(s, vocab) for s in SMILES + [BIG]]
    assert all(isinstance(g, MolGraph) for g in samples)
    a = collate_graphs(samples, multi_hop_max_dist=5)
    b = collate_graphs([graph(s, vocab) for s in SMILES + [BIG]], multi_hop_max_dist=5)
    for f in fields(GraphBatch):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, torch.Tensor):
            assert x.dtype == y.dtype and torch.equal(x, y), f.name
        else:
            assert x == y, f.name
    assert pickle.loads(pickle.dumps(samples[2])).smiles == SMILES[2]  # crosses processes as arrays
