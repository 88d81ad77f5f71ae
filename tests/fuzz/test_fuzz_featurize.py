"""Fuzzing the featurizer: any input gives a valid graph or an ``InvalidMoleculeError`` with a reason.

The contract, checked on thousands of generated inputs (see ``strategies.py``) in both
vocabularies: :func:`~molsepnorm.chem.parse_molecule` and
:func:`~molsepnorm.chem.featurize` either return

* a sanitized Mol with at least one atom / a graph whose shapes, dtypes and values are
  those a model can embed (long tensors, edge indices in range and paired in both
  directions, every feature below its vocabulary size), with its Graphormer encodings; or
* raise :class:`~molsepnorm.errors.InvalidMoleculeError` with a non-empty reason.

Any other exception fails the test.  In the OGB vocabulary every valid molecule is
featurizable (unknown values go to OGB's "misc" bucket), so there featurize may reject
only what parse_molecule rejects.  The fixed real-world failures (MoleculeNet HIV rows,
valence, kekulization, ...) are parametrized at the end, with regressions of the bugs
the fuzzing found.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from rdkit import Chem, rdBase

from molsepnorm.chem import VOCABS, featurize, parse_molecule, vocab_sizes
from molsepnorm.chem.ogb_features import ogb_graph
from molsepnorm.chem.parse import ANY_TRAITS
from molsepnorm.encodings import encode
from molsepnorm.errors import InvalidMoleculeError

#: Graphs up to this size also get their Graphormer encodings computed (what predict does).
ENCODE_MAX_NODES = 300
#: The seven MoleculeNet HIV SMILES (0-based rows of HIV.csv) that today's RDKit rejects.
HIV_REJECTED_ROWS = (137, 987, 12882, 18293, 30784, 30785, 35728)


def check_graph(data: Any, vocab: str) -> None:
    """Assert ``data`` is a graph a model of ``vocab`` can embed."""
    sizes = vocab_sizes(vocab)
    n = data.num_nodes
    assert isinstance(n, int) and n >= 1
    assert data.x.dtype == data.edge_index.dtype == data.edge_attr.dtype == torch.long
    assert tuple(data.x.shape) == (n, len(sizes["atom"]))
    for column, size in enumerate(sizes["atom"]):
        assert 0 <= int(data.x[:, column].min()) and int(data.x[:, column].max()) < size, (column, size)
    ei = data.edge_index
    assert ei.dim() == 2 and ei.shape[0] == 2 and ei.shape[1] % 2 == 0
    e = ei.shape[1]
    if e:
        assert 0 <= int(ei.min()) and int(ei.max()) < n
        assert bool((ei[0] != ei[1]).all()), "self loop"
        assert torch.equal(ei[:, 1::2], ei[:, 0::2].flip(0)), "edges are not (i, j), (j, i) pairs"
    if vocab == "ogb":
        assert tuple(data.edge_attr.shape) == (e, len(sizes["bond"]))
        for column, size in enumerate(sizes["bond"]):
            if e:
                assert 0 <= int(data.edge_attr[:, column].min()) and int(data.edge_attr[:, column].max()) < size
        if e:
            assert torch.equal(data.edge_attr[0::2], data.edge_attr[1::2])
    else:
        assert tuple(data.edge_attr.shape) == (e,)
        assert set(data.edge_attr.tolist()) <= {1, 2, 3}
    assert isinstance(data.smiles, str)
    if n <= ENCODE_MAX_NODES:
        encode(data)
        assert tuple(data.degree.shape) == (n,) and tuple(data.spd.shape) == (n * n,)
        assert tuple(data.path_next.shape) == (n * n,)


def uses_ogb_misc(data: Any) -> bool:
    """Whether an OGB graph has a value outside OGB's lists (an atom's element, chirality,
    degree, charge, hydrogen count or radicals, a bond's type), which OGB maps to the
    column's last, "misc" index: the model embeds it, nothing says so.  (Hybridization is
    left out: its "misc" is also where every ion's unspecified hybridization goes.)"""
    dims = vocab_sizes("ogb")
    atom_misc = any(bool((data.x[:, c] == dims["atom"][c] - 1).any()) for c in range(6))
    return atom_misc or bool((data.edge_attr[:, 0] == dims["bond"][0] - 1).any())


