"""Output files of ``predict`` (CSV) and ``embed`` (NPZ), written so that they can be trusted.

Both are written to a hidden temporary file in the target folder
(``.<name>.<random>.part``, :class:`molsepnorm._atomic.AtomicFile`) and renamed over the
target only by :meth:`commit`, so a run
that is killed or fails leaves no partial file posing as complete output.  Neither ever
writes over the input (:func:`check_output_path`).  Both stream: a chunk is written as soon
as it is predicted, and nothing but a few counters stays in memory.
"""
from __future__ import annotations

import csv
import gzip
import io
import json
import os
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import IO, Any, Optional, Sequence, TypeVar, Union

import numpy as np

from molsepnorm._atomic import AtomicFile
from molsepnorm.errors import MolsepnormError
from molsepnorm.inference.evaluate import VALUE_FORMAT
from molsepnorm.predict.predictor import ChunkResult, value_columns

PathLike = Union[str, os.PathLike]
STDOUT = "-"


class OutputPathError(MolsepnormError, ValueError):
    """The output path is unusable (it is the input, or a folder)."""


def check_output_path(out: PathLike, source: PathLike) -> None:
    """Refuse an output that is the input file itself, or a folder.

    Raises:
        OutputPathError: naming both paths.
    """
    if str(out) == STDOUT:
        return
    out_path = Path(out)
    if out_path.is_dir():
        raise OutputPathError(f"--out {out}: is a folder; give a file name")
    if str(source) == "-" or not out_path.exists():
        return
    if os.path.samefile(out_path, source):
        raise OutputPathError(f"--out {out} is the input file itself: refusing to overwrite the input")


#: what ``predict`` writes, by the output's name (any other suffix is refused)
PREDICTION_SUFFIXES = {".csv": (",", False), ".csv.gz": (",", True), ".tsv": ("\t", False),
                       ".tsv.gz": ("\t", True), ".tab": ("\t", False), ".txt": (",", False)}


def prediction_format(out: PathLike) -> tuple[str, bool]:
    """``(delimiter, gzip)`` of a predictions file named ``out``: CSV, or TSV for ``.tsv`` /
    ``.tab``, gzipped for ``.gz``; a name without a suffix (and ``-``) is CSV.

    Raises:
        OutputPathError: another suffix (``.parquet``, ``.xlsx``, ``.npz``, ...).
    """
    name = Path(str(out)).name.lower()
    if str(out) == STDOUT or "." not in name.lstrip("."):
        return ",", False
    for suffix in sorted(PREDICTION_SUFFIXES, key=len, reverse=True):
        if name.endswith(suffix):
            return PREDICTION_SUFFIXES[suffix]
    raise OutputPathError(f"--out {out}: predictions are written as CSV or TSV; name the file "
                          f"{', '.join(PREDICTION_SUFFIXES)} (the same gzipped with .gz)")


def format_value(x: float) -> str:
    """A prediction as CSV text (:data:`~molsepnorm.inference.evaluate.VALUE_FORMAT`), empty for NaN."""
    return "" if x != x else format(float(x), VALUE_FORMAT)


_W = TypeVar("_W", bound="_CommitOrAbort")


class _CommitOrAbort:
    """The writers' ``with`` protocol: :meth:`commit` when the block ends normally, else
    :meth:`abort`, so an exception never leaves a partial output."""

    def commit(self) -> str:
        raise NotImplementedError

    def abort(self) -> None:
        raise NotImplementedError

    def __enter__(self: _W) -> _W:
        return self

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()


class PredictionWriter(_CommitOrAbort):
    """Streams prediction chunks to a CSV file (atomically) or to standard output.

    Columns: ``id``, ``smiles``, one per target (``<target>_std`` after each for an
    ensemble), ``error`` (empty when the row was predicted), ``warning`` (why the molecule
    lies outside the model's applicability domain; empty when it does not).  Use as a context manager:
    leaving it by an exception aborts (removes the temporary file), else commits.
    """

    def __init__(self, out: PathLike, target_names: Sequence[str], ensemble: bool,
                 stdout: Optional[IO[str]] = None) -> None:
        self.out = str(out)
        self.target_names = list(target_names)
        self.ensemble = ensemble
        self.columns = ["id", "smiles", *value_columns(self.target_names, ensemble), "error", "warning"]
        self._file: Optional[AtomicFile] = None
        self._gzip: Optional[IO[str]] = None
        delimiter, compressed = prediction_format(self.out)
        if self.out == STDOUT:
            stream = stdout if stdout is not None else sys.stdout
        elif compressed:
            self._file = AtomicFile(self.out, "wb")
            binary = gzip.GzipFile(fileobj=self._file.handle, mode="wb", mtime=0)
            stream = self._gzip = io.TextIOWrapper(binary, encoding="utf-8", newline="")
        else:
            self._file = AtomicFile(self.out, "w", encoding="utf-8", newline="")
            stream = self._file.handle
        self._stream = stream
        self._csv = csv.writer(stream, delimiter=delimiter, lineterminator="\n")
        # QUOTE_MINIMAL quotes "\n" (the line terminator) but not a lone "\r", which readers
        # (pandas, the csv module) take for a line break: rows holding one are fully quoted.
        self._csv_quoted = csv.writer(stream, delimiter=delimiter, lineterminator="\n", quoting=csv.QUOTE_ALL)
        self._csv.writerow(self.columns)
        self.rows = 0

    def write(self, chunk: ChunkResult) -> None:
        """Append one chunk's rows, in order."""
        T = len(self.target_names)
        warnings = chunk.warning_column()
        for i, record in enumerate(chunk.records):
            cells: list[str] = [str(record.id), chunk.smiles[i]]
            for t in range(T):
                cells.append(format_value(chunk.values[i, t]))
                if chunk.std is not None:
                    cells.append(format_value(chunk.std[i, t]))
            cells.append(_one_line(chunk.errors[i]))
            cells.append(_one_line(warnings[i]))
            (self._csv_quoted if any("\r" in cell for cell in cells) else self._csv).writerow(cells)
        self.rows += len(chunk.records)
        if self._file is None:
            self._stream.flush()

    def commit(self) -> str:
        """Finish: rename the temporary file to the output; its path (``-`` for stdout)."""
        if self._gzip is not None:
            self._gzip.close()  # the gzip trailer; the file under it stays open for the commit
        if self._file is not None:
            return str(self._file.commit())
        self._stream.flush()
        return STDOUT

    def abort(self) -> None:
        """Give up: remove the temporary file (rows already on stdout stay there)."""
        if self._file is not None:
            self._file.abort()


