"""featurize: shapes, hand-checked values, OGB identity on edge cases, the ZINC token rule."""
from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from ogb.utils import smiles2graph
from ogb.utils.features import get_atom_feature_dims, get_bond_feature_dims
from rdkit import Chem, RDConfig
from torch_geometric.data import Batch

from molsepnorm.chem import FEATURIZER_VERSION, VOCABS, featurize, vocab_sizes
from molsepnorm.chem.zinc_vocab import ZINC_ATOM_INDEX, ZINC_ATOM_TOKENS, mol_from_zinc_graph
from molsepnorm.errors import InvalidMoleculeError

Z = ZINC_ATOM_INDEX  # token -> index, for readable expectations


def zinc_reason(smiles: str) -> str:
    with pytest.raises(InvalidMoleculeError) as info:
        featurize(smiles, "zinc")
    return info.value.reason


def assert_same_graph(a, b) -> None:
    for key in ("x", "edge_index", "edge_attr"):
        assert torch.equal(getattr(a, key), getattr(b, key)), key
    assert a.num_nodes == b.num_nodes


# --- module constants --------------------------------------------------------------------


def test_constants() -> None:
    assert VOCABS == ("ogb", "zinc")
    assert isinstance(FEATURIZER_VERSION, int) and FEATURIZER_VERSION >= 1


def test_vocab_sizes() -> None:
    assert vocab_sizes("ogb") == {"atom": get_atom_feature_dims(), "bond": get_bond_feature_dims()}
    assert vocab_sizes("ogb")["atom"] == [119, 5, 12, 12, 10, 6, 6, 2, 2]
    assert vocab_sizes("zinc") == {"atom": [28], "bond": [4]}


@pytest.mark.parametrize("call", [lambda: vocab_sizes("qm9"), lambda: featurize("CCO", "OGB")])
def test_unknown_vocab_lists_the_valid_ones(call) -> None:
    with pytest.raises(ValueError, match="ogb, zinc"):
        call()


# --- hand-checked small molecules ------------------------------------------------------------


def test_ethanol_zinc() -> None:
    data = featurize("CCO", "zinc")
    assert data.x.tolist() == [[0], [0], [1]]
    assert data.edge_index.tolist() == [[0, 1, 1, 2], [1, 0, 2, 1]]
    assert data.edge_attr.tolist() == [1, 1, 1, 1]
    assert data.num_nodes == 3 and data.smiles == "CCO"


def test_ethanol_ogb() -> None:
    data = featurize("CCO")  # default vocab
    # atomic_num-1, chirality, total degree, charge+5, total Hs, radicals, hybridization (SP3=2), aromatic, ring
    assert data.x.tolist() == [
        [5, 0, 4, 5, 3, 0, 2, 0, 0],
        [5, 0, 4, 5, 2, 0, 2, 0, 0],
        [7, 0, 2, 5, 1, 0, 2, 0, 0],
    ]
    assert data.edge_index.tolist() == [[0, 1, 1, 2], [1, 0, 2, 1]]
    assert data.edge_attr.tolist() == [[0, 0, 0]] * 4


def test_ogb_documented_example() -> None:
    # the example in ogb/utils/features.py: chiral carbon and an E double bond
    data = featurize("Cl[C@H](/C=C/C)Br")
    assert data.x[1].tolist() == [5, 2, 4, 5, 1, 0, 2, 0, 0]
    assert data.edge_attr[4].tolist() == data.edge_attr[5].tolist() == [1, 2, 0]  # bond 2, both directions
    assert data.edge_index[:, 4].tolist() == [2, 3] and data.edge_index[:, 5].tolist() == [3, 2]


def test_benzene_zinc_is_kekule() -> None:
    data = featurize("c1ccccc1", "zinc")
    assert sorted(data.edge_attr.tolist()) == [1] * 6 + [2] * 6
    valence = torch.zeros(6, dtype=torch.long).index_add_(0, data.edge_index[0], data.edge_attr)
    assert valence.tolist() == [3] * 6


# --- shapes and dtypes -------------------------------------------------------------------------


SHAPES = {"ogb": (9, (3,)), "zinc": (1, ())}  # x columns, edge_attr shape per edge


@pytest.mark.parametrize(
    "vocab, smiles",
    [("ogb", "CC(=O)Oc1ccccc1C(=O)O"), ("ogb", "[Na+].[Cl-]"), ("ogb", "C"),
     ("zinc", "CC(=O)Oc1ccccc1C(=O)O"), ("zinc", "C.O"), ("zinc", "O")],
)  # fmt: skip
def test_shapes_and_dtypes(vocab: str, smiles: str) -> None:
    x_cols, attr_shape = SHAPES[vocab]
    data = featurize(smiles, vocab)
    mol = Chem.MolFromSmiles(smiles)
    n, e = mol.GetNumAtoms(), 2 * mol.GetNumBonds()
    assert data.x.dtype == data.edge_index.dtype == data.edge_attr.dtype == torch.long
    assert tuple(data.x.shape) == (n, x_cols)
    assert tuple(data.edge_index.shape) == (2, e)
    assert tuple(data.edge_attr.shape) == (e, *attr_shape)
    assert data.num_nodes == n and "num_nodes" in data.keys()


