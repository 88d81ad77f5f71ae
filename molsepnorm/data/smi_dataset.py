"""A ``.smi`` file of unlabelled molecules as a split :class:`DatasetSplits`.

``SMILES [name]`` per line (a first line ``SMILES ...`` is a header, skipped), optionally
gzipped: the format ``predict`` and ``pretrain`` read, through the same reader
(:class:`~molsepnorm.chem.readers.RecordReader`), so a line is numbered and named alike
everywhere.  The molecules carry no targets: the data
set's ``task`` is ``"unlabelled"``, for what needs molecules only (``analyze`` of a model's
embeddings on a user's own molecules, or of an encoder on the ``.smi`` corpus it was
pretrained on).  Featurizing, caching, ``on_invalid`` and the random / scaffold split are
:func:`~molsepnorm.data.labelled.load_rows`'s, as for CSV and SDF files.

>>> splits = load_smi("my_molecules.smi")          # 80 / 10 / 10 random split
>>> splits.task, len(splits.test), splits.ids[:2]
('unlabelled', 42, ['aspirin', 'caffeine'])
"""
from __future__ import annotations

from typing import Optional, Sequence, Union

import numpy as np

from molsepnorm.chem.readers import RecordReader
from molsepnorm.data.cache import file_sha256
from molsepnorm.data.labelled import LabelledRows, check_options, data_file, load_rows, parse_split
from molsepnorm.data.paths import PathLike
from molsepnorm.data.registry import DatasetSplits
from molsepnorm.data.splits import DEFAULT_SIZES
from molsepnorm.errors import DatasetFormatError, InvalidMoleculeError
from molsepnorm.formats import format_suffix


def load_smi(
    path: PathLike,
    split: str = "random",
    seed: int = 0,
    sizes: Sequence[float] = DEFAULT_SIZES,
    vocab: str = "ogb",
    on_invalid: str = "error",
    progress: Optional[bool] = None,
    target_columns: Union[None, str, Sequence[str]] = None,
    smiles_column: Optional[str] = None,
    id_column: Optional[str] = None,
    task: Optional[str] = None,
) -> DatasetSplits:
    """The unlabelled molecules of a ``.smi`` file, split into train / val / test.

    Args:
        path: ``SMILES [name]`` per line (``.smi`` / ``.smiles`` / ``.ism`` / ``.can`` /
            ``.txt``, optionally ``.gz``); blank lines are not records.  The names are
            :attr:`DatasetSplits.ids` (None for a line without one; ``ids`` is None when no
            line has a name).
        split: ``"random"`` or ``"scaffold"`` (a ``.smi`` file has no split column).
        seed, sizes: of the split.
        vocab: ``"ogb"`` or ``"zinc"``.
        on_invalid: ``"error"`` (one error listing every bad line) or ``"skip"``.
        progress: show a progress bar while featurizing (None: only on a terminal).
        target_columns, smiles_column, id_column, task: the CSV / SDF options, accepted so
            that one set of options serves any file; a ``.smi`` file has no columns, so
            only None (or ``[]`` targets, ``"unlabelled"`` task) is valid, anything else an
            error.

    Raises:
        DatasetNotFoundError: the file does not exist.
        DatasetFormatError: an empty file, a split column, targets or columns asked for,
            invalid SMILES with ``on_invalid="error"`` (each named by its line).
    """
    file = data_file(path)
    label = str(file)
    asked = {"target_columns": target_columns or None, "smiles_column": smiles_column, "id_column": id_column}
    for option, value in asked.items():
        if value is not None:
            raise DatasetFormatError(f"{label}: a {format_suffix(file)} file is read as 'SMILES [name]' per line, "
                                     f"with no columns: {option}={value!r} does not apply")
    check_options(vocab, on_invalid)
    kind, _ = parse_split(split)
    if kind not in ("random", "scaffold"):
        raise DatasetFormatError(f"{label}: a {format_suffix(file)} file of SMILES has no split column; use split "
                                 "'random' or 'scaffold'")
    lines, ids, smiles, errors = [], [], [], []
    with RecordReader(file, fmt="smi") as reader:
        for record in reader:
            lines.append(record.line)
            ids.append(record.id if isinstance(record.id, str) else None)  # an int id is the record number
            smiles.append(record.smiles)
            errors.append(record.error)
    if not lines:
        raise DatasetFormatError(f"{label}: no molecule: the file has no non-blank line")
    if "smiles" in smiles[0].lower():  # no SMILES spells it: a table's header (a 'SMILES name' one is skipped)
        raise DatasetFormatError(
            f"{label}: line {lines[0]} is a header ({smiles[0]!r}), not a molecule: a {format_suffix(file)} file is "
            "read as 'SMILES [name]' per line, with at most a 'SMILES name' header; a table with a header is a CSV "
            "or TSV: name it .csv or .tsv (or delete the header line)")

    def molecules():
        for text, error in zip(smiles, errors):
            yield text if error is None else InvalidMoleculeError(text, error)

    rows = LabelledRows(molecules=molecules, y=np.zeros((len(lines), 0), dtype=np.float32), target_names=[],
                        lines=np.asarray(lines, dtype=np.int64), smiles=smiles,
                        ids=ids if any(i is not None for i in ids) else None)
    sha256 = file_sha256(file)
    return load_rows(rows, name=file.name, source=file, key_parts={"sha256": sha256, "format": "smi"},
                     split=kind, seed=seed, sizes=sizes, vocab=vocab, task=task, on_invalid=on_invalid,
                     progress=progress, info={"sha256": sha256, "format": "smi",
                                              "split_indices": "0-based records of the file (blank lines ignored)"})
