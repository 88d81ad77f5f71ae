"""An SD file of molecules whose data fields hold measured properties, as a :class:`DatasetSplits`.

Each record's ``> <NAME>`` data items are its columns: ``target_columns`` names the
fields to learn, ``id_column`` the field of its id (default the title line, else the
record number), ``split="column:FIELD"`` a field of train / val / test labels.  Field
names match exactly, else case-insensitively when that is unique; a name no record has
is an error listing the fields the file has.

Reading the fields takes one pass over the file without RDKit
(:func:`molsepnorm.chem.sdf.sdf_blocks`, the reader ``molsepnorm predict`` uses), so a
cached file is never parsed again.  The molecules are read only when the cache is built,
as ``predict`` reads them: each record's mol block, unsanitized
(:func:`~molsepnorm.chem.sdf.molblock_to_mol`: charges, isotopes, explicit hydrogens and
stereo as written), then :func:`~molsepnorm.chem.parse_molecule`, the sanitization that
gives RDKit's chemistry reasons; the graph comes from that molecule, never from a SMILES
written and read back.  From there on an SDF is what a CSV is
(:func:`~molsepnorm.data.labelled.load_rows`): the same cache (keyed by the file's
sha256 and the target fields), splits and skipping.

Nothing is dropped silently, and every message names the record (1-based) and its
first line in the file:

* a target field that is absent, empty (or NA / NaN / None / null) or not a number is a
  missing target (NaN): one warning lists each with its reason, and a record whose
  targets are *all* missing is left out and recorded in :attr:`DatasetSplits.skipped`;
* a record RDKit cannot read (a broken mol block, text that is not UTF-8) or that fails
  sanitization: ``on_invalid="error"`` (default) raises one :class:`DatasetFormatError`
  listing them all with the reasons; ``on_invalid="skip"`` warns and records them in
  ``skipped``;
* a split label that is not a split name, or a record without the split field, is an
  error listing every such record.
"""
from __future__ import annotations

import gzip
import math
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Iterator, Optional, Sequence, Union

import numpy as np

from molsepnorm._stacklevel import outside_package_stacklevel
from molsepnorm.chem.sdf import molblock_to_mol, sdf_blocks, sdf_data_fields
from molsepnorm.data.cache import file_sha256
from molsepnorm.data.labelled import (
    LabelledRows,
    MoleculeItem,
    check_options,
    data_file,
    listing,
    load_rows,
    parse_split,
    parse_target,
)
from molsepnorm.data.paths import PathLike
from molsepnorm.data.registry import DatasetSplits, normalize_split_name
from molsepnorm.data.splits import DEFAULT_SIZES
from molsepnorm.errors import DatasetFormatError, InvalidMoleculeError


@dataclass
class SdfFields:
    """What one pass over an SD file learns, without RDKit: per record (R of them) its
    first line, title, read error, and the values of the requested fields.

    Attributes:
        lines: int64 ``(R,)``, first line of each record.
        titles: ``(R,)`` title lines, stripped.
        errors: ``(R,)`` why a record is not text, else None.
        values: ``(R,)`` ``{field name: value}`` of the fields whose name case-folds to a
            requested one (every field is kept only when nothing was requested).
        counts: how many records carry each field name (every field of the file).
        numeric: how many records hold a finite number in each field.
    """

    lines: np.ndarray
    titles: list[str]
    errors: list[Optional[str]]
    values: list[dict[str, str]]
    counts: Counter = field(default_factory=Counter)
    numeric: Counter = field(default_factory=Counter)

    def __len__(self) -> int:
        return len(self.lines)

    def describe(self) -> str:
        """The file's fields, with how many records lack each where some do."""
        total = len(self)
        return ", ".join(repr(name) + ("" if n == total else f" ({n} of {total} records)")
                         for name, n in sorted(self.counts.items()))

    def resolve(self, name: str, role: str, source: str) -> str:
        """The field called ``name`` (exact, else the one case-insensitive match)."""
        if name in self.counts:
            return name
        folded = [f for f in self.counts if f.strip().lower() == name.strip().lower()]
        if len(folded) == 1:
            return folded[0]
        numeric = [f for f, n in sorted(self.numeric.items()) if n]
        hint = f"; fields holding numbers: {', '.join(map(repr, numeric))}" if numeric and role == "target" else ""
        raise DatasetFormatError(f"{source}: no record has the {role} field {name!r}; the records' data fields are: "
                                 f"{self.describe() or '(none)'}{hint}")


