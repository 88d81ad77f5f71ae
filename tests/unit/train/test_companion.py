"""Fitting the fingerprint companion on real molecules (molsepnorm.train.companion)."""
from __future__ import annotations

import logging

import numpy as np
import pytest
import torch
from sklearn.metrics import r2_score, roc_auc_score

from molsepnorm.checkpoint import TargetScaler
from molsepnorm.data.columns import num_atoms, targets
from molsepnorm.data.registry import load_dataset
from molsepnorm.errors import MolsepnormError
from molsepnorm.inference.runner import Runner, run
from molsepnorm.nn.graphormer import Graphormer, GraphormerConfig
from molsepnorm.train.companion import (COMPANION_BITS, companion_model_keys, fit_companion, resolve_companion,
                                        substructure_features)


def splits_of(path):
    return load_dataset(path, split="random", progress=False)


def model_with_companion(task: str) -> Graphormer:
    config = GraphormerConfig(vocab="ogb", num_layers=1, hidden_dim=16, ffn_dim=16, num_heads=2,
                              **companion_model_keys("fingerprint", task))
    return Graphormer(config)


def test_auto_fits_a_companion_for_binary_targets_only():
    assert resolve_companion("auto", "binary") == "fingerprint"
    assert resolve_companion("auto", "regression") == "none"
    assert resolve_companion("fingerprint", "regression") == "fingerprint"
    assert resolve_companion("none", "binary") == "none"
    with pytest.raises(MolsepnormError, match="train.companion must be one of"):
        resolve_companion("forest", "binary")


def test_features_are_in_input_order_with_their_targets(tmp_path, write_tpsa_csv):
    splits = splits_of(write_tpsa_csv(tmp_path / "tpsa.csv", n=120))
    graphs = splits.train
    X, y = substructure_features(graphs, num_atoms(graphs), COMPANION_BITS, 2, batch_size=16)
    assert X.shape == (len(graphs), COMPANION_BITS)
    np.testing.assert_array_equal(y, targets(graphs))
    # every atom once per radius: log(1 + count) summed back to counts
    assert np.allclose(np.expm1(X.toarray()).sum(1), 3 * np.asarray(num_atoms(graphs)))


def test_the_ridge_companion_learns_tpsa_an_atom_additive_property(tmp_path, write_tpsa_csv):
    splits = splits_of(write_tpsa_csv(tmp_path / "tpsa.csv", n=1000))
    model = model_with_companion("regression").eval()
    scaler = TargetScaler.fit(targets(splits.train))
    fit = fit_companion(model.companion, splits.train, num_atoms(splits.train), "regression", ["tpsa"],
                        weight=1.0, scaler=scaler)
    assert fit.fitted == {"tpsa": True} and fit.molecules == len(splits.train)
    out = run([Runner(model, "regression", scaler)], splits.test)  # weight 1: the companion alone
    assert r2_score(out.targets[:, 0], out.values[0, :, 0]) > 0.9


def test_the_logistic_companion_separates_polar_molecules_and_blends_evenly(tmp_path, write_tpsa_csv):
    splits = splits_of(write_tpsa_csv(tmp_path / "polar.csv", n=1000, binary=True))
    model = model_with_companion("binary").eval()
    runner = Runner(model, "binary")
    alone = run([runner], splits.test).values[0, :, 0]  # unfitted: the Graphormer's output unchanged
    fit = fit_companion(model.companion, splits.train, num_atoms(splits.train), "binary", ["polar"], weight=0.5)
    assert fit.fitted == {"polar": True} and model.companion.weight.tolist() == [0.5]
    out = run([runner], splits.test)
    y = out.targets[:, 0]
    model.companion.weight.fill_(1.0)
    own = run([runner], splits.test).values[0, :, 0]
    assert roc_auc_score(y, own) > 0.9
    np.testing.assert_allclose(out.values[0, :, 0], 0.5 * alone + 0.5 * own, atol=1e-5)


def test_a_target_with_one_class_is_left_to_the_graphormer(tmp_path, write_tpsa_csv, caplog):
    splits = splits_of(write_tpsa_csv(tmp_path / "polar.csv", n=60, binary=True))
    graphs = [g for g in splits.train if float(torch.as_tensor(g.y).reshape(-1)[0]) == 1.0]  # polar ones only
    model = model_with_companion("binary")
    with caplog.at_level(logging.WARNING, logger="molsepnorm"):
        fit = fit_companion(model.companion, graphs, num_atoms(graphs), "binary", ["polar"])
    assert fit.fitted == {"polar": False} and not model.companion.fitted
    assert "target polar has one class only in the training split" in caplog.text


def test_weight_must_be_in_the_unit_interval(tmp_path, write_tpsa_csv):
    splits = splits_of(write_tpsa_csv(tmp_path / "polar.csv", n=40, binary=True))
    with pytest.raises(MolsepnormError, match=r"train.companion_weight must be in \(0, 1\]"):
        fit_companion(model_with_companion("binary").companion, splits.train, num_atoms(splits.train), "binary",
                      ["polar"], weight=0.0)
