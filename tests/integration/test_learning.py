"""Training learns: the default recipe on a small model reaches a stated accuracy.

The threshold is set from measurement with margin: configs/tiny.yaml on nci-tpsa for 8
epochs reached validation R² 0.958 / 0.967 / 0.966 (seeds 0 / 1 / 2; test 0.954 / 0.963 /
0.965).  A mean predictor has R² 0.  Every threshold is on the Graphormer's own predictions:
on regression the default blends them with a fingerprint companion (``train.companion``),
which alone predicts TPSA (a sum of atom contributions) almost exactly, so the blend's
figures would pass whatever the Graphormer learnt.
"""
from __future__ import annotations

from pathlib import Path

from molsepnorm.train.api import train
from molsepnorm.train.config import load_experiment_config

TINY = Path(__file__).resolve().parents[2] / "configs" / "tiny.yaml"
MIN_R2 = 0.93
DEFAULT_MIN_R2 = 0.95
DEFAULT_MAX_MAE = 3.0


def test_training_learns_tpsa(tmp_path):
    config = load_experiment_config(TINY, {"data.dataset": "nci-tpsa", "train.epochs": 8, "train.seed": 0,
                                           "train.threads": 1, "train.progress": False, "train.companion": "none"})
    result = train(config, out=tmp_path / "run", console=False)
    assert result.companion is None  # the metrics below are the Graphormer's alone
    curve = [row["val_r2"] for row in result.history]
    assert len(curve) == 8 and curve[0] < max(curve)  # it improves over the run
    assert result.val["r2"] >= MIN_R2, curve
    assert result.test["r2"] >= MIN_R2 and result.test["mae"] < 8.0  # Å², TPSA's std is about 40


def test_the_default_recipe_learns_tpsa(tmp_path):
    """The library's own defaults (no preset: the CPU model fine-tuned from the bundled
    encoder, bucketed batches of 32, lr 1e-3, the fingerprint companion blended in), cut to
    6 epochs, on one thread.  Measured at seed 0, the Graphormer alone: validation R² 0.994,
    test MAE 1.03 Å² (0.976 and 1.88 at the earlier lr 5e-4); the blend, the companion
    alone: test MAE 0.106.  The same run with the paper's BatchNorm graph token
    (``model.cls_norm: batch``) gives the Graphormer alone validation R² 0.952 and test MAE
    4.74, so this test guards that choice of the defaults by its test MAE (at lr 5e-4 it was
    R² 0.808, MAE 10.9); with the head on the graph token alone (``model.readout: cls``) R² 0.979 and MAE
    1.27, too close to the default's 1.03 for a 6-epoch test to tell apart (at lr 5e-4: R²
    0.897, MAE 4.04)."""
    from molsepnorm.train.config import ExperimentConfig, apply_overrides

    config = apply_overrides(ExperimentConfig(), {"data.dataset": "nci-tpsa", "train.epochs": 6, "train.seed": 0,
                                                  "train.threads": 1, "train.progress": False})
    result = train(config, out=tmp_path / "run", console=False)
    assert result.epochs == 6 and result.stopped == "epochs"
    alone = result.companion["scores"]["graphormer"]  # best.pt's Graphormer (the epoch the blend chose) alone
    assert alone["val"]["r2"] >= DEFAULT_MIN_R2, [row["val_r2"] for row in result.history]
    assert alone["test"]["mae"] < DEFAULT_MAX_MAE
    assert result.val["mae"] <= alone["val"]["mae"]  # validation chose the blend: never worse there
