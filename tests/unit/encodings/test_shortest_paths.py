"""shortest_paths / edge_paths against networkx and RDKit, on random and real graphs."""
from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from molsepnorm.encodings import (
    DENSE_MAX_NODES,
    MAX_NODES,
    UNREACHABLE,
    edge_paths,
    edge_paths_batched,
    shortest_paths,
)

METHODS = ["dense", "scipy", "auto"]

SMILES = [
    "CC(=O)Oc1ccccc1C(=O)O",  # aspirin
    "Cn1cnc2c1c(=O)n(C)c(=O)n2C",  # caffeine
    "CC(C)CCCC(C)C1CCC2C1(CCC3C2CC=C4C3(CCC(C4)O)C)C",  # cholesterol
    "CC(=O)[O-].[Na+]",  # salt: two components
    "[Na+].[Cl-]",  # no bonds at all
    "Cl.CN1CCC23C4C1CC5=C2C(=CC=C5)OC3C(O)C=C4",  # hydrochloride salt
    "C",  # one atom
    "CC1=C2C(C(=O)C3(C(CC4C(C3C(C(C2(C)C)(CC1OC(=O)C(C(C5=CC=CC=C5)NC(=O)C6=CC=CC=C6)O)O)"
    "OC(=O)C7=CC=CC=C7)(CO4)OC(=O)C)O)C)OC(=O)C",  # paclitaxel, 62 heavy atoms (> DENSE_MAX_NODES)
]


@pytest.fixture(autouse=True)
def _single_thread():
    """One BLAS/OpenMP thread: on a busy 2-core machine their spin-waits cost ~100 ms per call."""
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    with threadpool_limits(limits=1):
        yield
    torch.set_num_threads(before)


# --------------------------------------------------------------------------- helpers


def mol_graph(smiles: str) -> tuple[np.ndarray, int]:
    """``edge_index`` [2, 2B] (both directions of every bond) and atom count of a SMILES."""
    from rdkit import Chem

    mol = Chem.MolFromSmiles(smiles)
    assert mol is not None, smiles
    bonds = [(b.GetBeginAtomIdx(), b.GetEndAtomIdx()) for b in mol.GetBonds()]
    pairs = bonds + [(j, i) for i, j in bonds]
    return np.array(pairs, dtype=np.int64).reshape(-1, 2).T, mol.GetNumAtoms()


def nx_graph(edge_index: np.ndarray, n: int) -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from(zip(edge_index[0].tolist(), edge_index[1].tolist()))
    return g


def both_directions(g: nx.Graph) -> np.ndarray:
    e = np.array(list(g.edges()), dtype=np.int64).reshape(-1, 2)
    return np.concatenate([e, e[:, ::-1]]).T.copy()


def nx_dist(edge_index: np.ndarray, n: int) -> np.ndarray:
    ref = np.full((n, n), UNREACHABLE, dtype=np.int64)
    for i, lengths in nx.all_pairs_shortest_path_length(nx_graph(edge_index, n)):
        for j, d in lengths.items():
            ref[i, j] = d
    return ref


def check_tables(dist: np.ndarray, nxt: np.ndarray, edge_index: np.ndarray, n: int) -> None:
    """dist equals networkx; every stored path is a real shortest path ending at j."""
    assert dist.dtype == np.int16 and nxt.dtype == np.int16
    assert dist.shape == nxt.shape == (n, n)
    np.testing.assert_array_equal(dist, nx_dist(edge_index, n))
    assert ((nxt == -1) == (dist <= 0)).all(), "next hop must be -1 exactly on diagonal/unreachable"
    if n == 0:
        return
    adj = np.zeros((n, n), dtype=bool)
    adj[edge_index[0], edge_index[1]] = True
    # Walk every pair at once: after dist[i, j] steps each walker must sit on j.
    cur = np.repeat(np.arange(n)[:, None], n, axis=1)
    col = np.repeat(np.arange(n)[None, :], n, axis=0)
    for h in range(int(dist.max(initial=0))):
        active = dist > h
        step = nxt[cur, col].astype(np.int64)
        assert (step[active] >= 0).all()
        assert adj[cur[active], step[active]].all(), "path uses a non-edge"
        # one hop closer each time: consistency of the chosen paths
        assert (dist[step[active], col[active]] == dist[cur[active], col[active]] - 1).all()
        cur = np.where(active, step, cur)
    reach = dist >= 0
    assert (cur[reach] == col[reach]).all(), "walk does not end at the target"
    # Documented tie-break: the lowest-numbered neighbour on a shortest path.
    if n <= 80:
        cand = adj[:, :, None] & (dist[None, :, :] == dist[:, None, :] - 1) & (dist[:, None, :] > 0)  # [i, k, j]
        lowest = np.where(cand.any(axis=1), cand.argmax(axis=1), -1)
        np.testing.assert_array_equal(nxt, lowest)


