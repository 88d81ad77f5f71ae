"""``Predictor``: DataFrame API, batch independence, ensembles, vocabularies, strictness."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from rdkit import Chem

from molsepnorm.data.collate import collate_graphs
from molsepnorm.errors import InvalidMoleculeError, MolsepnormError
from molsepnorm.predict import Predictor
from molsepnorm.predict.predictor import to_records

# a 40-residue poly-alanine peptide: 201 heavy atoms
BIG = "N" + "C(C)C(=O)N" * 40 + "CC(=O)O"
SMALL = ["CCO", "c1ccccc1O", "CC(=O)Nc1ccc(O)cc1", "OC(=O)CC(O)(CC(O)=O)C(O)=O"]


def test_big_molecule_is_big():
    assert Chem.MolFromSmiles(BIG).GetNumAtoms() >= 150


def test_predict_returns_a_frame_like_the_cli(bundled_predictor):
    frame = bundled_predictor.predict(["CCO"])
    assert isinstance(frame, pd.DataFrame)
    assert list(frame.columns) == ["id", "smiles", "tpsa", "error", "warning"]
    assert frame["id"].tolist() == [1] and frame["smiles"].tolist() == ["CCO"]
    assert frame["error"].isna().all()
    assert np.isfinite(frame["tpsa"]).all()


def test_prediction_does_not_depend_on_batch_mates(bundled_predictor):
    alone = bundled_predictor.predict(SMALL[0])["tpsa"].to_numpy()
    mixed = bundled_predictor.predict([BIG, *SMALL, BIG])
    assert np.abs(mixed["tpsa"].to_numpy()[1] - alone[0]) <= 1e-5
    # the same, with the two molecules forced into one padded batch
    member = bundled_predictor.members[0]
    graphs = [bundled_predictor.featurize(s) for s in (SMALL[0], BIG)]
    K = bundled_predictor.multi_hop_max_dist
    with torch.inference_mode():
        together = member.runner.model(collate_graphs(graphs, K))[0]
        single = member.runner.model(collate_graphs(graphs[:1], K))[0]
        emb_together = member.runner.model.embed(collate_graphs(graphs, K))[0]
        emb_single = member.runner.model.embed(collate_graphs(graphs[:1], K))[0]
    assert torch.allclose(together, single, atol=1e-5, rtol=0)
    assert torch.allclose(emb_together, emb_single, atol=1e-5, rtol=0)
    assert graphs[1].num_nodes > 150  # the batch really was padded to the big one


def test_outputs_are_unscaled_model_outputs(bundled_predictor):
    member = bundled_predictor.members[0]
    graphs = [bundled_predictor.featurize(s) for s in SMALL]
    with torch.inference_mode():
        raw = member.runner.model(collate_graphs(graphs, bundled_predictor.multi_hop_max_dist))
    expected = member.runner.scaler.inverse_transform(raw).numpy()[:, 0]
    got = bundled_predictor.predict(SMALL)["tpsa"].to_numpy()
    np.testing.assert_allclose(got, expected, atol=1e-4, rtol=1e-6)
    assert member.runner.scaler.std[0] > 1  # scaling is not the identity: the test can tell


def test_invalid_rows_keep_their_place_and_reason(bundled_predictor):
    frame = bundled_predictor.predict(["CCO", "C1CC", None, float("nan"), "c1cccc1", "CCN"])
    assert len(frame) == 6
    assert frame["error"].notna().tolist() == [False, True, True, True, True, False]
    assert "unclosed ring" in frame["error"][1]
    assert "missing value" in frame["error"][2]
    assert "kekulize" in frame["error"][4]
    assert "  " not in frame["error"][4] and "\n" not in frame["error"][4]  # one line, as the CLI's CSV cell
    assert frame["tpsa"].isna().tolist() == [False, True, True, True, True, False]


def test_inputs_series_mols_and_ids(bundled_predictor):
    series = pd.Series(["CCO", "CCN"], index=["a", "b"])
    assert bundled_predictor.predict(series)["id"].tolist() == ["a", "b"]
    frame = pd.DataFrame({"smiles": ["C", "CC", "CCO", "CCN", "CCC"]})
    for part in (frame["smiles"], frame["smiles"].iloc[2:4], frame.loc[frame.index != 4, "smiles"],
                 frame.loc[frame.index != 1, "smiles"]):  # whole, sliced, filtered: the labels, always
        out = bundled_predictor.predict(part)
        assert out["id"].tolist() == part.index.tolist()
        assert frame.loc[out["id"], "smiles"].tolist() == out["smiles"].tolist()
    assert bundled_predictor.predict(["CCO", "CCN"])["id"].tolist() == [1, 2]  # a list: 1-based positions
    mol = Chem.MolFromSmiles("OC(=O)c1ccccc1")
    mol.SetProp("_Name", "benzoic")
    from_mol = bundled_predictor.predict([mol, Chem.MolFromSmiles("CCO")])
    assert from_mol["id"].tolist() == ["benzoic", 2]
    assert from_mol["smiles"][0] == "O=C(O)c1ccccc1"  # RDKit's SMILES for a Mol input
    same = bundled_predictor.predict("OC(=O)c1ccccc1")["tpsa"][0]
    assert from_mol["tpsa"][0] == pytest.approx(same, abs=1e-5)
    assert bundled_predictor.predict(np.array(["CCO"]), ids=["x"])["id"].tolist() == ["x"]
    with pytest.raises(ValueError, match="ids"):
        bundled_predictor.predict(["CCO"], ids=["a", "b"])
    with pytest.raises(TypeError):
        bundled_predictor.predict([1])
    with pytest.raises(TypeError, match="DataFrame"):
        bundled_predictor.predict(pd.DataFrame({"smiles": ["CCO"]}))
    assert len(bundled_predictor.predict([])) == 0
    nullable = bundled_predictor.predict(pd.Series(["CCO", pd.NA], dtype="string"))  # pandas' own missing value
    assert frame_errors(nullable) == [False, True] and "missing value" in nullable["error"][1]
    with pytest.raises(TypeError, match=r"got bytes: pass the SMILES as a str"):
        bundled_predictor.predict(b"CCO")


def frame_errors(frame):
    return frame["error"].notna().tolist()


def test_strict_raises_at_the_first_bad_molecule(bundled_predictor):
    with pytest.raises(InvalidMoleculeError) as info:
        bundled_predictor.predict(["CCO", "CCN", "C1CC"], strict=True)
    assert info.value.row == 3 and "unclosed ring" in info.value.reason


def test_chunking_does_not_change_results(bundled_predictor):
    smiles = SMALL * 5 + [BIG, "bad"]
    records = to_records(smiles, None)
    small = [c.values for c in bundled_predictor.predict_records(records, chunk_size=3)]
    large = [c.values for c in bundled_predictor.predict_records(records, chunk_size=100)]
    np.testing.assert_allclose(np.concatenate(small), np.concatenate(large), atol=1e-5, equal_nan=True)


def test_embed(bundled_predictor):
    emb = bundled_predictor.embed(["CCO", "not smiles", BIG])
    assert emb.dtype == np.float32 and emb.shape == (3, bundled_predictor.embedding_dim)
    assert np.isnan(emb[1]).all() and np.isfinite(emb[[0, 2]]).all()
    member = bundled_predictor.members[0]
    with torch.inference_mode():
        direct = member.runner.model.embed(collate_graphs([bundled_predictor.featurize("CCO")], 5))[0].numpy()
    np.testing.assert_allclose(emb[0], direct, atol=1e-5)
    with pytest.raises(InvalidMoleculeError):
        bundled_predictor.embed(["CCO", "not smiles"], strict=True)


def test_ensemble_mean_and_std(bundled_predictor, checkpoints):
    ensemble = Predictor.load("tpsa-nci-small", checkpoints["tpsa-b"])
    assert ensemble.is_ensemble and ensemble.multi_hop_max_dist == 5
    single_b = Predictor.load(checkpoints["tpsa-b"]).predict(SMALL)["tpsa"].to_numpy()
    single_a = bundled_predictor.predict(SMALL)["tpsa"].to_numpy()
    frame = ensemble.predict(SMALL + ["bad"])
    assert list(frame.columns) == ["id", "smiles", "tpsa", "tpsa_std", "error", "warning"]
    both = np.stack([single_a, single_b])
    np.testing.assert_allclose(frame["tpsa"][:4], both.mean(0), atol=1e-4)
    np.testing.assert_allclose(frame["tpsa_std"][:4], both.std(0), atol=1e-4)
    assert np.isnan(frame["tpsa_std"][4])
    with pytest.raises(MolsepnormError, match="one model"):
        ensemble.embed(["CCO"])


def test_ensemble_members_in_threads_write_what_they_write_one_after_another(checkpoints):
    turns = Predictor.load("tpsa-nci-small", checkpoints["tpsa-b"], member_threads=1).predict(SMALL + ["bad"])
    together = Predictor.load("tpsa-nci-small", checkpoints["tpsa-b"], member_threads=2).predict(SMALL + ["bad"])
    pd.testing.assert_frame_equal(together, turns)
    with pytest.raises(ValueError, match="member_threads must be 'auto' or a number >= 1"):
        Predictor.load("tpsa-nci-small", member_threads=0)


def test_ensemble_members_must_agree(checkpoints):
    with pytest.raises(MolsepnormError, match="target names"):
        Predictor.load(checkpoints["tpsa-b"], checkpoints["other-target"])
    with pytest.raises(MolsepnormError, match="vocab"):
        Predictor.load(checkpoints["tpsa-b"], checkpoints["zinc"])


def test_zinc_vocabulary_model_names_the_unsupported_atom(checkpoints):
    zinc = Predictor.load(checkpoints["zinc"])
    frame = zinc.predict(["CCO", "C[Se]C", "[Na+].[Cl-]"])
    assert frame["error"].isna().tolist() == [True, False, False]
    assert "Se" in frame["error"][1] and "zinc vocabulary" in frame["error"][1]
    assert "zinc vocabulary" in frame["error"][2]
    assert np.isfinite(frame["penalized_logp"][0])


def test_binary_outputs_are_probabilities(checkpoints):
    binary = Predictor.load(checkpoints["binary"])
    frame = binary.predict(SMALL)
    assert list(frame.columns) == ["id", "smiles", "active", "toxic", "error", "warning"]
    member = binary.members[0]
    with torch.inference_mode():
        logits = member.runner.model(collate_graphs([binary.featurize(s) for s in SMALL], 3))
    np.testing.assert_allclose(frame[["active", "toxic"]].to_numpy(), torch.sigmoid(logits).numpy(), atol=1e-6)


def test_unknown_model_names_the_bundled_ones():
    from molsepnorm.checkpoint import UnknownModelError

    with pytest.raises(UnknownModelError, match="tpsa-nci-small"):
        Predictor.load("no-such-model")


def test_models_given_as_any_iterable_keep_their_names_and_an_encoder_says_it_has_no_head():
    from_generator = Predictor.load(name for name in ["tpsa-nci-small"])
    assert repr(from_generator).startswith("Predictor(tpsa-nci-small: regression, targets tpsa, ogb vocabulary")
    assert "no head: embeddings only" in repr(Predictor.load("molhiv-encoder"))


def test_molecules_over_max_atoms_get_a_row_with_the_reason(tmp_path):
    from molsepnorm.predict import Predictor, predict_file

    small = Predictor.load("tpsa-nci-small", max_atoms=12)
    frame = small.predict(["CCO", "C" * 13, "CCCCCCCCCCCC"])
    assert frame["error"].isna().tolist() == [True, False, True]
    assert "too large: 13 heavy atoms, more than the limit of 12" in frame["error"][1]
    smi = tmp_path / "m.smi"
    smi.write_text("CCO a\n" + "C" * 13 + " b\n")
    summary = predict_file(small, smi, out=tmp_path / "out.csv")
    assert (summary.ok, summary.failed) == (1, 1)
    with pytest.raises(ValueError, match="max_atoms"):
        Predictor.load("tpsa-nci-small", max_atoms=0)
    assert Predictor.load("tpsa-nci-small").max_atoms == 1000


def test_predictor_is_thread_safe_and_changes_no_process_setting(bundled_predictor):
    import threading

    model = bundled_predictor.members[0].runner.model
    outside = torch.backends.mkldnn.enabled
    seen = []
    hook = model.register_forward_hook(lambda *_: seen.append(torch.backends.mkldnn.enabled))
    try:
        expected = bundled_predictor.predict(SMALL + [BIG])["tpsa"].to_numpy()
        results, errors = [None] * 6, []

        def work(i):
            try:
                results[i] = bundled_predictor.predict([BIG, *SMALL] if i % 2 else SMALL + [BIG])["tpsa"].to_numpy()
            except Exception as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        hook.remove()
    assert not errors
    for i, got in enumerate(results):
        order = [len(SMALL), *range(len(SMALL))] if i % 2 else list(range(len(SMALL) + 1))
        np.testing.assert_allclose(got, expected[order], atol=1e-5)
    assert seen and set(seen) == {outside}  # the model ran under the caller's settings, untouched
    assert torch.backends.mkldnn.enabled == outside and not model.training
