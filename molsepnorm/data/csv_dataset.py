"""A user's table of SMILES and targets (CSV / TSV) as a :class:`DatasetSplits`.

Reading checks everything it can before the (slow) featurization: the SMILES, target
and split columns exist (errors list the available columns), every target cell is a
number or empty, every split label is a split name.  Errors name the file and the row,
where *row* is the line number in the file (the header is line 1).

Molecules are featurized once (:func:`molsepnorm.chem.featurize_graph`: graph and
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

import json
import math
import os
import sys
import warnings
from pathlib import Path
from typing import Optional, Sequence, Union

import numpy as np
import pandas as pd
import torch
from torch_geometric.data import InMemoryDataset
from tqdm.auto import tqdm

from molsepnorm.data.cache import build_once, cache_key, file_sha256, read_marker
from molsepnorm.data.paths import PathLike
from molsepnorm.data.registry import DatasetSplits, SkippedRow
from molsepnorm.data.splits import (
    DEFAULT_SIZES,
    check_sizes,
    column_split,
    murcko_scaffold,
    random_split,
    scaffold_split,
)
from molsepnorm.errors import DatasetFormatError, DatasetNotFoundError, InvalidMoleculeError

MISSING_TOKENS = frozenset({"", "nan", "na", "n/a", "none", "null"})
"""Target cells read as a missing value (case-insensitive, after stripping)."""
TASKS = ("regression", "binary")
_TASK_ALIASES = {"regression": "regression", "binary": "binary", "classification": "binary"}
MAX_LISTED = 50  # rows listed in one error or warning; the rest are counted


# --------------------------------------------------------------------------- cached graphs


class ProcessedGraphs(InMemoryDataset):
    """The graphs of one processed table, read from a file written by :meth:`save`."""

    def __init__(self, path: PathLike) -> None:
        super().__init__(None)
        self.load(str(path))


def _outside_package_stacklevel() -> int:
    """``stacklevel`` for ``warnings.warn`` called from the caller of this function that
    points at the first frame outside molsepnorm, so the warning names the user's line."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    level, frame = 1, sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame, level = frame.f_back, level + 1
    return level


def _listing(lines: Sequence[str]) -> str:
    shown = "\n".join(f"  {line}" for line in lines[:MAX_LISTED])
    more = len(lines) - MAX_LISTED
    return shown + (f"\n  ... and {more} more" if more > 0 else "")


# --------------------------------------------------------------------------- reading


def read_table(path: Path, sep: Optional[str] = None) -> pd.DataFrame:
    """All cells of a CSV / TSV as strings, blank lines dropped; the index is the line - 2."""
    if sep is None:
        sep = "\t" if path.name.lower().removesuffix(".gz").endswith((".tsv", ".tab")) else ","
    try:
        table = pd.read_csv(path, sep=sep, dtype=str, keep_default_na=False, skip_blank_lines=False)
    except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as err:
        raise DatasetFormatError(f"{path}: cannot be read as a {'TSV' if sep == chr(9) else 'CSV'} table: {err}") \
            from err
    blank = (table == "").all(axis=1)
    return table[~blank]


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
            text = str(cell).strip()
            if text.lower() in MISSING_TOKENS:
                continue
            try:
                value = float(text)
            except ValueError:
                value = math.nan
            if not math.isfinite(value):
                bad.append(f"row {lines[i]}, column {column!r}: {cell!r}")
                continue
            out[i, j] = value
    if bad:
        raise DatasetFormatError(f"{source}: {len(bad)} target cell(s) are not finite numbers "
                                 f"(empty, NaN or NA mean missing):\n{_listing(bad)}")
    return out


def _resolve_split(split: str, table: pd.DataFrame, source: str) -> tuple[str, Optional[str]]:
    """``("random" | "scaffold" | "column", column name or None)``."""
    text = str(split)
    if text.lower() in ("random", "scaffold"):
        return text.lower(), None
    name = text[len("column:"):] if text.lower().startswith("column:") else text
    columns = [str(c) for c in table.columns]
    if name in columns or text.lower().startswith("column:"):
        return "column", find_column(table, name, "split", source)
    raise DatasetFormatError(f"{source}: split={text!r} is not 'random', 'scaffold', 'column:NAME' or the name "
                             f"of a column; the columns are: {', '.join(repr(c) for c in columns)}")


# --------------------------------------------------------------------------- featurizing