def check_edge_paths(ep: torch.Tensor, dist: np.ndarray, nxt: np.ndarray, edge_index: np.ndarray, hops: int) -> None:
    """Edges start at i, are consecutive, follow path_next, end at j when spd <= hops."""
    n = dist.shape[0]
    assert ep.shape == (n, n, hops) and ep.dtype == torch.long
    ep = ep.numpy()
    src, dst = edge_index
    d = dist.astype(np.int64)
    length = np.where(d > 0, np.minimum(d, hops), 0)
    h = np.arange(hops)
    filled = h[None, None, :] < length[:, :, None]
    assert (ep[filled] >= 0).all() and (ep[~filled] == -1).all()
    cur = np.repeat(np.arange(n)[:, None], n, axis=1)
    col = np.repeat(np.arange(n)[None, :], n, axis=0)
    for k in range(hops):
        act = filled[:, :, k]
        if not act.any():
            continue
        e = ep[:, :, k][act]
        assert (src[e] == cur[act]).all(), "edge does not start where the previous one ended"
        assert (dst[e] == nxt[cur[act], col[act]]).all(), "edge does not follow path_next"
        cur = np.where(act, dst[np.maximum(ep[:, :, k], 0)], cur)
    done = (d >= 0) & (d <= hops)
    assert (cur[done] == col[done]).all(), "complete paths must end at j"
    trunc = d > hops
    assert (dist[cur[trunc], col[trunc]] == d[trunc] - hops).all(), "truncated path stops after max_hops"


def random_graphs(seed: int = 0) -> list[tuple[str, np.ndarray, int]]:
    """Named undirected graphs (both directions stored) covering the awkward cases."""
    rng = np.random.default_rng(seed)
    out: list[tuple[str, np.ndarray, int]] = []
    for n in (2, 3, 5, 8, 13, 21, 34, 41, 55, 70):
        for p in (0.02, 0.06, 0.15, 0.4, 0.9):
            g = nx.gnp_random_graph(n, p, seed=int(rng.integers(1 << 30)))
            out.append((f"er-{n}-{p}", both_directions(g), n))
    for n in (2, 7, 30, 64):
        out.append((f"tree-{n}", both_directions(nx.random_labeled_tree(n, seed=int(rng.integers(1 << 30)))), n))
        out.append((f"ring-{n}", both_directions(nx.cycle_graph(n)), n))
    parts = [nx.cycle_graph(6), nx.path_graph(4), nx.empty_graph(3), nx.complete_graph(5), nx.star_graph(4)]
    g = nx.disjoint_union_all(parts)
    perm = rng.permutation(g.number_of_nodes())  # interleave the components' node ids
    g = nx.relabel_nodes(g, dict(enumerate(perm.tolist())))
    out.append(("components", both_directions(g), g.number_of_nodes()))
    out.append(("isolated-only", np.zeros((2, 0), dtype=np.int64), 6))
    out.append(("empty", np.zeros((2, 0), dtype=np.int64), 0))
    out.append(("single", np.zeros((2, 0), dtype=np.int64), 1))
    out.append(("chain-300", both_directions(nx.path_graph(300)), 300))
    return out


RANDOM = random_graphs()


# --------------------------------------------------------------------------- shortest_paths


@pytest.mark.parametrize("method", METHODS)
def test_random_graphs_match_networkx(method: str) -> None:
    for name, ei, n in RANDOM:
        if method == "dense" and n > 100:
            continue  # the O(N^3)-per-level dense BFS is covered on the chain via scipy/auto
        dist, nxt = shortest_paths(ei, n, method=method)
        try:
            check_tables(dist, nxt, ei, n)
        except AssertionError as exc:
            raise AssertionError(f"{name} ({method}): {exc}") from exc


@pytest.mark.parametrize("method", METHODS)
def test_long_chain_closed_form(method: str) -> None:
    n = 60 if method == "dense" else 300  # dense: O(N^3) per level, N levels
    ei = both_directions(nx.path_graph(n))
    dist, nxt = shortest_paths(ei, n, method=method)
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    np.testing.assert_array_equal(dist, np.abs(i - j))
    np.testing.assert_array_equal(nxt[i < j], (i + 1)[i < j])
    np.testing.assert_array_equal(nxt[i > j], (i - 1)[i > j])


