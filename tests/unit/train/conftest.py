"""Fixtures of the training tests: a small real CSV (RDKit's NCI molecules with TPSA, tests/conftest.py)."""
from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
TINY = REPO / "configs" / "tiny.yaml"


@pytest.fixture
def tpsa_csv(tmp_path, write_tpsa_csv) -> Path:
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
