"""The applicability domain of a trained model: which molecules its training data covers.

A model answers for every molecule it can featurize, also for molecules unlike anything
it was trained on: a negative TPSA for 3-methylpentane, a value for uranium or a +30
charge, which OGB's "misc" buckets take in without a word.  An
:class:`ApplicabilityDomain` records what the training split looked like, and
:meth:`ApplicabilityDomain.check` names every way in which a new molecule lies outside it:

1. **Features.**  A value of a featurizer column that no training molecule had (an
   element, a formal charge, a degree, ...: every column of
   :func:`~molsepnorm.chem.featurize.feature_columns` but the two stereo columns, see
   below); any value in one of OGB's "misc" buckets, seen in training or not, since each
   lumps together every value outside OGB's list (``*``, a +30 charge, more than 10
   neighbours); a bond between two elements never bonded to each other in training
   (B-B, Sn-Sn); an element that only a handful of training molecules held (fewer than
   :data:`RARE_ELEMENT_MOLECULES` and under :data:`RARE_ELEMENT_FRACTION` of them:
   organotins in nci-tpsa, whose 3,993 training molecules hold 4 with tin), whose
   contribution the model could not have learnt.  Stereo tags (OGB's chirality and bond stereo) are not compared with the
   training data: data sets written without stereo (nci-tpsa, molhiv, MOSES) would put
   every chiral drug outside, while a tag changes no atom, bond or element, and removing
   the tags moved the bundled model's predictions by less than its test error
   (docs/applicability.md).
2. **Size.**  More heavy atoms than the largest training molecule.
3. **Similarity.**  The Tanimoto similarity of Morgan fingerprints (radius 2, 2,048 bits;
   Rogers & Hahn, J. Chem. Inf. Model. 50, 742, 2010) to the nearest molecule of a sample
   of the training split, below a threshold: the nearest-neighbour similarity that
   Sheridan et al. (J. Chem. Inf. Comput. Sci. 44, 1912, 2004) found to track the error
   of a prediction.

The trainer builds the domain from the training split (:meth:`ApplicabilityDomain.from_splits`)
and the checkpoint carries it (entry ``applicability``: plain data and tensors, as the rest
of a checkpoint).  How the default threshold was chosen, with the figures:
``docs/applicability.md``.
"""
from __future__ import annotations

import functools
import hashlib
import json
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Optional, Sequence, Union

import numpy as np
from rdkit import Chem, DataStructs, rdBase
from rdkit.Chem import rdFingerprintGenerator

from molsepnorm.chem.featurize import feature_columns, featurize_graph
from molsepnorm.chem.parse import parse_molecule
from molsepnorm.chem.zinc_vocab import mol_from_zinc_graph, parse_zinc_token

if TYPE_CHECKING:
    from molsepnorm.checkpoint.checkpoint import Checkpoint
    from molsepnorm.data.registry import DatasetSplits

__all__ = ["ApplicabilityDomain", "FingerprintSample", "DEFAULT_TANIMOTO_THRESHOLD", "DEFAULT_MAX_FINGERPRINTS",
           "RARE_ELEMENT_MOLECULES", "RARE_ELEMENT_FRACTION",
           "check_domains", "distinct_domains", "domain_warning", "graph_molecule"]

#: Nearest-neighbour Tanimoto below which a molecule is flagged (docs/applicability.md: no
#: nci-tpsa test molecule and 0.4 % of 500 MOSES drug-like molecules fall below it).
DEFAULT_TANIMOTO_THRESHOLD: float = 0.15
#: Training molecules whose fingerprints a domain keeps (a random sample beyond that).
DEFAULT_MAX_FINGERPRINTS: int = 5000
#: An element present in fewer training molecules than this is reported as rare.  The
#: elements of drug-like molecules (C, N, O, S, P, F, Cl, Br, I) are each in 40 or more of
#: nci-tpsa's 3,993 training molecules; tin in 4, cadmium in 8 (docs/applicability.md).
RARE_ELEMENT_MOLECULES: int = 10
#: ... and in under this fraction of them (a set of a few dozen molecules has every element
#: in few molecules; that is the whole data set, not a rarity).
RARE_ELEMENT_FRACTION: float = 0.005
FINGERPRINT_RADIUS: int = 2
FINGERPRINT_BITS: int = 2048
PAYLOAD_VERSION: int = 1
_BLOCK = 64  # fingerprints compared per call while a search may still stop early
_MISC = "misc"
# columns whose unseen values are not reported (their "misc" bucket still is): see the module docstring
_STEREO_COLUMNS = frozenset({"chirality", "bond stereo"})
_MAX_Z = 128  # element codes: atomic numbers 1..118, 0 for "*" / OGB's misc bucket