@pytest.mark.parametrize("smiles", SMILES)
def test_real_molecules_match_networkx_and_rdkit(smiles: str) -> None:
    from rdkit import Chem

    ei, n = mol_graph(smiles)
    rd = Chem.GetDistanceMatrix(Chem.MolFromSmiles(smiles))
    rd = np.where(rd >= 1e7, UNREACHABLE, rd).astype(np.int64)  # RDKit writes 1e8 for no path
    results = [shortest_paths(ei, n, method=m) for m in METHODS]
    for dist, nxt in results:
        check_tables(dist, nxt, ei, n)
        np.testing.assert_array_equal(dist, rd)
        np.testing.assert_array_equal(nxt, results[0][1])


def test_salt_has_unreachable_pairs() -> None:
    ei, n = mol_graph("CC(=O)[O-].[Na+]")
    dist, nxt = shortest_paths(ei, n)
    assert (dist[:4, 4] == UNREACHABLE).all() and (dist[4, :4] == UNREACHABLE).all()
    assert (nxt[:4, 4] == -1).all() and dist[4, 4] == 0


def test_methods_identical_and_edge_order_irrelevant() -> None:
    rng = np.random.default_rng(1)
    for _, ei, n in RANDOM:
        if n > 100:
            continue
        base = shortest_paths(ei, n, method="dense")
        other = shortest_paths(ei[:, rng.permutation(ei.shape[1])], n, method="scipy")
        np.testing.assert_array_equal(base[0], other[0])
        np.testing.assert_array_equal(base[1], other[1])


def test_directed_self_loops_and_duplicates() -> None:
    rng = np.random.default_rng(2)
    g = nx.gnp_random_graph(25, 0.08, seed=3, directed=True)
    ei = np.array(list(g.edges()), dtype=np.int64).T
    ei = np.concatenate([ei, ei[:, :5], np.stack([np.arange(4), np.arange(4)])], axis=1)
    ei = ei[:, rng.permutation(ei.shape[1])]
    for method in METHODS:
        dist, nxt = shortest_paths(ei, 25, method=method)
        check_tables(dist, nxt, ei, 25)


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(0, 45),
    data=st.data(),
)
def test_hypothesis_random_edge_lists(n: int, data: st.DataObject) -> None:
    pairs = data.draw(st.lists(st.tuples(st.integers(0, max(n - 1, 0)), st.integers(0, max(n - 1, 0))), max_size=3 * n))
    pairs = pairs if n else []
    ei = np.array(pairs + [(j, i) for i, j in pairs], dtype=np.int64).reshape(-1, 2).T
    dist, nxt = shortest_paths(ei, n)
    check_tables(dist, nxt, ei, n)


def test_input_types() -> None:
    ei, n = mol_graph("c1ccccc1O")
    ref = shortest_paths(ei, n)
    for variant in (torch.from_numpy(ei), torch.from_numpy(ei).int(), ei.astype(np.int32)):
        out = shortest_paths(variant, n)
        np.testing.assert_array_equal(out[0], ref[0])
        np.testing.assert_array_equal(out[1], ref[1])
    empty = shortest_paths(torch.empty(2, 0, dtype=torch.long), 0)
    assert empty[0].shape == empty[1].shape == (0, 0)
    single = shortest_paths(np.zeros((2, 0), dtype=np.int64), 1)
    assert single[0].tolist() == [[0]] and single[1].tolist() == [[-1]]


def test_invalid_inputs() -> None:
    with pytest.raises(ValueError, match="at most"):
        shortest_paths(np.zeros((2, 0), dtype=np.int64), MAX_NODES + 1)
    with pytest.raises(ValueError, match=r"\[2, E\]"):
        shortest_paths(np.zeros((3, 4), dtype=np.int64), 5)
    with pytest.raises(ValueError, match="outside"):
        shortest_paths(np.array([[0, 5], [5, 0]]), 5)
    with pytest.raises(ValueError, match="outside"):
        shortest_paths(np.array([[0, -1], [-1, 0]]), 5)
    with pytest.raises(ValueError, match="method"):
        shortest_paths(np.zeros((2, 0), dtype=np.int64), 3, method="floyd")  # type: ignore[arg-type]


def test_auto_switches_above_threshold() -> None:
    n = DENSE_MAX_NODES + 1
    ei = both_directions(nx.cycle_graph(n))
    check_tables(*shortest_paths(ei, n), ei, n)


# --------------------------------------------------------------------------- edge paths


