"""Records -> encoded graphs, a chunk at a time, in this process or in worker processes.

Featurization (RDKit parsing, OGB / ZINC features, shortest paths) is single-threaded
Python and a large share of the time per molecule of a prediction with the bundled model
on one thread (``scripts/benchmark.py`` parts a and c; figures in ``docs/benchmarks.md``).
With ``workers > 0`` each chunk is split among worker processes while the calling process
runs the model on the previous chunk; at most two chunks are in flight, so memory stays
bounded.  A worker takes featurization off the main process: with two cores one worker
is the fastest setting measured, even beside other jobs; two workers on two cores are
slower (figures in ``docs/benchmarks.md``).

Workers are started with ``spawn`` (torch and OpenMP do not survive ``fork`` reliably),
so a script that uses them from the Python API needs the usual ``if __name__ ==
"__main__":`` guard: the library's functions default to no worker, and ``molsepnorm
predict`` / ``embed``, entry points that have the guard, to ``"auto"``
(:func:`resolve_workers`).
"""
from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Optional, Sequence, Union

from molsepnorm.errors import InvalidMoleculeError
from molsepnorm.inference.device import usable_cpus

if TYPE_CHECKING:  # the chem package imports RDKit: not for the CLI's import of this module's constants
    from molsepnorm.chem.readers import Record


@dataclass
class Featurized:
    """One record after featurization: its graph, or the reason there is none."""

    graph: Any  # molsepnorm.chem.MolGraph (arrays with the Graphormer encodings), or None
    smiles: str  # what the output shows (RDKit's SMILES for a Mol input)
    error: Optional[str]
    warning: Optional[str] = None  # why the molecule lies outside the model's applicability domain


#: Default limit on heavy atoms per molecule for prediction (a protein in an SDF would need
#: gigabytes: memory grows with the square of the size).  ``--max-atoms`` changes it.
MAX_ATOMS: int = 1000


def featurize_records(records: list[Record], vocab: str, max_atoms: Optional[int] = MAX_ATOMS,
                      domains: Sequence[Any] = ()) -> list[Featurized]:
    """Featurize every record; a failure becomes an error, never an exception.

    Each featurized molecule is checked against ``domains`` (the models'
    :class:`~molsepnorm.checkpoint.domain.ApplicabilityDomain` s, none: no check), here and
    so in the worker processes too.

    The graphs are :class:`~molsepnorm.chem.MolGraph` NumPy arrays, which also suit
    sending between processes (torch would pickle tensors across processes as
    shared-memory file descriptors, and thousands of graphs exhaust the descriptor limit).
    """
    from molsepnorm.chem.featurize import featurize_graph_and_mol

    out = []
    for record in records:
        if record.error is not None:
            out.append(Featurized(None, record.smiles, " ".join(record.error.split())))  # one line, as every reason
            continue
        try:
            graph, mol = featurize_graph_and_mol(record.molecule, vocab, max_atoms=max_atoms,
                                                 sanitized=record.mol_sanitized)
        except InvalidMoleculeError as err:
            # for a Mol (SDF) record, the error's SMILES is RDKit's best try at the bad molecule
            smiles = err.smiles if record.mol is not None and not err.smiles.startswith("<") else record.smiles
            out.append(Featurized(None, smiles, err.reason))
        except Exception as exc:  # noqa: BLE001 - one odd record must not end a run of millions
            out.append(Featurized(None, record.smiles, " ".join(f"could not featurize the molecule: "
                                                                f"{type(exc).__name__}: {exc}".split())))
        else:
            out.append(Featurized(graph, graph.smiles, None, _warning(domains, graph, mol)))
    return out


def _warning(domains: Sequence[Any], graph: Any, mol: Any) -> Optional[str]:
    """The applicability warning of one featurized molecule (None: inside every domain)."""
    if not domains:
        return None
    from molsepnorm.checkpoint.domain import domain_warning

    return domain_warning(domains, graph, mol) or None