def test_batches_with_smiles() -> None:
    batch = Batch.from_data_list([featurize("CCO", "zinc"), featurize("c1ccccc1", "zinc")])
    assert batch.num_graphs == 2 and batch.smiles == ["CCO", "c1ccccc1"]
    assert batch.x.shape == (9, 1)


# --- ogb vocabulary equals ogb.utils.smiles2graph on edge cases ---------------------------------

OGB_EDGE_CASES = [
    "CC(=O)[O-].[Na+]",  # salt
    "[Na+].[Cl-]",  # no bonds at all
    "C",  # one atom
    "[13CH3]O",  # isotope
    "[2H]C(Cl)Cl",  # isotopic explicit H: stays a node, as in ogb
    "[H]OC([H])([H])C",  # ordinary explicit Hs: removed
    "[H][H]",  # H2: kept
    "C[N+](C)(C)C.[O-]S(=O)(=O)C",
    "F/C=C\\F",
    "C[C@@H]1CC[C@H](C)CC1",
    "[Se]",
    "O=[PH](O)c1ccccc1",
    "c1ccc2c(c1)[nH]c1ccccc12",
    "C1CC2CCC1C2",
    "[Fe+2].[O-]C(=O)C.[O-]C(=O)C",
]


@pytest.mark.parametrize("smiles", OGB_EDGE_CASES)
def test_ogb_matches_smiles2graph(smiles: str) -> None:
    ours, theirs = featurize(smiles, "ogb"), smiles2graph(smiles)
    assert np.array_equal(ours.x.numpy(), theirs["node_feat"])
    assert np.array_equal(ours.edge_index.numpy(), theirs["edge_index"])
    assert np.array_equal(ours.edge_attr.numpy(), theirs["edge_feat"])
    assert ours.edge_attr.shape == theirs["edge_feat"].shape  # (0, 3) when there are no bonds
    assert ours.num_nodes == theirs["num_nodes"]


@pytest.mark.parametrize("vocab", VOCABS)
def test_large_molecules(vocab: str) -> None:
    chain = featurize("C" * 600, vocab)
    assert chain.num_nodes == 600 and chain.edge_index.shape == (2, 1198)
    peg = "O" + "CCO" * 200  # a 601-atom polyethylene glycol
    data = featurize(peg, vocab)
    assert data.num_nodes == 601 and data.edge_index.shape == (2, 1200)
    assert int(data.edge_index.max()) == 600


def test_large_molecule_matches_smiles2graph() -> None:
    smiles = "c1ccccc1" + "C(=O)NCC" * 100 + "[NH3+]"
    ours, theirs = featurize(smiles), smiles2graph(smiles)
    assert ours.num_nodes > 500
    assert np.array_equal(ours.x.numpy(), theirs["node_feat"])
    assert np.array_equal(ours.edge_index.numpy(), theirs["edge_index"])


# --- Mol input ------------------------------------------------------------------------------------

MOL_INPUT_CASES = ["CCO", "C[C@@H](N)C(=O)O", "c1ccc2[nH]ccc2c1", "Cl.CN", "O=[N+]([O-])c1ccccc1", "F/C=C/F"]


@pytest.mark.parametrize("vocab", VOCABS)
@pytest.mark.parametrize("smiles", MOL_INPUT_CASES)
def test_mol_input_equals_smiles_input(vocab: str, smiles: str) -> None:
    expected = featurize(smiles, vocab)
    mol = Chem.MolFromSmiles(smiles)
    for variant in (mol, Chem.AddHs(mol), Chem.MolFromSmiles(smiles, sanitize=False)):
        assert_same_graph(featurize(variant, vocab), expected)


def test_mol_input_smiles_attribute_and_no_mutation() -> None:
    mol = Chem.AddHs(Chem.MolFromSmiles("OCC"))
    data = featurize(mol, "zinc")
    assert data.smiles == Chem.MolToSmiles(Chem.MolFromSmiles("OCC"))
    assert mol.GetNumAtoms() == 9


def test_smiles_attribute_is_the_stripped_input() -> None:
    assert featurize("  OCC \n").smiles == "OCC"


def test_invalid_molecules_raise_in_both_vocabs() -> None:
    for vocab in VOCABS:
        with pytest.raises(InvalidMoleculeError, match="kekulize"):
            featurize("c1cccc1", vocab)
        with pytest.raises(InvalidMoleculeError, match="empty molecule"):
            featurize("", vocab)