def outcome(molecule: Any, vocab: str) -> str:
    """``"valid"`` (``"valid with OGB misc"`` when :func:`uses_ogb_misc`) or ``"rejected"``; any
    exception but InvalidMoleculeError propagates."""
    try:
        data = featurize(molecule, vocab)
    except InvalidMoleculeError as err:
        assert isinstance(err.reason, str) and err.reason.strip(), f"empty reason for {molecule!r}"
        assert str(err)  # the message formats, whatever the input holds
        if vocab == "ogb":  # OGB has a bucket for everything: only invalid molecules fail
            with pytest.raises(InvalidMoleculeError):
                parse_molecule(molecule)
        return "rejected"
    check_graph(data, vocab)
    if isinstance(molecule, str):
        assert data.smiles == molecule.strip()
        mol = parse_molecule(molecule)
        assert mol.GetNumAtoms() >= 1 and not mol.NeedsUpdatePropertyCache()
        if vocab == "ogb":
            assert data.num_nodes == mol.GetNumAtoms()
            # the columns skipped on what the SMILES text rules out read the same when read
            full = ogb_graph(mol, ANY_TRAITS)
            for name, array in zip(("x", "edge_index", "edge_attr"), full):
                assert np.array_equal(data[name].numpy(), array), (molecule, name)
    return "valid with OGB misc" if vocab == "ogb" and uses_ogb_misc(data) else "valid"


# --- properties ------------------------------------------------------------------------------------


STRING_KINDS = ("random_text", "smiles_alphabet_strings", "token_smiles", "mutated_real_smiles")


def string_strategy(kind: str, fuzz: Any, real_smiles: Any) -> Any:
    """The hypothesis strategy of one kind of generated string."""
    return {"random_text": fuzz.random_text, "smiles_alphabet_strings": fuzz.smiles_alphabet_text,
            "token_smiles": fuzz.token_smiles, "mutated_real_smiles": lambda: fuzz.mutated_smiles(real_smiles)}[kind]()


@pytest.mark.parametrize("vocab", VOCABS)
@pytest.mark.parametrize("kind", STRING_KINDS)
def test_generated_strings(budget, kind, vocab, fuzz, real_smiles, tally, run_property):
    @given(string_strategy(kind, fuzz, real_smiles))
    def prop(text: str) -> None:
        tally.add(outcome(text, vocab))

    run_property(budget, prop)


@pytest.mark.parametrize("vocab", VOCABS)
def test_mol_inputs(budget, vocab, fuzz, real_smiles, tally, run_property):
    """RDKit Mols as an SDF record gives them: unsanitized, explicit hydrogens kept."""

    @given(st.one_of(fuzz.token_smiles(), fuzz.mutated_smiles(real_smiles), st.sampled_from(real_smiles)),
           st.booleans())
    def prop(text: str, add_hs: bool) -> None:
        with rdBase.BlockLogs():
            try:
                mol = Chem.MolFromSmiles(text, sanitize=False)
            except UnicodeEncodeError:  # RDKit's own API does not take lone surrogates
                mol = None
            if mol is None:
                tally.add("not a Mol")
                return
            if add_hs:
                mol.UpdatePropertyCache(strict=False)
                mol = Chem.AddHs(mol)
        tally.add(outcome(mol, vocab))

    run_property(budget, prop)


@pytest.mark.parametrize("vocab", VOCABS)
def test_large_molecules(budget, vocab, fuzz, tally, run_property):
    @given(fuzz.large_smiles())
    def prop(text: str) -> None:
        result = outcome(text, vocab)
        assert result.startswith("valid") or vocab == "zinc"
        assert featurize(text, "ogb").num_nodes >= 500
        tally.add(result)

    run_property(budget, prop, scale=0.1)


# --- fixed real failures ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hiv_rejected(data_root) -> dict[int, str]:
    """The seven HIV.csv SMILES RDKit rejects, by 0-based row."""
    frame = pd.read_csv(data_root / "sources" / "moleculenet" / "HIV.csv")
    assert len(frame) == 41_127
    return {row: frame["smiles"][row] for row in HIV_REJECTED_ROWS}


@pytest.mark.parametrize("vocab", VOCABS)
@pytest.mark.parametrize("row", HIV_REJECTED_ROWS)
def test_hiv_smiles_rdkit_rejects(row, vocab, hiv_rejected):
    with pytest.raises(InvalidMoleculeError) as info:
        featurize(hiv_rejected[row], vocab)
    assert "valence" in info.value.reason.lower()  # hypervalent Al / B / Ge
    assert info.value.smiles == hiv_rejected[row]


