"""The ZINC benchmark vocabulary (benchmarking-gnns / PyG ``ZINC``) and its atom-token rule.

A ZINC atom token is ``symbol[ H<n>][ <charge>]``, e.g. ``"C"``, ``"C H1"``, ``"N H3 +"``,
``"O -"``.  The benchmark derived it from how each atom is written in an RDKit Kekulé
SMILES (aromatic flags cleared): the ``H<n>`` part appears only for atoms that SMILES
writes in square brackets, and gives the number of hydrogens inside them.  Checked
against all 12,000 benchmark molecules:

* charged atoms are bracketed: ``[NH3+]`` -> ``"N H3 +"``, ``[O-]`` -> ``"O -"``;
* stereocentres are bracketed: ``[C@@H]`` -> ``"C H1"``, ``[C@]`` -> ``"C"``;
* an atom whose hydrogens bring it to its element's lowest default valence is not:
  an aromatic ``[nH]`` is a plain ``N`` in Kekulé form (``N1C=CC=C1``), so it is
  ``"N"``, while ``[nH+]`` is charged and stays ``"N H1 +"``;
* RDKit's writer also brackets hydrogen-bearing atoms above that valence (``[PH]`` in
  ``O=[PH](O)C``): that is where ``"P H1"`` / ``"P H2"`` come from.  The 12,000
  molecules contain no such atom, so this clause follows RDKit, not the data.

:func:`zinc_atom_token` applies this rule to an atom of a kekulized, hydrogen-suppressed
RDKit Mol.  Isotopes are ignored (the vocabulary has none); the featurizer rejects
atoms with unpaired electrons, since no token can express them.
"""
from __future__ import annotations

import functools
from typing import Optional

from rdkit import Chem

#: The 28 atom tokens, in index order (``atom_dict.pickle``'s ``idx2word``).
ZINC_ATOM_TOKENS: tuple[str, ...] = (
    "C", "O", "N", "F", "C H1", "S", "Cl", "O -", "N H1 +", "Br",
    "N H3 +", "N H2 +", "N +", "N -", "S -", "I", "P", "O H1 +", "N H1 -", "O +",
    "S +", "P H1", "P H2", "C H2 -", "P +", "S H1 +", "C H1 -", "P H1 +",
)  # fmt: skip
#: token -> index
ZINC_ATOM_INDEX: dict[str, int] = {token: i for i, token in enumerate(ZINC_ATOM_TOKENS)}
#: The 4 bond types, in index order (``bond_dict.pickle``); 0 means "no bond".
ZINC_BOND_TYPES: tuple[str, ...] = ("NONE", "SINGLE", "DOUBLE", "TRIPLE")
#: RDKit bond type -> ZINC bond index (Kekulé bonds only: the benchmark has no aromatic type).
ZINC_BOND_INDEX: dict[Chem.BondType, int] = {
    Chem.BondType.SINGLE: 1,
    Chem.BondType.DOUBLE: 2,
    Chem.BondType.TRIPLE: 3,
}

# Elements that SMILES may write without brackets (OpenSMILES "organic subset").
_ORGANIC_SUBSET = frozenset({5, 6, 7, 8, 9, 15, 16, 17, 35, 53})
_PERIODIC_TABLE = Chem.GetPeriodicTable()


@functools.lru_cache(maxsize=None)
def _lowest_default_valence(atomic_num: int) -> int:
    return _PERIODIC_TABLE.GetValenceList(atomic_num)[0]


def zinc_atom_token(atom: Chem.Atom, valence: int) -> str:
    """The ZINC token of ``atom``; it may be outside the vocabulary (the caller checks).

    The ``H<n>`` part is written when RDKit's SMILES writer would put the atom in
    brackets (with isomeric SMILES, ignoring isotopes): a formal charge, a chiral tag,
    an element outside the organic subset, or hydrogens on an atom whose total valence
    is not its element's lowest default valence (``O=[PH](O)C``, valence 5 vs 3).

    Args:
        atom: an atom of a kekulized Mol (aromatic flags cleared) whose hydrogens are
            all implicit or counted on their heavy atom (none as separate atoms).
        valence: the sum of the orders of the atom's bonds in that Kekulé form.

    Unpaired electrons are not part of a token: the caller rejects radicals.
    """
    atomic_num = atom.GetAtomicNum()
    charge = atom.GetFormalCharge()
    hydrogens = atom.GetTotalNumHs()
    bracketed = (
        charge != 0
        or atom.GetChiralTag() != Chem.ChiralType.CHI_UNSPECIFIED
        or atomic_num not in _ORGANIC_SUBSET
        or (hydrogens > 0 and valence + hydrogens != _lowest_default_valence(atomic_num))
    )
    token = atom.GetSymbol()
    if bracketed and hydrogens:
        token += f" H{hydrogens}"
    if charge:
        token += " " + ("+" if charge == 1 else "-" if charge == -1 else f"{charge:+d}")
    return token


def parse_zinc_token(token: str) -> tuple[str, Optional[int], int]:
    """``(symbol, hydrogens or None when implied, formal charge)`` of a token such as ``"N H3 +"``."""
    symbol, *parts = token.split(" ")
    hydrogens: Optional[int] = None
    charge = 0
    for part in parts:
        if part.startswith("H"):
            hydrogens = int(part[1:])
        elif part in ("+", "-"):
            charge = 1 if part == "+" else -1
        else:
            charge = int(part)
    if hydrogens is None and charge:
        hydrogens = 0  # a charged atom is bracketed: no H part means no hydrogens
    return symbol, hydrogens, charge


def mol_from_zinc_graph(atom_types, bonds, sanitize: bool = True) -> Chem.Mol:
    """Rebuild an RDKit Mol from a ZINC-vocabulary graph (the inverse of the featurizer).

    Args:
        atom_types: ``[N]`` token indices (ints, or anything ``int()`` accepts).
        bonds: ``(i, j, bond_index)`` triples, each undirected bond once or twice
            (repeats are ignored); bond_index 1/2/3 = single/double/triple.
        sanitize: sanitize the result, which perceives aromaticity (so two Kekulé forms
            of one ring system give the same aromatic molecule).

    Returns:
        The molecule; atoms keep the graph's order.
    """
    rw = Chem.RWMol()
    for index in atom_types:
        symbol, hydrogens, charge = parse_zinc_token(ZINC_ATOM_TOKENS[int(index)])
        atom = Chem.Atom(symbol)
        atom.SetFormalCharge(charge)
        if hydrogens is not None:
            atom.SetNumExplicitHs(hydrogens)
            atom.SetNoImplicit(True)
        rw.AddAtom(atom)
    bond_types = {index: bond_type for bond_type, index in ZINC_BOND_INDEX.items()}
    for i, j, kind in bonds:
        i, j = int(i), int(j)
        if rw.GetBondBetweenAtoms(i, j) is None:
            rw.AddBond(i, j, bond_types[int(kind)])
    mol = rw.GetMol()
    if sanitize:
        Chem.SanitizeMol(mol)
    return mol