MolOrGraph = Union[str, Chem.Mol, Any]  # a SMILES, an RDKit Mol, or a featurized graph (MolGraph / PyG Data)


@functools.lru_cache(maxsize=None)
def _generator(radius: int, bits: int) -> Any:
    return rdFingerprintGenerator.GetMorganGenerator(radius=radius, fpSize=bits)


@dataclass(eq=False)
class FingerprintSample:
    """Morgan fingerprints of a sample of training molecules, kept sparse.

    A 2,048-bit Morgan fingerprint of a small molecule sets a few dozen bits (25 on average
    over nci-tpsa), so the indices of its set bits, as int16, take a fifth of the 256 bytes
    of the packed bits: the checkpoint stays small.

    Attributes:
        on_bits: int16 ``(sum of set bits,)``: the set bits of every fingerprint in turn.
        offsets: int64 ``(K + 1,)``: fingerprint ``k`` is ``on_bits[offsets[k]:offsets[k + 1]]``.
        radius, bits: of the Morgan fingerprint.
    """

    on_bits: np.ndarray
    offsets: np.ndarray
    radius: int = FINGERPRINT_RADIUS
    bits: int = FINGERPRINT_BITS
    _reference: Optional[list] = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def from_mols(cls, mols: Iterable[Chem.Mol], radius: int = FINGERPRINT_RADIUS,
                  bits: int = FINGERPRINT_BITS) -> "FingerprintSample":
        """The fingerprints of ``mols`` (sanitized RDKit Mols)."""
        generator = _generator(radius, bits)
        parts = [np.asarray(list(generator.GetFingerprint(m).GetOnBits()), dtype=np.int16) for m in mols]
        offsets = np.zeros(len(parts) + 1, dtype=np.int64)
        offsets[1:] = np.cumsum([len(p) for p in parts])
        on_bits = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int16)
        return cls(on_bits, offsets, int(radius), int(bits))

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def fingerprint(self, mol: Chem.Mol) -> Any:
        """The Morgan fingerprint (RDKit ``ExplicitBitVect``) of ``mol``, as the sample's."""
        return _generator(self.radius, self.bits).GetFingerprint(mol)

    def nearest(self, mol: Chem.Mol, stop_at: Optional[float] = None) -> float:
        """The largest Tanimoto similarity of ``mol`` to a molecule of the sample (0 for none).

        With ``stop_at``, the search (RDKit's ``BulkTanimotoSimilarity``, one block of
        :data:`_BLOCK` fingerprints at a time) ends at the first block holding a similarity
        of at least ``stop_at``, and returns that block's best: exactly whether the nearest
        molecule reaches ``stop_at``, and the nearest's similarity when it does not.  An
        ordinary molecule is decided in the first block or two (figures:
        docs/applicability.md).
        """
        if self._reference is None:
            vectors = [self._bitvect(k) for k in range(len(self))]
            self._reference = [vectors[i:i + _BLOCK] for i in range(0, len(vectors), _BLOCK)]
        fingerprint = self.fingerprint(mol)
        best = 0.0
        for block in self._reference:
            best = max(best, max(DataStructs.BulkTanimotoSimilarity(fingerprint, block)))
            if stop_at is not None and best >= stop_at:
                break
        return float(best)

    def _bitvect(self, k: int) -> Any:
        vector = DataStructs.ExplicitBitVect(self.bits)
        vector.SetBitsFromList(self.on_bits[self.offsets[k]:self.offsets[k + 1]].tolist())
        return vector

    def __getstate__(self) -> dict[str, Any]:  # to worker processes: the arrays, not the RDKit vectors
        return {**self.__dict__, "_reference": None}

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, FingerprintSample) and (self.radius, self.bits) == (other.radius, other.bits)
                and np.array_equal(self.offsets, other.offsets) and np.array_equal(self.on_bits, other.on_bits))

    def to_payload(self) -> dict[str, Any]:
        import torch  # here only: predict's featurizing workers check molecules without torch

        return {"radius": self.radius, "bits": self.bits, "on_bits": torch.from_numpy(self.on_bits.copy()),
                "offsets": torch.from_numpy(self.offsets.copy())}

    @classmethod
    def from_payload(cls, data: Mapping[str, Any]) -> "FingerprintSample":
        return cls(np.asarray(data["on_bits"], dtype=np.int16), np.asarray(data["offsets"], dtype=np.int64),
                   int(data["radius"]), int(data["bits"]))


