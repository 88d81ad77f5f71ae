"""A user's table of SMILES and targets (CSV / TSV) as a :class:`DatasetSplits`.

Reading checks everything it can before the (slow) featurization: the SMILES, target
and split columns exist (errors list the available columns), every target cell is a
number or empty, every split label is a split name.  Errors name the file and the row,
where *row* is the line number in the file (the header is line 1).

The table becomes :class:`~molsepnorm.data.labelled.LabelledRows` and goes the way every
labelled file goes (:func:`~molsepnorm.data.labelled.load_rows`, shared with SDF):
molecules are featurized once (:func:`molsepnorm.chem.featurize_graph`: graph and
Graphormer encodings, with a tqdm bar) into ``<cache>/processed/<key>/`` where the key hashes the
file's bytes (sha256), the SMILES and target columns, the vocabulary and the featurizer
and encoding versions; editing the file rebuilds it.  The cache also records invalid
SMILES (with RDKit's reason) and Bemis–Murcko scaffolds, so the split (``random`` /
``scaffold`` / a column), its seed and sizes, ``task`` and ``on_invalid`` are applied at
load time without featurizing again.

Nothing is dropped silently:

* invalid SMILES: ``on_invalid="error"`` (default) raises one
  :class:`DatasetFormatError` listing every bad row and its reason;
  ``on_invalid="skip"`` warns, listing them, and records them in
  :attr:`DatasetSplits.skipped`;
* a row whose targets are *all* missing carries nothing to learn or score: it is
  skipped with a warning and recorded in ``skipped`` too (a row with *some* targets
  missing is kept, NaN in ``y``).
"""
from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Optional, Sequence, Union

import numpy as np
import pandas as pd

from molsepnorm.data.cache import file_sha256
from molsepnorm.data.labelled import (
    LabelledRows,
    check_options,
    data_file,
    listing,
    load_rows,
    parse_split,
    parse_target,
)
from molsepnorm.data.paths import PathLike
from molsepnorm.data.registry import DatasetSplits
from molsepnorm.data.splits import DEFAULT_SIZES, column_split
from molsepnorm.errors import DatasetFormatError
from molsepnorm.formats import (
    ID_COLUMNS,
    SEPARATORS,
    default_id_column,
    default_smiles_column,
    file_format,
    looks_like_id_column,
    misread_separator,
    names_smiles,
)



# --------------------------------------------------------------------------- reading


def read_table(path: Path, sep: Optional[str] = None) -> pd.DataFrame:
    """All cells of a CSV / TSV as strings, blank lines dropped; the index is the line - 2."""
    if sep is None:
        sep = "\t" if file_format(path) == "tsv" else ","
    options = {"sep": sep, "dtype": str, "keep_default_na": False, "skip_blank_lines": False}
    try:
        header = [str(c) for c in pd.read_csv(path, nrows=0, **options).columns]
        _check_separator(path, header, sep)  # before the rows: ';' with decimal commas would not parse
        table = pd.read_csv(path, **options)
    except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as err:
        raise DatasetFormatError(f"{path}: cannot be read as a {'TSV' if sep == chr(9) else 'CSV'} table: {err}") \
            from err
    blank = (table == "").all(axis=1)
    return table[~blank]


def _check_separator(path: Path, header: list[str], sep: str) -> None:
    """Refuse a table whose one-column header shows another separator (a ';' CSV from Excel)."""
    found = misread_separator(header, sep)
    if found is None:
        return
    if found == "\t":
        fix = "name the file .tsv (or .tab), or pass sep='\\t'"
    elif found == ",":
        fix = "name the file .csv, or pass sep=','"
    else:
        fix = (f"pass sep={found!r} to load_dataset / load_csv (in a training config: sep under data.options; the "
               "command line has no separator option), or save the file comma-separated")
    raise DatasetFormatError(f"{path}: the header line is one column {header[0]!r} holding {SEPARATORS[found]}: "
                             f"the fields look separated by {found!r}, not {sep!r}; {fix}")


def find_column(table: pd.DataFrame, name: str, role: str, source: str) -> str:
    """The column called ``name`` (exact, else the one case-insensitive match)."""
    columns = [str(c) for c in table.columns]
    if name in columns:
        return name
    folded = [c for c in columns if c.strip().lower() == name.strip().lower()]
    if len(folded) == 1:
        return folded[0]
    raise DatasetFormatError(f"{source}: no {role} column {name!r}; the columns are: "
                             f"{', '.join(repr(c) for c in columns)}")


def parse_targets(table: pd.DataFrame, columns: Sequence[str], lines: np.ndarray, source: str) -> np.ndarray:
    """Targets as float32 ``[rows, T]``, NaN for a missing cell; every non-number is reported."""
    out = np.full((len(table), len(columns)), np.nan, dtype=np.float32)
    bad: list[str] = []
    for j, column in enumerate(columns):
        for i, cell in enumerate(table[column].tolist()):
            value = parse_target(str(cell))
            if value is None:
                continue
            if math.isnan(value):
                bad.append(f"row {lines[i]}, column {column!r}: {cell!r}")
                continue
            out[i, j] = value
    if bad:
        raise DatasetFormatError(f"{source}: {len(bad)} target cell(s) are not finite numbers "
                                 f"(empty, NaN or NA mean missing):\n{listing(bad)}")
    return out


