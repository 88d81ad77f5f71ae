"""Indexing the compact SMILES sequences of an unlabelled corpus."""
from __future__ import annotations

import numpy as np
import pytest

from molsepnorm.data.lazy import ConcatSmiles, SmilesColumn


def column(text: str, source: str) -> SmilesColumn:
    buffer = text.encode()
    starts, ends, at = [], [], 0
    for line in text.split("\n"):
        starts.append(at)
        ends.append(at + len(line.encode()))
        at += len(line.encode()) + 1
    return SmilesColumn(buffer, np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64), source)


@pytest.mark.parametrize("make", [lambda: column("CCO\nc1ccccc1\nCN", "a.smi"),
                                  lambda: ConcatSmiles([column("CCO", "a.smi"), column("c1ccccc1\nCN", "b.smi")])])
def test_positions_slices_and_the_range(make):
    smiles = make()
    assert list(smiles) == ["CCO", "c1ccccc1", "CN"] and len(smiles) == 3
    assert smiles[1] == "c1ccccc1" and smiles[-1] == "CN" and smiles[-3] == "CCO"
    assert smiles[::2] == ["CCO", "CN"] and smiles[5:] == []
    for i in (3, -4):
        with pytest.raises(IndexError, match=f"record {i} out of range for 3 SMILES"):
            smiles[i]
