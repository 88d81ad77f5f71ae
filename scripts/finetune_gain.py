"""Fine-tuning from a pretrained encoder against training from scratch, few labels.

The pretraining issue's goal: with only a fraction of a data set's training molecules
labelled, ``molsepnorm train --init <encoder>`` should reach a clearly lower test error
than ``molsepnorm train`` from scratch with the same defaults.  This script writes one
table per data set: nci-tpsa's seeded random split (validation and test as they are), its
training split reduced to a random ``--fraction`` (seed 0), as a CSV with a ``split``
column; then trains both ways on it with the library's defaults, for each seed, and
writes the test metrics and the ratio of the means as JSON.

    python scripts/finetune_gain.py --encoder runs/pretrain-moses/encoder.pt --seeds 0 1 2 \\
        --out docs/pretraining/finetune-nci-tpsa-10pct.json
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np


def write_table(fraction: float, work: Path) -> tuple[Path, dict[str, int]]:
    """nci-tpsa with ``fraction`` of its training split kept, as ``smiles,tpsa,split``."""
    import pandas as pd

    from molsepnorm.data import load_dataset

    splits = load_dataset("nci-tpsa")
    rng = np.random.default_rng(0)
    smiles, tpsa, labels = [], [], []
    for split in ("train", "val", "test"):
        indices = np.asarray(splits.split_indices[split])  # into the full data set, like splits.smiles
        positions = np.arange(len(indices))
        if split == "train":
            positions = np.sort(rng.choice(positions, max(1, round(fraction * len(positions))), replace=False))
        for position in positions:
            smiles.append(splits.smiles[int(indices[position])])
            tpsa.append(round(float(splits[split][int(position)].y.view(-1)[0]), 4))  # float32 in the graphs
            labels.append(split)
    table = pd.DataFrame({"smiles": smiles, "tpsa": tpsa, "split": labels})
    work.mkdir(parents=True, exist_ok=True)
    path = work / f"nci-tpsa-{round(100 * fraction)}pct.csv"
    table.to_csv(path, index=False)
    return path, {k: int(v) for k, v in table["split"].value_counts().items()}


def run(csv: Path, seed: int, out: Path, init: str | None, threads: int) -> dict:
    from molsepnorm.train import train
    from molsepnorm.train.config import load_experiment_config

    config = load_experiment_config(None, {
        "data.dataset": str(csv), "data.smiles_column": "smiles", "data.target_columns": ["tpsa"],
        "data.split": "column:split", "train.seed": seed, "train.progress": False, "train.threads": threads})
    start = time.perf_counter()
    result = train(config, out=out, console=False, init=init)
    return {"seed": seed, "init": init, "test": result.test, "val": result.val, "best_epoch": result.best_epoch,
            "epochs": result.epochs, "seconds": round(time.perf_counter() - start, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--encoder", required=True, help="the pretrained encoder checkpoint (or a bundled name)")
    parser.add_argument("--fraction", type=float, default=0.1, help="share of the training split labelled")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--threads", type=int, default=1, help="torch threads of every run (both arms alike)")
    parser.add_argument("--work", default="runs/finetune-gain")
    parser.add_argument("--out", required=True, help="JSON file to write")
    args = parser.parse_args(argv)

    work = Path(args.work)
    csv, sizes = write_table(args.fraction, work)
    rows = []
    for seed in args.seeds:
        for init in (None, args.encoder):
            tag = "init" if init else "scratch"
            row = run(csv, seed, work / f"{tag}-seed{seed}", init, args.threads)
            rows.append(row)
            print(f"seed {seed} {tag:8s} test MAE {row['test']['mae']:.3f}  ({row['seconds']:.0f} s, "
                  f"best epoch {row['best_epoch']} of {row['epochs']})", flush=True)
    summary = {}
    for tag, is_init in (("scratch", False), ("init", True)):
        maes = [r["test"]["mae"] for r in rows if (r["init"] is not None) == is_init]
        summary[tag] = {"mae_mean": statistics.fmean(maes), "mae_std": statistics.pstdev(maes), "maes": maes}
    summary["ratio_init_over_scratch"] = summary["init"]["mae_mean"] / summary["scratch"]["mae_mean"]
    print(f"scratch {summary['scratch']['mae_mean']:.3f} ± {summary['scratch']['mae_std']:.3f}, "
          f"init {summary['init']['mae_mean']:.3f} ± {summary['init']['mae_std']:.3f}, "
          f"ratio {summary['ratio_init_over_scratch']:.3f}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({
        "command": " ".join([Path(sys.executable).name, *sys.argv]), "data": str(csv), "sizes": sizes,
        "fraction": args.fraction, "encoder": args.encoder, "threads": args.threads, "machine": platform.platform(),
        "summary": summary, "runs": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