def _featurize_rows(smiles: Sequence[str], y: np.ndarray, lines: np.ndarray, vocab: str, out: Path,
                    what: str, progress: Optional[bool]) -> dict:
    """Featurize every row into ``out/data.pt``; return what the marker records."""
    from molsepnorm.chem import featurize_graph, parse_molecule

    graphs, rows, scaffolds, invalid = [], [], [], []
    bar = tqdm(total=len(smiles), desc=f"featurizing {what}", unit="mol",
               disable=None if progress is None else not progress)
    for i, text in enumerate(smiles):
        try:
            mol = parse_molecule(text)
            data = featurize_graph(mol, vocab).to_data()  # with the encodings (RDKit's distances for ogb)
        except InvalidMoleculeError as err:
            invalid.append({"row": int(lines[i]), "index": i, "smiles": text, "reason": err.reason})
        else:
            data.smiles = text.strip()
            data.y = torch.from_numpy(y[i:i + 1].astype(np.float32))  # [1, T], as GraphormerPreTransform makes it
            graphs.append(data)
            rows.append(i)
            scaffolds.append(murcko_scaffold(mol))
        bar.update(1)
    bar.close()
    if graphs:
        ProcessedGraphs.save(graphs, str(out / "data.pt"))
    meta = {"rows": rows, "scaffolds": scaffolds, "invalid": invalid}
    (out / "meta.json").write_text(json.dumps(meta))
    return {"molecules": len(graphs), "invalid": len(invalid)}


# --------------------------------------------------------------------------- the loader


def _infer_task(task: Optional[str], y: np.ndarray, lines: np.ndarray, names: Sequence[str], source: str) -> str:
    values = y[~np.isnan(y)]
    is_binary = bool(values.size) and bool(np.isin(values, (0.0, 1.0)).all())
    if task is None:
        return "binary" if is_binary else "regression"
    resolved = _TASK_ALIASES.get(str(task).lower())
    if resolved is None:
        raise ValueError(f"task must be one of {', '.join(TASKS)} or None (infer), got {task!r}")
    if resolved == "binary" and not is_binary:
        bad = [f"row {lines[i]}, column {names[j]!r}: {y[i, j]:g}"
               for i, j in zip(*np.nonzero(~np.isnan(y) & ~np.isin(y, (0.0, 1.0))))]
        raise DatasetFormatError(f"{source}: task='binary' needs targets 0 or 1 (or missing); "
                                 f"{len(bad)} cell(s) are not:\n{_listing(bad)}")
    return resolved


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
) -> DatasetSplits:
    """Featurize (cached), validate and split a table whose cells are strings.

    ``lines[i]`` is the file line of table row ``i``, used in every message.  Columns
    must already be resolved to names of ``table``.  See :func:`load_csv` for the options.
    """
    label = str(source)
    if vocab not in ("ogb", "zinc"):
        raise ValueError(f"vocab must be 'ogb' or 'zinc', got {vocab!r}")
    if on_invalid not in ("error", "skip"):
        raise ValueError(f"on_invalid must be 'error' or 'skip', got {on_invalid!r}")
    sizes = check_sizes(sizes)
    kind, split_column = _resolve_split(split, table, label)
    if kind == "column":
        column_split(table[split_column].tolist(), rows=lines, column=split_column, source=label)  # fail early
    y_all = parse_targets(table, target_columns, lines, label)
    smiles_all = table[smiles_column].astype(str).tolist()

    key = cache_key(name, vocab, sha256=content_sha256, smiles_column=smiles_column,
                    target_columns=list(target_columns))
    cache = build_once(key, lambda out: _featurize_rows(smiles_all, y_all, lines, vocab, out, name, progress),
                       f"{name} ({len(table):,} molecules, {vocab} vocabulary)")
    meta = json.loads((cache / "meta.json").read_text())
    rows = np.asarray(meta["rows"], dtype=np.int64)  # table row of each cached graph

    skipped = [SkippedRow(e["row"], e["smiles"], e["reason"]) for e in meta["invalid"]]
    if skipped and on_invalid == "error":
        raise DatasetFormatError(
            f"{label}: {len(skipped)} invalid SMILES (row = line in the file); fix them, or pass "
            f"on_invalid='skip' to leave these rows out:\n{_listing([str(s) for s in skipped])}")
    all_missing = np.isnan(y_all[rows]).all(axis=1) if rows.size else np.zeros(0, dtype=bool)
    for i in rows[all_missing]:
        skipped.append(SkippedRow(int(lines[i]), smiles_all[i], "every target is missing"))
    if skipped:
        skipped.sort(key=lambda s: s.row)
        warnings.warn(f"{label}: {len(skipped)} row(s) left out of the data set (listed in "
                      f"DatasetSplits.skipped):\n{_listing([str(s) for s in skipped])}", UserWarning,
                      stacklevel=_outside_package_stacklevel())
    keep = np.nonzero(~all_missing)[0]  # graph ids kept
    if keep.size == 0:
        raise DatasetFormatError(f"{label}: no usable molecule: every row has an invalid SMILES or no target")

    kept_rows = rows[keep]
    resolved_task = _infer_task(task, y_all[kept_rows], lines[kept_rows], target_columns, label)
    if kind == "random":
        parts = random_split(len(keep), sizes, seed)
    elif kind == "scaffold":
        parts = scaffold_split([meta["scaffolds"][g] for g in keep], sizes, seed)
    else:
        parts = column_split(table[split_column].iloc[kept_rows].tolist(), rows=lines[kept_rows],
                             column=split_column, source=label)
    graphs = ProcessedGraphs(cache / "data.pt")
    datasets = {s: graphs[torch.from_numpy(keep[idx])] for s, idx in parts.items()}
    return DatasetSplits(
        name=name, train=datasets["train"], val=datasets["val"], test=datasets["test"], task=resolved_task,
        target_names=list(target_columns), vocab=vocab, metric="rocauc" if resolved_task == "binary" else "mae",
        split_indices={s: kept_rows[idx] for s, idx in parts.items()}, source=source, cache_dir=cache,
        skipped=skipped, smiles=smiles_all,
        info={"split": kind if kind != "column" else f"column:{split_column}", "seed": seed, "sizes": sizes,
              "sha256": content_sha256, "on_invalid": on_invalid, "built": read_marker(cache).get("built_at"),
              "split_indices": "0-based data rows of the file (blank lines ignored)"})


