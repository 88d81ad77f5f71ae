"""Prediction across the workers of a Dask cluster: one output file per partition.

``predict_partitioned(models, "big.smi.gz", "preds/", client=client)`` is ``predict_file``
spread over a cluster:

1. This process (the driver) reads the input with the same
   :class:`~molsepnorm.chem.readers.RecordReader` as ``molsepnorm predict``, so record
   numbers, lines, ids and the errors of unreadable records are the same, whatever the
   format (``.smi`` / ``.csv`` / ``.tsv`` / ``.sdf``, gzipped or not).  It cuts the
   records into partitions of ``partition_size`` and sends each to a worker
   (``client.scatter``); at most ``max_in_flight`` partitions are out at once, so the
   driver's memory stays flat whatever the file's size.  Reading is cheap next to
   prediction (no RDKit on the driver), so one driver keeps many workers busy.
2. A worker loads the model(s) once per process (the checkpoint files travel with the
   job: only ``out_dir`` must be shared between driver and workers), predicts its
   partition chunk by chunk and writes ``out_dir/part-00000.predictions.csv`` through
   :class:`~molsepnorm.predict.writer.PredictionWriter`: a temporary file renamed on
   success, so a worker that crashes leaves no half file under that name, and Dask runs
   the partition again elsewhere.
3. The worker counts the rows of its file once renamed; the driver checks that count,
   and the file, against the records it sent, and writes ``out_dir/manifest.json`` (atomically, last): the partitions in input
   order with their records in, rows out, ok and failed counts.  Reading the part files
   in manifest order gives one row per input record in input order, with the columns of
   ``molsepnorm predict``; :func:`combine_outputs` writes them as one CSV.

Why Dask and not Ray: ``dask[distributed]`` is pure Python, a few MB with its
dependencies, and starts a local cluster of worker processes in seconds, so the test
runs in every CI job; Ray's wheel alone is tens of MB with a C++ runtime, for a job that
needs no object store or actors.  Why futures and not a ``dask.bag``: a bag's partitions
are fixed when it is built, so one file would have to be read whole into the driver
first, or cut into byte ranges (``read_text(blocksize=...)``) that cannot be made from a
gzip file, split a quoted CSV record or an SDF block, and lose the record numbers.

Dask is an optional extra: ``pip install "molsepnorm[dask]"``.  It is imported only when
a function here runs, and its absence is a :class:`MissingExtraError` naming the extra.
"""
from __future__ import annotations

import csv
import hashlib
import json
import os
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Optional, Sequence, Union

from molsepnorm.errors import InvalidMoleculeError, MolsepnormError
from molsepnorm.predict.featurizing import MAX_ATOMS
from molsepnorm.predict.predictor import DEFAULT_BATCH_SIZE, DEFAULT_CHUNK_SIZE
from molsepnorm.chem.readers import Record, RecordReader
from molsepnorm._atomic import AtomicFile
from molsepnorm.predict.writer import PredictionWriter

if TYPE_CHECKING:
    from molsepnorm.predict.predictor import Predictor

PathLike = Union[str, os.PathLike]

EXTRA = "dask"
MANIFEST = "manifest.json"
MANIFEST_FORMAT = "molsepnorm-partitioned-predictions"
MANIFEST_VERSION = 1
DEFAULT_PARTITION_SIZE = 20_000


