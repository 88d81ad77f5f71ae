"""RDKit's 2D descriptors of a molecule: graph-level targets of descriptor pretraining.

ChemBERTa-2 (Ahmad et al. 2022) pretrains on *multitask regression* (MTR): the readout
predicts a molecule's RDKit 2D descriptors, each standardized, and found that it
fine-tunes better than masked-token pretraining; MolBERT (Fabian et al. 2020) adds the
same task (``PhysChemPred``).  The descriptors are computed from the structure alone: no
measured label enters.

Left out, so that no pretraining target *is* a property a data set of this project asks
for (nor a piece of one): the functional-group counts (``fr_*``, already the motif
targets, :mod:`molsepnorm.chem.motifs`), Crippen's logP and molar refractivity and the
surface areas binned by their atom contributions (``MolLogP``, ``MolMR``, ``SlogP_VSA*``,
``SMR_VSA*``), TPSA, QED (built on logP and polar surface), and ``Ipc`` (which grows
exponentially with the molecule's size; ``AvgIpc`` stays).  What remains are counts of
atoms, bonds, rings and hydrogen-bond donors and acceptors, weights, topological indices
(Chi, Kappa, Balaban, Bertz), E-state and partial-charge summaries and their binned
surface areas, BCUT and fingerprint densities.  The list is RDKit's and changes between
its releases (a pretraining run records it, and its resume checks it).

Values are returned as ``sign(v) * log(1 + |v|)``: the descriptors span orders of
magnitude (partial charges are fractions of an electron, molecular weights hundreds of
daltons), and the pretraining head standardizes them further with a reference sample's
mean and spread (:class:`molsepnorm.pretrain.objectives.PretextModel`).
"""
from __future__ import annotations

from functools import lru_cache
from typing import Callable, Union

import numpy as np
from rdkit import Chem

#: Descriptor name prefixes left out (see the module docstring).
EXCLUDED_PREFIXES = ("fr_", "MolLogP", "MolMR", "SlogP_VSA", "SMR_VSA", "TPSA", "qed", "Ipc")


@lru_cache(maxsize=1)
def _descriptors() -> tuple[tuple[str, Callable[[Chem.Mol], float]], ...]:
    from rdkit.Chem import Descriptors

    return tuple((name, fn) for name, fn in Descriptors._descList if not name.startswith(EXCLUDED_PREFIXES))


def descriptor_names() -> list[str]:
    """The names of the descriptors, in the order of :func:`descriptor_values`."""
    return [name for name, _ in _descriptors()]


def descriptor_values(molecule: Union[str, Chem.Mol, None]) -> np.ndarray:
    """The molecule's descriptors as ``sign(v) * log(1 + |v|)``: (K,) float32.

    A SMILES RDKit cannot read gives NaN everywhere, and a descriptor RDKit cannot compute
    for this molecule (an error, NaN or infinity; Gasteiger charges of some elements) gives
    NaN in its place: the loss leaves those entries out rather than teaching a made-up value.
    """
    mol = Chem.MolFromSmiles(molecule) if isinstance(molecule, str) else molecule
    found = np.full(len(_descriptors()), np.nan, dtype=np.float64)
    if mol is None:
        return found.astype(np.float32)
    for k, (_, fn) in enumerate(_descriptors()):
        try:
            found[k] = float(fn(mol))
        except Exception:  # RDKit raises assorted errors on exotic molecules; NaN leaves the entry out
            continue
    found[~np.isfinite(found)] = np.nan
    return (np.sign(found) * np.log1p(np.abs(found))).astype(np.float32)