# --- ZINC token rule -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "smiles, tokens",
    [
        ("C[C@@H](N)C(=O)O", ["C", "C H1", "N", "C", "O", "O"]),  # stereocentre with H
        ("CC(C)(C)[C@](C)(O)CC", ["C", "C", "C", "C", "C", "C", "O", "C", "C"]),  # stereocentre without H
        ("CC(C)O", ["C", "C", "C", "O"]),  # no stereo: no H part
        ("c1cc[nH]c1", ["C", "C", "C", "N", "C"]),  # aromatic [nH] is a plain N in Kekulé form
        ("Cc1cc[nH+]cc1", ["C", "C", "C", "C", "N H1 +", "C", "C"]),
        ("[NH3+]CC(=O)[O-]", ["N H3 +", "C", "C", "O", "O -"]),
        ("C[NH2+]C", ["C", "N H2 +", "C"]),
        ("O=[N+]([O-])c1ccccc1", ["O", "N +", "O -", "C", "C", "C", "C", "C", "C"]),
        ("C[S+](C)[O-]", ["C", "S +", "C", "O -"]),
        ("[CH2-]C#N", ["C H2 -", "C", "N"]),
        ("C[N-]S(C)(=O)=O", ["C", "N -", "S", "C", "O", "O"]),
        ("CS(C)=O", ["C", "S", "C", "O"]),  # hypervalent S without H: no bracket
        ("O=[PH](O)c1ccccc1", ["O", "P H1", "O", "C", "C", "C", "C", "C", "C"]),  # H above P's valence 3
        ("CP(C)C", ["C", "P", "C", "C"]),
        ("CC[O+](CC)CC", ["C", "C", "O +", "C", "C", "C", "C"]),
        ("FC(Cl)(Br)I", ["F", "C", "Cl", "Br", "I"]),
        ("[13CH3]O", ["C", "O"]),  # isotopes are ignored
        ("[2H]C([2H])Cl", ["C", "Cl"]),  # hydrogens, isotopic or not, are counted on their atom
        ("Cl.CN", ["Cl", "C", "N"]),  # hydrochloride salt
    ],
)
def test_zinc_tokens(smiles: str, tokens: list[str]) -> None:
    data = featurize(smiles, "zinc")
    assert [ZINC_ATOM_TOKENS[i] for i in data.x[:, 0].tolist()] == tokens


@pytest.mark.parametrize(
    "smiles, reason",
    [
        ("CCCCC[Se]C", "atom 5 (Se) is not in the zinc vocabulary"),
        ("C[Si](C)(C)C", "atom 1 (Si) is not in the zinc vocabulary"),
        ("CC(=O)[O-].[Na+]", "atom 4 (Na +) is not in the zinc vocabulary"),
        ("[NH4+]", "atom 0 (N H4 +) is not in the zinc vocabulary"),
        ("[Cl-].C[NH3+]", "atom 0 (Cl -) is not in the zinc vocabulary"),
        ("OB(O)c1ccccc1", "atom 1 (B) is not in the zinc vocabulary"),
        ("C[CH2]", "atom 1 (C H2, radical with 1 unpaired electron) is not in the zinc vocabulary"),
        ("[H][H]", "atom 0 (H) is not in the zinc vocabulary"),
        ("C[SH](=O)=O", "atom 1 (S H1) is not in the zinc vocabulary"),
    ],
)
def test_zinc_rejects_out_of_vocabulary_atoms(smiles: str, reason: str) -> None:
    assert zinc_reason(smiles) == reason


def test_zinc_rejects_dative_bonds() -> None:
    assert zinc_reason("C[NH2]->[Cu]") in {
        "atom 2 (Cu) is not in the zinc vocabulary",
        "bond 1 (DATIVE between atoms 1 and 2) is not in the zinc vocabulary",
    }
    # a dative bond between in-vocabulary atoms
    assert zinc_reason("C[NH2]->[O]") == "bond 1 (DATIVE between atoms 1 and 2) is not in the zinc vocabulary"


def test_every_zinc_token_is_produced_by_some_molecule() -> None:
    examples = {
        "C": "C", "O": "O", "N": "N", "F": "F", "C H1": "C[C@H](O)N", "S": "CSC", "Cl": "CCl",
        "O -": "C[O-]", "N H1 +": "C[NH+](C)C", "Br": "CBr", "N H3 +": "C[NH3+]", "N H2 +": "C[NH2+]C",
        "N +": "C[N+](C)(C)C", "N -": "C[N-]C", "S -": "C[S-]", "I": "CI", "P": "CP(C)C",
        "O H1 +": "C=[OH+]", "N H1 -": "C[NH-]", "O +": "C[O+](C)C", "S +": "C[S+](C)C",
        "P H1": "O=[PH](O)C", "P H2": "O=[PH2]C", "C H2 -": "[CH2-]C", "P +": "C[P+](C)(C)C",
        "S H1 +": "C[SH+]C", "C H1 -": "C[CH-]C", "P H1 +": "C[PH+](C)C",
    }  # fmt: skip
    assert set(examples) == set(ZINC_ATOM_TOKENS)
    for token, smiles in examples.items():
        produced = {ZINC_ATOM_TOKENS[i] for i in featurize(smiles, "zinc").x[:, 0].tolist()}
        assert token in produced, (token, smiles, produced)