def _open(path: Path) -> BinaryIO:
    if path.name.lower().endswith(".gz"):
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return open(path, "rb")  # noqa: SIM115 - closed by the caller's with


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def read_sdf_fields(path: Path, wanted: Sequence[str] = ()) -> SdfFields:
    """One pass over ``path`` (``.gz`` read through): see :class:`SdfFields`.

    Raises:
        DatasetFormatError: the file is not gzip data though named ``.gz``, or holds no record.
    """
    folded = {w.strip().lower() for w in wanted}
    lines: list[int] = []
    titles: list[str] = []
    errors: list[Optional[str]] = []
    values: list[dict[str, str]] = []
    counts: Counter = Counter()
    numeric: Counter = Counter()
    try:
        with _open(path) as stream:
            for block in sdf_blocks(stream):
                lines.append(block.line)
                titles.append(block.title)
                errors.append(block.error)
                fields = sdf_data_fields(block.text) if block.error is None else {}
                counts.update(fields.keys())
                numeric.update(name for name, text in fields.items() if _is_number(text.strip()))
                values.append({k: v for k, v in fields.items() if not folded or k.strip().lower() in folded})
    except (OSError, EOFError) as err:  # gzip.BadGzipFile is an OSError; a truncated .gz an EOFError
        raise DatasetFormatError(f"{path}: cannot be read as {'a gzipped ' if path.suffix == '.gz' else 'an '}"
                                 f"SD file: {err}") from err
    if not lines:
        raise DatasetFormatError(f"{path}: no SDF record in the file")
    return SdfFields(np.asarray(lines, dtype=np.int64), titles, errors, values, counts, numeric)


def _place(fields: SdfFields, i: int) -> str:
    return f"record {i + 1} (line {int(fields.lines[i])})"


