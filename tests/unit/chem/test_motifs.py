"""Functional-group counts (the motif pretraining targets) against RDKit's fr_* descriptors."""
from __future__ import annotations

import numpy as np
from rdkit import Chem
from rdkit.Chem import Descriptors

from molsepnorm.chem.motifs import motif_counts, motif_names, motif_targets


def test_counts_are_rdkits_fragment_descriptors_in_name_order():
    names = motif_names()
    assert len(names) == 85 and len(set(names)) == 85 and all(n.startswith("fr_") for n in names)
    descriptors = dict(Descriptors.descList)
    for smiles in ["CC(=O)Nc1ccc(O)cc1", "OC(=O)C1=CC=CC=C1OC(C)=O", "O=[N+]([O-])c1ccc(Cl)cc1Br", "[Na+].[Cl-]"]:
        mol = Chem.MolFromSmiles(smiles)
        expected = np.array([descriptors[n](mol) for n in names], dtype=np.float32)
        np.testing.assert_array_equal(motif_counts(smiles), expected)
        np.testing.assert_array_equal(motif_counts(mol), expected)


def test_counts_count_rather_than_flag():
    names = motif_names()
    acids = motif_counts("OC(=O)CCC(=O)O")  # succinic acid: two carboxylic acids
    assert acids[names.index("fr_COO")] == 2
    assert motif_counts("C").sum() == 0  # methane: no functional group


def test_an_unreadable_smiles_gives_nan_not_zero_counts():
    counts = motif_counts("<RDKit Mol with 3 atoms>")
    assert counts.shape == (85,) and np.isnan(counts).all()


def test_environment_targets_follow_the_motifs_and_count_radius_0_and_1_environments():
    from rdkit.Chem import rdFingerprintGenerator

    smiles = "CC(=O)Nc1ccc(O)cc1"  # paracetamol: 11 atoms, each counted at radius 0 and at radius 1
    targets = motif_targets(smiles, 64)
    assert targets.shape == (85 + 64,) and targets.dtype == np.float32
    np.testing.assert_array_equal(targets[:85], motif_counts(smiles))
    expected = rdFingerprintGenerator.GetMorganGenerator(radius=1, fpSize=64).GetCountFingerprintAsNumPy(
        Chem.MolFromSmiles(smiles))
    np.testing.assert_array_equal(targets[85:], expected)
    assert targets[85:].sum() == 2 * 11
    np.testing.assert_array_equal(motif_targets(smiles), motif_counts(smiles))  # 0: the motifs alone
    assert np.isnan(motif_targets("<RDKit Mol with 3 atoms>", 64)).all()