@pytest.mark.parametrize("hops", [0, 1, 3, 5, 20])
def test_edge_paths_follow_stored_paths(hops: int) -> None:
    graphs = [(s, *mol_graph(s)) for s in SMILES] + RANDOM[::7]
    for name, ei, n in graphs:
        dist, nxt = shortest_paths(ei, n)
        ep = edge_paths(torch.from_numpy(dist), torch.from_numpy(nxt), torch.from_numpy(ei), n, hops)
        try:
            check_edge_paths(ep, dist, nxt, ei, hops)
        except AssertionError as exc:
            raise AssertionError(f"{name}, max_hops={hops}: {exc}") from exc


def test_edge_paths_flat_inputs_and_unreachable() -> None:
    ei, n = mol_graph("CC(=O)[O-].[Na+]")
    dist, nxt = shortest_paths(ei, n)
    flat = edge_paths(torch.from_numpy(dist.reshape(-1)), torch.from_numpy(nxt.reshape(-1)), torch.from_numpy(ei), n, 4)
    full = edge_paths(torch.from_numpy(dist), torch.from_numpy(nxt), torch.from_numpy(ei), n, 4)
    assert torch.equal(flat, full)
    assert (full[:4, 4] == -1).all() and (full[4, :4] == -1).all()
    assert (full[torch.arange(n), torch.arange(n)] == -1).all()


def test_edge_paths_chain_truncation() -> None:
    ei = both_directions(nx.path_graph(10))
    dist, nxt = shortest_paths(ei, 10)
    ep = edge_paths(torch.from_numpy(dist), torch.from_numpy(nxt), torch.from_numpy(ei), 10, 3)
    src, dst = ei
    path = ep[0, 9].numpy()  # 0 -> 1 -> 2 -> 3, then cut
    assert src[path].tolist() == [0, 1, 2] and dst[path].tolist() == [1, 2, 3]


def test_edge_paths_batched_matches_per_graph() -> None:
    names = ["CC(=O)Oc1ccccc1C(=O)O", "CC(=O)[O-].[Na+]", "C", "Cl.CN1CCC23C4C1CC5=C2C(=CC=C5)OC3C(O)C=C4"]
    graphs = [mol_graph(s) for s in names]
    graphs += [(np.zeros((2, 0), dtype=np.int64), 0), (both_directions(nx.path_graph(12)), 12)]
    b, nmax, hops = len(graphs), max(n for _, n in graphs), 5
    spd = torch.full((b, nmax, nmax), -1, dtype=torch.long)
    nxt = torch.full((b, nmax, nmax), -1, dtype=torch.long)
    eid = torch.full((b, nmax, nmax), -1, dtype=torch.long)
    expected, offset = [], 0
    for k, (ei, n) in enumerate(graphs):
        dist, nh = shortest_paths(ei, n)
        spd[k, :n, :n] = torch.from_numpy(dist)
        nxt[k, :n, :n] = torch.from_numpy(nh)
        if ei.shape[1]:
            eid[k, ei[0], ei[1]] = torch.arange(ei.shape[1]) + offset  # batch-global edge ids
        ep = edge_paths(torch.from_numpy(dist), torch.from_numpy(nh), torch.from_numpy(ei), n, hops)
        expected.append(torch.where(ep >= 0, ep + offset, ep))
        offset += ei.shape[1]
    out = edge_paths_batched(spd, nxt, eid, hops)
    assert out.shape == (b, nmax, nmax, hops) and out.dtype == torch.long
    for k, (_, n) in enumerate(graphs):
        assert torch.equal(out[k, :n, :n], expected[k])
        assert (out[k, n:] == -1).all() and (out[k, :, n:] == -1).all(), "padding must stay -1"


def test_edge_paths_batched_shape_errors() -> None:
    z = torch.zeros(2, 3, 3, dtype=torch.long)
    with pytest.raises(ValueError):
        edge_paths_batched(z, z[:, :2], z, 2)
    with pytest.raises(ValueError):
        edge_paths_batched(z, z, z, -1)
    assert edge_paths_batched(z[:0], z[:0], z[:0], 3).shape == (0, 3, 3, 3)


def test_edge_paths_batched_without_any_path() -> None:
    # single atoms and unbonded ions: no pair has a path, every entry stays -1
    spd = torch.tensor([[[0, -1], [-1, 0]], [[0, -1], [-1, -1]]])
    out = edge_paths_batched(spd, torch.full_like(spd, -1), torch.full_like(spd, -1), 4)
    assert out.shape == (2, 2, 2, 4) and (out == -1).all()