@dataclass
class ApplicabilityDomain:
    """What a model's training molecules looked like; :meth:`check` says how a molecule differs.

    Attributes:
        vocab: the featurizer vocabulary (``"ogb"`` / ``"zinc"``) the values index.
        atom_values, bond_values: per column of ``x`` / ``edge_attr``, the indices that
            occur in the training split.
        element_pairs: ``(Z1, Z2)``, ``Z1 <= Z2``, of every bond in the training split
            (0 stands for ``*`` and OGB's misc element).
        max_atoms: heavy atoms of the largest training molecule.
        num_molecules: molecules of the training split.
        fingerprints: a sample of the training molecules' fingerprints; None where the
            training data carried no molecules to take them from (no similarity check).
        tanimoto_threshold: nearest-neighbour similarity below which a molecule is flagged.
        element_molecules: atomic number (0 for ``*`` / misc) -> training molecules holding
            that element; None in domains written before it was recorded (no rarity check).
    """

    vocab: str
    atom_values: tuple[frozenset[int], ...]
    bond_values: tuple[frozenset[int], ...]
    element_pairs: frozenset[tuple[int, int]]
    max_atoms: int
    num_molecules: int
    fingerprints: Optional[FingerprintSample] = None
    tanimoto_threshold: float = DEFAULT_TANIMOTO_THRESHOLD
    element_molecules: Optional[dict[int, int]] = None
    _tables: Optional[tuple] = field(default=None, init=False, repr=False, compare=False)
    _digest: Optional[str] = field(default=None, init=False, repr=False, compare=False)

    # --- building -------------------------------------------------------------------------
    @classmethod
    def from_graphs(cls, graphs: Sequence[Any], vocab: str, smiles: Optional[Sequence[Optional[str]]] = None,
                    max_fingerprints: int = DEFAULT_MAX_FINGERPRINTS,
                    tanimoto_threshold: float = DEFAULT_TANIMOTO_THRESHOLD, seed: int = 0) -> "ApplicabilityDomain":
        """The domain of the training graphs ``graphs``.

        Args:
            graphs: featurized training molecules (PyG ``Data`` or
                :class:`~molsepnorm.chem.MolGraph`: ``x`` ``(N, C)``, ``edge_index``
                ``(2, E)``, ``edge_attr`` ``(E, C')`` or ``(E,)``), in ``vocab``.
            smiles: the SMILES of each graph, for the fingerprints; without them the
                molecules come from the graph's own ``smiles``, or (zinc) are rebuilt from
                the graph; an ogb graph with neither gives no fingerprint.
            max_fingerprints: fingerprints kept at most (a random sample drawn with
                ``seed`` from its own generator: the global random state is untouched).
        """
        columns = feature_columns(vocab)
        atoms: list[np.ndarray] = []
        bonds: list[np.ndarray] = []
        pairs: set[tuple[int, int]] = set()
        element = _element_table(vocab)
        max_atoms = 0
        element_molecules = np.zeros(_MAX_Z, dtype=np.int64)
        for graph in graphs:
            x, edge_index, edge_attr = _arrays(graph)
            atoms.append(x)
            bonds.append(edge_attr)
            max_atoms = max(max_atoms, x.shape[0])
            pairs.update(_pairs(element[x[:, 0]], edge_index))
            element_molecules[np.unique(element[x[:, 0]])] += 1
        if not atoms:
            raise ValueError("an applicability domain needs at least one training molecule")
        x_all, e_all = np.concatenate(atoms), np.concatenate(bonds)
        atom_values = tuple(frozenset(np.unique(x_all[:, c]).tolist()) for c in range(len(columns["atom"])))
        bond_values = tuple(frozenset(np.unique(e_all[:, c]).tolist()) for c in range(len(columns["bond"])))

        n = len(atoms)
        rng = np.random.default_rng(seed)
        sample = np.sort(rng.choice(n, max_fingerprints, replace=False)) if n > max_fingerprints else np.arange(n)
        mols = [m for m in (graph_molecule(graphs[int(i)], vocab, None if smiles is None else smiles[int(i)])
                            for i in sample) if m is not None]
        fingerprints = FingerprintSample.from_mols(mols) if mols else None
        return cls(vocab, atom_values, bond_values, frozenset(pairs), int(max_atoms), n, fingerprints,
                   float(tanimoto_threshold),
                   {int(z): int(c) for z, c in enumerate(element_molecules.tolist()) if c})

    @classmethod
    def from_smiles(cls, smiles: Sequence[str], vocab: str = "ogb", **options: Any) -> "ApplicabilityDomain":
        """The domain of training molecules given as SMILES (options as :meth:`from_graphs`).

        Raises:
            InvalidMoleculeError: a SMILES that cannot be featurized.
        """
        graphs = [featurize_graph(s, vocab) for s in smiles]
        return cls.from_graphs(graphs, vocab, smiles=list(smiles), **options)

    @classmethod
    def from_splits(cls, splits: "DatasetSplits", split: str = "train", **options: Any) -> "ApplicabilityDomain":
        """The domain of one split (the training split) of a data set, with its SMILES where
        the data set has them (options as :meth:`from_graphs`)."""
        graphs = splits[split]  # raises KeyError naming the splits for an unknown one
        return cls.from_graphs(graphs, splits.vocab, smiles=splits.smiles_of(split), **options)

    # --- checking -------------------------------------------------------------------------
    def check(self, molecule: MolOrGraph, mol: Optional[Chem.Mol] = None) -> str:
        """Why ``molecule`` lies outside this domain: the reasons joined with ``"; "``, or ``""``.

        Args:
            molecule: a SMILES or an RDKit Mol (featurized here, in :attr:`vocab`), or the
                molecule's featurized graph (``MolGraph`` or PyG ``Data``).
            mol: for a graph, its molecule (for the fingerprint); else the graph's
                ``smiles`` is parsed, or a ZINC graph's molecule rebuilt
                (:func:`graph_molecule`); another graph without one is not compared by similarity.

        Raises:
            InvalidMoleculeError: a SMILES or Mol that cannot be featurized.
        """
        return "; ".join(self.reasons(molecule, mol))

    def reasons(self, molecule: MolOrGraph, mol: Optional[Chem.Mol] = None) -> list[str]:
        """The reasons of :meth:`check`, one string each, in the order features, size, similarity."""
        if isinstance(molecule, (str, Chem.Mol)):
            mol = parse_molecule(molecule)
            graph = featurize_graph(mol if isinstance(molecule, Chem.Mol) else molecule, self.vocab)
        else:
            graph = molecule
        x, edge_index, edge_attr = _arrays(graph)
        reasons = self._feature_reasons(x, edge_index, edge_attr)
        if x.shape[0] > self.max_atoms:
            reasons.append(f"larger than any training molecule: {x.shape[0]} heavy atoms > {self.max_atoms}")
        if self.fingerprints is not None and len(self.fingerprints):
            if mol is None:
                mol = graph_molecule(graph, self.vocab)
            if mol is not None:
                similarity = self.fingerprints.nearest(mol, stop_at=self.tanimoto_threshold)
                if similarity < self.tanimoto_threshold:
                    reasons.append(f"nearest training molecule Tanimoto {_below(similarity, self.tanimoto_threshold)}")
        return reasons

    def _feature_reasons(self, x: np.ndarray, edge_index: np.ndarray, edge_attr: np.ndarray) -> list[str]:
        """Unseen values, misc buckets and unseen bonded element pairs (a lookup per value;
        the message is built only for a molecule that has one)."""
        atom_flags, bond_flags, pair_seen, element = self._lookup_tables()
        a = atom_flags[np.arange(x.shape[1]), x] if x.size else np.zeros((0, 0), dtype=np.int8)
        b = bond_flags[np.arange(edge_attr.shape[1]), edge_attr] if edge_attr.size else np.zeros((0, 0), np.int8)
        z = element[x[:, 0]] if x.size else np.zeros(0, dtype=np.int64)
        codes = _pair_codes(z, edge_index)
        new_pairs = codes[~pair_seen[codes]] if codes.size else codes
        rare = self._rare_elements(z)
        if not a.any() and not b.any() and not new_pairs.size and not rare:
            return []
        columns = feature_columns(self.vocab)
        unseen: list[str] = []
        misc: list[str] = []
        for kind, flags, values in (("atom", a, x), ("bond", b, edge_attr)):
            for c, (name, allowed) in enumerate(columns[kind]):
                if flags.size == 0 or not flags[:, c].any():
                    continue
                if (flags[:, c] == 2).any():
                    misc.append(name)
                for v in sorted(set(values[flags[:, c] == 1, c].tolist())):
                    unseen.append(_describe(name, allowed[v]))
        reasons = []
        if unseen:
            reasons.append("not seen in training: " + ", ".join(unseen))
        if misc:
            reasons.append("outside OGB's feature lists (its 'misc' bucket): " + ", ".join(misc))
        if new_pairs.size:
            shown = [f"{_symbol(int(c) // _MAX_Z)}-{_symbol(int(c) % _MAX_Z)}" for c in np.unique(new_pairs)]
            reasons.append("bond between elements never bonded in training: " + ", ".join(shown))
        if rare:
            reasons.append("rare in training: " + ", ".join(
                f"element {_symbol(e)} in {self.element_molecules[e]:,} of {self.num_molecules:,} molecules"
                for e in rare))
        return reasons

    def _rare_elements(self, z: np.ndarray) -> list[int]:
        """Atomic numbers in ``z`` held by at least one training molecule but fewer than
        RARE_ELEMENT_MOLECULES and RARE_ELEMENT_FRACTION of them (an element held by none is
        reported as never seen)."""
        if not self.element_molecules or not z.size:
            return []
        limit = min(RARE_ELEMENT_MOLECULES, RARE_ELEMENT_FRACTION * self.num_molecules)
        counts = self.element_molecules
        return [e for e in np.unique(z).tolist() if e and 0 < counts.get(e, 0) < limit]

    def _lookup_tables(self) -> tuple:
        """``(atom flags (C, V), bond flags (C', V'), seen pair codes (128 * 128,), element of
        an atom index)``; flags: 0 seen, 1 never seen, 2 a misc bucket."""
        if self._tables is None:
            columns = feature_columns(self.vocab)
            tables = []
            for kind, seen in (("atom", self.atom_values), ("bond", self.bond_values)):
                width = max(len(values) for _, values in columns[kind])
                flags = np.ones((len(columns[kind]), width), dtype=np.int8)
                for c, (name, values) in enumerate(columns[kind]):
                    flags[c, sorted(v for v in seen[c] if v < width)] = 0
                    if name in _STEREO_COLUMNS:
                        flags[c] = 0
                    if values[-1] == _MISC:
                        flags[c, len(values) - 1] = 2
                tables.append(flags)
            pair_seen = np.zeros(_MAX_Z * _MAX_Z, dtype=bool)
            pair_seen[[a * _MAX_Z + b for a, b in self.element_pairs]] = True
            self._tables = (*tables, pair_seen, _element_table(self.vocab))
        return self._tables

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_tables": None, "_digest": None}

    # --- the checkpoint entry -------------------------------------------------------------
    def to_payload(self) -> dict[str, Any]:
        """The plain dict a checkpoint stores (lists, numbers, tensors)."""
        return {
            "version": PAYLOAD_VERSION,
            "vocab": self.vocab,
            "atom_values": [sorted(v) for v in self.atom_values],
            "bond_values": [sorted(v) for v in self.bond_values],
            "element_pairs": [list(p) for p in sorted(self.element_pairs)],
            "max_atoms": self.max_atoms,
            "num_molecules": self.num_molecules,
            "fingerprints": self.fingerprints.to_payload() if self.fingerprints is not None else None,
            "tanimoto_threshold": self.tanimoto_threshold,
            "element_molecules": (None if self.element_molecules is None
                                  else [[z, c] for z, c in sorted(self.element_molecules.items())]),
        }

    @classmethod
    def from_payload(cls, data: Mapping[str, Any]) -> "ApplicabilityDomain":
        """The domain of a checkpoint's ``applicability`` entry.

        Raises:
            ValueError: an entry of a later version than this molsepnorm reads.
        """
        version = int(data.get("version", 1))
        if version > PAYLOAD_VERSION:
            raise ValueError(f"applicability data of version {version}; this molsepnorm reads {PAYLOAD_VERSION}")
        fingerprints = data.get("fingerprints")
        return cls(
            vocab=str(data["vocab"]),
            atom_values=tuple(frozenset(int(v) for v in vs) for vs in data["atom_values"]),
            bond_values=tuple(frozenset(int(v) for v in vs) for vs in data["bond_values"]),
            element_pairs=frozenset((int(a), int(b)) for a, b in data["element_pairs"]),
            max_atoms=int(data["max_atoms"]),
            num_molecules=int(data["num_molecules"]),
            fingerprints=FingerprintSample.from_payload(fingerprints) if fingerprints else None,
            tanimoto_threshold=float(data["tanimoto_threshold"]),
            element_molecules=({int(z): int(c) for z, c in data["element_molecules"]}
                               if data.get("element_molecules") is not None else None),
        )

    def digest(self) -> str:
        """A sha256 of the domain's content: equal for the domains of one training split."""
        if self._digest is None:
            payload = self.to_payload()
            fingerprints = payload.pop("fingerprints")
            h = hashlib.sha256(json.dumps(payload, sort_keys=True).encode())
            if fingerprints is not None:
                for key in ("radius", "bits"):
                    h.update(str(fingerprints[key]).encode())
                h.update(self.fingerprints.on_bits.tobytes())
                h.update(self.fingerprints.offsets.tobytes())
            self._digest = h.hexdigest()
        return self._digest

    def summary(self) -> str:
        """One line: what the domain holds."""
        fps = f"{len(self.fingerprints):,} fingerprints" if self.fingerprints is not None else "no fingerprints"
        return (f"applicability domain of {self.num_molecules:,} training molecules ({self.vocab}): up to "
                f"{self.max_atoms} heavy atoms, {len(self.element_pairs)} bonded element pairs, {fps}, "
                f"Tanimoto threshold {self.tanimoto_threshold:g}")


