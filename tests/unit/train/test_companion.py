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
from molsepnorm.nn.fingerprint import FingerprintCompanion
from molsepnorm.nn.graphormer import Graphormer, GraphormerConfig
from molsepnorm.train.blend import BLEND_WEIGHTS, MIN_VALIDATION_GAIN, ValidationBlend, covered_by, format_weights
from molsepnorm.train.companion import (COMPANION_BITS, GROUP_BITS, GROUP_FEATURES, GROUP_RADIUS, CompanionFit,
                                        companion_model_keys, covered_rows, feature_name, fit_blend, fit_companion,
                                        resolve_companion, ridge, substructure_features)


def splits_of(path):
    return load_dataset(path, split="random", progress=False)


def model_with_companion(task: str) -> Graphormer:
    config = GraphormerConfig(vocab="ogb", num_layers=1, hidden_dim=16, ffn_dim=16, num_heads=2,
                              **companion_model_keys("fingerprint", task))
    return Graphormer(config)


def test_auto_fits_a_companion_for_every_task_of_its_own_kind():
    assert resolve_companion("auto") == "fingerprint"
    assert resolve_companion("none") == "none"
    with pytest.raises(MolsepnormError, match="train.companion must be one of"):
        resolve_companion("forest")
    assert companion_model_keys("fingerprint", "binary") == {
        "companion_bits": COMPANION_BITS, "companion_radius": 2, "companion_blend": "probability",
        "companion_counts": "log"}
    # regression: a group-contribution model on the raw counts of radius-0 and radius-1 environments
    assert companion_model_keys("fingerprint", "regression") == {
        "companion_bits": GROUP_BITS, "companion_radius": GROUP_RADIUS, "companion_blend": "value",
        "companion_counts": "raw"}
    assert companion_model_keys("none", "regression") == {"companion_bits": 0}


def test_features_are_in_input_order_with_their_targets(tmp_path, write_tpsa_csv):
    splits = splits_of(write_tpsa_csv(tmp_path / "tpsa.csv", n=120))
    graphs = splits.train
    X, y = substructure_features(graphs, num_atoms(graphs), COMPANION_BITS, 2, batch_size=16)
    assert X.shape == (len(graphs), COMPANION_BITS)
    np.testing.assert_array_equal(y, targets(graphs))
    # every atom once per radius: log(1 + count) summed back to counts
    assert np.allclose(np.expm1(X.toarray()).sum(1), 3 * np.asarray(num_atoms(graphs)))
    raw, _ = substructure_features(graphs, num_atoms(graphs), COMPANION_BITS, 2, batch_size=16, counts="raw")
    np.testing.assert_allclose(raw.toarray(), np.expm1(X.toarray()), rtol=1e-5, atol=1e-5)  # float32 logs


