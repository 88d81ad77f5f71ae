"""Training and evaluating on a labelled SD file through the Python API, and predicting that file.

RDKit's NCI/first_200.props.sdf, target CLOGP; one epoch of the tiny model.  The run's
test molecules, predicted by ``molsepnorm predict``'s reader from the same SD file, must
get the values the training run scored: one featurization of an SDF record.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from rdkit import RDConfig

from molsepnorm.checkpoint import Checkpoint, checkpoint_data
from molsepnorm.inference import evaluate_checkpoint
from molsepnorm.inference.runner import Runner, run
from molsepnorm.predict import Predictor
from molsepnorm.chem.readers import RecordReader
from molsepnorm.train.api import train
from molsepnorm.train.config import load_experiment_config

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "configs" / "tiny.yaml"
FIRST_200 = Path(RDConfig.RDDataDir) / "NCI" / "first_200.props.sdf"


def test_train_evaluate_and_predict_an_sdf(tmp_path: Path) -> None:
    config = load_experiment_config(TINY, {"data.dataset": str(FIRST_200), "data.target_columns": ["CLOGP"],
                                           "train.epochs": 1, "train.progress": False, "train.threads": 1})
    result = train(config, out=tmp_path / "run", console=False)
    best = tmp_path / "run" / "best.pt"
    report = evaluate_checkpoint(best, split="test")
    assert report["dataset"] == "first_200.props.sdf" and report["num_molecules"] == 20
    assert report["target_names"] == ["CLOGP"]
    assert report["metrics"]["mae"] == pytest.approx(result.test["mae"])
    assert json.loads((tmp_path / "run" / "results.json").read_text())["test"]["mae"] == pytest.approx(
        result.test["mae"])

    checkpoint = Checkpoint.load(best)
    graphs, splits = checkpoint_data(checkpoint, split="test")
    scored = run([Runner.from_checkpoint(checkpoint)], graphs, batch_size=64).values[0][:, 0]
    with RecordReader(FIRST_200) as reader:
        records = list(reader)
    test_records = [records[i] for i in splits.split_indices["test"]]
    (chunk,) = Predictor.load(best).predict_records(test_records)
    assert chunk.errors == [None] * 20
    assert chunk.smiles == [splits.smiles[i] for i in splits.split_indices["test"]]
    np.testing.assert_allclose(chunk.values[:, 0], scored, rtol=1e-5, atol=1e-5)
