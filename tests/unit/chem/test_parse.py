"""parse_molecule: valid molecules come back sanitized, invalid ones fail with RDKit's reason."""
from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import pytest
from rdkit import Chem

from molsepnorm.chem import parse_molecule
from molsepnorm.errors import InvalidMoleculeError


def reason_of(value) -> str:
    with pytest.raises(InvalidMoleculeError) as info:
        parse_molecule(value)
    return info.value.reason


# --- SMILES syntax errors: RDKit's own log message becomes the reason -------------------


@pytest.mark.parametrize(
    "smiles, expected",
    [
        ("Cx", "syntax error while parsing: Cx"),
        ("C1CC", "unclosed ring"),
        ("CC(C", "extra open parentheses"),
        ("CC)C", "extra close parentheses"),
        ("[Xx]", "syntax error"),
    ],
)
def test_syntax_error_reason_is_rdkits(smiles: str, expected: str) -> None:
    reason = reason_of(smiles)
    assert reason.startswith("SMILES parse error: ")
    assert expected in reason


def test_syntax_error_reason_points_at_the_position() -> None:
    assert "check for mistakes around position 2" in reason_of("Cx")


def test_syntax_error_drops_rdkit_echo_lines_and_timestamps() -> None:
    reason = reason_of("Cx")
    assert "~^" not in reason and "[" not in reason and "\n" not in reason


# --- chemistry errors: Chem.DetectChemistryProblems ------------------------------------


def test_valence_error_names_atom_element_and_valence() -> None:
    assert reason_of("CN(C)(C)(C)C") == "Explicit valence for atom # 1 N, 5, is greater than permitted"


def test_valence_error_lists_every_bad_atom() -> None:
    reason = reason_of("CN(C)(C)(C)C.CO(C)(C)C")
    assert "atom # 1 N, 5" in reason and "atom # 7 O, 4" in reason


def test_kekulization_error_lists_the_atoms() -> None:
    assert reason_of("c1cccc1") == "Can't kekulize mol. Unkekulized atoms: 0 1 2 3 4"  # RDKit's, on one line


def test_hypervalent_aluminium_from_molhiv_is_rejected() -> None:
    smiles = "O=C1O[Al]23(OC1=O)(OC(=O)C(=O)O2)OC(=O)C(=O)O3"  # HIV.csv row 137
    assert reason_of(smiles) == "Explicit valence for atom # 3 Al, 6, is greater than permitted"


def test_error_keeps_the_input_and_message_names_it() -> None:
    with pytest.raises(InvalidMoleculeError) as info:
        parse_molecule("c1cccc1")
    assert info.value.smiles == "c1cccc1"
    assert "'c1cccc1'" in str(info.value) and "kekulize" in str(info.value)


def test_invalid_input_writes_nothing_to_stderr(capfd) -> None:
    for bad in ("Cx", "C1CC", "CN(C)(C)(C)C", "c1cccc1"):
        with pytest.raises(InvalidMoleculeError):
            parse_molecule(bad)
    parse_molecule("[H+]")  # RDKit warns "not removing hydrogen atom without neighbors"
    assert capfd.readouterr().err == ""


# --- empty and missing input -----------------------------------------------------------


@pytest.mark.parametrize("smiles", ["", " ", "\t\n"])
def test_empty_smiles_is_an_empty_molecule(smiles: str) -> None:
    assert reason_of(smiles).startswith("empty molecule")


def test_mol_without_atoms_is_an_empty_molecule() -> None:
    assert reason_of(Chem.Mol()).startswith("empty molecule")


@pytest.mark.parametrize("missing", [None, math.nan])
def test_missing_value_is_an_invalid_molecule(missing) -> None:
    assert reason_of(missing).startswith("missing value")


@pytest.mark.parametrize("wrong", [3, b"CCO", ["CCO"], 1.5])
def test_wrong_type_is_a_type_error(wrong) -> None:
    with pytest.raises(TypeError, match="SMILES string or an RDKit Mol"):
        parse_molecule(wrong)


def test_whitespace_inside_smiles_is_rejected_not_truncated() -> None:
    # RDKit alone would read "CC O" as ethane and drop the O.
    assert "whitespace inside the SMILES" in reason_of("CC O")


def test_surrounding_whitespace_and_cxsmiles_extension_are_fine() -> None:
    assert parse_molecule("  CCO\n").GetNumAtoms() == 3
    assert parse_molecule("CCO |$A;B;C$|").GetNumAtoms() == 3


# --- valid molecules ---------------------------------------------------------------------


def test_returns_a_sanitized_heavy_atom_mol() -> None:
    mol = parse_molecule("[H]OC([H])([H])c1ccccc1")
    assert mol.GetNumAtoms() == 8  # explicit [H] removed, as MolFromSmiles does
    assert not mol.NeedsUpdatePropertyCache()
    assert sum(a.GetIsAromatic() for a in mol.GetAtoms()) == 6


def test_salts_and_mixtures_keep_every_fragment() -> None:
    mol = parse_molecule("CC(=O)[O-].[Na+].O")
    assert mol.GetNumAtoms() == 6
    assert len(Chem.GetMolFrags(mol)) == 3


def test_large_molecule() -> None:
    mol = parse_molecule("C" * 600)
    assert mol.GetNumAtoms() == 600 and mol.GetNumBonds() == 599


def test_charges_and_isotopes_survive() -> None:
    mol = parse_molecule("[13CH3][NH3+].[2H]O[2H]")
    assert [a.GetIsotope() for a in mol.GetAtoms()] == [13, 0, 2, 0, 2]  # isotopic H stay, like MolFromSmiles
    assert mol.GetAtomWithIdx(1).GetFormalCharge() == 1