@pytest.mark.parametrize(
    "text, reason",
    [
        ("C(C)(C)(C)(C)C", "Explicit valence for atom # 0 C, 5"),
        ("c1cccc1", "Can't kekulize mol"),
        ("c1ccccc1c", "non-ring atom 6 marked aromatic"),
        ("", "empty molecule"),
        ("\r\n", "empty molecule"),
        ("C\x00C", "SMILES parse error"),
        ("\ud800", "not valid Unicode"),  # a lone surrogate (found by fuzzing)
        ("CC\udcffO", "not valid Unicode"),
        # RDKit drops non-ASCII characters at either end of a SMILES (found by fuzzing)
        ("CC\uff2f", "character 'Ｏ' (U+FF2F) at position 3 is not a SMILES character"),  # full-width O
        ("\ufeffCCO", "(U+FEFF) at position 1 is not a SMILES character"),  # a byte-order mark
        ("CCO\u200b", "(U+200B) at position 4"),  # a zero-width space
        ("C" * 200 + "\u00e9" * 30, "(U+00E9) at position 201"),
        ("CCO\rCCN", "whitespace inside the SMILES"),
    ],
)
@pytest.mark.parametrize("vocab", VOCABS)
def test_fixed_invalid_inputs(text, reason, vocab):
    with pytest.raises(InvalidMoleculeError) as info:
        featurize(text, vocab)
    assert reason in info.value.reason
    assert str(info.value)


@pytest.mark.parametrize(
    "text, zinc_reason",
    [
        ("[Na+].[Cl-]", "atom 0 (Na +) is not in the zinc vocabulary"),  # salt
        ("CC(=O)[O-].[Na+]", "atom 4 (Na +)"),
        ("CCO.c1ccccc1.O", None),  # mixture
        ("[13CH4]", None),  # isotopes
        ("[2H]O[2H]", None),
        ("C[N+](C)(C)C.[Cl-]", "atom 5 (Cl -)"),  # charges
        ("[NH3+]CC(=O)[O-]", None),
        ("O=[N+]([O-])c1ccccc1", None),
        ("O" + "CCO" * 200, None),  # 601-atom polyethylene glycol
        ("[Og]", "atom 0 (Og)"),  # in OGB's element list, not in ZINC's
        ("*", "atom 0 (*)"),  # a dummy atom: OGB's "misc" element
        ("[C+30]", "atom 0 (C +30"),  # charge beyond OGB's list: "misc"
    ],
)
def test_fixed_valid_inputs(text, zinc_reason):
    """Valid molecules: OGB featurizes all of them; ZINC names the atom it has no token for."""
    check_graph(featurize(text, "ogb"), "ogb")
    if zinc_reason is None:
        check_graph(featurize(text, "zinc"), "zinc")
    else:
        with pytest.raises(InvalidMoleculeError) as info:
            featurize(text, "zinc")
        assert zinc_reason in info.value.reason and "zinc vocabulary" in info.value.reason


def test_ogb_vocabulary_maps_unknown_values_to_misc_without_a_word():
    """What the OGB vocabulary (the bundled model's) does with what it has no entry for:
    the "misc" index, silently; only the ZINC vocabulary rejects (see above)."""
    assert uses_ogb_misc(featurize("*")) and uses_ogb_misc(featurize("[C+30]"))  # element 0, charge +30
    assert uses_ogb_misc(featurize("C$C"))  # a quadruple bond
    assert not uses_ogb_misc(featurize("[Og]")) and not uses_ogb_misc(featurize("CC(=O)[O-].[Na+]"))


def test_rdkit_log_cut_inside_a_character_still_gives_a_reason():
    """Regression (found by fuzzing): RDKit echoes a syntax error's input cut at a byte count,
    inside a multi-byte character, and reading its log raised UnicodeDecodeError."""
    from molsepnorm.chem.parse import _diagnose_smiles

    reason = _diagnose_smiles("00000000" + "\x80" * 7 + "\U00010000" * 5)
    assert reason.startswith("SMILES parse error: syntax error while parsing: 00000000?")


def test_mol_that_rdkit_cannot_write_as_smiles_still_featurizes(monkeypatch):
    """Regression: a valid Mol whose SMILES RDKit cannot write (``MolToSmiles`` raises
    ``ValueError: Too many rings open at once`` beyond ~2,500 open ring closures) gave an
    uncaught ValueError; its graph is fine, only the SMILES shown is a description."""
    def refuse(*args, **kwargs):
        raise ValueError("Too many rings open at once. SMILES cannot be generated.")

    monkeypatch.setattr(Chem, "MolToSmiles", refuse)
    data = featurize(Chem.MolFromSmiles("c1ccccc1O"), "ogb")
    check_graph(data, "ogb")
    assert data.smiles == "<RDKit Mol with 7 atoms>"


@pytest.mark.slow
def test_mol_with_thousands_of_open_rings():
    """The real case behind the regression above (about 20 s of RDKit)."""
    n = 2600
    mol = Chem.MolFromSmiles("".join(f"C%({i + 10})" for i in range(n)) * 2, sanitize=False)
    data = featurize(mol, "ogb")
    assert data.num_nodes == 2 * n and data.smiles.startswith("<RDKit Mol")
