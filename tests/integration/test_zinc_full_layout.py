"""Full ZINC through PyG's real ZINC class, on a small full-layout folder built in tmp_path.

The staged data has only the subset layout (``None`` placeholders), so a miniature of the
full layout is assembled from real molecules of the staged ``val.pickle``: three pickles
that are plain lists of molecule dicts (no ``None``), plus ``.index`` files ending in
``\\r\\n`` as PyG's parser (``f.read()[:-1]``) expects.
"""
from __future__ import annotations

import functools
import http.server
import pickle
import threading
import zipfile
from pathlib import Path

import pytest
import torch
from torch_geometric.datasets import ZINC

from molsepnorm.data import load_dataset
from molsepnorm.data.cache import remove_cache

SIZES = {"train": 30, "val": 10, "test": 8}
INDEX = {"train": [1, 3, 5, 7, 9], "val": [0, 4, 8], "test": [2, 6]}


@pytest.fixture(scope="module")
def full_layout(data_root: Path, tmp_path_factory) -> tuple[Path, dict[str, list[dict]]]:
    with open(data_root / "ZINC" / "raw" / "val.pickle", "rb") as handle:
        molecules = [m for m in pickle.load(handle) if m is not None]
    root = tmp_path_factory.mktemp("zinc-full-root")
    raw = root / "ZINC" / "raw"
    raw.mkdir(parents=True)
    splits, start = {}, 0
    for split, size in SIZES.items():
        splits[split] = molecules[start:start + size]
        start += size
        with open(raw / f"{split}.pickle", "wb") as handle:
            pickle.dump(splits[split], handle, protocol=4)
        (raw / f"{split}.index").write_bytes((",".join(map(str, INDEX[split])) + "\r\n").encode())
    return root, splits


def _listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _assert_same_graph(data, mol: dict) -> None:
    adj = mol["bond_type"].long()
    assert torch.equal(data.x.view(-1), mol["atom_type"].long())
    assert torch.equal(data.edge_index, adj.nonzero().t())
    assert torch.equal(data.edge_attr, adj[adj.nonzero(as_tuple=True)])
    assert torch.equal(data.y, mol["logP_SA_cycle_normalized"].float().view(1, 1))
    n = int(data.num_nodes)
    assert data.spd.numel() == n * n and data.path_next.numel() == n * n and data.degree.numel() == n


@pytest.fixture
def throwaway_caches():
    """Caches keyed by a tmp_path source are never reused: delete them after the test."""
    made: list[Path] = []
    yield made
    for path in made:
        remove_cache(path)


def test_full_zinc_loads_through_pyg(full_layout, throwaway_caches) -> None:
    root, molecules = full_layout
    before = _listing(root)
    splits = load_dataset("zinc", root=root)
    throwaway_caches.append(splits.cache_dir)
    assert splits.name == "zinc" and splits.sizes == SIZES
    assert splits.source == root / "ZINC" / "raw" and root not in splits.cache_dir.parents
    assert (splits.cache_dir / "full" / "processed" / "train.pt").is_file()
    for split in SIZES:
        for k, mol in enumerate(molecules[split]):
            _assert_same_graph(splits[split][k], mol)
    assert _listing(root) == before, "loading wrote into the data root"


def test_subset_of_the_same_folder_follows_the_index_files(full_layout, throwaway_caches) -> None:
    root, molecules = full_layout
    subset = load_dataset("zinc-subset", root=root)
    full = load_dataset("zinc", root=root)
    throwaway_caches.extend([subset.cache_dir, full.cache_dir])
    assert subset.sizes == {split: len(index) for split, index in INDEX.items()}
    assert subset.cache_dir != full.cache_dir
    for split, index in INDEX.items():
        for k, position in enumerate(index):
            _assert_same_graph(subset[split][k], molecules[split][position])


def test_missing_zinc_is_downloaded_by_pyg_into_an_empty_writable_root(full_layout, tmp_path: Path, monkeypatch,
                                                                       throwaway_caches) -> None:
    """PyG's own ZINC.download, pointed at a local server that serves a molecules.zip."""
    _, molecules = full_layout
    served = tmp_path / "served"
    (served / "molecules").mkdir(parents=True)
    with zipfile.ZipFile(served / "molecules.zip", "w") as archive:
        for split in SIZES:
            archive.writestr(f"molecules/{split}.pickle", pickle.dumps(molecules[split], protocol=4))
    for split, index in INDEX.items():
        (served / f"{split}.index").write_bytes((",".join(map(str, index)) + "\r\n").encode())
    handler = functools.partial(_QuietHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    monkeypatch.setattr(ZINC, "url", f"{base}/molecules.zip")
    monkeypatch.setattr(ZINC, "split_url", base + "/{}.index")
    root = tmp_path / "root"
    root.mkdir()
    try:
        splits = load_dataset("zinc", root=root)
    finally:
        server.shutdown()
    throwaway_caches.append(splits.cache_dir)
    assert splits.sizes == SIZES
    assert sorted(p.name for p in (root / "ZINC").iterdir()) == ["raw"]  # no zip, no scratch folder left
    assert sorted(p.name for p in (root / "ZINC" / "raw").iterdir()) == sorted(
        f"{s}.{ext}" for s in SIZES for ext in ("index", "pickle"))
    _assert_same_graph(splits.test[3], molecules["test"][3])


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass
