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
from typing import Optional, Union

FORMATS: tuple[str, ...] = ("smi", "csv", "tsv", "sdf")
SUFFIXES: dict[str, str] = {
    ".smi": "smi", ".smiles": "smi", ".ism": "smi", ".can": "smi", ".txt": "smi",
    ".csv": "csv",
    ".tsv": "tsv", ".tab": "tsv",
    ".sdf": "sdf", ".sd": "sdf", ".mol": "sdf",
}
"""File suffix (lower case) -> format; a ``.gz`` after any of them is looked through."""
ID_COLUMNS: tuple[str, ...] = ("id", "name")
"""A CSV / TSV's id column when none is named: the first header matching one of these (any case)."""


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
