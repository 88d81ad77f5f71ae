"""RDKit's 2D descriptors as pretraining targets: which, in what order, on what scale."""
from __future__ import annotations

import numpy as np
from rdkit import Chem
from rdkit.Chem import Descriptors

from molsepnorm.chem.descriptors import EXCLUDED_PREFIXES, descriptor_names, descriptor_values


def test_the_descriptors_are_rdkits_without_the_properties_of_the_data_sets():
    names = descriptor_names()
    every = [name for name, _ in Descriptors.descList]
    assert names == [n for n in every if not n.startswith(EXCLUDED_PREFIXES)]  # RDKit's order
    for target in ("MolLogP", "MolMR", "TPSA", "qed", "SlogP_VSA1", "SMR_VSA1", "fr_COO", "Ipc"):
        assert target in every and target not in names
    assert {"MolWt", "NumHDonors", "RingCount", "BertzCT", "AvgIpc"} <= set(names)


def test_values_are_the_signed_log_of_rdkits():
    names = descriptor_names()
    functions = dict(Descriptors.descList)
    for smiles in ["CC(=O)Nc1ccc(O)cc1", "O=[N+]([O-])c1ccc(Cl)cc1Br", "[Na+].[Cl-]"]:
        mol = Chem.MolFromSmiles(smiles)
        raw = np.array([functions[n](mol) for n in names], dtype=np.float64)
        expected = np.sign(raw) * np.log1p(np.abs(raw))
        got = descriptor_values(smiles)
        assert got.shape == (len(names),) and got.dtype == np.float32
        finite = np.isfinite(expected)
        np.testing.assert_allclose(got[finite], expected[finite], rtol=1e-6)
        assert np.isnan(got[~finite]).all()  # what RDKit cannot compute is left out, not made up
    minimum = descriptor_values("CC(=O)Nc1ccc(O)cc1")[names.index("MinPartialCharge")]
    assert minimum < 0  # the sign survives the log


def test_an_unreadable_smiles_gives_nan_everywhere():
    values = descriptor_values("<RDKit Mol with 3 atoms>")
    assert values.shape == (len(descriptor_names()),) and np.isnan(values).all()
