"""OGB's atom and bond features (Hu et al., NeurIPS 2020), computed a molecule at a time.

``ogb.utils.features.atom_to_feature_vector`` / ``bond_to_feature_vector`` call RDKit
once per atom and value, then look each value up in a Python list (``list.index``).
Here each column is read for all atoms at once (``map`` over RDKit's unbound getters, no
per-atom Python frame) into one ``(9, N)`` array, and mapped to OGB's indices with NumPy
lookup tables built from OGB's own ``allowable_features`` lists, so the vocabulary is
OGB's by construction; the result is identical to ``ogb.utils.smiles2graph``
(tests/integration/test_ogb_identity.py checks all 41,127 ogbg-molhiv SMILES and the
ZINC and NCI SMILES, which carry stereo).

Three columns are not read when the molecule cannot hold anything but their default
(:class:`~molsepnorm.chem.parse.SmilesTraits`, known from the SMILES text): chirality
(no ``@``), bond stereo (no ``/`` or ``\\``) and the bond type's enum (no dative bond,
neither written nor made by RDKit's sanitization for a metal: then the bond order, a
float RDKit returns without building an enum object, names the type).  RDKit's enum
getters are its slowest (each value becomes a Python enum object), and the molhiv
SMILES carry no stereo at all.  The total degree is RDKit's definition, bonded atoms plus hydrogens, so it is not
read either.

Columns: atoms ``[atomic_num, chirality, degree, formal_charge, num_Hs,
num_radical_electrons, hybridization, is_aromatic, is_in_ring]``; bonds ``[bond_type,
bond_stereo, is_conjugated]``.  Values outside a list map to its last entry ("misc"),
as OGB's ``safe_index`` does, and so do chirality tags OGB's list lacks (RDKit's
non-tetrahedral tags, on which OGB's ``list.index`` fails).  A bond stereo value OGB does
not know (RDKit's atropisomer tags) raises ``KeyError`` naming it, where OGB would fail
too: the featurizer turns that into a per-molecule error.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
from ogb.utils.features import allowable_features
from rdkit import Chem
from rdkit.Chem import Atom, Bond

from molsepnorm.chem.parse import ANY_TRAITS, SmilesTraits

__all__ = ["ogb_columns", "ogb_graph"]

_INT_TABLE_RANGE = (-16, 256)  # raw integer values covered by a lookup array; others are "misc"


class _Column:
    """Raw RDKit value (int or enum) -> OGB index, for one feature column, as a lookup array."""

    def __init__(self, name: str, values: Sequence[object], safe: bool, key: Callable[[object], object] = lambda v: v):
        self.name, self.safe, self.key = name, safe, key
        self.allowed = list(values)
        lo, hi = _INT_TABLE_RANGE
        # values beyond the range are clipped onto its ends, which no list holds: "misc" / unknown
        self.table = np.full(hi - lo, len(self.allowed) - 1 if safe else -1, dtype=np.int64)
        for raw in range(lo, hi):
            k = key(raw)
            if k in self.allowed:
                self.table[raw - lo] = self.allowed.index(k)


class _Columns:
    """All columns of one kind: one clip, one offset add and one ``take`` per molecule."""

    def __init__(self, columns: Sequence[_Column]):
        self.columns = list(columns)
        lo, hi = _INT_TABLE_RANGE
        self.lo, self.hi = lo, hi
        self.table = np.concatenate([c.table for c in self.columns])
        self.offsets = (np.arange(len(self.columns), dtype=np.int64) * (hi - lo) - lo)[:, None]

    def __call__(self, values: np.ndarray) -> np.ndarray:
        """``(C, K)`` int64 raw values (a column per row) -> ``(K, C)`` OGB indices."""
        # ufuncs (in place after the first), not np.clip: its argument checks cost more than the lookup
        index = np.maximum(values, self.lo)
        np.minimum(index, self.hi - 1, out=index)
        index += self.offsets
        out = self.table.take(index).T
        if out.size and out.min() < 0:
            row, col = (int(v[0]) for v in np.nonzero(out < 0))
            c, raw = self.columns[col], int(values[col, row])
            shown = c.key(raw) if c.key(raw) is not None else raw
            raise KeyError(f"{c.name} {shown} (of atom or bond {row}) is not in OGB's list {c.allowed}")
        return np.ascontiguousarray(out)


def _enum_key(enum_type: type) -> Callable[[object], object]:
    """int -> the enum's name (what OGB compares with ``str(...)``), or None if no such member."""
    names = {int(v): str(v) for v in enum_type.values.values()}
    return lambda raw: names.get(int(raw))  # type: ignore[arg-type]