def distinct_domains(checkpoints: Sequence["Checkpoint"], stacklevel: int = 2) -> list[ApplicabilityDomain]:
    """The distinct applicability domains of an ensemble's checkpoints (members trained on
    one split share one).  A trained model without one (its checkpoint predates them) is
    noted once in a ``UserWarning``: its molecules get no warning; a pretrained encoder has
    none and needs none (it was trained on no labelled split)."""
    from molsepnorm.checkpoint.checkpoint import PRETRAINED

    domains: list[ApplicabilityDomain] = []
    for checkpoint in checkpoints:
        domain = checkpoint.applicability
        if domain is None and checkpoint.task.type == PRETRAINED:
            continue
        if domain is None:
            warnings.warn(f"{checkpoint.name}: the model carries no applicability data (its checkpoint predates "
                          "it): its predictions get no warning", UserWarning, stacklevel=stacklevel + 1)
        elif all(domain.digest() != d.digest() for d in domains):
            domains.append(domain)
    return domains


def check_domains(domains: Sequence[ApplicabilityDomain], molecule: MolOrGraph,
                  mol: Optional[Chem.Mol] = None) -> str:
    """The reasons of every domain (an ensemble's models), each once, joined with ``"; "``."""
    reasons: list[str] = []
    for domain in domains:
        reasons.extend(r for r in domain.reasons(molecule, mol) if r not in reasons)
    return "; ".join(reasons)


