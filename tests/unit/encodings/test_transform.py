"""GraphormerEncoding as a PyG pre_transform: shapes, repr, collate/separate, DataLoader."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch_geometric.data import Data, InMemoryDataset
from torch_geometric.loader import DataLoader

from molsepnorm.encodings import (
    ENCODING_VERSION,
    UNREACHABLE,
    GraphormerEncoding,
    edge_paths,
    encode,
    shortest_paths,
)

SMILES = [
    "CC(=O)Oc1ccccc1C(=O)O",
    "CC(=O)[O-].[Na+]",
    "C",
    "Cl.CN1CCC23C4C1CC5=C2C(=CC=C5)OC3C(O)C=C4",
    "Cn1cnc2c1c(=O)n(C)c(=O)n2C",
    "[Na+].[Cl-]",
]


def mol_data(smiles: str) -> Data:
    """A PyG graph of a SMILES: atomic numbers as ``x``, bond types as ``edge_attr`` [E, 1]."""
    from rdkit import Chem

    mol = Chem.MolFromSmiles(smiles)
    x = torch.tensor([[a.GetAtomicNum()] for a in mol.GetAtoms()], dtype=torch.long)
    rows, attrs = [], []
    for b in mol.GetBonds():
        i, j, t = b.GetBeginAtomIdx(), b.GetEndAtomIdx(), int(b.GetBondTypeAsDouble() * 2)
        rows += [(i, j), (j, i)]
        attrs += [[t], [t]]
    edge_index = torch.tensor(rows, dtype=torch.long).reshape(-1, 2).t().contiguous()
    edge_attr = torch.tensor(attrs, dtype=torch.long).reshape(-1, 1)
    return Data(x=x, edge_index=edge_index, edge_attr=edge_attr, smiles=smiles)


def empty_data() -> Data:
    return Data(
        x=torch.zeros(0, 1, dtype=torch.long),
        edge_index=torch.zeros(2, 0, dtype=torch.long),
        edge_attr=torch.zeros(0, 1, dtype=torch.long),
        smiles="",
        num_nodes=0,
    )


class _Memory(InMemoryDataset):
    """An InMemoryDataset built straight from a list, as ``process()`` would save it."""

    def __init__(self, data_list: list[Data]) -> None:
        super().__init__(root=None)
        self.data, self.slices = self.collate(data_list)


class _SmilesDataset(InMemoryDataset):
    """A tiny on-disk dataset whose process() applies ``pre_transform`` like PyG's own."""

    def __init__(self, root: str, pre_transform=None) -> None:
        super().__init__(root, pre_transform=pre_transform)
        self.load(self.processed_paths[0])

    @property
    def raw_file_names(self) -> list[str]:
        return []

    @property
    def processed_file_names(self) -> list[str]:
        return ["data.pt"]

    def download(self) -> None:
        pass

    def process(self) -> None:
        data_list = [mol_data(s) for s in SMILES]
        if self.pre_transform is not None:
            data_list = [self.pre_transform(d) for d in data_list]
        self.save(data_list, self.processed_paths[0])


def assert_encoded(d: Data) -> None:
    n = int(d.num_nodes)
    assert d.degree.dtype == torch.long and d.degree.shape == (n,)
    assert d.spd.dtype == torch.int16 and d.spd.shape == (n * n,)
    assert d.path_next.dtype == torch.int16 and d.path_next.shape == (n * n,)
    dist, nxt = shortest_paths(d.edge_index, n)
    assert torch.equal(d.spd.view(n, n), torch.from_numpy(dist))
    assert torch.equal(d.path_next.view(n, n), torch.from_numpy(nxt))
    assert torch.equal(d.degree, torch.bincount(d.edge_index[1], minlength=n))


@pytest.mark.parametrize("smiles", SMILES)
def test_transform_adds_encodings(smiles: str) -> None:
    data = mol_data(smiles)
    out = GraphormerEncoding()(data)
    assert out is data
    assert_encoded(out)
    assert not any("index" in key for key in ("degree", "spd", "path_next"))


def test_values_on_a_salt() -> None:
    d = encode(mol_data("CC(=O)[O-].[Na+]"))
    spd = d.spd.view(5, 5)
    assert spd.diagonal().eq(0).all() and spd[0, 4] == UNREACHABLE and spd[0, 3] == 2
    assert d.degree.tolist() == [1, 3, 1, 1, 0]