def load_csv(
    path: PathLike,
    smiles_column: str = "smiles",
    target_columns: Union[None, str, Sequence[str]] = None,
    split: str = "random",
    seed: int = 0,
    sizes: Sequence[float] = DEFAULT_SIZES,
    vocab: str = "ogb",
    task: Optional[str] = None,
    on_invalid: str = "error",
    progress: Optional[bool] = None,
    sep: Optional[str] = None,
) -> DatasetSplits:
    """A CSV / TSV file of SMILES and one or more targets, split into train / val / test.

    Args:
        path: ``.csv`` (comma) or ``.tsv`` / ``.tab`` (tab) file, optionally gzipped,
            with a header line.
        smiles_column: column of SMILES (exact name, else a unique case-insensitive match).
        target_columns: target column(s); default every column but the SMILES and the
            split column.  Empty / NaN / NA / None / null cells are missing targets.
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
        sep: field separator (default from the file extension).

    Raises:
        DatasetNotFoundError: the file does not exist.
        DatasetFormatError: a missing column, a non-numeric target, a bad split label,
            invalid SMILES with ``on_invalid="error"``; each names the file and rows.
    """
    file = Path(path).expanduser()
    if not file.is_file():
        raise DatasetNotFoundError(f"data file {file} does not exist")
    file = file.resolve()
    table = read_table(file, sep)
    label = str(file)
    smiles_col = find_column(table, smiles_column, "SMILES", label)
    kind, split_column = _resolve_split(split, table, label)
    if target_columns is None:
        targets = [str(c) for c in table.columns if c not in (smiles_col, split_column)]
        if not targets:
            raise DatasetFormatError(
                f"{label}: no target column: the file has only {', '.join(map(repr, table.columns))}")
    else:
        names = [target_columns] if isinstance(target_columns, str) else list(target_columns)
        if not names:
            raise ValueError("target_columns is empty")
        targets = [find_column(table, t, "target", label) for t in names]
    lines = table.index.to_numpy(dtype=np.int64) + 2
    return load_table(table.reset_index(drop=True), name=file.name, source=file, content_sha256=file_sha256(file),
                      lines=lines, smiles_column=smiles_col, target_columns=targets, split=split, seed=seed,
                      sizes=sizes, vocab=vocab, task=task, on_invalid=on_invalid, progress=progress)
