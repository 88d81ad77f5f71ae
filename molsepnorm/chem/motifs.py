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
"""
from __future__ import annotations

from functools import lru_cache
from typing import Callable, Union

import numpy as np
from rdkit import Chem


@lru_cache(maxsize=1)
def _patterns() -> tuple[tuple[str, Callable[[Chem.Mol], int]], ...]:
    from rdkit.Chem import Fragments

    return tuple(Fragments.fns)


def motif_names() -> list[str]:
    """The names of the counted patterns, in the order of :func:`motif_counts` (``fr_C_O``, ...)."""
    return [name for name, _ in _patterns()]


def motif_counts(molecule: Union[str, Chem.Mol]) -> np.ndarray:
    """How often each of RDKit's fragment patterns occurs in the molecule: (M,) float32.

    ``molecule`` is a SMILES string or an RDKit Mol.  A SMILES that RDKit cannot read (such
    as the placeholder a featurized Mol without a SMILES carries) gives NaN everywhere:
    the loss leaves such a molecule out rather than teaching it zero counts.
    """
    mol = Chem.MolFromSmiles(molecule) if isinstance(molecule, str) else molecule
    if mol is None:
        return np.full(len(_patterns()), np.nan, dtype=np.float32)
    return np.array([count(mol) for _, count in _patterns()], dtype=np.float32)
