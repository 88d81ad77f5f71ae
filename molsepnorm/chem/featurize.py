"""Molecule -> PyG ``Data`` in one of two vocabularies.

``"ogb"``:  the 9 atom / 3 bond integer columns of OGB, identical to
``ogb.utils.smiles2graph`` (the columns are mapped with lookup tables built from OGB's own
``allowable_features`` lists, :mod:`molsepnorm.chem.ogb_features`).

``"zinc"``:  the ZINC benchmark vocabulary: one atom-token column (28 types, see
:mod:`molsepnorm.chem.zinc_vocab`) and Kekulé bond types 1/2/3, the encoding of
``torch_geometric.datasets.ZINC``.  Hydrogens are never nodes: those attached to a heavy
atom (including isotopic and stereo-defining ``[H]``/``[2H]`` atoms) are counted on it;
a hydrogen with no heavy neighbour (``[H][H]``, ``[H+]``) is out of the vocabulary.
Atom and bond numbers in zinc errors are rows of that hydrogen-free graph (of ``x``).

Both vocabularies list every bond in both directions, ``(i, j)`` then ``(j, i)``, in
RDKit's bond order, as OGB does.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, Optional

import numpy as np
from ogb.utils.features import get_atom_feature_dims, get_bond_feature_dims
from rdkit import Chem, rdBase

from molsepnorm.chem.ogb_features import ogb_columns, ogb_graph
from molsepnorm.chem.parse import ANY_TRAITS, MolInput, SmilesTraits, describe_mol, parse_molecule, smiles_traits
from molsepnorm.chem.zinc_vocab import (ZINC_ATOM_INDEX, ZINC_ATOM_TOKENS, ZINC_BOND_INDEX, ZINC_BOND_TYPES,
                                         zinc_atom_token)
from molsepnorm.encodings import structural_encodings
from molsepnorm.errors import InvalidMoleculeError

if TYPE_CHECKING:  # torch and PyG are imported where a Data is built: the featurization
    from torch_geometric.data import Data  # worker processes of predict need neither

#: The vocabularies ``featurize`` knows.
VOCABS: tuple[str, ...] = ("ogb", "zinc")
#: Bump whenever any featurizer output changes: it keys the processed-data caches.
FEATURIZER_VERSION: int = 1


def vocab_sizes(vocab: str) -> dict[str, list[int]]:
    """Per-column cardinalities a model's embedding tables need.

    Returns:
        ``{"atom": [...], "bond": [...]}``: for ``"ogb"`` OGB's 9 atom and 3 bond
        feature dims; for ``"zinc"`` ``{"atom": [28], "bond": [4]}`` (bond index 0,
        "no bond", is never used by an edge).
    """
    _check_vocab(vocab)
    if vocab == "ogb":
        return {"atom": list(get_atom_feature_dims()), "bond": list(get_bond_feature_dims())}
    return {"atom": [len(ZINC_ATOM_TOKENS)], "bond": [len(ZINC_BOND_INDEX) + 1]}


def feature_columns(vocab: str) -> dict[str, list[tuple[str, list]]]:
    """Name and values of every atom and bond column of ``vocab``.

    Returns:
        ``{"atom": [(name, values), ...], "bond": [...]}`` in column order of ``x`` /
        ``edge_attr``; index ``i`` in a column means ``values[i]``.  ``"ogb"``: OGB's lists
        (:func:`~molsepnorm.chem.ogb_features.ogb_columns`; a last value ``"misc"`` is the
        bucket of everything outside a list); ``"zinc"``: the 28 atom tokens and the 4 bond
        types.
    """
    _check_vocab(vocab)
    if vocab == "ogb":
        return ogb_columns()
    return {"atom": [("atom type", list(ZINC_ATOM_TOKENS))], "bond": [("bond type", list(ZINC_BOND_TYPES))]}


class MolGraph(NamedTuple):
    """One molecule's graph with Graphormer's structural encodings, as NumPy arrays.

    The model-ready sample: what :func:`featurize_graph` returns, what ``molsepnorm
    predict`` feeds :func:`~molsepnorm.data.collate_graphs` (which takes these and PyG
    ``Data`` alike) and what crosses process boundaries.  The same arrays as
    ``featurize(..., encodings=True)``; building the PyG ``Data`` (:meth:`to_data`) is left
    to who needs one, because PyG's per-attribute bookkeeping is a noticeable share of the
    time to featurize a molecule (``scripts/benchmark.py`` part a; figures in
    docs/benchmarks.md).
    """

    x: np.ndarray  # (N, 9) int64 "ogb" / (N, 1) "zinc"
    edge_index: np.ndarray  # (2, E) int64
    edge_attr: np.ndarray  # (E, 3) int64 "ogb" / (E,) "zinc"
    degree: np.ndarray  # (N,) int64
    spd: np.ndarray  # (N * N,) int16, row-major; UNREACHABLE = -1
    path_next: np.ndarray  # (N * N,) int16, row-major; -1 = none
    num_nodes: int
    smiles: str

    def to_data(self) -> Data:
        """The same graph as a PyG ``Data`` (tensors share the arrays' memory)."""
        import torch
        from torch_geometric.data import Data

        tensors = {name: torch.from_numpy(getattr(self, name)) for name in self._fields[:6]}
        return Data(**tensors, num_nodes=self.num_nodes, smiles=self.smiles)


def featurize(mol_or_smiles: MolInput, vocab: str = "ogb", encodings: bool = False,
              max_atoms: Optional[int] = None) -> Data:
    """The graph of one molecule.

    Args:
        mol_or_smiles: a SMILES string or an RDKit Mol (see :func:`parse_molecule`).
        vocab: ``"ogb"`` or ``"zinc"``.
        encodings: also add Graphormer's structural encodings (``degree``, ``spd``,
            ``path_next``), exactly as :func:`molsepnorm.encodings.encode` would; see
            :func:`featurize_graph`.
        max_atoms: refuse a molecule with more (heavy) atoms than this, before any
            O(N^2) work: the encodings and the model's attention grow with N^2.

    Returns:
        ``Data`` with ``num_nodes`` = N heavy atoms, E = 2 x bonds directed edges and
        ``smiles`` (the input SMILES, stripped; ``Chem.MolToSmiles`` of a Mol input, or
        ``"<RDKit Mol with N atoms>"`` where RDKit cannot write one):

        * ``"ogb"``:  ``x`` long [N, 9], ``edge_index`` long [2, E], ``edge_attr`` long [E, 3];
        * ``"zinc"``: ``x`` long [N, 1], ``edge_index`` long [2, E], ``edge_attr`` long [E].

    Raises:
        ValueError: unknown ``vocab``.
        InvalidMoleculeError: the molecule is invalid, or (``"zinc"``) has an atom or
            bond outside the vocabulary.
        TypeError: input of a wrong type.
    """
    if encodings:
        return featurize_graph(mol_or_smiles, vocab, max_atoms).to_data()
    import torch
    from torch_geometric.data import Data

    _, smiles, (x, edge_index, edge_attr) = _graph(mol_or_smiles, vocab, max_atoms)
    return Data(x=torch.from_numpy(x), edge_index=torch.from_numpy(edge_index),
                edge_attr=torch.from_numpy(edge_attr), num_nodes=x.shape[0], smiles=smiles)


def featurize_graph(mol_or_smiles: MolInput, vocab: str = "ogb", max_atoms: Optional[int] = None) -> MolGraph:
    """The model-ready sample of one molecule: its graph and structural encodings as NumPy arrays.

    Arguments, errors and array contents as :func:`featurize` with ``encodings=True``.
    In the ogb vocabulary the distances come from RDKit's distance matrix of the molecule
    (C++), faster than the graph search; the zinc graph folds hydrogens away, so its
    nodes are not the molecule's atoms and it takes the graph search.
    """
    return featurize_graph_and_mol(mol_or_smiles, vocab, max_atoms)[0]


def featurize_graph_and_mol(mol_or_smiles: MolInput, vocab: str = "ogb", max_atoms: Optional[int] = None,
                            sanitized: Optional[bool] = None) -> tuple[MolGraph, Chem.Mol]:
    """:func:`featurize_graph`'s sample and the sanitized Mol it was read from, for whoever
    also needs the molecule (a fingerprint) without parsing the input a second time;
    ``sanitized``: see :func:`~molsepnorm.chem.parse.parse_molecule`."""
    mol, smiles, (x, edge_index, edge_attr) = _graph(mol_or_smiles, vocab, max_atoms, sanitized)
    n = x.shape[0]
    distances = Chem.GetDistanceMatrix(mol) if vocab == "ogb" else None
    degree, spd, path_next = structural_encodings(edge_index, n, distances=distances)
    return MolGraph(x, edge_index, edge_attr, degree, spd, path_next, n, smiles), mol


def _graph(mol_or_smiles: MolInput, vocab: str, max_atoms: Optional[int], sanitized: Optional[bool] = None
           ) -> tuple[Chem.Mol, str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(sanitized Mol, the SMILES to show, (x, edge_index, edge_attr)) of one input."""
    _check_vocab(vocab)
    mol = parse_molecule(mol_or_smiles, sanitized)
    if max_atoms is not None and mol.GetNumAtoms() > max_atoms:
        raise InvalidMoleculeError(
            mol_or_smiles.strip() if isinstance(mol_or_smiles, str) else describe_mol(mol),
            f"too large: {mol.GetNumAtoms()} heavy atoms, more than the limit of {max_atoms} "
            "(max_atoms; memory and time grow with the square of the size)")
    if isinstance(mol_or_smiles, str):
        smiles = mol_or_smiles.strip()
        traits = smiles_traits(smiles)
    else:
        # RDKit cannot write every valid Mol as SMILES (ValueError "Too many rings open at
        # once" beyond ~2,500 open ring closures): then a description stands in for it.
        smiles = describe_mol(mol)
        traits = ANY_TRAITS
    arrays = _ogb_arrays(mol, traits) if vocab == "ogb" else _zinc_arrays(mol, smiles)
    return mol, smiles, arrays


def _check_vocab(vocab: str) -> None:
    if vocab not in VOCABS:
        raise ValueError(f"unknown vocabulary {vocab!r}; choose one of {', '.join(VOCABS)}")


def _directed(ends: np.ndarray) -> np.ndarray:
    """[B, 2] bond ends -> [2, 2B] edge_index: (i, j) then (j, i) for each bond in turn."""
    return np.ascontiguousarray(np.stack([ends, ends[:, ::-1]], axis=1).reshape(-1, 2).T)


# RDKit's GetAtoms()/GetBonds() iterators are pure-Python wrappers that re-check the size
# on every step; indexing directly is faster on molecule-sized graphs (docs/benchmarks.md).
def _atoms(mol: Chem.Mol) -> list[Chem.Atom]:
    return [mol.GetAtomWithIdx(i) for i in range(mol.GetNumAtoms())]


def _bonds(mol: Chem.Mol) -> list[Chem.Bond]:
    return [mol.GetBondWithIdx(i) for i in range(mol.GetNumBonds())]


def _ogb_arrays(mol: Chem.Mol, traits: SmilesTraits) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x [N, 9], edge_index [2, E], edge_attr [E, 3], all int64, as smiles2graph builds them."""
    try:
        return ogb_graph(mol, traits)
    except KeyError as exc:  # a value OGB's lists lack where OGB itself would fail
        raise InvalidMoleculeError(describe_mol(mol), f"outside the OGB vocabulary: {exc.args[0]}") from None


# Hydrogens to fold into their heavy atom for the zinc vocabulary: every H with a heavy
# neighbour, whatever its isotope or role in stereo; bare ones stay (and are rejected).
_FOLD_HYDROGENS = Chem.RemoveHsParameters()
_FOLD_HYDROGENS.removeIsotopes = True
_FOLD_HYDROGENS.removeDefiningBondStereo = True
_FOLD_HYDROGENS.removeWithWedgedBond = True
_FOLD_HYDROGENS.removeNontetrahedralNeighbors = True
_FOLD_HYDROGENS.removeHigherDegrees = False
_FOLD_HYDROGENS.removeOnlyHNeighbors = False
_FOLD_HYDROGENS.removeDegreeZero = False
_FOLD_HYDROGENS.showWarnings = False


def _zinc_arrays(mol: Chem.Mol, smiles: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x [N, 1], edge_index [2, E], edge_attr [E], all int64, in the ZINC vocabulary."""
    try:
        with rdBase.BlockLogs():
            if any(atom.GetAtomicNum() == 1 for atom in _atoms(mol)):
                work = Chem.RemoveHs(mol, _FOLD_HYDROGENS, sanitize=False)
                work.UpdatePropertyCache(strict=False)
            else:
                work = Chem.Mol(mol)
            Chem.Kekulize(work, clearAromaticFlags=True)
    except Exception as exc:  # RDKit raises several unrelated exception types here
        raise InvalidMoleculeError(smiles, f"cannot kekulize for the zinc vocabulary: {exc}") from exc

    atoms = _atoms(work)
    valence = [0] * len(atoms)  # sum of Kekulé bond orders per atom
    ends: list[tuple[int, int]] = []
    orders: list[int] = []
    for k, bond in enumerate(_bonds(work)):
        i, j = bond.GetBeginAtomIdx(), bond.GetEndAtomIdx()
        order = ZINC_BOND_INDEX.get(bond.GetBondType())
        if order is None:
            raise InvalidMoleculeError(
                smiles, f"bond {k} ({bond.GetBondType().name} between atoms {i} and {j}) is not in the zinc vocabulary"
            )
        valence[i] += order
        valence[j] += order
        ends.append((i, j))
        orders.append(order)

    types: list[int] = []
    for i, atom in enumerate(atoms):
        token = zinc_atom_token(atom, valence[i])
        index = ZINC_ATOM_INDEX.get(token)
        radicals = atom.GetNumRadicalElectrons()
        if index is None or radicals:
            what = f"{token}, radical with {radicals} unpaired electron{'s' * (radicals > 1)}" if radicals else token
            raise InvalidMoleculeError(smiles, f"atom {i} ({what}) is not in the zinc vocabulary")
        types.append(index)
    x = np.array(types, dtype=np.int64).reshape(-1, 1)
    edge_index = _directed(np.array(ends, dtype=np.int64).reshape(-1, 2))
    return x, edge_index, np.repeat(np.array(orders, dtype=np.int64), 2)
