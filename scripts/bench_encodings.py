"""Throughput of the Graphormer structural encodings on real molecule graphs.

Builds graphs from RDKit's bundled NCI sample (``RDDataDir/NCI/first_5K.smi``, 4,999
SMILES; no download) and prints graphs/s for each shortest-path method, for the full
``GraphormerEncoding`` transform, for ``edge_paths`` and, as reference points, for RDKit's
``GetDistanceMatrix`` (distances only, needs a Mol) and scipy's predecessor matrix.

    python scripts/bench_encodings.py [--n 2000] [--repeat 3] [--threads 1]
"""
from __future__ import annotations

import argparse
import os
import time
from typing import Callable, Sequence

import numpy as np
import torch


def load_graphs(n: int | None) -> tuple[list, list[np.ndarray], list[int]]:
    """RDKit Mols, ``edge_index`` arrays [2, 2B] and atom counts of the NCI sample."""
    from rdkit import Chem, RDConfig, RDLogger

    RDLogger.DisableLog("rdApp.*")
    path = os.path.join(RDConfig.RDDataDir, "NCI", "first_5K.smi")
    mols, edges, sizes = [], [], []
    with open(path) as fh:
        for line in fh:
            if n is not None and len(mols) >= n:
                break
            mol = Chem.MolFromSmiles(line.split()[0]) if line.strip() else None
            if mol is None:
                continue
            bonds = [(b.GetBeginAtomIdx(), b.GetEndAtomIdx()) for b in mol.GetBonds()]
            pairs = bonds + [(j, i) for i, j in bonds]
            mols.append(mol)
            edges.append(np.array(pairs, dtype=np.int64).reshape(-1, 2).T.copy())
            sizes.append(mol.GetNumAtoms())
    return mols, edges, sizes


def rate(fn: Callable[[int], object], count: int, repeat: int) -> float:
    """Best graphs/s over ``repeat`` passes of ``fn(i)`` for ``i < count``."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for i in range(count):
            fn(i)
        best = min(best, time.perf_counter() - start)
    return count / best


def scipy_predecessors(edge_index: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Reference: csgraph with ``return_predecessors``; next_hop[i, j] = pred[j, i] (undirected).

    Valid paths, but its tie-break depends on scipy's search order, so the library does
    not use it (all library methods share one deterministic next-hop rule).
    """
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import shortest_path

    g = csr_matrix((np.ones(edge_index.shape[1]), (edge_index[0], edge_index[1])), shape=(n, n))
    d, pred = shortest_path(g, method="D", unweighted=True, return_predecessors=True)
    dist = np.where(np.isfinite(d), d, -1).astype(np.int16)
    nxt = pred.T.astype(np.int16)
    nxt[nxt < 0] = -1
    return dist, nxt


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=None, help="number of molecules (default: all 4,999)")
    parser.add_argument("--repeat", type=int, default=3, help="passes per measurement; the best is reported")
    parser.add_argument("--threads", type=int, default=1, help="torch / BLAS threads (default 1, as in a data worker)")
    parser.add_argument("--max-hops", type=int, default=5, help="max_hops for the edge_paths figure")
    args = parser.parse_args(argv)

    from threadpoolctl import threadpool_limits
    from torch_geometric.data import Data

    from molsepnorm.encodings import DENSE_MAX_NODES, GraphormerEncoding, edge_paths, shortest_paths

    torch.set_num_threads(args.threads)
    threadpool_limits(limits=args.threads)
    mols, edges, sizes = load_graphs(args.n)
    count = len(mols)
    sz = np.array(sizes)
    print(
        f"{count} molecules from RDKit's NCI first_5K.smi; atoms: median {np.median(sz):.0f}, "
        f"mean {sz.mean():.1f}, max {sz.max()}, {np.mean(sz > DENSE_MAX_NODES):.1%} above "
        f"DENSE_MAX_NODES={DENSE_MAX_NODES}; threads={args.threads}, best of {args.repeat}"
    )

    for i in range(min(count, 50)):  # warm up imports and caches
        shortest_paths(edges[i], sizes[i], method="scipy")
    data = [Data(edge_index=torch.from_numpy(e), num_nodes=n) for e, n in zip(edges, sizes)]
    encoded = [GraphormerEncoding()(d.clone()) for d in data]
    transform = GraphormerEncoding()
    edge_index_t = [torch.from_numpy(e) for e in edges]

    from rdkit import Chem

    rows = [
        ("shortest_paths method='auto' (default)", lambda i: shortest_paths(edges[i], sizes[i])),
        ("shortest_paths method='dense' (numpy BFS)", lambda i: shortest_paths(edges[i], sizes[i], method="dense")),
        ("shortest_paths method='scipy' (csgraph)", lambda i: shortest_paths(edges[i], sizes[i], method="scipy")),
        ("GraphormerEncoding() transform (full)", lambda i: transform(data[i])),
        (
            f"edge_paths(max_hops={args.max_hops}) per graph",
            lambda i: edge_paths(encoded[i].spd, encoded[i].path_next, edge_index_t[i], sizes[i], args.max_hops),
        ),
        ("ref: scipy predecessors (other tie-break)", lambda i: scipy_predecessors(edges[i], sizes[i])),
        ("ref: RDKit GetDistanceMatrix (no paths)", lambda i: Chem.GetDistanceMatrix(mols[i], force=True)),
    ]
    width = max(len(name) for name, _ in rows)
    for name, fn in rows:
        r = rate(fn, count, args.repeat)
        print(f"  {name:<{width}}  {r:9,.0f} graphs/s  ({1e6 / r:7.1f} us/graph)")


if __name__ == "__main__":
    main()
