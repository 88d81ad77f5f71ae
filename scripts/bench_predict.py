"""Benchmark ``molsepnorm predict`` on many molecules: molecules/s, peak memory, one row per input.

    python scripts/bench_predict.py                      # 10,000 and 100,000 SMILES, bundled model
    python scripts/bench_predict.py --sizes 100000 --threads 1 --batch-size 128
    python scripts/bench_predict.py --sizes 100000 --workers 1   # featurize in a second process
    python scripts/bench_predict.py --moses train --workers 1    # all 1,584,663 MOSES training SMILES
    python scripts/bench_predict.py --moses train --limit 20000  # its first 20,000

Inputs:

* ``--sizes``: real molecules repeated until there are enough: ogbg-molhiv's
  ``mapping/mol.csv.gz`` under ``$MOLSEPNORM_DATA`` (or ``../shared/data``) when present,
  else RDKit's 4,999 NCI molecules, written to a temporary ``.smi``.
* ``--moses SPLIT``: a MOSES split (``molsepnorm.data.moses``), its gzip CSV read as it is
  (the ``SMILES`` column), or with ``--limit N`` its first N SMILES written to a temporary
  ``.smi``.

Each run is a fresh process.  Its memory is followed from outside every 0.1 s over its
whole process tree (the ``--workers`` featurization processes included), from ``/proc``:

* ``peak_memory_mib``: the memory the run takes from the machine: the largest sum over
  the tree, at one moment, of each process's anonymous and shared-memory resident pages
  (``RssAnon``, ``RssShmem``: heaps, tensors, graphs) plus the file-backed pages of the
  process that maps the most (``RssFile``: torch's, RDKit's and Python's libraries, which
  every worker maps again but the machine holds once);
* ``peak_pss_all_mib``: the same moment-to-moment sum of proportional set sizes (``Pss``
  of ``smaps_rollup``), which also divides library pages with other programs on the
  machine that map them, so it is lower on a machine shared with other torch jobs;
* ``peak_rss_all_mib``: the largest sum of resident sizes at one moment, which counts
  those shared library pages once per process;
* ``peak_rss_sum_of_peaks_mib``: the sum of each process's own peak (``VmHWM``), an upper
  bound of the former; ``peak_rss_mib``: the main process's peak (``ru_maxrss``).

Afterwards the output is read back: it must hold one row per input record, with the
records' ids in input order.
"""
from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parents[1]


def source_smiles() -> tuple[list[str], str]:
    """Real SMILES to repeat, and where they came from."""
    roots = [os.environ.get("MOLSEPNORM_DATA"), str(REPO.parent / "shared" / "data")]
    for root in filter(None, roots):
        path = Path(root) / "ogbg_molhiv" / "mapping" / "mol.csv.gz"
        if path.is_file():
            with gzip.open(path, "rt", encoding="utf-8") as fh:
                reader = csv.DictReader(fh)
                return [row["smiles"] for row in reader], str(path)
    from rdkit import RDConfig

    path = Path(RDConfig.RDDataDir) / "NCI" / "first_5K.smi"
    return [line.split()[0] for line in path.read_text().splitlines() if line.strip()], str(path)


def write_smi(path: Path, n: int) -> tuple[str, list[str]]:
    """``n`` repeated real SMILES named ``m1`` ... ``mn``; their source and the ids."""
    smiles, source = source_smiles()
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            fh.write(f"{smiles[i % len(smiles)]} m{i + 1}\n")
    return source, [f"m{i + 1}" for i in range(n)]


def moses_input(split: str, limit: Optional[int], folder: Path) -> tuple[Path, int]:
    """The MOSES file to predict (the split itself, or its first ``limit`` SMILES as a .smi)
    and its number of records, counted here independently of the predict run."""
    from molsepnorm.data.moses import FILES, ensure_moses, moses_smiles

    if limit is None:
        path = ensure_moses() / FILES[split].name
        with gzip.open(path, "rb") as fh:
            return path, sum(1 for line in fh if line.strip()) - 1  # minus the header
    path = folder / f"moses-{split}-{limit}.smi"
    n = 0
    with open(path, "w", encoding="utf-8") as fh:
        for smiles in moses_smiles(split, limit=limit):
            fh.write(smiles + "\n")
            n += 1
    return path, n


def check_output(out: Path, expected_ids: Optional[list[str]], n: int) -> int:
    """Rows of the output CSV; fails unless there is one per input record with the ids in
    input order (``expected_ids``, else ``1 .. n``: the record numbers of unnamed records)."""
    rows = 0
    with open(out, encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader)
        at = header.index("id")
        for rows, row in enumerate(reader, start=1):
            want = expected_ids[rows - 1] if expected_ids is not None and rows <= len(expected_ids) else str(rows)
            if row[at] != want:
                raise SystemExit(f"{out}, data row {rows}: id {row[at]!r}, expected {want!r}: rows out of order")
    if rows != n:
        raise SystemExit(f"{out}: {rows} rows for {n} input records")
    return rows


