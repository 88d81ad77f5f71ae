"""Random, scaffold and column splits (molsepnorm.data.splits) on real NCI molecules."""
from __future__ import annotations

import os

import numpy as np
import pytest
from rdkit import Chem, RDConfig

from molsepnorm.data.splits import (
    check_sizes,
    column_split,
    murcko_scaffold,
    random_split,
    scaffold_split,
    split_counts,
)
from molsepnorm.errors import DatasetFormatError


@pytest.fixture(scope="module")
def nci_scaffolds() -> list[str]:
    """Scaffolds of the first 1,000 parseable molecules of RDKit's NCI set."""
    path = os.path.join(RDConfig.RDDataDir, "NCI", "first_5k.tpsa.csv")
    scaffolds = []
    with open(path) as handle:
        for line in handle:
            if line.startswith("#"):
                continue
            mol = Chem.MolFromSmiles(line.rpartition(",")[0])
            if mol is not None:
                scaffolds.append(murcko_scaffold(mol))
            if len(scaffolds) == 1000:
                break
    return scaffolds


def _assert_partition(parts: dict[str, np.ndarray], n: int) -> None:
    assert set(parts) == {"train", "val", "test"}
    joined = np.concatenate([parts["train"], parts["val"], parts["test"]])
    assert joined.dtype == np.int64
    assert len(joined) == n and len(np.unique(joined)) == n, "splits overlap or miss molecules"
    assert np.array_equal(np.sort(joined), np.arange(n))
    for idx in parts.values():
        assert np.all(np.diff(idx) > 0), "indices are not sorted"


def test_split_counts() -> None:
    assert split_counts(4999) == (3999, 500, 500)
    assert split_counts(10, (0.8, 0.1, 0.1)) == (8, 1, 1)
    assert split_counts(100, (0.5, 0.25, 0.25)) == (50, 25, 25)
    assert split_counts(3, (0.0, 0.0, 1.0)) == (0, 0, 3)


@pytest.mark.parametrize("sizes", [(0.8, 0.1), (0.8, 0.1, 0.2), (1.2, -0.1, -0.1), (0.8, float("nan"), 0.1)])
def test_bad_sizes_are_rejected(sizes) -> None:
    with pytest.raises(ValueError, match="sizes"):
        check_sizes(sizes)


def test_random_split_sizes_disjoint_reproducible() -> None:
    parts = random_split(1001, (0.8, 0.1, 0.1), seed=3)
    _assert_partition(parts, 1001)
    assert [len(parts[s]) for s in ("train", "val", "test")] == [801, 100, 100]
    again = random_split(1001, (0.8, 0.1, 0.1), seed=3)
    other = random_split(1001, (0.8, 0.1, 0.1), seed=4)
    assert all(np.array_equal(parts[s], again[s]) for s in parts)
    assert not np.array_equal(parts["test"], other["test"])


def test_murcko_scaffold() -> None:
    toluene, phenol = Chem.MolFromSmiles("Cc1ccccc1"), Chem.MolFromSmiles("Oc1ccccc1")
    assert murcko_scaffold(toluene) == murcko_scaffold(phenol) == "c1ccccc1"
    assert murcko_scaffold(Chem.MolFromSmiles("CCCCO")) == ""


def test_scaffold_split_never_straddles(nci_scaffolds) -> None:
    n = len(nci_scaffolds)
    parts = scaffold_split(nci_scaffolds, (0.8, 0.1, 0.1), seed=0)
    _assert_partition(parts, n)
    owner = {}
    for split, idx in parts.items():
        for i in idx:
            assert owner.setdefault(nci_scaffolds[i], split) == split, f"scaffold {nci_scaffolds[i]!r} straddles"
    # train and val never exceed their targets; test takes the rest
    assert len(parts["train"]) <= 800 and len(parts["val"]) <= 100
    assert len(parts["train"]) >= 700 and len(parts["val"]) >= 50


def test_scaffold_split_puts_big_groups_in_train(nci_scaffolds) -> None:
    parts = scaffold_split(nci_scaffolds, (0.8, 0.1, 0.1), seed=5)
    counts: dict[str, int] = {}
    for s in nci_scaffolds:
        counts[s] = counts.get(s, 0) + 1
    big = [s for s, c in counts.items() if c > 50]  # larger than half of val / test (100)
    assert big, "test data should have at least one large scaffold group (acyclic molecules)"
    train = {nci_scaffolds[i] for i in parts["train"]}
    assert all(s in train for s in big)


def test_scaffold_split_seeded(nci_scaffolds) -> None:
    a = scaffold_split(nci_scaffolds, seed=1)
    b = scaffold_split(nci_scaffolds, seed=1)
    c = scaffold_split(nci_scaffolds, seed=2)
    assert all(np.array_equal(a[s], b[s]) for s in a)
    assert not np.array_equal(a["val"], c["val"])


def test_column_split_labels() -> None:
    labels = ["train", "TRAIN", " valid ", "Validation", "val", "test", "Test"]
    parts = column_split(labels)
    _assert_partition(parts, len(labels))
    assert parts["train"].tolist() == [0, 1]
    assert parts["val"].tolist() == [2, 3, 4]
    assert parts["test"].tolist() == [5, 6]


def test_column_split_bad_labels_name_every_row() -> None:
    with pytest.raises(DatasetFormatError) as info:
        column_split(["train", "dev", "test", "", "training"], rows=[2, 3, 4, 5, 6], column="fold", source="f.csv")
    message = str(info.value)
    assert "f.csv" in message and "'fold'" in message and "3 row(s)" in message
    for fragment in ("row 3: 'dev'", "row 5: ''", "row 6: 'training'"):
        assert fragment in message
    assert "row 2" not in message and "row 4" not in message
