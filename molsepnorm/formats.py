"""Molecule file formats and the suffixes that name them, in one table.

Both readers of molecule files go by it: the streaming record reader
(:mod:`molsepnorm.chem.readers`: ``predict``, ``pretrain``) and ``load_dataset``
(:mod:`molsepnorm.data.registry`), so a file a model was pretrained on is a data set of
the same format for ``analyze``.  A leaf module: it imports nothing, so the registry and
the CLI can tell a format without loading RDKit or torch.
"""
from __future__ import annotations

import os
from pathlib import PurePath
from typing import Iterable, Optional, Sequence, Union

FORMATS: tuple[str, ...] = ("smi", "csv", "tsv", "sdf")
SUFFIXES: dict[str, str] = {
    ".smi": "smi", ".smiles": "smi", ".ism": "smi", ".can": "smi", ".txt": "smi",
    ".csv": "csv",
    ".tsv": "tsv", ".tab": "tsv",
    ".sdf": "sdf", ".sd": "sdf", ".mol": "sdf",
}
"""File suffix (lower case) -> format; a ``.gz`` after any of them is looked through."""
ID_COLUMNS: tuple[str, ...] = ("id", "name")
"""A CSV / TSV's id column when none is named: the column named ``id``, else ``name`` (any case)."""


def format_suffix(name: Union[str, os.PathLike]) -> str:
    """The lower-case suffix that names a file's format, looking through ``.gz``
    (``a/Mols.SDF.gz`` -> ``.sdf``); ``""`` when there is none."""
    path = PurePath(str(name).lower())
    if path.suffix == ".gz":
        path = PurePath(path.stem)
    return path.suffix


def file_format(name: Union[str, os.PathLike]) -> Optional[str]:
    """The format (``smi`` / ``csv`` / ``tsv`` / ``sdf``) a file's suffix names, else None."""
    return SUFFIXES.get(format_suffix(name))


def _folded(header: Sequence[str]) -> list[str]:
    return [str(name).strip().lower() for name in header]


def names_smiles(column: str) -> bool:
    """Whether a column's name says it holds SMILES: it contains "smiles", in any case."""
    return "smiles" in str(column).lower()


def default_smiles_column(header: Sequence[str]) -> Optional[int]:
    """The position of a table's SMILES column when none is named: the column named
    ``smiles`` (any case, spaces around ignored), else the first whose name contains
    "smiles" (``canonical_smiles``, :func:`names_smiles`); None when no column is named so."""
    folded = _folded(header)
    if "smiles" in folded:
        return folded.index("smiles")
    return next((i for i, name in enumerate(header) if names_smiles(name)), None)


def default_id_column(header: Sequence[str], taken: Iterable[Optional[int]] = ()) -> Optional[int]:
    """The position of a table's id column when none is named: the column named ``id``, else
    ``name`` (:data:`ID_COLUMNS`, any case), leaving out the positions ``taken`` (the SMILES,
    split and target columns); None when there is none."""
    skip = set(taken)
    folded = _folded(header)
    for wanted in ID_COLUMNS:
        for i, name in enumerate(folded):
            if name == wanted and i not in skip:
                return i
    return None