class TreeMemory:
    """Follows the resident memory of a process and its descendants from ``/proc`` (Linux)."""

    def __init__(self, pid: int, interval: float = 0.1) -> None:
        self.pid = pid
        self.interval = interval
        self.peak_total_kib = 0
        self.peak_pss_kib = 0
        self.peak_memory_kib = 0
        self.peaks_kib: dict[int, int] = {}  # VmHWM of every process seen
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "TreeMemory":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _tree(self) -> list[int]:
        pids, frontier = [], [self.pid]
        while frontier:
            pid = frontier.pop()
            pids.append(pid)
            for task in Path(f"/proc/{pid}/task").glob("*/children"):
                try:
                    frontier.extend(int(c) for c in task.read_text().split())
                except OSError:
                    pass
        return pids

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            total = pss = private = files = 0
            for pid in self._tree():
                status = _status(pid)
                if status:
                    total += status.get("VmRSS", 0)
                    private += status.get("RssAnon", 0) + status.get("RssShmem", 0)
                    files = max(files, status.get("RssFile", 0))
                    self.peaks_kib[pid] = max(self.peaks_kib.get(pid, 0), status.get("VmHWM", 0))
                    pss += _pss(pid)
            self.peak_total_kib = max(self.peak_total_kib, total)
            self.peak_pss_kib = max(self.peak_pss_kib, pss)
            self.peak_memory_kib = max(self.peak_memory_kib, private + files)


def _status(pid: int) -> dict[str, int]:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return {}
    return {line.split(":")[0]: int(line.split()[1]) for line in text.splitlines()
            if line.startswith(("VmRSS:", "VmHWM:", "RssAnon:", "RssFile:", "RssShmem:"))}


def _pss(pid: int) -> int:
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0
    return next((int(line.split()[1]) for line in text.splitlines() if line.startswith("Pss:")), 0)


def child(args: argparse.Namespace) -> None:
    """One run in this process; prints a JSON line with the figures."""
    from molsepnorm.inference.device import inference_process_settings
    from molsepnorm.predict import Predictor, predict_file

    inference_process_settings(args.threads)  # what `molsepnorm predict` sets
    start = time.perf_counter()
    predictor = Predictor.load(args.model, batch_size=args.batch_size)
    summary = predict_file(predictor, args.input, out=args.out, chunk_size=args.chunk_size, workers=args.workers)
    wall = time.perf_counter() - start
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(json.dumps({"n": summary.total, "ok": summary.ok, "failed": summary.failed,
                      "predict_seconds": round(summary.seconds, 2), "mol_per_s": round(summary.per_second, 1),
                      "wall_seconds_with_load": round(wall, 2), "peak_rss_mib": round(peak_mib, 1),
                      "threads": args.threads, "workers": args.workers, "batch_size": args.batch_size,
                      "chunk_size": args.chunk_size}))


def run(args: argparse.Namespace, source: Path, out: Path, n: int, ids: Optional[list[str]]) -> dict:
    command = [sys.executable, __file__, "--child", "--input", str(source), "--out", str(out),
               "--model", args.model, "--threads", str(args.threads), "--batch-size", str(args.batch_size),
               "--chunk-size", str(args.chunk_size), "--workers", str(args.workers)]
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    with TreeMemory(process.pid) as memory:
        stdout, _ = process.communicate()
    if process.returncode != 0:
        raise SystemExit(f"the predict run failed (exit {process.returncode})")
    result = json.loads(stdout.strip().splitlines()[-1])
    result["process_wall_seconds"] = round(time.perf_counter() - start, 2)
    result["peak_memory_mib"] = round(memory.peak_memory_kib / 1024, 1)
    result["peak_pss_all_mib"] = round(memory.peak_pss_kib / 1024, 1)
    result["peak_rss_all_mib"] = round(memory.peak_total_kib / 1024, 1)
    result["peak_rss_sum_of_peaks_mib"] = round(sum(memory.peaks_kib.values()) / 1024, 1)
    result["processes_seen"] = len(memory.peaks_kib)
    result["rows_out"] = check_output(out, ids, n)
    result["one_row_per_input"] = True
    return result


def main() -> None:
    from molsepnorm.data.moses import MOSES_SPLITS

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated numbers of molecules")
    parser.add_argument("--moses", choices=MOSES_SPLITS, default=None,
                        help="predict a MOSES split instead of repeated molecules (--sizes is ignored)")
    parser.add_argument("--limit", type=int, default=None, help="with --moses: only its first N SMILES")
    parser.add_argument("--model", default="tpsa-nci-small")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--chunk-size", type=int, default=2_000)
    parser.add_argument("--workers", type=int, default=0, help="featurization worker processes")
    parser.add_argument("--tmp", default=None, help="writable folder for inputs and outputs (default: system temp)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--input", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    if args.limit is not None and args.moses is None:
        parser.error("--limit goes with --moses")
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        folder = Path(tmp)
        if args.moses is not None:
            source, n = moses_input(args.moses, args.limit, folder)
            result = run(args, source, folder / "out.csv", n, None)
            result.update(smiles_from=f"MOSES {args.moses} ({source})", limit=args.limit)
            print(json.dumps(result), flush=True)
            return
        for n in (int(s) for s in args.sizes.split(",")):
            smi = folder / f"bench{n}.smi"
            origin, ids = write_smi(smi, n)
            result = run(args, smi, folder / "out.csv", n, ids)
            result["smiles_from"] = origin
            print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
