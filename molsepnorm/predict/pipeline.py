"""File in, file out: what ``molsepnorm predict`` and ``molsepnorm embed`` do, as functions.

Records are read, featurized and predicted a chunk at a time and each chunk is written
before the next is read, so memory stays flat whatever the file's size.  The output
appears only when the run completes (see :mod:`molsepnorm.predict.writer`).
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union

from molsepnorm.predict.featurizing import resolve_workers
from molsepnorm.predict.predictor import DEFAULT_CHUNK_SIZE, ChunkResult, Predictor, prediction_frame
from molsepnorm.chem.readers import STDIN, RecordReader
from molsepnorm.formats import output_stem
from molsepnorm.predict.writer import STDOUT, EmbeddingWriter, PredictionWriter, check_output_path

if TYPE_CHECKING:
    import pandas as pd

PathLike = Union[str, os.PathLike]


@dataclass
class RunSummary:
    """What a run did: counts, time, where the output went, and its first rows."""

    output: str
    ok: int = 0
    failed: int = 0
    warned: int = 0  # predicted rows with an applicability warning
    seconds: float = 0.0
    preview: Optional["pd.DataFrame"] = field(default=None, repr=False)

    @property
    def total(self) -> int:
        return self.ok + self.failed

    @property
    def per_second(self) -> float:
        return self.total / self.seconds if self.seconds > 0 else 0.0

    def line(self) -> str:
        """``ok 15 / failed 4 (19 records), 2 with a warning, in 0.3 s, 63 molecules/s -> path``."""
        warned = f", {self.warned} with a warning," if self.warned else ""
        return (f"ok {self.ok} / failed {self.failed} ({self.total} records){warned} in {self.seconds:.1f} s, "
                f"{self.per_second:,.0f} molecules/s -> {self.output}")


def default_output(input_path: PathLike, suffix: str) -> str:
    """``<folder of the input>/<stem><suffix>``; standard output for standard input (CSV only)."""
    if str(input_path) == STDIN:
        return STDOUT
    p = Path(input_path)
    return str(p.with_name(output_stem(p) + suffix))


def predict_file(
    predictor: Predictor,
    input_path: PathLike,
    out: Optional[PathLike] = None,
    fmt: Optional[str] = None,
    smiles_column: Optional[str] = None,
    id_column: Optional[str] = None,
    strict: bool = False,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    progress: bool = False,
    preview_rows: int = 0,
    workers: Union[int, str] = 0,
    stdin: Any = None,
    stdout: Any = None,
) -> RunSummary:
    """Predict every record of ``input_path`` into a CSV.

    Args:
        out: the CSV (default: ``<stem>.predictions.csv`` beside the input; ``-`` is stdout).
        fmt, smiles_column, id_column: see :class:`~molsepnorm.chem.readers.RecordReader`.
        strict: stop at the first bad record (``InvalidMoleculeError`` naming file, row and
            reason); no output file is left.
        chunk_size: records held in memory at once.
        progress: a progress bar on stderr.
        preview_rows: keep the first rows as a DataFrame in the summary.
        workers: featurize in this many worker processes (0: in this process), or ``"auto"``
            (:func:`~molsepnorm.predict.featurizing.resolve_workers`: one for a large file on a
            machine with two or more CPUs, the CLI's default).

    Raises:
        InputFormatError, OutputPathError, FileNotFoundError: unusable arguments.
        InvalidMoleculeError: with ``strict``.
    """
    out = str(out) if out is not None else default_output(input_path, ".predictions.csv")
    check_output_path(out, input_path)
    with RecordReader(input_path, fmt, smiles_column, id_column, stdin=stdin) as reader:
        writer = PredictionWriter(out, predictor.target_names, predictor.is_ensemble, stdout=stdout)
        summary = RunSummary(output=out)
        frames: list[Any] = []
        with writer, _Progress(reader, progress) as bar:
            start = time.perf_counter()
            for chunk in predictor.predict_records(reader, chunk_size, strict=strict, source=reader.source,
                                                   workers=resolve_workers(workers, input_path)):
                writer.write(chunk)
                _count(summary, chunk, bar)
                if len(frames) < preview_rows:
                    frames.append(prediction_frame(_head(chunk, preview_rows), predictor.target_names))
            summary.seconds = time.perf_counter() - start
    if frames:
        import pandas as pd

        summary.preview = pd.concat(frames, ignore_index=True).head(preview_rows)
    return summary


def embed_file(
    predictor: Predictor,
    input_path: PathLike,
    out: Optional[PathLike] = None,
    fmt: Optional[str] = None,
    smiles_column: Optional[str] = None,
    id_column: Optional[str] = None,
    strict: bool = False,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    progress: bool = False,
    workers: Union[int, str] = 0,
    stdin: Any = None,
) -> RunSummary:
    """Graph-token embeddings of every record of ``input_path`` into an ``.npz``
    (default ``<stem>.embeddings.npz`` beside the input); see :class:`EmbeddingWriter`."""
    if out is None:
        if str(input_path) == STDIN:
            from molsepnorm.predict.writer import OutputPathError

            raise OutputPathError("reading standard input: give --out FILE.npz for the embeddings")
        out = default_output(input_path, ".embeddings.npz")
    out = str(out)
    check_output_path(out, input_path)
    with RecordReader(input_path, fmt, smiles_column, id_column, stdin=stdin) as reader:
        writer = EmbeddingWriter(out, predictor.embedding_dim, predictor.members[0].source)
        summary = RunSummary(output=out)
        with writer, _Progress(reader, progress) as bar:
            start = time.perf_counter()
            for chunk in predictor.embed_records(reader, chunk_size, strict=strict, source=reader.source,
                                                 workers=resolve_workers(workers, input_path)):
                writer.write(chunk)
                _count(summary, chunk, bar)
            summary.seconds = time.perf_counter() - start
    return summary


def _count(summary: RunSummary, chunk: ChunkResult, bar: "_Progress") -> None:
    ok = chunk.num_ok
    summary.ok += ok
    summary.failed += len(chunk.records) - ok
    summary.warned += chunk.num_warned
    bar.update(summary)


def _head(chunk: ChunkResult, n: int) -> ChunkResult:
    return ChunkResult(chunk.records[:n], chunk.smiles[:n], chunk.values[:n],
                       None if chunk.std is None else chunk.std[:n], chunk.errors[:n], chunk.warnings[:n])


class _Progress:
    """A tqdm bar over the input's bytes (molecules for standard input), or nothing.

    The reader runs a chunk or two ahead of the molecules predicted (a worker featurizes the
    next chunk meanwhile), so the bar shows the bytes of the molecules done: the bytes read
    in proportion to the records done of those read."""

    def __init__(self, reader: RecordReader, enabled: bool) -> None:
        self.reader = reader
        self.bar: Optional[Any] = None
        if enabled:
            from tqdm.auto import tqdm

            total = reader.total_bytes
            self.bar = tqdm(total=total, unit="B" if total else "mol", unit_scale=True, unit_divisor=1024,
                            desc=Path(reader.source).name if total else "molecules", file=sys.stderr,
                            dynamic_ncols=True)

    def update(self, summary: RunSummary) -> None:
        if self.bar is None:
            return
        done = summary.total
        if self.reader.total_bytes:
            read, records = self.reader.bytes_read, self.reader.records_read
            done = read if summary.total >= records else read * summary.total // max(1, records)
        self.bar.update(max(0, done - self.bar.n))
        self.bar.set_postfix(ok=summary.ok, failed=summary.failed, refresh=False)

    def __enter__(self) -> "_Progress":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.bar is not None:
            self.bar.close()