def parse_sdf_targets(fields: SdfFields, names: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    """Targets float32 ``(R, T)`` and why each NaN is one (``"record 3 (line 45): ..."``).

    Missing: the field is absent, empty or a missing token (NA, NaN, ...); a value that is
    not a finite number is a missing target too.  Records that are not text are left out
    of the notes: they are invalid records, reported as such.
    """
    y = np.full((len(fields), len(names)), np.nan, dtype=np.float32)
    notes: list[str] = []
    for i, record in enumerate(fields.values):
        if fields.errors[i] is not None:
            continue
        for j, name in enumerate(names):
            if name not in record:
                notes.append(f"{_place(fields, i)}: no field {name!r}")
                continue
            text = record[name].strip()
            value = parse_target(text)
            if value is None:
                notes.append(f"{_place(fields, i)}: field {name!r} is {'empty' if not text else repr(text)}")
                continue
            if math.isnan(value):
                notes.append(f"{_place(fields, i)}: field {name!r} is {text!r}, not a number")
                continue
            y[i, j] = value
    return y, notes


def _split_field(split: str, fields: SdfFields, source: str) -> tuple[str, Optional[str]]:
    """``("random" | "scaffold" | "column", field name or None)``."""
    kind, name = parse_split(split)
    if name is None:
        return str(kind), None
    if kind == "column" or name in fields.counts or name.lower() in {f.lower() for f in fields.counts}:
        return "column", fields.resolve(name, "split", source)
    raise DatasetFormatError(f"{source}: split={str(split)!r} is not 'random', 'scaffold', 'column:FIELD' or the name of "
                             f"a data field; the records' data fields are: {fields.describe() or '(none)'}")


def _split_labels(fields: SdfFields, name: str, source: str) -> list[Optional[str]]:
    """Each record's label (None for a record that is not text); every bad one is an error."""
    labels: list[Optional[str]] = []
    bad: list[str] = []
    for i, record in enumerate(fields.values):
        if fields.errors[i] is not None:
            labels.append(None)
            continue
        label = record.get(name)
        if label is None or normalize_split_name(label) is None:
            bad.append(f"{_place(fields, i)}: " + ("no field" if label is None else repr(label)))
        labels.append(label)
    if bad:
        raise DatasetFormatError(f"{source}: {len(bad)} record(s) hold something other than train / val / valid / "
                                 f"validation / test (case-insensitive) in split field {name!r}:\n{listing(bad)}")
    return labels


def _ids(fields: SdfFields, id_field: Optional[str], source: str) -> list[Union[str, int]]:
    """Each record's id: the ``id_field`` value, else its title, else its record number."""
    ids: list[Union[str, int]] = []
    lacking: list[str] = []
    for i, title in enumerate(fields.titles):
        fallback: Union[str, int] = title or i + 1
        if id_field is None or fields.errors[i] is not None:
            ids.append(fallback)
            continue
        value = fields.values[i].get(id_field, "").strip()
        if not value:
            lacking.append(f"{_place(fields, i)}: {'empty' if id_field in fields.values[i] else 'no'} field "
                           f"{id_field!r}; id {fallback!r}")
        ids.append(value or fallback)
    if lacking:
        warnings.warn(f"{source}: {len(lacking)} record(s) have no id in field {id_field!r}; their title (else "
                      f"record number) is their id:\n{listing(lacking)}", UserWarning,
                      stacklevel=outside_package_stacklevel())
    return ids


def _molecules(path: Path) -> Iterator[MoleculeItem]:
    """Each record's unsanitized Mol, or an :class:`InvalidMoleculeError` saying why not."""
    with _open(path) as stream:
        for block in sdf_blocks(stream):
            mol = block.error if block.error is not None else molblock_to_mol(block.text)
            yield InvalidMoleculeError("", mol) if isinstance(mol, str) else mol


def load_sdf(
    path: PathLike,
    target_columns: Union[None, str, Sequence[str]] = None,
    id_column: Optional[str] = None,
    split: str = "random",
    seed: int = 0,
    sizes: Sequence[float] = DEFAULT_SIZES,
    vocab: str = "ogb",
    task: Optional[str] = None,
    on_invalid: str = "error",
    progress: Optional[bool] = None,
    smiles_column: Optional[str] = None,
) -> DatasetSplits:
    """An SD file whose records' data fields hold targets, split into train / val / test.

    Args:
        path: ``.sdf`` / ``.sd`` file (or a single ``.mol`` file), optionally gzipped
            (``.sdf.gz``).
        target_columns: the data field(s) to learn, required (the error lists the
            fields, and those holding numbers).  Absent, empty, NA or non-numeric values
            are missing targets (NaN), listed in one warning.  ``[]``: unlabelled
            molecules, a data set whose ``task`` is ``"unlabelled"``.
        id_column: data field of the molecule ids (:attr:`DatasetSplits.ids`); default
            the title line, else the record number.
        split: ``"random"``, ``"scaffold"``, ``"column:FIELD"`` or just ``"FIELD"`` (a
            data field of train / val / valid / validation / test labels).
        seed, sizes, vocab, task, progress: as in
            :func:`~molsepnorm.data.csv_dataset.load_csv`.
        on_invalid: ``"error"`` or ``"skip"`` for records RDKit cannot read or sanitize.
        smiles_column: not for SDF (its records hold molecules): given, it is an error.

    Raises:
        DatasetNotFoundError: the file does not exist.
        DatasetFormatError: no target field given, a field no record has, a bad split
            label, invalid records with ``on_invalid="error"``; each names the file and
            the records.
    """
    file = data_file(path)
    label = str(file)
    if smiles_column is not None:
        raise DatasetFormatError(f"{label}: an SD file holds molecules, not SMILES: smiles_column does not apply "
                                 "(the targets are data fields: target_columns)")
    check_options(vocab, on_invalid)
    requested = [] if target_columns is None else (
        [target_columns] if isinstance(target_columns, str) else list(target_columns))
    split_name = parse_split(split)[1]
    wanted = [*requested, *([id_column] if id_column else []), *([split_name] if split_name is not None else [])]
    fields = read_sdf_fields(file, wanted)
    if target_columns is None:
        numeric = [f for f, n in sorted(fields.numeric.items()) if n]
        raise DatasetFormatError(f"{label}: name the target field(s) of an SD file (target_columns / "
                                 f"--target-columns); the records' data fields are: {fields.describe() or '(none)'}"
                                 + (f"; fields holding numbers: {', '.join(map(repr, numeric))}" if numeric else ""))
    targets = [fields.resolve(t, "target", label) for t in requested]
    kind, split_field = _split_field(split, fields, label)
    labels = _split_labels(fields, split_field, label) if split_field is not None else None
    id_field = fields.resolve(id_column, "id", label) if id_column is not None else None
    ids = _ids(fields, id_field, label)
    y, notes = parse_sdf_targets(fields, targets)
    if notes:
        warnings.warn(f"{label}: {len(notes)} target value(s) missing or not numbers, read as missing (NaN):\n"
                      f"{listing(notes)}", UserWarning, stacklevel=outside_package_stacklevel())
    records = np.arange(1, len(fields) + 1, dtype=np.int64)
    rows = LabelledRows(molecules=lambda: _molecules(file), y=y, target_names=targets, lines=fields.lines,
                        records=records, ids=ids, split_labels=labels, split_column=split_field)
    sha256 = file_sha256(file)
    info: dict[str, Any] = {"sha256": sha256, "format": "sdf", "missing_targets": len(notes),
                            "split_indices": "0-based records of the file (record number - 1)"}
    return load_rows(rows, name=file.name, source=file,
                     key_parts={"sha256": sha256, "format": "sdf", "target_columns": targets},
                     split=kind, seed=seed, sizes=sizes, vocab=vocab, task=task, on_invalid=on_invalid,
                     progress=progress, info=info)