def _one_line(error: Optional[str]) -> str:
    return "" if error is None else " ".join(error.split())


class EmbeddingWriter(_CommitOrAbort):
    """Streams embedding chunks into an ``.npz`` (atomically), in flat memory.

    The archive holds one row per input record, in order:

    * ``embeddings``: float32 ``(n, D)``, NaN rows for records that failed;
    * ``ids``, ``smiles``, ``errors`` (``""`` when ok), ``warnings`` (why the molecule lies
      outside the model's applicability domain, ``""`` when it does not): unicode ``(n,)``;
    * ``ok``: bool ``(n,)``;  ``model``: the model's name or path (0-d string).

    Rows go to anonymous temporary files while the run lasts; :meth:`commit` assembles the
    archive entry by entry, never holding more than one chunk.
    """

    def __init__(self, out: PathLike, dim: int, model: str) -> None:
        if str(out) == STDOUT:
            raise OutputPathError("embeddings are a binary .npz archive: give --out FILE, not '-'")
        if Path(out).suffix.lower() != ".npz":
            raise OutputPathError(f"--out {out}: embeddings are written as a NumPy .npz archive; name the file .npz")
        self.out = Path(out)
        self.dim = int(dim)
        self.model = model
        self.rows = 0
        self._vectors = tempfile.TemporaryFile()
        self._texts = tempfile.TemporaryFile(mode="w+", encoding="utf-8")
        self._width = {"ids": 1, "smiles": 1, "errors": 1, "warnings": 1}

    def write(self, chunk: ChunkResult) -> None:
        """Append one chunk's rows."""
        self._vectors.write(np.ascontiguousarray(chunk.values, dtype="<f4").tobytes())
        warnings = chunk.warning_column()
        for i, record in enumerate(chunk.records):
            row = [str(record.id), chunk.smiles[i], _one_line(chunk.errors[i]), _one_line(warnings[i])]
            for key, text in zip(("ids", "smiles", "errors", "warnings"), row):
                self._width[key] = max(self._width[key], len(text))
            self._texts.write(json.dumps(row) + "\n")
        self.rows += len(chunk.records)

    def commit(self) -> str:
        """Write the archive to a temporary file and rename it to the output; its path."""
        target = AtomicFile(self.out, "wb")
        try:
            with zipfile.ZipFile(target.handle, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
                self._vectors.seek(0)
                with archive.open("embeddings.npy", "w", force_zip64=True) as entry:
                    _header(entry, "<f4", (self.rows, self.dim))
                    while block := self._vectors.read(1 << 20):
                        entry.write(block)
                for column, key in enumerate(("ids", "smiles", "errors", "warnings")):
                    self._texts.seek(0)
                    width = self._width[key]
                    with archive.open(f"{key}.npy", "w", force_zip64=True) as entry:
                        _header(entry, f"<U{width}", (self.rows,))
                        for line in self._texts:
                            entry.write(np.array(json.loads(line)[column], dtype=f"<U{width}").tobytes())
                self._texts.seek(0)
                with archive.open("ok.npy", "w", force_zip64=True) as entry:
                    _header(entry, "|b1", (self.rows,))
                    for line in self._texts:
                        entry.write(b"\x00" if json.loads(line)[2] else b"\x01")
                with archive.open("model.npy", "w") as entry:
                    np.lib.format.write_array(entry, np.array(self.model))
            path = target.commit()
        except BaseException:
            target.abort()
            raise
        finally:
            self._close_temporaries()
        return str(path)

    def abort(self) -> None:
        """Give up: nothing is written."""
        self._close_temporaries()

    def _close_temporaries(self) -> None:
        self._vectors.close()
        self._texts.close()


def _header(stream: IO[bytes], descr: str, shape: tuple[int, ...]) -> None:
    np.lib.format.write_array_header_2_0(stream, {"descr": np.dtype(descr).str, "fortran_order": False,
                                                  "shape": shape})
