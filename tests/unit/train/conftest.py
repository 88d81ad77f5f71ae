"""Fixtures of the training tests: a small real CSV (RDKit's NCI molecules with TPSA)."""
from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
TINY = REPO / "configs" / "tiny.yaml"


def write_tpsa_csv(path: Path, n: int = 300) -> Path:
    """The first ``n`` molecules of RDKit's ``NCI/first_5k.tpsa.csv`` as ``smiles,tpsa``."""
    from molsepnorm.data.nci import read_tpsa_file, tpsa_file

    table, _ = read_tpsa_file(tpsa_file())
    table.iloc[:n].to_csv(path, index=False)
    return path


@pytest.fixture
def tpsa_csv(tmp_path) -> Path:
    return write_tpsa_csv(tmp_path / "tpsa300.csv")


@pytest.fixture
def tiny_config():
    """``tiny_config(dataset, **train_overrides)``: configs/tiny.yaml on a data set, quiet."""
    from molsepnorm.train.config import load_experiment_config

    def make(dataset, **train):
        # random batches: a fixed number of batches per epoch, which step-count tests rely on
        overrides = {"data.dataset": str(dataset), "train.progress": False, "train.threads": 1,
                     "train.batching": "random"}
        overrides.update({f"train.{k}": v for k, v in train.items()})
        return load_experiment_config(TINY, overrides)

    return make