def test_zinc_graph_decodes_back_to_the_molecule() -> None:
    """Tokens + Kekulé bonds determine the molecule (hydrogens included) on RDKit's NCI set."""
    path = os.path.join(RDConfig.RDDataDir, "NCI", "first_5K.smi")
    with open(path) as handle:
        smiles_list = [line.split()[0] for line in handle if line.strip()]
    checked = 0
    for smiles in smiles_list:
        try:
            data = featurize(smiles, "zinc")
        except InvalidMoleculeError:
            continue
        bonds = zip(*data.edge_index.tolist(), data.edge_attr.tolist())
        decoded = mol_from_zinc_graph(data.x[:, 0].tolist(), bonds)
        original = Chem.MolFromSmiles(smiles)
        for atom in original.GetAtoms():
            atom.SetIsotope(0)
        expected = Chem.MolToSmiles(Chem.RemoveHs(original), isomericSmiles=False)
        assert Chem.MolToSmiles(decoded, isomericSmiles=False) == expected, smiles
        checked += 1
    assert checked > 4000


def test_featurize_with_encodings_equals_encode_after_featurize():
    """featurize(..., encodings=True) (RDKit's distance matrix for ogb) == encode(featurize(...))."""
    import os

    from rdkit import RDConfig

    from molsepnorm.encodings import encode

    path = os.path.join(RDConfig.RDDataDir, "NCI", "first_5K.smi")
    with open(path) as fh:
        smiles = ["CC(=O)[O-].[Na+]", "[Na+].[Cl-]", "C", "O=C(O)c1ccccc1.CCN"] + [
            line.split()[0] for _, line in zip(range(400), fh)]
    compared = 0
    for vocab in ("ogb", "zinc"):
        for s in smiles:
            try:
                a = featurize(s, vocab, encodings=True)
            except InvalidMoleculeError:
                continue
            b = encode(featurize(s, vocab))
            for key in ("x", "edge_index", "edge_attr", "degree", "spd", "path_next"):
                assert torch.equal(a[key], b[key]), (vocab, s, key)
            compared += 1
    assert compared > 600


@pytest.mark.parametrize("vocab", VOCABS)
def test_featurize_graph_is_featurize_with_encodings(vocab: str) -> None:
    """The model-ready MolGraph holds the arrays of featurize(..., encodings=True), Mol inputs too."""
    from rdkit import Chem

    from molsepnorm.chem import MolGraph, featurize_graph

    for molecule in ("C[NH3+].CC(=O)[O-]", "C[C@H](N)C(=O)O", "F/C=C/F", Chem.MolFromSmiles("c1ccccc1O")):
        g = featurize_graph(molecule, vocab)
        d = featurize(molecule, vocab, encodings=True)
        assert isinstance(g, MolGraph) and g.num_nodes == d.num_nodes and g.smiles == d.smiles
        for name in ("x", "edge_index", "edge_attr", "degree", "spd", "path_next"):
            assert np.array_equal(getattr(g, name), d[name].numpy()), (molecule, name)
            assert getattr(g, name).dtype == d[name].numpy().dtype
        assert torch.equal(g.to_data().spd, d.spd)
    with pytest.raises(InvalidMoleculeError, match="too large: 3 heavy atoms"):
        featurize_graph("CCO", vocab, max_atoms=2)


def test_ogb_columns_beyond_ogbs_lists():
    """Newer RDKit chirality tags map to OGB's "misc"; an atropisomer bond stereo is a per-molecule error."""
    from rdkit import Chem

    from molsepnorm.chem.ogb_features import ogb_graph

    x = featurize("C[Fe@OH1](F)(Cl)(Br)(I)N").x
    assert x[1, 1].item() == 4  # misc, where OGB's list.index raises ValueError
    mol = Chem.MolFromSmiles("Cc1ccccc1-c1ccccc1C")
    bond = mol.GetBondBetweenAtoms(6, 7)
    bond.SetStereo(Chem.BondStereo.STEREOATROPCW)
    with pytest.raises(KeyError, match=r"bond stereo STEREOATROPCW \(of atom or bond 6\)"):
        ogb_graph(mol)
    with pytest.raises(InvalidMoleculeError, match="outside the OGB vocabulary: .*bond stereo STEREOATROPCW"):
        featurize(mol)