_F = allowable_features
_ATOM_COLUMNS = _Columns((
    _Column("atomic number", _F["possible_atomic_num_list"], safe=True),
    # OGB's list.index fails on RDKit's newer tags (square planar, octahedral, ...); its list
    # has a "misc" entry, used for them here, so such molecules still get a prediction
    _Column("chirality", _F["possible_chirality_list"], safe=True, key=_enum_key(Chem.ChiralType)),
    _Column("degree", _F["possible_degree_list"], safe=True),
    _Column("formal charge", _F["possible_formal_charge_list"], safe=True),
    _Column("number of Hs", _F["possible_numH_list"], safe=True),
    _Column("radical electrons", _F["possible_number_radical_e_list"], safe=True),
    _Column("hybridization", _F["possible_hybridization_list"], safe=True, key=_enum_key(Chem.HybridizationType)),
    _Column("aromaticity", _F["possible_is_aromatic_list"], safe=False, key=lambda v: bool(v) if v in (0, 1) else None),
    _Column("ring membership", _F["possible_is_in_ring_list"], safe=False,
            key=lambda v: bool(v) if v in (0, 1) else None),
))
_BOND_COLUMNS = _Columns((
    _Column("bond type", _F["possible_bond_type_list"], safe=True, key=_enum_key(Chem.BondType)),
    _Column("bond stereo", _F["possible_bond_stereo_list"], safe=False, key=_enum_key(Chem.BondStereo)),
    _Column("conjugation", _F["possible_is_conjugated_list"], safe=False,
            key=lambda v: bool(v) if v in (0, 1) else None),
))


def ogb_columns() -> dict[str, list[tuple[str, list]]]:
    """``{"atom": [...], "bond": [...]}``: each column's name and OGB's list of its values, in
    column order (index ``i`` in ``x`` / ``edge_attr`` means ``values[i]``; a last value
    ``"misc"`` is the bucket of every value outside the list)."""
    return {"atom": [(c.name, list(c.allowed)) for c in _ATOM_COLUMNS.columns],
            "bond": [(c.name, list(c.allowed)) for c in _BOND_COLUMNS.columns]}


# RDKit's getters in the order of the columns above; reading a column is one ``map``.
_ATOM_GETTERS = (Atom.GetAtomicNum, Atom.GetChiralTag, Atom.GetTotalDegree, Atom.GetFormalCharge,
                 Atom.GetTotalNumHs, Atom.GetNumRadicalElectrons, Atom.GetHybridization, Atom.GetIsAromatic,
                 Atom.IsInRing)
_CHIRALITY, _DEGREE, _NUM_HS = 1, 2, 4  # rows of the raw atom array with a shortcut
_BOND_TYPE, _BOND_STEREO = 0, 1

# Twice a bond's order -> its RDKit BondType, for molecules without dative bonds: then
# 1.0 is SINGLE and 1.5 AROMATIC (ONEANDAHALF has no SMILES).  Orders of no such type
# (0: UNSPECIFIED, written "~"; 32 and above are clipped onto the last entry) map to
# UNSPECIFIED, which OGB files under "misc" with all but its four types.
_TYPE_OF_ORDER = np.full(64, int(Chem.BondType.UNSPECIFIED), dtype=np.int64)
for _order, _type in ((1.0, Chem.BondType.SINGLE), (1.5, Chem.BondType.AROMATIC), (2.0, Chem.BondType.DOUBLE),
                      (3.0, Chem.BondType.TRIPLE), (4.0, Chem.BondType.QUADRUPLE)):
    _TYPE_OF_ORDER[int(2 * _order)] = int(_type)