def _resolve_split(split: str, table: pd.DataFrame, source: str) -> tuple[str, Optional[str]]:
    """``("random" | "scaffold" | "column", column name or None)``."""
    kind, name = parse_split(split)
    if name is None:
        return str(kind), None
    columns = [str(c) for c in table.columns]
    if kind == "column" or name in columns:
        return "column", find_column(table, name, "split", source)
    raise DatasetFormatError(f"{source}: split={str(split)!r} is not 'random', 'scaffold', 'column:NAME' or the name "
                             f"of a column; the columns are: {', '.join(repr(c) for c in columns)}")


def _check_named_targets(asked: Sequence[str], columns: Sequence[str], roles: dict[Optional[str], str],
                         source: str) -> None:
    """Refuse a target column named twice, or one that is the SMILES / split / id column.

    ``asked[i]`` resolved to ``columns[i]``; ``roles`` maps a column (or None) to its role."""
    seen: dict[str, str] = {}
    for name, column in zip(asked, columns):
        if column in roles:
            raise DatasetFormatError(f"{source}: target column {name!r} is the {roles[column]} column ({column!r}), "
                                     "not a target; leave it out of target_columns (--target-columns)")
        if column in seen:
            how = "twice" if seen[column] == name else f"twice (as {seen[column]!r} and {name!r})"
            raise DatasetFormatError(f"{source}: target_columns names the column {column!r} {how}: it would be "
                                     "two identical targets; name each target column once (--target-columns)")
        seen[column] = name


def _refuse_id_like_targets(table: pd.DataFrame, columns: Sequence[str], source: str) -> None:
    """Refuse a default target column of identifiers: named like one (:func:`looks_like_id_column`;
    not ``id`` / ``name``) and its present cells all unique, and all integers or all non-numbers."""
    for column in columns:
        if str(column).strip().lower() in ID_COLUMNS or not looks_like_id_column(column):
            continue
        cells = [str(c).strip() for c in table[column].tolist() if parse_target(str(c)) is not None]
        if not cells or len(set(cells)) < len(cells):
            continue
        integers = all(re.fullmatch(r"[+-]?\d+", c) for c in cells)
        if integers or all(math.isnan(parse_target(c)) for c in cells):  # type: ignore[arg-type]
            kind = "integers" if integers else "non-numbers"
            raise DatasetFormatError(
                f"{source}: column {column!r} looks like an identifier (its name, and its values are all unique "
                f"{kind}), yet with no target_columns it would be a target; name the targets with target_columns "
                "(--target-columns), and give it as id_column (--id-column) to keep it as the molecule ids")


# --------------------------------------------------------------------------- the loader


def load_table(
    table: pd.DataFrame,
    *,
    name: str,
    source: Path,
    content_sha256: str,
    lines: np.ndarray,
    smiles_column: str,
    target_columns: Sequence[str],
    split: str = "random",
    seed: int = 0,
    sizes: Sequence[float] = DEFAULT_SIZES,
    vocab: str = "ogb",
    task: Optional[str] = None,
    on_invalid: str = "error",
    progress: Optional[bool] = None,
    id_column: Optional[str] = None,
    warn_duplicates: bool = True,
) -> DatasetSplits:
    """Featurize (cached), validate and split a table whose cells are strings.

    ``lines[i]`` is the file line of table row ``i``, used in every message.  Columns
    must already be resolved to names of ``table``.  See :func:`load_csv` for the options;
    ``warn_duplicates``: see :func:`~molsepnorm.data.labelled.load_rows`.
    """
    label = str(source)
    check_options(vocab, on_invalid)
    kind, split_column = _resolve_split(split, table, label)
    labels = None
    if kind == "column":
        labels = table[split_column].tolist()
        column_split(labels, rows=lines, column=split_column, source=label)  # fail early
    y_all = parse_targets(table, target_columns, lines, label)
    smiles_all = table[smiles_column].astype(str).tolist()
    ids = [cell.strip() or None for cell in table[id_column].astype(str)] if id_column is not None else None
    rows = LabelledRows(molecules=lambda: iter(smiles_all), y=y_all, target_names=list(target_columns), lines=lines,
                        smiles=smiles_all, ids=ids, split_labels=labels, split_column=split_column)
    return load_rows(rows, name=name, source=source,
                     key_parts={"sha256": content_sha256, "smiles_column": smiles_column,
                                "target_columns": list(target_columns)},
                     split=kind, seed=seed, sizes=sizes, vocab=vocab, task=task, on_invalid=on_invalid,
                     progress=progress, warn_duplicates=warn_duplicates,
                     info={"sha256": content_sha256, "split_indices": "0-based data rows of the file (blank lines "
                           "ignored)"})


