"""``DatasetSplits.to_frame``: any data set with SMILES as a table, in its own order; and the
molecules of a split (``all`` included) as indices and SMILES in the split's order."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch_geometric.data import Data

from molsepnorm.data.registry import DatasetSplits
from molsepnorm.errors import MolsepnormError

SMILES = ["CCO", "c1ccccc1", "CC(=O)O", "N#N", "O", "CCN"]


def _splits(indices: dict[str, list[int]], targets: list[str], task: str = "regression") -> DatasetSplits:
    def graphs(rows: list[int]) -> list[Data]:
        if not targets:
            return [Data(num_nodes=1) for _ in rows]
        return [Data(num_nodes=1, y=torch.tensor([[10.0 * r + t for t in range(len(targets))]])) for r in rows]

    return DatasetSplits(name="tiny", train=graphs(indices["train"]), val=graphs(indices["val"]),
                         test=graphs(indices["test"]), task=task, target_names=targets, vocab="ogb",
                         metric="mae" if targets else None,
                         split_indices={k: np.asarray(v, dtype=np.int64) for k, v in indices.items()},
                         source=Path("tiny.csv"), cache_dir=None, smiles=SMILES)


def test_two_targets_in_the_data_sets_order_and_rows_in_no_split_left_out():
    frame = _splits({"train": [4, 0, 2], "val": [5], "test": [1]}, ["a", "b"]).to_frame()
    assert list(frame.columns) == ["smiles", "a", "b", "split"]
    assert frame.index.tolist() == [0, 1, 2, 4, 5]  # row 3 is in no split
    assert frame["smiles"].tolist() == ["CCO", "c1ccccc1", "CC(=O)O", "O", "CCN"]
    assert frame["split"].tolist() == ["train", "test", "train", "train", "val"]
    np.testing.assert_array_equal(frame["a"], [0.0, 10.0, 20.0, 40.0, 50.0])  # each row's own targets
    np.testing.assert_array_equal(frame["b"], [1.0, 11.0, 21.0, 41.0, 51.0])


def test_an_empty_split_and_an_unlabelled_corpus():
    frame = _splits({"train": [0, 1], "val": [], "test": [2]}, ["a"]).to_frame()
    assert frame["split"].tolist() == ["train", "train", "test"] and "val" not in set(frame["split"])
    corpus = _splits({"train": [0, 1, 2], "val": [3], "test": []}, [], task="unlabelled").to_frame()
    assert list(corpus.columns) == ["smiles", "split"] and len(corpus) == 4


def test_a_target_named_like_a_column_and_a_data_set_without_smiles_are_refused():
    with pytest.raises(MolsepnormError, match="target named 'split'"):
        _splits({"train": [0], "val": [1], "test": [2]}, ["split"]).to_frame()
    no_smiles = _splits({"train": [0], "val": [1], "test": [2]}, ["a"])
    no_smiles.smiles = None
    with pytest.raises(MolsepnormError, match="keeps no SMILES"):
        no_smiles.to_frame()


def test_the_molecules_of_a_split_in_its_order_and_of_all_three():
    splits = _splits({"train": [4, 0, 2], "val": [5], "test": [1]}, ["a"])
    assert splits.parts("all") == ("train", "val", "test") and splits.parts("valid") == ("val",)
    assert splits.indices("train").tolist() == [4, 0, 2]  # the split's order, not the data set's
    assert splits.indices("all").tolist() == [4, 0, 2, 5, 1]
    assert splits.smiles_of("all") == ["O", "CCO", "CC(=O)O", "CCN", "c1ccccc1"]
    assert [float(g.y[0, 0]) for g in splits.train] == [40.0, 0.0, 20.0]  # the graphs line up with them
    with pytest.raises(KeyError, match="unknown split 'dev'"):
        splits.indices("dev")
    splits.smiles = None
    assert splits.smiles_of("test") is None