# Elements between which RDKit's sanitization never makes a bond dative: it does that to
# bonds of metals ("cleanUpOrganometallics": C1C[N+]23...[Fe+2]24... gets two), so a
# molecule with any other atom (metalloids such as B and Si included, to be safe) has its
# bond types read from RDKit's enum.  Indexed by atomic number: H C N O F P S Cl Se Br I.
_NO_DATIVE_BONDS = np.zeros(128, dtype=bool)
_NO_DATIVE_BONDS[[1, 6, 7, 8, 9, 15, 16, 17, 34, 35, 53]] = True


def _column(getter: Callable, items: list, n: int) -> np.ndarray:
    return np.fromiter(map(getter, items), dtype=np.int64, count=n)


def ogb_graph(mol: Chem.Mol, traits: SmilesTraits = ANY_TRAITS) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The OGB graph of a sanitized molecule, as ``ogb.utils.smiles2graph`` builds it.

    Args:
        mol: a sanitized RDKit Mol (hydrogens as RDKit left them).
        traits: what the molecule can carry (:func:`~molsepnorm.chem.parse.smiles_traits`
            of the SMILES it was parsed from); the default reads every column.

    Returns:
        ``x`` ``(N, 9)``, ``edge_index`` ``(2, E)`` and ``edge_attr`` ``(E, 3)``, all int64,
        ``E = 2 x bonds``: every bond as ``(i, j)`` then ``(j, i)``, in RDKit's bond order.

    Raises:
        KeyError: a value outside one of OGB's lists that has no "misc" entry.
    """
    n, nb = mol.GetNumAtoms(), mol.GetNumBonds()
    atoms = list(map(mol.GetAtomWithIdx, range(n)))
    bonds = list(map(mol.GetBondWithIdx, range(nb)))
    begin, end = _column(Bond.GetBeginAtomIdx, bonds, nb), _column(Bond.GetEndAtomIdx, bonds, nb)

    raw = np.zeros((len(_ATOM_GETTERS), n), dtype=np.int64)
    for row, getter in enumerate(_ATOM_GETTERS):
        if row == _DEGREE or (row == _CHIRALITY and not traits.chiral_tags):  # CHI_UNSPECIFIED (0)
            continue
        raw[row] = _column(getter, atoms, n)
    # RDKit's total degree is the number of bonded atoms plus the (implicit and explicit) Hs
    raw[_DEGREE] = np.bincount(begin, minlength=n) + np.bincount(end, minlength=n) + raw[_NUM_HS]
    x = _ATOM_COLUMNS(raw)

    exotic_bonds = traits.dative_bonds or not _NO_DATIVE_BONDS.take(raw[0], mode="clip").all()
    raw = np.zeros((3, nb), dtype=np.int64)
    if exotic_bonds:
        raw[_BOND_TYPE] = _column(Bond.GetBondType, bonds, nb)
    else:
        orders = np.fromiter(map(Bond.GetBondTypeAsDouble, bonds), dtype=np.float64, count=nb)
        raw[_BOND_TYPE] = _TYPE_OF_ORDER.take((2 * orders).astype(np.int64), mode="clip")
    if traits.bond_stereo:  # else STEREONONE (0) everywhere
        raw[_BOND_STEREO] = _column(Bond.GetStereo, bonds, nb)
    raw[2] = _column(Bond.GetIsConjugated, bonds, nb)
    edge_attr = np.repeat(_BOND_COLUMNS(raw), 2, axis=0)

    edge_index = np.empty((2, 2 * nb), dtype=np.int64)
    edge_index[0, 0::2] = edge_index[1, 1::2] = begin
    edge_index[0, 1::2] = edge_index[1, 0::2] = end
    return x, edge_index, edge_attr