def load_csv(
    path: PathLike,
    smiles_column: Optional[str] = None,
    target_columns: Union[None, str, Sequence[str]] = None,
    split: str = "random",
    seed: int = 0,
    sizes: Sequence[float] = DEFAULT_SIZES,
    vocab: str = "ogb",
    task: Optional[str] = None,
    on_invalid: str = "error",
    progress: Optional[bool] = None,
    sep: Optional[str] = None,
    id_column: Optional[str] = None,
) -> DatasetSplits:
    """A CSV / TSV file of SMILES and one or more targets, split into train / val / test.

    Args:
        path: ``.csv`` (comma) or ``.tsv`` / ``.tab`` (tab) file, optionally gzipped,
            with a header line.
        smiles_column: column of SMILES (exact name, else a unique case-insensitive match);
            default the column named ``smiles``, else the first whose name contains
            "smiles" (any case), as ``predict`` and ``pretrain`` read a CSV.
        target_columns: target column(s); default every column but the SMILES, id and
            split columns (and any other named like "smiles"), refusing one of identifiers
            (named like one, :func:`~molsepnorm.formats.looks_like_id_column`, with unique
            integer or non-numeric values).  Named: each once, none the SMILES, split or id
            column.  Empty / NaN / NA / None / null cells are missing targets.
            None at all (``[]``, or a file of SMILES alone): unlabelled molecules, a data
            set whose ``task`` is ``"unlabelled"`` (for ``analyze`` and ``prepare``; training
            refuses it).
        split: ``"random"`` (seeded permutation), ``"scaffold"`` (seeded balanced
            Bemis–Murcko scaffold split, see :func:`molsepnorm.data.splits.scaffold_split`),
            ``"column:NAME"`` or just ``"NAME"`` (a column of train / val / valid /
            validation / test labels, case-insensitive).
        seed: seed of the random and scaffold splits.
        sizes: ``(train, val, test)`` fractions for the random and scaffold splits.
        vocab: ``"ogb"`` (any element) or ``"zinc"`` (ZINC's 28 atom types).
        task: ``"regression"`` or ``"binary"``; None infers binary when every present
            target is 0 or 1, else regression.
        on_invalid: ``"error"`` or ``"skip"`` for rows whose SMILES do not parse.
        progress: show a progress bar while featurizing (None: only on a terminal).
        sep: field separator (default from the file extension); a header read as one
            column holding ``;``, a tab or a comma is refused, naming the separator.
        id_column: a column of molecule ids (:attr:`DatasetSplits.ids`, named with each
            skipped row; an empty cell: None); default the column named ``id``, else
            ``name`` (any case), if there is one and it is not the SMILES, split or a named
            target column, as ``predict`` and ``pretrain`` read a CSV.

    Raises:
        DatasetNotFoundError: the file does not exist.
        DatasetFormatError: another separator, a missing column, a target named twice or
            in another role, a default target of identifiers, a non-numeric target, a bad
            split label, invalid SMILES with ``on_invalid="error"``; each names the file and
            rows.
    """
    file = data_file(path)
    table = read_table(file, sep)
    label = str(file)
    if table.empty:
        raise DatasetFormatError(f"{label}: no data rows: the file holds a header line only (or nothing but blank "
                                 "lines after it)")
    header = [str(c) for c in table.columns]
    if smiles_column is not None:
        smiles_col = find_column(table, smiles_column, "SMILES", label)
    else:  # as predict and pretrain read a CSV
        found = default_smiles_column(header)
        if found is None:
            raise DatasetFormatError(f"{label}: no SMILES column (none is named like 'smiles'); the columns are: "
                                     f"{', '.join(map(repr, header))}; name it with smiles_column (--smiles-column)")
        smiles_col = header[found]
    kind, split_column = _resolve_split(split, table, label)
    named_targets = None
    if target_columns is not None:
        names = [target_columns] if isinstance(target_columns, str) else list(target_columns)
        named_targets = [find_column(table, t, "target", label) for t in names]
    if id_column is not None:
        id_col: Optional[str] = find_column(table, id_column, "id", label)
    else:  # a column named id / name, as predict and pretrain read a CSV (never a target by default)
        taken = [header.index(c) for c in (smiles_col, split_column, *(named_targets or [])) if c is not None]
        found = default_id_column(header, taken)
        id_col = None if found is None else header[found]
    if named_targets is None:  # every other column (other SMILES columns are not targets); none: unlabelled
        targets = [c for c in header if c not in (smiles_col, split_column, id_col) and not names_smiles(c)]
        _refuse_id_like_targets(table, targets, label)
    else:
        _check_named_targets(names, named_targets, {smiles_col: "SMILES", split_column: "split", id_col: "id"}, label)
        targets = named_targets
    lines = table.index.to_numpy(dtype=np.int64) + 2
    return load_table(table.reset_index(drop=True), name=file.name, source=file, content_sha256=file_sha256(file),
                      lines=lines, smiles_column=smiles_col, target_columns=targets, split=split, seed=seed,
                      sizes=sizes, vocab=vocab, task=task, on_invalid=on_invalid, progress=progress,
                      id_column=id_col)