def test_empty_and_edgeless_graphs() -> None:
    d = GraphormerEncoding()(empty_data())
    assert d.degree.shape == (0,) and d.spd.shape == (0,) and d.path_next.shape == (0,)
    d = encode(Data(num_nodes=3, edge_index=None))
    assert d.spd.view(3, 3).tolist() == [[0, -1, -1], [-1, 0, -1], [-1, -1, 0]]
    assert d.degree.tolist() == [0, 0, 0]


def test_repr_is_stable_and_versioned() -> None:
    t = GraphormerEncoding()
    assert repr(t) == f"GraphormerEncoding(version={ENCODING_VERSION})"
    assert repr(GraphormerEncoding(method="scipy")) == repr(t), "methods give identical output"
    assert isinstance(ENCODING_VERSION, int)
    with pytest.raises(ValueError, match="method"):
        GraphormerEncoding(method="bfs")  # type: ignore[arg-type]


def test_methods_give_identical_data() -> None:
    for s in SMILES:
        a, b = encode(mol_data(s), method="dense"), encode(mol_data(s), method="scipy")
        assert torch.equal(a.spd, b.spd) and torch.equal(a.path_next, b.path_next)


def test_rdkit_distances_give_identical_data() -> None:
    """encode(..., distances=Chem.GetDistanceMatrix(mol)) skips the search, same tables (salts too)."""
    import os

    from rdkit import Chem, RDConfig

    path = os.path.join(RDConfig.RDDataDir, "NCI", "first_5K.smi")
    with open(path) as fh:
        smiles = SMILES + [line.split()[0] for _, line in zip(range(300), fh)]
    checked = 0
    for s in smiles:
        mol = Chem.MolFromSmiles(s)
        if mol is None:
            continue
        a, b = encode(mol_data(s)), encode(mol_data(s), distances=Chem.GetDistanceMatrix(mol))
        assert torch.equal(a.spd, b.spd) and torch.equal(a.path_next, b.path_next), s
        checked += 1
    assert checked > 290
    with pytest.raises(ValueError, match="distances must have shape"):
        encode(mol_data("CCO"), distances=np.zeros((2, 2)))


def test_in_memory_collate_round_trip() -> None:
    originals = [GraphormerEncoding()(mol_data(s)) for s in SMILES]
    originals.insert(2, GraphormerEncoding()(empty_data()))
    ds = _Memory([d.clone() for d in originals])
    assert len(ds) == len(originals)
    for i, ref in enumerate(originals):
        got = ds[i]
        assert_encoded(got)
        for key in ("degree", "spd", "path_next", "edge_index", "edge_attr"):
            assert torch.equal(got[key], ref[key]), (i, key)


def test_dataloader_batches_flat_encodings() -> None:
    data = [GraphormerEncoding()(mol_data(s)) for s in SMILES]
    batch = next(iter(DataLoader(_Memory(data), batch_size=len(data), shuffle=False)))
    sizes = [int(d.num_nodes) for d in data]
    assert batch.spd.shape == (sum(n * n for n in sizes),) and batch.spd.dtype == torch.int16
    assert batch.degree.shape == (sum(sizes),)
    # No offsets were added to the flat tables (their names do not contain "index").
    assert torch.equal(batch.path_next, torch.cat([d.path_next for d in data]))
    offsets = np.cumsum([0] + [n * n for n in sizes])
    for k, d in enumerate(data):
        assert torch.equal(batch.spd[offsets[k] : offsets[k + 1]], d.spd)
    for got, ref in zip(batch.to_data_list(), data):
        assert torch.equal(got.spd, ref.spd) and torch.equal(got.path_next, ref.path_next)


def test_as_pre_transform_of_a_saved_dataset(tmp_path) -> None:
    ds = _SmilesDataset(str(tmp_path), pre_transform=GraphormerEncoding())
    assert torch.load(tmp_path / "processed" / "pre_transform.pt", weights_only=False) == repr(GraphormerEncoding())
    again = _SmilesDataset(str(tmp_path), pre_transform=GraphormerEncoding())  # from the cache
    for i in range(len(SMILES)):
        assert_encoded(again[i])
        assert torch.equal(again[i].spd, ds[i].spd)
        n = int(again[i].num_nodes)
        ep = edge_paths(again[i].spd, again[i].path_next, again[i].edge_index, n, max_hops=3)
        assert ep.shape == (n, n, 3)
