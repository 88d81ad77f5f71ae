"""A user's labelled molecules -> a cached, split :class:`DatasetSplits`: what CSV and SDF share.

A file reader (:mod:`~molsepnorm.data.csv_dataset`, :mod:`~molsepnorm.data.sdf_dataset`)
checks what it can without RDKit and hands over :class:`LabelledRows`: one entry per
record (targets, split labels, ids, where it is in the file) and a way to iterate its
molecules.  :func:`load_rows` then, the same for every format:

1. featurizes each molecule once (:func:`~molsepnorm.chem.parse_molecule` then
   :func:`~molsepnorm.chem.featurize_graph`, with a tqdm bar) into
   ``<cache>/processed/<key>/``, keyed by the file's bytes and the reader's options
   (:func:`~molsepnorm.data.cache.cache_key`), recording invalid molecules with RDKit's
   reason and Bemis–Murcko scaffolds;
2. applies ``on_invalid`` (``"error"``: one :class:`DatasetFormatError` listing every bad
   record; ``"skip"``: a warning listing them, and :attr:`DatasetSplits.skipped`), and
   leaves out — warned and recorded too — records whose targets are all missing;
3. splits (``random`` / ``scaffold`` / a column of labels) at load time, so changing the
   split, its seed or sizes never featurizes again.
"""
from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Sequence, Union

import numpy as np
import torch
from torch_geometric.data import InMemoryDataset
from tqdm.auto import tqdm

from molsepnorm._stacklevel import outside_package_stacklevel
from molsepnorm.data.cache import build_once, cache_key, read_marker
from molsepnorm.data.paths import PathLike
from molsepnorm.data.registry import UNLABELLED, DatasetSplits, SkippedRow
from molsepnorm.data.splits import check_sizes, column_split, murcko_scaffold, random_split, scaffold_split
from molsepnorm.errors import DatasetFormatError, DatasetNotFoundError, InvalidMoleculeError

TASKS = ("regression", "binary")
_TASK_ALIASES = {"regression": "regression", "binary": "binary", "classification": "binary"}
MAX_LISTED = 50  # records listed in one error or warning; the rest are counted
MISSING_TOKENS = frozenset({"", "nan", "na", "n/a", "none", "null"})
"""Target values read as missing (case-insensitive, after stripping)."""

#: What a reader yields per record: a SMILES, an RDKit Mol (sanitized or not), or why it could not be read.
MoleculeItem = Union[str, Any, InvalidMoleculeError]

#: A record whose molecule cannot be featurized: ``error`` (raise, naming every such row) or
#: ``skip`` (leave it out, listed in :attr:`DatasetSplits.skipped`).
ON_INVALID = ("error", "skip")


class ProcessedGraphs(InMemoryDataset):
    """The graphs of one processed file, read from a file written by :meth:`save`."""

    def __init__(self, path: PathLike) -> None:
        super().__init__(None)
        self.load(str(path))


def listing(lines: Sequence[str]) -> str:
    """Indented lines, at most :data:`MAX_LISTED` of them, then how many more."""
    shown = "\n".join(f"  {line}" for line in lines[:MAX_LISTED])
    more = len(lines) - MAX_LISTED
    return shown + (f"\n  ... and {more} more" if more > 0 else "")