class MissingExtraError(MolsepnormError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""


def require_distributed() -> Any:
    """``dask.distributed``, or :class:`MissingExtraError` saying how to install it."""
    try:
        import distributed
    except ImportError as err:
        raise MissingExtraError(
            f"prediction on a Dask cluster needs dask.distributed: pip install \"molsepnorm[{EXTRA}]\" "
            f"(it installs dask[distributed])") from err
    return distributed


@dataclass
class PartitionResult:
    """One partition as its worker reported it and the driver checked it.

    ``first_record`` / ``last_record`` are 1-based record numbers of the input (the
    ``id`` of records without a name); ``first_line`` is the input line of the first.
    """

    part: int
    output: str  # file name inside out_dir
    first_record: int
    last_record: int
    first_line: int
    records: int  # sent to the worker
    rows: int  # data rows found in the output file
    ok: int
    failed: int
    seconds: float
    worker: str


@dataclass
class PartitionedSummary:
    """What :func:`predict_partitioned` did."""

    out_dir: str
    manifest: str
    partitions: list[PartitionResult] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> int:
        return sum(p.ok for p in self.partitions)

    @property
    def failed(self) -> int:
        return sum(p.failed for p in self.partitions)

    @property
    def total(self) -> int:
        return sum(p.rows for p in self.partitions)

    @property
    def outputs(self) -> list[Path]:
        """The part files in input order."""
        return [Path(self.out_dir) / p.output for p in self.partitions]

    def line(self) -> str:
        """``ok 15 / failed 4 (19 records, 2 partitions) in 3.1 s, 6 molecules/s -> out_dir``."""
        rate = self.total / self.seconds if self.seconds > 0 else 0.0
        return (f"ok {self.ok} / failed {self.failed} ({self.total} records, {len(self.partitions)} partitions) "
                f"in {self.seconds:.1f} s, {rate:,.0f} molecules/s -> {self.out_dir}")


@dataclass(frozen=True)
class _ModelFile:
    """A checkpoint's bytes, sent to the workers so that they need no access to its path."""

    name: str  # the file name, kept so the worker's copy reads like the original
    sha256: str
    payload: bytes


@dataclass(frozen=True)
class _PartitionTask:
    part: int
    output: Path
    source: str
    chunk_size: int
    strict: bool


@dataclass(frozen=True)
class _PredictorSpec:
    batch_size: int
    max_atoms: Optional[int]
    threads: Optional[int]
    device: str


def part_name(part: int) -> str:
    """``part-00007.predictions.csv``: names sort in partition order."""
    return f"part-{part:05d}.predictions.csv"


def predict_partitioned(
    models: Union[PathLike, Sequence[PathLike], None],
    input_path: PathLike,
    out_dir: PathLike,
    *,
    client: Any = None,
    partition_size: int = DEFAULT_PARTITION_SIZE,
    fmt: Optional[str] = None,
    smiles_column: Optional[str] = None,
    id_column: Optional[str] = None,
    strict: bool = False,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    batch_size: int = DEFAULT_BATCH_SIZE,
    max_atoms: Optional[int] = MAX_ATOMS,
    threads: Optional[int] = 1,
    device: str = "cpu",
    max_in_flight: Optional[int] = None,
    retries: int = 0,
) -> PartitionedSummary:
    """Predict every record of ``input_path`` on a Dask cluster, one CSV per partition.

    Args:
        models: checkpoint paths or bundled model names (several: an ensemble); None: the
            default bundled model.  Read here and sent to the workers.
        input_path: the molecules, any format ``molsepnorm predict`` reads.
        out_dir: a folder that does not exist yet or is empty; on a real cluster a
            folder every worker and the driver see at the same path (a shared file system).
        client: a ``distributed.Client``; None: the current default client.
        partition_size: records per partition (and per output file).
        fmt, smiles_column, id_column, strict, chunk_size, batch_size, max_atoms, device:
            as for :func:`~molsepnorm.predict.pipeline.predict_file` and
            :meth:`Predictor.load`; ``chunk_size`` bounds each worker's memory.
        threads: torch threads in each worker process (set once, when the worker first
            loads the model: the process belongs to this job's cluster); None: leave as is.
        max_in_flight: partitions sent and not yet finished, at most (default: twice the
            cluster's worker threads): bounds the memory of driver and cluster.
        retries: times Dask re-runs a partition whose task raised (an error there is
            usually not transient); a partition whose worker died is re-run by Dask
            whatever this says (``distributed.scheduler.allowed-failures``).

    Returns:
        The summary; ``out_dir/manifest.json`` holds the same.

    Raises:
        MissingExtraError: dask.distributed is not installed.
        InputFormatError, FileNotFoundError, UnknownModelError, CheckpointError: unusable
            arguments (raised before any work is sent).
        MolsepnormError: ``out_dir`` is not empty, there is no client, a partition failed
            (naming it and its records; the others' files stay) or an output does not hold
            one row per record.
        InvalidMoleculeError: with ``strict``, from the partition that met a bad record.
    """
    distributed = require_distributed()
    if partition_size < 1:
        raise ValueError(f"partition_size must be >= 1, got {partition_size}")
    with RecordReader(input_path, fmt, smiles_column, id_column) as reader:  # input and columns checked
        out = _prepare_out_dir(Path(out_dir))
        paths = _model_paths(models)
        columns = _check_models(paths)  # before anything is sent
        client = client if client is not None else _default_client(distributed)
        files = [_ModelFile(path.name, hashlib.sha256(data).hexdigest(), data)
                 for path, data in ((p, p.read_bytes()) for p in paths)]
        spec = _PredictorSpec(batch_size, max_atoms, threads, device)
        window = max_in_flight or max(2, 2 * sum(client.nthreads().values()))
        start = time.perf_counter()
        summary = PartitionedSummary(out_dir=str(out), manifest=str(out / MANIFEST))
        [model_future] = client.scatter([files], broadcast=True, hash=False)
        results: dict[int, PartitionResult] = {}
        pending: dict[Any, tuple[int, list[Record]]] = {}
        finished = distributed.as_completed()
        try:
            for part, records in enumerate(_partitions(reader, partition_size)):
                task = _PartitionTask(part, out / part_name(part), reader.source, chunk_size, strict)
                [data] = client.scatter([records], hash=False)
                future = client.submit(_predict_partition, task, data, model_future, spec, retries=retries,
                                       key=f"molsepnorm-predict-part-{part:05d}-{os.urandom(4).hex()}", pure=False)
                pending[future] = (part, _span(records))
                finished.add(future)
                while len(pending) >= window:
                    _collect(next(finished), pending, results, out)
            for future in finished:
                _collect(future, pending, results, out)
        except BaseException:
            client.cancel(list(pending))
            raise
    summary.partitions = [results[k] for k in sorted(results)]
    summary.seconds = time.perf_counter() - start
    _write_manifest(summary, input_path, files, columns, partition_size)
    _remove_orphans(out)
    return summary


# --- driver side ---------------------------------------------------------------------------


def _default_client(distributed: Any) -> Any:
    try:
        return distributed.get_client()
    except ValueError as err:
        raise MolsepnormError(
            "no Dask client: pass client=distributed.Client(...), e.g. Client(LocalCluster(n_workers=2, "
            "threads_per_worker=1)) on one machine or Client('tcp://scheduler:8786') on a cluster") from err


def _prepare_out_dir(out: Path) -> Path:
    if out.exists() and not out.is_dir():
        raise MolsepnormError(f"{out}: is a file; give a folder for the partition outputs")
    out.mkdir(parents=True, exist_ok=True)
    if any(out.iterdir()):
        raise MolsepnormError(f"{out}: the folder is not empty; partitions are written into an empty (or new) "
                              f"folder so that no file of an earlier run can pass for part of this one")
    return out.resolve()


def _model_paths(models: Union[PathLike, Sequence[PathLike], None]) -> list[Path]:
    from molsepnorm.checkpoint import DEFAULT_MODEL, resolve_models

    if models is None:
        specs: list[PathLike] = [DEFAULT_MODEL]
    elif isinstance(models, (str, os.PathLike)):
        specs = [models]
    else:
        specs = list(models) or [DEFAULT_MODEL]
    return resolve_models(specs)


def _check_models(paths: list[Path]) -> list[str]:
    """Load the checkpoints here once, so that a bad file or an ensemble of models that
    predict different things fails before any work is sent; the output columns."""
    from molsepnorm.predict.predictor import Predictor

    predictor = Predictor.load(paths, device="cpu")
    predictor.check_predicts()  # a pretrained encoder predicts nothing
    return predictor.output_columns()


def _partitions(records: Iterator[Record], size: int) -> Iterator[list[Record]]:
    batch: list[Record] = []
    for record in records:
        batch.append(record)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _span(records: list[Record]) -> list[Record]:
    """What the driver keeps of a partition while it runs: its first and last record."""
    return [records[0], records[-1]]


def _collect(future: Any, pending: dict[Any, tuple[int, list[Record]]], results: dict[int, PartitionResult],
             out: Path) -> None:
    part, (first, last) = pending.pop(future)
    try:
        result: PartitionResult = future.result()
    except InvalidMoleculeError:
        raise
    except Exception as err:
        raise MolsepnormError(f"partition {part} (records {first.index}-{last.index}, from line {first.line}) "
                              f"failed: {type(err).__name__}: {err}") from err
    expected = last.index - first.index + 1
    if not (out / result.output).is_file():
        raise MolsepnormError(f"partition {part}: its worker reported {result.output}, which is not in {out}: "
                              f"is out_dir on a file system the workers and this process share?")
    if result.records != expected or result.rows != expected:
        raise MolsepnormError(f"partition {part}: {expected} records sent, the worker read {result.records} and "
                              f"its output {result.output} holds {result.rows} rows")
    results[part] = result


def _write_manifest(summary: PartitionedSummary, input_path: PathLike, files: list[_ModelFile],
                    columns: list[str], partition_size: int) -> None:
    manifest = {
        "format": MANIFEST_FORMAT, "version": MANIFEST_VERSION,
        "input": str(input_path), "models": [{"file": f.name, "sha256": f.sha256} for f in files],
        "columns": columns, "partition_size": partition_size,
        "records": summary.total, "ok": summary.ok, "failed": summary.failed,
        "seconds": round(summary.seconds, 3),
        "partitions": [asdict(p) for p in summary.partitions],
    }
    target = AtomicFile(summary.manifest, "w", encoding="utf-8")
    try:
        json.dump(manifest, target.handle, indent=1)
        target.handle.write("\n")
        target.commit()
    except BaseException:
        target.abort()
        raise


def _remove_orphans(out: Path) -> None:
    """Temporary files of partitions whose worker died (their task ran again elsewhere)."""
    for orphan in out.glob(".part-*.predictions.csv.*.part"):
        orphan.unlink(missing_ok=True)


def read_manifest(out_dir: PathLike) -> dict[str, Any]:
    """The manifest of a finished run, checked: every part file is there.

    Raises:
        MolsepnormError: no manifest (the run did not finish), a foreign one, or a
            missing part file.
    """
    path = Path(out_dir) / MANIFEST
    if not path.is_file():
        raise MolsepnormError(f"{path}: no manifest: the run did not finish (or this is not its folder)")
    manifest = json.loads(path.read_text(encoding="utf-8"))
    if manifest.get("format") != MANIFEST_FORMAT:
        raise MolsepnormError(f"{path}: not a molsepnorm partition manifest")
    missing = [p["output"] for p in manifest["partitions"] if not (Path(out_dir) / p["output"]).is_file()]
    if missing:
        raise MolsepnormError(f"{path}: part files missing: {', '.join(missing)}")
    return manifest


def combine_outputs(out_dir: PathLike, out: PathLike) -> int:
    """Concatenate a finished run's part files, in input order, into one CSV (written
    atomically); returns its number of data rows.

    Raises:
        MolsepnormError: see :func:`read_manifest`; a part whose header or row count
            differs from the manifest.
    """
    manifest = read_manifest(out_dir)
    target = AtomicFile(out, "w", encoding="utf-8", newline="")
    rows = 0
    try:
        writer = csv.writer(target.handle, lineterminator="\n")
        writer.writerow(manifest["columns"])
        for entry in manifest["partitions"]:
            path = Path(out_dir) / entry["output"]
            with open(path, encoding="utf-8", newline="") as handle:
                reader = csv.reader(handle)
                if next(reader, None) != manifest["columns"]:
                    raise MolsepnormError(f"{path}: its header is not the manifest's columns")
                count = 0
                for row in reader:
                    writer.writerow(row)
                    count += 1
            if count != entry["rows"]:
                raise MolsepnormError(f"{path}: {count} rows, the manifest says {entry['rows']}")
            rows += count
        target.commit()
    except BaseException:
        target.abort()
        raise
    return rows


# --- worker side ---------------------------------------------------------------------------

_PREDICTORS: dict[tuple, "Predictor"] = {}
_PREDICTORS_LOCK = threading.Lock()


def _worker_predictor(files: list[_ModelFile], spec: _PredictorSpec, scratch: Path) -> "Predictor":
    """This process's Predictor for ``files`` (built once per process and settings); the
    checkpoint files are written under ``scratch`` (the Dask worker's own folder)."""
    key = (tuple(f.sha256 for f in files), spec)
    with _PREDICTORS_LOCK:
        predictor = _PREDICTORS.get(key)
        if predictor is None:
            from molsepnorm.inference.device import inference_process_settings
            from molsepnorm.predict.predictor import Predictor

            if spec.threads is not None:
                inference_process_settings(spec.threads)
            folder = scratch / "molsepnorm-models"
            paths = []
            for f in files:
                path = folder / f.sha256 / f.name
                if not path.is_file():
                    path.parent.mkdir(parents=True, exist_ok=True)
                    target = AtomicFile(path, "wb")
                    target.handle.write(f.payload)
                    target.commit()
                paths.append(path)
            # the cluster's threads and processes already share the CPUs: members take turns
            predictor = Predictor.load(paths, device=spec.device, batch_size=spec.batch_size,
                                       max_atoms=spec.max_atoms, member_threads=1)
            _PREDICTORS[key] = predictor
    return predictor


def _predict_partition(task: _PartitionTask, records: list[Record], files: list[_ModelFile],
                       spec: _PredictorSpec) -> PartitionResult:
    """Run on a worker: predict one partition into its own file (temporary, then renamed)."""
    from distributed import get_worker

    start = time.perf_counter()
    worker = get_worker()
    predictor = _worker_predictor(files, spec, Path(worker.local_directory))
    ok = failed = 0
    with PredictionWriter(task.output, predictor.target_names, predictor.is_ensemble) as writer:
        for chunk in predictor.predict_records(records, task.chunk_size, strict=task.strict, source=task.source):
            writer.write(chunk)
            good = chunk.num_ok
            ok += good
            failed += len(chunk.records) - good
    return PartitionResult(
        part=task.part, output=task.output.name, first_record=records[0].index, last_record=records[-1].index,
        first_line=records[0].line, records=len(records), rows=_count_rows(task.output), ok=ok, failed=failed,
        seconds=round(time.perf_counter() - start, 3), worker=str(worker.address))


def _count_rows(path: Path) -> int:
    """Data rows of a written CSV, read back from the file (quoted line breaks counted once)."""
    with open(path, encoding="utf-8", newline="") as handle:
        return sum(1 for _ in csv.reader(handle)) - 1