def chunks(records: Iterable[Record], size: int) -> Iterator[list[Record]]:
    """Consecutive lists of ``size`` records (the last may be shorter)."""
    if size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {size}")
    chunk: list[Record] = []
    for record in records:
        chunk.append(record)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


#: ``workers="auto"`` starts a worker only for an input file of at least this many bytes
#: (about 1,400 SMILES): below, the whole file is about one chunk and there is nothing to overlap.
AUTO_WORKERS_MIN_BYTES = 64 * 1024


def resolve_workers(workers: Union[int, str], input_path: Any = None) -> int:
    """The featurization worker processes to start: a number as given, or for ``"auto"`` one
    when this process may use two or more CPUs and ``input_path`` is a file of at least
    :data:`AUTO_WORKERS_MIN_BYTES` (featurization then overlaps the model, which no longer
    waits for it: docs/benchmarks.md, "Predicting with the default model" and "The members
    of an ensemble in threads"), else none (standard input, a small file, one CPU).

    Raises:
        ValueError: neither ``"auto"`` nor a number >= 0.
    """
    if workers == "auto":
        from molsepnorm.chem.readers import STDIN

        if input_path is None or str(input_path) == STDIN or usable_cpus() < 2:
            return 0
        try:
            return 1 if os.path.getsize(input_path) >= AUTO_WORKERS_MIN_BYTES else 0
        except OSError:
            return 0
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
        raise ValueError(f"workers must be 'auto' or a number >= 0, got {workers!r}")
    return workers


#: how often a worker checks that the process that started it is still there (seconds)
PARENT_POLL_SECONDS = 1.0


def featurized_chunks(records: Iterable[Record], vocab: str, chunk_size: int, workers: int = 0,
                      max_atoms: Optional[int] = MAX_ATOMS, domains: Sequence[Any] = ()
                      ) -> Iterator[tuple[list[Record], list[Featurized]]]:
    """``(chunk, its featurized records)`` in input order, featurized (and checked against
    ``domains``) by ``workers`` processes (0: in this process)."""
    if workers <= 0:
        for chunk in chunks(records, chunk_size):
            yield chunk, featurize_records(chunk, vocab, max_atoms=max_atoms, domains=domains)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_worker_init)
    try:
        in_flight: deque = deque()
        for chunk in chunks(records, chunk_size):
            step = -(-len(chunk) // workers)
            futures = [pool.submit(featurize_records, chunk[i:i + step], vocab, max_atoms, domains)
                       for i in range(0, len(chunk), step)]
            in_flight.append((chunk, futures))
            if len(in_flight) > 1:  # the next chunk is being featurized while this one is predicted
                yield _collect(in_flight.popleft())
        while in_flight:
            yield _collect(in_flight.popleft())
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _collect(item: tuple[list[Record], list[Any]]) -> tuple[list[Record], list[Featurized]]:
    chunk, futures = item
    return chunk, [f for future in futures for f in future.result()]


def _worker_init() -> None:
    # Featurization runs on NumPy and RDKit: a worker does not import torch (hundreds of MB
    # per process).  Should anything import it here, it gets one thread, not one per core.
    # Ctrl-C reaches every process of the terminal's group: the parent stops the command and
    # shuts the pool down, so a worker ignores it rather than print its own traceback.
    import os
    import signal
    import threading

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[variable] = "1"
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), name="molsepnorm-parent-watch",
                     daemon=True).start()


def _exit_with_parent(parent: int, every: float = PARENT_POLL_SECONDS) -> None:
    """End this worker once its parent is gone.  A parent that exits normally shuts the pool
    down; one killed outright (SIGKILL, the kernel's out-of-memory killer) cannot, and its
    workers would otherwise wait for work forever, orphaned."""
    import os
    import time

    while os.getppid() == parent:
        time.sleep(every)
    os._exit(1)
