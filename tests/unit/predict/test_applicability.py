"""The ``warning`` column: the bundled model's applicability domain on real molecules."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from molsepnorm.checkpoint import Checkpoint
from molsepnorm.predict import Predictor
from molsepnorm.predict.predictor import to_records

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "data" / "examples" / "molecules.smi"
BORON_CLUSTER = "B1B2B1B2"  # a B4 cage: the NCI training set has boron, never bonded to boron
DISTANNANE = "CCCC[Sn](CCCC)(CCCC)[Sn](CCCC)(CCCC)CCCC"  # hexabutylditin: an Sn-Sn bond
URANIUM = "[U]"
TRIBUTYLTIN = "CCCC[Sn](Cl)(CCCC)CCCC"  # tin is in 4 of the 3,993 training molecules


def example_drugs() -> list[tuple[str, str]]:
    """(SMILES, name) of the README's example file that RDKit reads (its invalid lines and
    sodium chloride, a salt rather than a drug, left out)."""
    from rdkit import Chem

    rows = [line.split() for line in EXAMPLE.read_text().splitlines() if line.strip()]
    return [(smiles, name) for smiles, name in rows
            if name != "sodium_chloride" and Chem.MolFromSmiles(smiles) is not None]


def test_the_bundled_model_carries_its_domain():
    domain = Checkpoint.load("tpsa-nci-small").applicability
    assert domain is not None and domain.vocab == "ogb"
    assert domain.num_molecules == 3993 and len(domain.fingerprints) == 3993  # the whole training split


def test_out_of_domain_molecules_are_flagged(bundled_predictor):
    frame = bundled_predictor.predict([BORON_CLUSTER, DISTANNANE, URANIUM, TRIBUTYLTIN, "CCO", "c1ccccc1O"])
    assert frame["error"].isna().all()  # predicted all the same
    assert np.isfinite(frame["tpsa"]).all()
    warning = frame["warning"].tolist()
    assert "bond between elements never bonded in training: B-B" in warning[0]
    assert "nearest training molecule Tanimoto" in warning[0]
    assert warning[1] == ("bond between elements never bonded in training: Sn-Sn; "
                          "rare in training: element Sn in 4 of 3,993 molecules")
    assert warning[2].startswith("not seen in training: element U, degree 0")
    assert warning[3] == "rare in training: element Sn in 4 of 3,993 molecules"
    assert frame["warning"].isna().tolist() == [False, False, False, False, True, True]  # ethanol, phenol: none


def test_the_readme_drugs_are_not_flagged(bundled_predictor):
    drugs = example_drugs()
    assert len(drugs) == 14
    frame = bundled_predictor.predict([s for s, _ in drugs], ids=[n for _, n in drugs])
    assert frame["error"].isna().all()
    flagged = frame.loc[frame["warning"].notna(), ["id", "warning"]].values.tolist()
    assert flagged == []


def test_sodium_chloride_is_outside_a_model_trained_without_sodium(bundled_predictor):
    warning = bundled_predictor.applicability(["[Na+].[Cl-]"])[0]
    assert warning.startswith("not seen in training: element Na, degree 0")


def test_applicability_is_the_warning_column_without_the_model(bundled_predictor):
    molecules = [URANIUM, "CCO", "C1CC", None, BORON_CLUSTER]
    warnings = bundled_predictor.applicability(molecules)
    assert warnings[1:4] == [None, None, None]  # in the domain; unreadable; missing: no warning, as predict says it
    frame = bundled_predictor.predict(molecules)
    assert [None if pd.isna(w) else w for w in frame["warning"]] == warnings  # a missing value: no warning


def test_embed_rows_have_the_same_warnings(bundled_predictor):
    (chunk,) = bundled_predictor.embed_records(to_records([URANIUM, "CCO"], None))
    assert chunk.values.shape == (2, bundled_predictor.embedding_dim)
    assert chunk.warnings == [bundled_predictor.applicability([URANIUM])[0], None]


def test_a_checkpoint_without_domain_predicts_with_a_note_and_no_warnings(tmp_path):
    checkpoint = Checkpoint.load("tpsa-nci-small")
    checkpoint.applicability = None
    old = checkpoint.save(tmp_path / "old.pt")
    with pytest.warns(UserWarning, match="old.pt: the model carries no applicability data") as record:
        predictor = Predictor.load(old)
    notes = [w for w in record if "applicability" in str(w.message)]
    assert len(notes) == 1 and notes[0].filename == __file__  # one note, pointing at the caller's line
    frame = predictor.predict([URANIUM, "CCO"])
    assert frame["warning"].isna().all() and frame["tpsa"].notna().all()
    assert predictor.applicability([URANIUM]) == [None]
    assert predictor.domains == []


def test_an_ensemble_checks_one_training_split_once():
    predictor = Predictor.load("tpsa-nci-small", "tpsa-nci-small")
    assert len(predictor.domains) == 1
    assert predictor.predict([URANIUM])["warning"][0] == predictor.applicability([URANIUM])[0]


def test_the_check_can_be_switched_off():
    predictor = Predictor.load("tpsa-nci-small", applicability=False)
    assert predictor.domains == []
    assert predictor.predict([URANIUM])["warning"].isna().all()