@pytest.mark.parametrize("n, alpha", [(60, 0.01), (400, 0.004), (400, 40.0)])
def test_ridge_solves_the_centred_normal_equations(tmp_path, write_tpsa_csv, n, alpha):
    """On real hashed counts (more columns than molecules at n=60, fewer at 400) the solution
    satisfies ridge's normal equations with an unpenalized intercept, solved densely here."""
    splits = splits_of(write_tpsa_csv(tmp_path / "tpsa.csv", n=n + n // 4))
    X, y = substructure_features(splits.train, num_atoms(splits.train), 512, 1, counts="raw")
    y = y[:, 0]
    coef, intercept = ridge(X, y, alpha)
    dense = X.toarray()
    Xc, yc = dense - dense.mean(0), y - y.mean()
    exact = np.linalg.solve(Xc.T @ Xc + alpha * np.eye(dense.shape[1]), Xc.T @ yc)
    np.testing.assert_allclose(dense @ coef + intercept, dense @ exact + y.mean() - dense.mean(0) @ exact,
                               atol=1e-4 * y.std())
    assert np.all(coef[~dense.any(0)] == 0)  # buckets no molecule has get no weight
    assert intercept == pytest.approx(y.mean() - dense.mean(0) @ coef)


def test_the_group_contribution_companion_learns_tpsa_an_atom_additive_property(tmp_path, write_tpsa_csv):
    splits = splits_of(write_tpsa_csv(tmp_path / "tpsa.csv", n=1000))
    scaler = TargetScaler.fit(targets(splits.train))

    def r2_alone(model):  # the companion alone (weight 1) on the test split
        fit = fit_companion(model.companion, splits.train, num_atoms(splits.train), "regression", ["tpsa"],
                            weight=1.0, scaler=scaler)
        assert fit.fitted == {"tpsa": True} and fit.molecules == len(splits.train)
        out = run([Runner(model.eval(), "regression", scaler)], splits.test)
        return r2_score(out.targets[:, 0], out.values[0, :, 0])

    group = r2_alone(model_with_companion("regression"))
    assert group > 0.99
    # the classification companion's features (log(1 + count) of ECFP4 substructures) in the same ridge
    # fit worse: TPSA is a sum over atoms, linear in the counts
    logged = r2_alone(Graphormer(GraphormerConfig(vocab="ogb", num_layers=1, hidden_dim=16, ffn_dim=16, num_heads=2,
                                                  companion_bits=COMPANION_BITS, companion_blend="value")))
    assert logged < group


def test_auto_weight_waits_for_validation_on_regression(tmp_path, write_tpsa_csv):
    splits = splits_of(write_tpsa_csv(tmp_path / "tpsa.csv", n=400))
    model = model_with_companion("regression").eval()  # untrained: its head predicts about the mean
    scaler = TargetScaler.fit(targets(splits.train))
    fit = fit_companion(model.companion, splits.train, num_atoms(splits.train), "regression", ["tpsa"],
                        scaler=scaler)
    assert fit.weight == "auto" and fit.weights == {"tpsa": 0.0} and not model.companion.fitted
    runner = Runner(model, "regression", scaler)

    def predict():
        out = run([runner], splits.val)
        return out.targets, out.values[0]

    ValidationBlend.measure(model.companion, fit.fitted, predict, "regression", "mae").settle(model.companion, fit,
                                                                                             predict)
    scores = fit.validation["tpsa"]
    best = min(BLEND_WEIGHTS, key=lambda w: scores[f"{w:g}"])
    assert best > 0 and fit.weights == {"tpsa": best} and model.companion.weight.tolist() == [best]
    y, blended = predict()  # the model now predicts with the chosen weight
    assert np.mean(np.abs(blended - y)) == pytest.approx(scores[f"{best:g}"], rel=1e-5)


@pytest.mark.parametrize("gain, chosen", [(0.5 * MIN_VALIDATION_GAIN, 0.0), (2 * MIN_VALIDATION_GAIN, 1.0)])
def test_a_weight_must_beat_the_graphormer_alone_by_the_minimum_gain(gain, chosen):
    """The Graphormer errs by +1 on every validation molecule, the companion by 1 - gain, so
    the blend's MAE is 1 - w * gain: best at weight 1, by ``gain``. A second target has no
    training labels (not fitted) and is left alone."""
    companion = FingerprintCompanion(8, 1, 2, "value", "raw")
    y = np.linspace(-2.0, 2.0, 50)[:, None].repeat(2, 1)
    calls = []

    def predict():
        calls.append(companion.weight.tolist())
        return y, y + np.where(companion.weight.numpy() == 1, 1 - gain, 1.0)

    fit = CompanionFit(weight="auto", bits=8, radius=1, counts="raw", l2=0.0, molecules=50,
                       fitted={"a": True, "b": False}, seconds=0.0, weights={"a": 0.0, "b": 0.0})
    ValidationBlend.measure(companion, fit.fitted, predict, "regression", "mae").settle(companion, fit, predict)
    assert calls == [[1.0, 0.0], [0.0, 0.0]]  # the fitted target's companion alone, then the Graphormer alone
    assert fit.weights == {"a": chosen, "b": 0.0} and companion.weight.tolist() == [chosen, 0.0]
    assert fit.validation["a"] == pytest.approx({f"{w:g}": 1 - w * gain for w in BLEND_WEIGHTS})
    assert "b" not in fit.validation


@pytest.mark.parametrize("covered_error, novel_error, pair, score, weights", [
    (0.5, 1.01, (1.0, 0.0), 0.75, (1.0, 1.0)),
    (0.5, 1.1, (1.0, 0.0), 0.75, (1.0, 0.0)),
    (1.1, 0.5, (1.0, 1.0), 0.8, (1.0, 1.0)),
])
def test_molecules_with_novel_substructures_get_their_own_weight_when_validation_says_so(
        covered_error, novel_error, pair, score, weights):
    """Half the validation molecules are covered. The Graphormer errs by 1 on all; the
    companion by ``covered_error`` on covered ones and by ``novel_error`` on the others.
    With 0.5 and 1.01 the single best weight is 1 (MAE 0.755) and the pair (1, 0) gives
    0.75, 0.7 % better: kept as one weight; with 0.5 and 1.1 (single 0.8), 6 % better:
    split. With 1.1 and 0.5 the pair (0, 1) would give 0.75, but a molecule with a novel
    substructure never takes more of the companion than a covered one: the best allowed
    pair is the single weight 1 (0.8)."""
    companion = FingerprintCompanion(8, 1, 1, "value", "raw")
    y = np.linspace(-2.0, 2.0, 40)[:, None]
    covered = np.arange(40) % 2 == 0

    def predict():
        assert torch.equal(companion.weight, companion.weight_novel)  # the models alone: one weight for all
        error = np.where(covered, covered_error, novel_error)[:, None] if companion.weight[0] == 1 else 1.0
        return y, y + error

    fit = CompanionFit(weight="auto", bits=8, radius=1, counts="raw", l2=0.0, molecules=40,
                       fitted={"a": True}, seconds=0.0)
    ValidationBlend.measure(companion, fit.fitted, predict, "regression", "mae", covered).settle(companion, fit,
                                                                                                 predict)
    assert (fit.coverage["a"]["novel_molecules"], tuple(fit.coverage["a"]["pair"])) == (20, pair)
    assert fit.coverage["a"]["score"] == pytest.approx(score)
    assert (fit.weights["a"], fit.weights_novel["a"]) == weights
    assert (companion.weight.item(), companion.weight_novel.item()) == weights


def test_format_weights_names_the_novel_weight_only_when_it_differs():
    assert format_weights({"a": 0.5}) == "0.5"
    assert format_weights({"a": 0.5}, {"a": 0.5}) == "0.5"
    assert format_weights({"a": 1.0}, {"a": 0.25}) == "1 (0.25 for a molecule with a novel substructure)"
    assert format_weights({"a": 1.0, "b": 0.0}, {"a": 0.25, "b": 0.0}) == \
        "a 1, b 0 (a 0.25, b 0 for a molecule with a novel substructure)"


def test_coverage_reads_the_buckets_of_the_training_split(tmp_path, write_tpsa_csv):
    splits = splits_of(write_tpsa_csv(tmp_path / "tpsa.csv", n=400))
    model = model_with_companion("regression")
    fit_companion(model.companion, splits.train, num_atoms(splits.train), "regression", ["tpsa"])
    assert covered_rows(model.companion, splits.train, num_atoms(splits.train)).all()
    val = covered_rows(model.companion, splits.val, num_atoms(splits.val))
    assert 0 < val.sum() < len(val)  # NCI's molecules: some have an environment the training split lacks
    model.companion.seen.fill_(1.0)
    assert covered_rows(model.companion, splits.val, num_atoms(splits.val)).all()


def test_the_logistic_companion_separates_polar_molecules_and_blends_evenly(tmp_path, write_tpsa_csv):
    splits = splits_of(write_tpsa_csv(tmp_path / "polar.csv", n=1000, binary=True))
    model = model_with_companion("binary").eval()
    runner = Runner(model, "binary")
    alone = run([runner], splits.test).values[0, :, 0]  # unfitted: the Graphormer's output unchanged
    fit = fit_companion(model.companion, splits.train, num_atoms(splits.train), "binary", ["polar"], weight=0.5)
    assert fit.fitted == {"polar": True} and model.companion.weight.tolist() == [0.5]
    out = run([runner], splits.test)
    y = out.targets[:, 0]
    model.companion.set_weights(1.0)
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
    with pytest.raises(MolsepnormError, match=r"train.companion_weight must be in \(0, 1\] or 'auto'"):
        fit_companion(model_with_companion("binary").companion, splits.train, num_atoms(splits.train), "binary",
                      ["polar"], weight=0.0)


def test_covered_by_reads_dense_and_sparse_counts_alike():
    from scipy.sparse import csr_matrix

    counts = np.array([[2, 0, 1, 0], [0, 1, 0, 0], [0, 0, 0, 3]], dtype=float)
    seen = np.array([True, False, True, False])
    for X in (counts, csr_matrix(counts)):
        assert covered_by(X, seen).tolist() == [True, False, False]
    assert covered_by(counts, np.ones(4, dtype=bool)).all()


@pytest.mark.parametrize("prop, radius", [("tpsa", 0), ("logp", 1)])
def test_validation_chooses_the_radius_of_the_property_s_atom_types(tmp_path, write_tpsa_csv, prop, radius):
    """Ertl's TPSA prices each polar atom by itself (radius 0); Crippen's logP types an atom
    by its neighbours too (radius 1). Validation finds which, and the companion predicts with it."""
    import pandas as pd
    from rdkit import Chem
    from rdkit.Chem import Crippen

    path = write_tpsa_csv(tmp_path / "tpsa.csv", n=1000)
    if prop == "logp":
        table = pd.read_csv(path)
        table["tpsa"] = [Crippen.MolLogP(Chem.MolFromSmiles(s)) for s in table.smiles]  # the column keeps its name
        table.to_csv(path, index=False)
    splits = splits_of(path)
    scaler = TargetScaler.fit(targets(splits.train))
    model = model_with_companion("regression").eval()
    fit = fit_companion(model.companion, splits.train, num_atoms(splits.train), "regression", ["tpsa"],
                        scaler=scaler, val=(splits.val, num_atoms(splits.val)))
    assert set(fit.features) == {feature_name(r, p) for r, p in GROUP_FEATURES}
    best = min(fit.features, key=fit.features.get)
    assert best == feature_name(fit.radius, fit.properties) and fit.radius == radius
    assert (model.companion.radius, model.companion.properties) == (fit.radius, fit.properties)
    model.companion.set_weights(1.0)  # the companion alone: its validation MAE is the one it was chosen by
    out = run([Runner(model, "regression", scaler)], splits.val)
    error = np.mean(np.abs(out.values[0, :, 0] - out.targets[:, 0])) / float(scaler.std[0])
    assert error == pytest.approx(fit.features[best], rel=1e-4)
    # a weight given by the user keeps the model's features and tries no other
    kept = model_with_companion("regression")
    fixed = fit_companion(kept.companion, splits.train, num_atoms(splits.train), "regression", ["tpsa"],
                          weight=1.0, scaler=scaler, val=(splits.val, num_atoms(splits.val)))
    assert fixed.features == {} and (kept.companion.radius, kept.companion.properties) == (GROUP_RADIUS, False)
    # fit_blend reads validation's coverage from the features of the kind chosen, hashed once
    runner = Runner(model, "regression", scaler)

    def predict_val():
        result = run([runner], splits.val)
        return result.targets, result.values[0]

    blended = fit_blend(model.companion, model.config, (splits.train, num_atoms(splits.train)),
                        (splits.val, num_atoms(splits.val)), "regression", ["tpsa"], "auto", scaler, predict_val, "mae")
    novel = int((~covered_rows(model.companion, splits.val, num_atoms(splits.val))).sum())
    assert 0 < novel < len(splits.val)
    assert blended.coverage["tpsa"]["novel_molecules"] == novel


def test_one_pass_of_groups_gives_every_kind_of_features(tmp_path, write_tpsa_csv):
    from molsepnorm.train.companion import combine_groups, feature_groups

    splits = splits_of(write_tpsa_csv(tmp_path / "tpsa.csv", n=200))
    sizes = num_atoms(splits.train)
    groups, y = feature_groups(splits.train, sizes, GROUP_BITS, 1, True)
    for radius, properties in GROUP_FEATURES:
        for counts in ("raw", "log"):
            X, y_one = substructure_features(splits.train, sizes, GROUP_BITS, radius, counts=counts,
                                             properties=properties)
            assert (combine_groups(groups, radius, properties, counts) != X).nnz == 0
    assert np.array_equal(y, y_one, equal_nan=True)


def test_features_no_validation_label_can_score_are_unmeasured_not_perfect(tmp_path, write_tpsa_csv):
    """With no validation label for a fitted target, each kind of features scores None (null
    in results.json, where 0.0 would read as a perfect fit) and the first kind is kept."""
    import dataclasses
    import json

    splits = splits_of(write_tpsa_csv(tmp_path / "tpsa.csv"))
    unlabelled = [graph.clone() for graph in splits.val]
    for graph in unlabelled:
        graph.y = torch.full_like(graph.y, float("nan"))
    model = model_with_companion("regression")
    fit = fit_companion(model.companion, splits.train, num_atoms(splits.train), "regression", ["tpsa"],
                        scaler=TargetScaler.fit(targets(splits.train)), val=(unlabelled, num_atoms(unlabelled)))
    assert fit.features == {feature_name(r, p): None for r, p in GROUP_FEATURES}
    assert (fit.radius, fit.properties) == GROUP_FEATURES[0] and fit.fitted == {"tpsa": True}
    assert "NaN" not in json.dumps(dataclasses.asdict(fit))