def data_file(path: PathLike) -> Path:
    """``path`` (``~`` expanded) resolved, or :class:`DatasetNotFoundError` if it is not a file."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise DatasetNotFoundError(f"data file {file} does not exist")
    return file.resolve()


def parse_target(text: str) -> Optional[float]:
    """One target cell or field: None when missing (stripped, one of :data:`MISSING_TOKENS`),
    NaN when it is not a finite number, else its value."""
    text = text.strip()
    if text.lower() in MISSING_TOKENS:
        return None
    try:
        value = float(text)
    except ValueError:
        return math.nan
    return value if math.isfinite(value) else math.nan


def parse_split(split: str) -> tuple[Optional[str], Optional[str]]:
    """A reader's ``split`` option as ``(kind, name)``: ``("random", None)`` and
    ``("scaffold", None)`` (any case), ``("column", NAME)`` for ``"column:NAME"``, and
    ``(None, NAME)`` for anything else: a column (field) of split labels if the file has
    one of that name, which the reader decides."""
    text = str(split)
    if text.lower() in ("random", "scaffold"):
        return text.lower(), None
    if text.lower().startswith("column:"):
        return "column", text[len("column:"):]
    return None, text


@dataclass
class LabelledRows:
    """The R records of a file of labelled molecules, read and checked, not yet featurized.

    Attributes:
        molecules: called once, only when the cache is built: the R molecules in file
            order, each a SMILES string, an RDKit Mol (unsanitized is fine:
            :func:`~molsepnorm.chem.parse_molecule` sanitizes it and gives the chemistry
            reasons) or an :class:`InvalidMoleculeError` for a record that cannot be read.
        y: float32 ``(R, T)``, NaN for a missing target.
        target_names: the T target names; none (T = 0) for a file of unlabelled
            molecules, loaded as an ``"unlabelled"`` data set (no ``y``, no metric).
        lines: int64 ``(R,)``, the line of the file where each record starts (a header is line 1).
        records: int64 ``(R,)`` 1-based record numbers where records span lines (SDF);
            None where a record is a line, named by it (``row``, CSV).
        smiles: ``(R,)`` SMILES as given, or None: the SMILES of each featurized
            molecule (``Chem.MolToSmiles``) is stored in the cache instead.
        ids: ``(R,)`` record ids (SDF titles, an id column / field), or None.
        split_labels: ``(R,)`` labels of a split column (train / val / test ...), or None.
        split_column: that column's (field's) name.
    """

    molecules: Callable[[], Iterable[MoleculeItem]]
    y: np.ndarray
    target_names: list[str]
    lines: np.ndarray
    records: Optional[np.ndarray] = None
    smiles: Optional[list[str]] = None
    ids: Optional[list[Any]] = None
    split_labels: Optional[list[Any]] = None
    split_column: Optional[str] = None

    def __len__(self) -> int:
        return len(self.lines)

    @property
    def unit(self) -> str:
        """What one entry is called in messages: ``row`` (a line) or ``record`` (a block)."""
        return "row" if self.records is None else "record"

    def place(self, i: int) -> str:
        """Where entry ``i`` is: ``row 12`` (line 12) or ``record 3 (line 45)``."""
        if self.records is None:
            return f"row {int(self.lines[i])}"
        return f"record {int(self.records[i])} (line {int(self.lines[i])})"

    def skipped(self, i: int, smiles: str, reason: str) -> SkippedRow:
        """The :class:`SkippedRow` of entry ``i`` (its id left out where it is only the record number)."""
        record = None if self.records is None else int(self.records[i])
        ident = None if self.ids is None else self.ids[i]
        return SkippedRow(int(self.lines[i]), smiles, reason, record=record, id=None if ident == record else ident)


# --------------------------------------------------------------------------- featurizing


def _featurize_rows(rows: LabelledRows, vocab: str, out: Path, what: str, progress: Optional[bool]) -> dict:
    """Featurize every record into ``out/data.pt``; return what the marker records."""
    from rdkit import Chem

    from molsepnorm.chem import featurize_graph, parse_molecule

    graphs, kept, scaffolds, invalid, canonical = [], [], [], [], []
    featurized_smiles: list[str] = []
    bar = tqdm(total=len(rows), desc=f"featurizing {what}", unit="mol",
               disable=None if progress is None else not progress)
    count = 0
    for i, item in enumerate(rows.molecules()):
        count += 1
        if count > len(rows):
            break
        given = rows.smiles[i] if rows.smiles is not None else None
        try:
            if isinstance(item, InvalidMoleculeError):
                raise item
            mol = parse_molecule(item)
            graph = featurize_graph(mol, vocab)  # with the encodings (RDKit's distances for ogb)
        except InvalidMoleculeError as err:
            text = given if given is not None else err.smiles
            invalid.append({"row": int(rows.lines[i]), "index": i, "smiles": text, "reason": err.reason})
            featurized_smiles.append(text)
        else:
            data = graph.to_data()
            data.smiles = given.strip() if given is not None else graph.smiles
            if rows.target_names:  # an unlabelled file's graphs carry no y, as a corpus's (moses)
                data.y = torch.from_numpy(rows.y[i:i + 1].astype(np.float32))  # [1, T], as GraphormerPreTransform
            graphs.append(data)
            kept.append(i)
            scaffolds.append(murcko_scaffold(mol))
            canonical.append(Chem.MolToSmiles(mol))
            featurized_smiles.append(data.smiles)
        bar.update(1)
    bar.close()
    if count != len(rows):
        raise DatasetFormatError(f"{what}: {'more' if count > len(rows) else count} molecules read for {len(rows)} "
                                 "records: did the file change while it was read?")
    if graphs:
        ProcessedGraphs.save(graphs, str(out / "data.pt"))
    meta: dict[str, Any] = {"rows": kept, "scaffolds": scaffolds, "invalid": invalid, "canonical": canonical}
    if rows.smiles is None:
        meta["smiles"] = featurized_smiles
    (out / "meta.json").write_text(json.dumps(meta))
    return {"molecules": len(graphs), "invalid": len(invalid)}


# --------------------------------------------------------------------------- the loader


def infer_task(task: Optional[str], y: np.ndarray, names: Sequence[str], place: Callable[[int], str],
               source: str) -> str:
    """``"binary"`` or ``"regression"``: ``task`` checked against ``y`` ``(R, T)``, or inferred
    (binary when every present target is 0 or 1); ``place(i)`` names row ``i`` of ``y``."""
    values = y[~np.isnan(y)]
    is_binary = bool(values.size) and bool(np.isin(values, (0.0, 1.0)).all())
    if task is None:
        return "binary" if is_binary else "regression"
    resolved = _TASK_ALIASES.get(str(task).lower())
    if resolved is None:
        raise ValueError(f"task must be one of {', '.join(TASKS)} or None (infer), got {task!r}")
    if resolved == "binary" and not is_binary:
        bad = [f"{place(i)}, column {names[j]!r}: {y[i, j]:g}"
               for i, j in zip(*np.nonzero(~np.isnan(y) & ~np.isin(y, (0.0, 1.0))))]
        raise DatasetFormatError(f"{source}: task='binary' needs targets 0 or 1 (or missing); "
                                 f"{len(bad)} cell(s) are not:\n{listing(bad)}")
    return resolved


def check_options(vocab: str, on_invalid: str) -> None:
    """Raise ``ValueError`` for an unknown vocabulary or ``on_invalid``."""
    from molsepnorm.chem.featurize import VOCABS

    if vocab not in VOCABS:
        raise ValueError(f"vocab must be one of {', '.join(map(repr, VOCABS))}, got {vocab!r}")
    if on_invalid not in ON_INVALID:
        raise ValueError(f"on_invalid must be one of {', '.join(map(repr, ON_INVALID))}, got {on_invalid!r}")


def load_rows(
    rows: LabelledRows,
    *,
    name: str,
    source: Path,
    key_parts: dict[str, Any],
    split: str,
    seed: int,
    sizes: Sequence[float],
    vocab: str,
    task: Optional[str],
    on_invalid: str,
    progress: Optional[bool],
    info: Optional[dict[str, Any]] = None,
    warn_duplicates: bool = True,
) -> DatasetSplits:
    """Featurize (cached), validate and split the records of one file.

    Args:
        rows: the file's records (see :class:`LabelledRows`).
        name: data set name (the file name), also the readable part of the cache key.
        source: the file, named in every message.
        key_parts: everything the featurized graphs depend on besides ``name`` and
            ``vocab`` (the file's sha256, the molecule and target columns, ...).
        split: ``"random"``, ``"scaffold"`` or ``"column"`` (``rows.split_labels``).
        seed, sizes: of the random and scaffold splits.
        vocab, task, on_invalid, progress: see :func:`~molsepnorm.data.csv_dataset.load_csv`.
        info: extra entries of :attr:`DatasetSplits.info`.
        warn_duplicates: warn when copies of a molecule lie in different splits (False: a
            named data set whose split is fixed, the count only in ``info["duplicates"]``).
    """
    label = str(source)
    check_options(vocab, on_invalid)
    sizes = check_sizes(sizes)
    key = cache_key(name, vocab, **key_parts)
    cache = build_once(key, lambda out: _featurize_rows(rows, vocab, out, name, progress),
                       f"{name} ({len(rows):,} molecules, {vocab} vocabulary)")
    meta = json.loads((cache / "meta.json").read_text())
    graph_rows = np.asarray(meta["rows"], dtype=np.int64)  # record (0-based) of each cached graph
    smiles_all = rows.smiles if rows.smiles is not None else meta["smiles"]

    skipped = [rows.skipped(e["index"], e["smiles"], e["reason"]) for e in meta["invalid"]]
    if skipped and on_invalid == "error":
        what = "SMILES" if rows.records is None else "molecule record(s)"
        where = "row = line in the file" if rows.records is None else "record number, and its first line in the file"
        raise DatasetFormatError(
            f"{label}: {len(skipped)} invalid {what} ({where}); fix them, or leave these {rows.unit}s out with "
            f"--on-invalid skip (on_invalid='skip' in Python):\n{listing([str(s) for s in skipped])}")
    y_all = rows.y
    labelled = bool(rows.target_names)  # unlabelled: no target to miss, every valid molecule kept
    all_missing = np.isnan(y_all[graph_rows]).all(axis=1) if labelled else np.zeros(graph_rows.size, dtype=bool)
    for i in graph_rows[all_missing]:
        skipped.append(rows.skipped(int(i), smiles_all[i], "every target is missing"))
    if skipped:
        skipped.sort(key=lambda s: s.row)
        warnings.warn(f"{label}: {len(skipped)} {rows.unit}(s) left out of the data set (listed in "
                      f"DatasetSplits.skipped):\n{listing([str(s) for s in skipped])}", UserWarning,
                      stacklevel=outside_package_stacklevel())
    keep = np.nonzero(~all_missing)[0]  # graph ids kept
    if keep.size == 0:
        why = "an invalid molecule or no target" if labelled else "an invalid molecule"
        raise DatasetFormatError(f"{label}: no usable molecule: every {rows.unit} has {why}")

    kept_rows = graph_rows[keep]
    if labelled:
        resolved_task = infer_task(task, y_all[kept_rows], rows.target_names,
                                   lambda i: rows.place(int(kept_rows[i])), label)
        _warn_about_targets(y_all[kept_rows], rows.target_names, resolved_task, inferred=task is None, label=label)
    elif task is not None and str(task).lower() != UNLABELLED:
        raise DatasetFormatError(f"{label}: task={task!r} needs targets, and the file has none (it is read as "
                                 "unlabelled molecules)")
    else:
        resolved_task = UNLABELLED
    if split == "random":
        parts = random_split(len(keep), sizes, seed)
    elif split == "scaffold":
        parts = scaffold_split([meta["scaffolds"][g] for g in keep], sizes, seed)
    elif split == "column" and rows.split_labels is not None:
        parts = column_split([rows.split_labels[i] for i in kept_rows], rows=rows.lines[kept_rows],
                             column=str(rows.split_column), source=label)
    else:
        raise ValueError(f"split must be 'random', 'scaffold' or 'column' (with split labels), got {split!r}")
    # a cache built before canonical SMILES were kept: the SMILES as written
    keys = ([meta["canonical"][g] for g in keep] if "canonical" in meta
            else [str(smiles_all[i]).strip() for i in kept_rows])
    duplicates = _duplicates(keys, parts, lambda pos: rows.place(int(kept_rows[pos])), label, warn_duplicates)
    graphs = ProcessedGraphs(cache / "data.pt")
    datasets = {s: graphs[torch.from_numpy(keep[idx])] for s, idx in parts.items()}
    return DatasetSplits(
        name=name, train=datasets["train"], val=datasets["val"], test=datasets["test"], task=resolved_task,
        target_names=list(rows.target_names), vocab=vocab,
        metric=None if not labelled else "rocauc" if resolved_task == "binary" else "mae",
        split_indices={s: kept_rows[idx] for s, idx in parts.items()}, source=source, cache_dir=cache,
        skipped=skipped, smiles=list(smiles_all), ids=None if rows.ids is None else list(rows.ids),
        info={"split": split if split != "column" else f"column:{rows.split_column}", "seed": seed, "sizes": sizes,
              "on_invalid": on_invalid, "built": read_marker(cache).get("built_at"), "duplicates": duplicates,
              **(info or {})})


#: targets whose spreads differ by more than this factor are named: the mean metric follows the widest
SCALE_RATIO_NOTED = 10.0


def _warn_about_targets(y: np.ndarray, names: Sequence[str], task: str, inferred: bool, label: str) -> None:
    """Warn about targets that train without a word but not as the user may think, ``y``
    ``(R, T)``: a column of one value (nothing to learn; its error of 0 lowers the mean
    metric), a 0/1 column among numbers (regression, as the task is inferred for the whole
    file), and regression targets of very different spreads (the mean error in their units,
    which picks ``best.pt`` and stops early, follows the widest)."""
    said = []
    present = [y[~np.isnan(y[:, j]), j] for j in range(y.shape[1])]
    constant = [f"{names[j]!r} ({v[0]:g})" for j, v in enumerate(present) if v.size and np.all(v == v[0])]
    if constant:
        said.append(f"target(s) {', '.join(constant)} hold one value in every row: there is nothing to learn, "
                    "and their error (0) lowers the mean metric that picks best.pt. Leave them out with "
                    "--target-columns")
    binary = [names[j] for j, v in enumerate(present) if v.size and np.isin(v, (0.0, 1.0)).all()
              and not np.all(v == v[0])] if task == "regression" and inferred and len(names) > 1 else []
    if binary:
        said.append(f"column(s) {', '.join(map(repr, binary))} hold only 0 and 1, but the other targets are "
                    "numbers, so every target is trained as regression (L1 loss, MAE). A 0/1 target is "
                    f"classified (probabilities, ROC-AUC) in a run of its own: --target-columns {binary[0]}")
    elif task == "regression" and len(names) > 1:  # a 0/1 column beside numbers says it all
        spreads = {names[j]: float(np.std(v)) for j, v in enumerate(present) if v.size > 1 and np.std(v) > 0}
        if len(spreads) > 1 and max(spreads.values()) > SCALE_RATIO_NOTED * min(spreads.values()):
            widest = max(spreads, key=spreads.__getitem__)
            said.append("the targets' spreads differ (standard deviation " + ", ".join(
                f"{n} {v:.3g}" for n, v in spreads.items()) + f"): the mean error in their own units, which picks "
                f"best.pt and stops early, follows {widest!r}. Train such targets in runs of their own to weigh "
                "each alike (the loss already does: it reads standardized targets)")
    for text in said:
        warnings.warn(f"{label}: {text}", UserWarning, stacklevel=outside_package_stacklevel())


def _duplicates(keys: Sequence[str], parts: dict[str, np.ndarray], place: Callable[[int], str],
                label: str, warn: bool = True) -> dict[str, int]:
    """Count the molecules that appear more than once (``keys``: one canonical SMILES per
    molecule kept; ``parts``: split -> positions in ``keys``), and warn when copies of one
    lie in different splits: a test molecule also seen in training makes the test scores
    look better than they are.  A scaffold split never does this (copies share a scaffold)."""
    split_of = np.empty(len(keys), dtype=object)
    for name, positions in parts.items():
        split_of[positions] = name
    groups: dict[str, list[int]] = {}
    for position, key in enumerate(keys):
        groups.setdefault(key, []).append(position)
    repeated = [g for g in groups.values() if len(g) > 1]
    across = [g for g in repeated if len({split_of[p] for p in g}) > 1]
    if across and warn:
        shown = [", ".join(f"{place(p)} ({split_of[p]})" for p in g) for g in across]
        warnings.warn(f"{label}: {len(repeated)} molecule(s) appear more than once ({sum(map(len, repeated))} "
                      f"rows), {len(across)} of them in more than one split, so the model is validated or tested "
                      "on molecules it trained on. Remove or merge the copies (average their targets), or split "
                      f"by scaffold (--split-by scaffold):\n{listing(shown)}", UserWarning,
                      stacklevel=outside_package_stacklevel())
    return {"molecules": len(repeated), "rows": sum(map(len, repeated)), "across_splits": len(across)}