def domain_warning(domains: Sequence[ApplicabilityDomain], graph: Any, mol: Optional[Chem.Mol] = None) -> str:
    """:func:`check_domains` for a molecule already predicted: a check that fails says so
    (``"applicability not checked: ..."``) instead of raising, since the prediction stands."""
    if not domains:
        return ""
    try:
        return check_domains(domains, graph, mol)
    except Exception as exc:  # noqa: BLE001 - one odd molecule must not end a run of millions
        return f"applicability not checked: {type(exc).__name__}: {exc}"


# --- helpers -------------------------------------------------------------------------------


def _arrays(graph: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``x`` ``(N, C)``, ``edge_index`` ``(2, E)``, ``edge_attr`` ``(E, C')`` as int64 NumPy arrays."""
    x = np.asarray(graph.x, dtype=np.int64)
    edge_index = np.asarray(graph.edge_index, dtype=np.int64).reshape(2, -1)
    edge_attr = np.asarray(graph.edge_attr, dtype=np.int64)
    return (x[:, None] if x.ndim == 1 else x), edge_index, (edge_attr[:, None] if edge_attr.ndim == 1 else edge_attr)


@functools.lru_cache(maxsize=None)
def _element_table(vocab: str) -> np.ndarray:
    """Atomic number (0 for ``*`` / misc) of each value of the first atom column."""
    name, values = feature_columns(vocab)["atom"][0]
    if vocab == "zinc":
        table = _PERIODIC.GetAtomicNumber
        return np.asarray([table(parse_zinc_token(token)[0]) for token in values], dtype=np.int64)
    return np.asarray([v if isinstance(v, int) and 0 < v < _MAX_Z else 0 for v in values], dtype=np.int64)


_PERIODIC = Chem.GetPeriodicTable()


def _symbol(z: int) -> str:
    return "*" if z == 0 else _PERIODIC.GetElementSymbol(z)


def _pair_codes(z: np.ndarray, edge_index: np.ndarray) -> np.ndarray:
    """``Z_low * 128 + Z_high`` of every edge."""
    if edge_index.shape[1] == 0:
        return np.zeros(0, dtype=np.int64)
    a, b = z[edge_index[0]], z[edge_index[1]]
    return np.minimum(a, b) * _MAX_Z + np.maximum(a, b)


def _pairs(z: np.ndarray, edge_index: np.ndarray) -> set[tuple[int, int]]:
    return {(int(c) // _MAX_Z, int(c) % _MAX_Z) for c in np.unique(_pair_codes(z, edge_index))}


def _describe(column: str, value: Any) -> str:
    if column == "atomic number" and isinstance(value, int):
        return f"element {_symbol(value)}"
    if column == "formal charge" and isinstance(value, int):
        return f"formal charge {value:+d}"
    return f"{column} {value}"


def _below(value: float, threshold: float) -> str:
    """``"0.12 < 0.15"``, with a third decimal where two would show equal numbers."""
    for digits in (2, 3, 4):
        shown = f"{value:.{digits}f} < {threshold:.{digits}f}"
        if f"{value:.{digits}f}" != f"{threshold:.{digits}f}":
            return shown
    return shown


def _mol_of_smiles(smiles: Optional[str]) -> Optional[Chem.Mol]:
    if not smiles or smiles.startswith("<"):  # "<RDKit Mol with N atoms>": no SMILES to parse
        return None
    with rdBase.BlockLogs():
        return Chem.MolFromSmiles(smiles)


def graph_molecule(graph: Any, vocab: str, smiles: Optional[str] = None) -> Optional[Chem.Mol]:
    """The molecule of a featurized graph, for its fingerprint (None where there is none):
    ``smiles`` when given, else the graph's own SMILES, else (zinc) rebuilt from the graph."""
    mol = _mol_of_smiles(smiles)
    if mol is not None:
        return mol
    mol = _mol_of_smiles(getattr(graph, "smiles", None))
    if mol is not None or vocab != "zinc":
        return mol
    x, edge_index, edge_attr = _arrays(graph)
    try:
        with rdBase.BlockLogs():
            return mol_from_zinc_graph(x[:, 0], zip(edge_index[0], edge_index[1], edge_attr[:, 0]))
    except Exception:  # noqa: BLE001 - a graph RDKit cannot sanitize is only not compared by similarity
        return None