def test_matches_molfromsmiles() -> None:
    smiles = "C[C@@H](N)C(=O)O.Cl"
    assert Chem.MolToSmiles(parse_molecule(smiles)) == Chem.MolToSmiles(Chem.MolFromSmiles(smiles))


# --- Mol input ---------------------------------------------------------------------------


def test_mol_input_is_copied_not_modified() -> None:
    mol = Chem.AddHs(Chem.MolFromSmiles("CCO"))
    out = parse_molecule(mol)
    assert out is not mol
    assert mol.GetNumAtoms() == 9 and out.GetNumAtoms() == 3


def test_unsanitized_mol_is_sanitized_on_a_copy() -> None:
    raw = Chem.MolFromSmiles("c1ccccc1O", sanitize=False)
    out = parse_molecule(raw)
    assert raw.NeedsUpdatePropertyCache()  # the input stays as it was
    assert not out.NeedsUpdatePropertyCache()
    assert Chem.MolToSmiles(out) == Chem.MolToSmiles(Chem.MolFromSmiles("Oc1ccccc1"))


@pytest.mark.parametrize(
    "smiles, expected",
    [("CN(C)(C)(C)C", "Explicit valence for atom # 1 N, 5"), ("c1cccc1", "Can't kekulize mol")],
)
def test_unsanitized_mol_gives_the_same_reasons(smiles: str, expected: str) -> None:
    raw = Chem.MolFromSmiles(smiles, sanitize=False)
    assert expected in reason_of(raw)


def test_unsanitized_mol_error_describes_the_input() -> None:
    with pytest.raises(InvalidMoleculeError) as info:
        parse_molecule(Chem.MolFromSmiles("CN(C)(C)(C)C", sanitize=False))
    assert info.value.smiles == "CN(C)(C)(C)C"


# --- concurrency -------------------------------------------------------------------------


def test_threads_get_their_own_reasons() -> None:
    cases = {"Cx": "syntax error", "C1CC": "unclosed ring", "CN(C)(C)(C)C": "Explicit valence", "CCO": None}
    inputs = list(cases) * 50

    def outcome(smiles: str):
        try:
            parse_molecule(smiles)
            return smiles, None
        except InvalidMoleculeError as err:
            return smiles, err.reason

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(outcome, inputs))
    for smiles, reason in results:
        expected = cases[smiles]
        if expected is None:
            assert reason is None
        else:
            assert expected in reason
            assert not any(other in reason for other in ("Cx", "C1CC") if other != smiles)


@pytest.mark.parametrize(
    "smiles, chiral, stereo, dative",
    [
        ("CCO", False, False, False),
        ("C[C@H](N)C(=O)O", True, False, False),
        ("F/C=C/F", False, True, False),
        ("F/C=C\\F", False, True, False),
        ("C->[Fe]", False, False, True),
        ("[Fe]<-N", False, False, True),
        ("CCO |$A;B;C$|", True, True, True),  # a CXSMILES extension can set anything
    ],
)
def test_smiles_traits(smiles: str, chiral: bool, stereo: bool, dative: bool) -> None:
    from molsepnorm.chem.parse import smiles_traits

    traits = smiles_traits(smiles)
    assert (traits.chiral_tags, traits.bond_stereo, traits.dative_bonds) == (chiral, stereo, dative)
    mol = parse_molecule(smiles)
    # what the text rules out is indeed absent from the parsed molecule
    if not chiral:
        assert all(a.GetChiralTag() == Chem.ChiralType.CHI_UNSPECIFIED for a in mol.GetAtoms())
    else:
        assert smiles.endswith("|") or any(a.GetChiralTag() != Chem.ChiralType.CHI_UNSPECIFIED for a in mol.GetAtoms())
    if not stereo:
        assert all(b.GetStereo() == Chem.BondStereo.STEREONONE for b in mol.GetBonds())
    if dative and not smiles.endswith("|"):
        assert any(b.GetBondType() == Chem.BondType.DATIVE for b in mol.GetBonds())


def test_sanitization_makes_bonds_to_metals_dative_without_an_arrow() -> None:
    """Why the featurizer also looks at the elements: RDKit turns these N+ -> Fe bonds dative."""
    from molsepnorm.chem import featurize
    from molsepnorm.chem.parse import smiles_traits

    smiles = "C1C[N+]23CCC[N+]4(C1)CC[S-]1[Fe+2]24([SH+]CC3)[S-]2CC[N+]34CCC[N+]5(CCC3)CC[SH+][Fe+2]1254"
    assert not smiles_traits(smiles).dative_bonds
    mol = parse_molecule(smiles)
    dative = [b.GetIdx() for b in mol.GetBonds() if b.GetBondType() == Chem.BondType.DATIVE]
    assert dative
    edge_attr = featurize(smiles).edge_attr
    assert all(edge_attr[2 * k, 0].item() == 4 for k in dative)  # OGB's "misc" bond type


@pytest.mark.parametrize("smiles, extension", [("C1CC1 |$", "|$"), ("CC |junk|", "|junk|"), ("CC |", "|")])
def test_malformed_cxsmiles_extension_is_named(smiles: str, extension: str) -> None:
    """RDKit logs nothing for a broken CXSMILES extension; the reason still says what is wrong."""
    with pytest.raises(InvalidMoleculeError) as info:
        parse_molecule(smiles)
    assert f"CXSMILES extension {extension!r} could not be read" in info.value.reason
    assert "no reason given" not in info.value.reason
