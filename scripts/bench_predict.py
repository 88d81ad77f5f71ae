"""Benchmark ``molsepnorm predict`` on many molecules: molecules/s and peak memory.

    python scripts/bench_predict.py                      # 10,000 and 100,000 SMILES, bundled model
    python scripts/bench_predict.py --sizes 100000 --threads 1 --batch-size 128
    python scripts/bench_predict.py --sizes 100000 --workers 1   # featurize in a second process

The SMILES are real molecules repeated until there are enough: ogbg-molhiv's
``mapping/mol.csv.gz`` under ``$MOLSEPNORM_DATA`` (or ``../shared/data``) when present, else
RDKit's 4,999 NCI molecules.  They are written to a temporary ``.smi`` and each size runs in
a fresh process, which reports its own peak resident memory (``ru_maxrss``): if memory is
flat, the peak does not grow with the number of molecules.  With ``--workers`` the figure
is the main process's only (each worker holds about one chunk of graphs more).
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
import time
from pathlib import Path

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


def write_smi(path: Path, n: int) -> str:
    smiles, source = source_smiles()
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            fh.write(f"{smiles[i % len(smiles)]} m{i + 1}\n")
    return source


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated numbers of molecules")
    parser.add_argument("--model", default="tpsa-nci-small")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--chunk-size", type=int, default=2_000)
    parser.add_argument("--workers", type=int, default=0, help="featurization worker processes")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--input", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(s) for s in args.sizes.split(",")):
            smi = Path(tmp) / f"bench{n}.smi"
            source = write_smi(smi, n)
            command = [sys.executable, __file__, "--child", "--input", str(smi), "--out", str(Path(tmp) / "out.csv"),
                       "--model", args.model, "--threads", str(args.threads), "--batch-size", str(args.batch_size),
                       "--chunk-size", str(args.chunk_size), "--workers", str(args.workers)]
            result = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
            result["smiles_from"] = source
            print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
