"""Molecule file formats and the suffixes that name them, in one table.

Both readers of molecule files go by it: the streaming record reader
(:mod:`molsepnorm.chem.readers`: ``predict``, ``pretrain``) and ``load_dataset``
(:mod:`molsepnorm.data.registry`), so a file a model was pretrained on is a data set of
the same format for ``analyze``.  A leaf module: it imports nothing, so the registry and
the CLI can tell a format without loading RDKit or torch.
"""
from __future__ import annotations

import os
import re
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
SEPARATORS: dict[str, str] = {",": "a comma", ";": "a semicolon", "\t": "a tab"}
"""Field separators a table may really have, and their names for messages."""
ID_WORDS: tuple[str, ...] = ("id", "ids", "idx", "cid", "cas")
"""A header whose last word is one of these names identifiers (``compound_id``, ``PubChem CID``)."""
NUMBER_WORDS: tuple[str, ...] = ("index", "idx", "no", "number", "num", "#")
"""A header that is one of these alone, or after an :data:`ID_WORDS` word (``ID_number``, ``cas_no``)."""


def format_suffix(name: Union[str, os.PathLike]) -> str:
    """The lower-case suffix that names a file's format, looking through ``.gz``
    (``a/Mols.SDF.gz`` -> ``.sdf``); ``""`` when there is none."""
    path = PurePath(str(name).lower())
    if path.suffix == ".gz":
        path = PurePath(path.stem)
    return path.suffix


def output_stem(path: Union[str, os.PathLike]) -> str:
    """The file name without its format suffix (one of :data:`SUFFIXES`, and ``.gz``):
    ``a/mols.sdf.gz`` -> ``mols``, ``assay.2024`` -> ``assay.2024``, ``data/`` -> ``data``;
    what output files and run directories are named after."""
    name = os.path.basename(os.fspath(path).rstrip("/\\"))
    if name.lower().endswith(".gz"):
        name = name[:-3]
    stem, dot, suffix = name.rpartition(".")
    return stem if dot and stem and f".{suffix.lower()}" in SUFFIXES else name


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


def looks_like_id_column(column: str) -> bool:
    """Whether a column's name says it holds identifiers, not a property: split into words at
    spaces, ``_``, ``-``, ``.`` and ``/`` (any case), its last word is one of :data:`ID_WORDS`
    (``mol_id``, ``ChEMBL ID``, ``cid``), or it is one of :data:`NUMBER_WORDS` alone or after
    such a word (``index``, ``ID_number``, ``cas_no``); or it ends in ``ID`` / ``Id`` after a
    lower-case letter or digit (``CompoundID``).  Conservative: ``octane_number`` and
    ``retention_index`` are properties."""
    words = [w for w in re.split(r"[\s_\-./]+", str(column).strip().lower()) if w]
    if not words:
        return False
    if words[-1] in ID_WORDS or re.search(r"[a-z0-9](ID|Id)$", str(column).strip()):
        return True
    return words[-1] in NUMBER_WORDS and (len(words) == 1 or words[-2] in ID_WORDS)


def misread_separator(header: Sequence[str], sep: str) -> Optional[str]:
    """The separator a table read with ``sep`` really has, as its header shows: when the header
    is one column holding ``;``, a tab or a comma (not ``sep``), the one it holds most; else None."""
    if len(header) != 1:
        return None
    counts = {s: str(header[0]).count(s) for s in SEPARATORS if s != sep}
    found = max(counts, key=lambda s: counts[s])
    return found if counts[found] else None
