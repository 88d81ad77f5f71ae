"""Functional-group counts of a molecule: the graph-level targets of motif pretraining.

GROVER (Rong et al., "Self-Supervised Graph Transformer on Large-Scale Molecular Data",
NeurIPS 2020) pretrains the graph-level readout to predict which functional groups
("semantic motifs") a molecule has, found by RDKit's fragment patterns; no label is
needed.  Here the targets are the *counts* of RDKit's 85 fragment patterns
(``rdkit.Chem.Fragments``, the ``fr_*`` descriptors: carboxylic acids, amides, phenols,
halogens, nitro groups, ...), so that the readout learns to count, which is what a property
built up from group or atom contributions needs.  The patterns are RDKit's own
(``FragmentDescriptors.csv`` in ``RDConfig.RDDataDir``); none of them is a molecular
property such as TPSA or logP.

Optionally the targets also count the molecule's **atom environments**: each atom alone
and with its bonded neighbours (Morgan / ECFP environments of radius 0 and 1, Rogers &
Hahn 2010), hashed into a fixed number of buckets.  A property built from atom or group
contributions is a linear function of such counts, so a readout that can count them is
one a fine-tuning head can read the property from.  They are structure only, no property.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable, Union

import numpy as np
from rdkit import Chem


@lru_cache(maxsize=1)
def _patterns() -> tuple[tuple[str, Callable[[Chem.Mol], int]], ...]:
    from rdkit.Chem import Fragments

    return tuple(Fragments.fns)


def motif_names() -> list[str]:
    """The names of the counted patterns, in the order of :func:`motif_counts` (``fr_C_O``, ...)."""
    return [name for name, _ in _patterns()]


@lru_cache(maxsize=8)
def _environment_generator(buckets: int) -> Any:
    from rdkit.Chem import rdFingerprintGenerator

    return rdFingerprintGenerator.GetMorganGenerator(radius=1, fpSize=buckets)


def motif_targets(molecule: Union[str, Chem.Mol], environments: int = 0) -> np.ndarray:
    """The graph-level pretraining targets: :func:`motif_counts` followed, when
    ``environments`` > 0, by the counts of the molecule's radius-0 and radius-1 atom
    environments hashed into that many buckets: (M + environments,) float32, NaN
    everywhere for a SMILES RDKit cannot read."""
    mol = Chem.MolFromSmiles(molecule) if isinstance(molecule, str) else molecule
    counts = motif_counts(mol)
    if environments <= 0:
        return counts
    if mol is None:
        return np.concatenate([counts, np.full(environments, np.nan, dtype=np.float32)])
    found = _environment_generator(environments).GetCountFingerprintAsNumPy(mol).astype(np.float32)
    return np.concatenate([counts, found])


def motif_counts(molecule: Union[str, Chem.Mol, None]) -> np.ndarray:
    """How often each of RDKit's fragment patterns occurs in the molecule: (M,) float32.

    ``molecule`` is a SMILES string or an RDKit Mol.  A SMILES that RDKit cannot read (such
    as the placeholder a featurized Mol without a SMILES carries) gives NaN everywhere:
    the loss leaves such a molecule out rather than teaching it zero counts.
    """
    mol = Chem.MolFromSmiles(molecule) if isinstance(molecule, str) else molecule
    if mol is None:
        return np.full(len(_patterns()), np.nan, dtype=np.float32)
    return np.array([count(mol) for _, count in _patterns()], dtype=np.float32)
