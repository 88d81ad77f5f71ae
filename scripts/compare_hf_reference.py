"""Check molsepnorm's Graphormer against the reference: HF transformers' Graphormer.

Both train on the ZINC subset with one recipe (4 layers x 80, no dropout, L1 on
standardized targets, AdamW with warm-up and linear decay, random batches of 32, the
same number of steps; written out in scripts/peer/hf_graphormer_train.py) and the best
validation epoch is scored on the test split.  molsepnorm runs with ShareNorm (one
LayerNorm for all tokens, as HF) and the head on the graph token alone
(``docs/results/hf-reference.yaml``); the two test MAEs should agree within seed noise.

    bash scripts/peer/setup_hf_env.sh          # once: .peer-venv/ with transformers' Graphormer
    python scripts/compare_hf_reference.py --seeds 0 1 2 --out runs/hf-reference

Resumable: a finished seed (molsepnorm's results.json, HF's hf-seed<S>.json) is skipped,
and molsepnorm's runs resume from last.pt (scripts/compare_norms.py).  Writes
``OUT/summary.md`` and ``OUT/results.json``.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Optional, Sequence

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
from compare_norms import main as compare_norms_main, mean_std  # noqa: E402

CONFIG = REPO / "docs" / "results" / "hf-reference.yaml"


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--epochs", type=int, default=50)
    p.add_argument("--data-root", default=os.environ.get("MOLSEPNORM_DATA"), help="shared data root")
    p.add_argument("--peer-python", default=str(REPO / ".peer-venv" / "bin" / "python"))
    p.add_argument("--threads", type=int, default=None, help="torch threads of the HF side")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    if not args.data_root:
        raise SystemExit("give --data-root or set MOLSEPNORM_DATA (the folder holding ZINC/raw)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = {"molsepnorm share": [], "hf-graphormer": []}
    for seed in args.seeds:
        compare_norms_main(["--config", str(CONFIG), "--norms", "share", "--seeds", str(seed),
                            "--epochs", str(args.epochs), "--data-root", args.data_root,
                            "--out", str(out / "molsepnorm"), "--no-progress"])
        ours = json.loads((out / "molsepnorm" / f"share-seed{seed}" / "results.json").read_text())
        rows["molsepnorm share"].append({"seed": seed, "test_mae": ours["test"]["mae"],
                                         "val_mae": ours["val"]["mae"], "best_epoch": ours.get("best_epoch")})
        peer = out / f"hf-seed{seed}.json"
        if not peer.is_file():
            command = [args.peer_python, str(REPO / "scripts" / "peer" / "hf_graphormer_train.py"),
                       "--data-root", args.data_root, "--seed", str(seed), "--epochs", str(args.epochs),
                       "--out", str(peer)]
            if args.threads:
                command += ["--threads", str(args.threads)]
            with open(out / f"hf-seed{seed}.log", "w") as log:
                subprocess.run(command, check=True, stdout=log, stderr=subprocess.STDOUT)
        theirs = json.loads(peer.read_text())
        rows["hf-graphormer"].append({"seed": seed, "test_mae": theirs["test_mae"], "val_mae": theirs["val_mae"],
                                      "best_epoch": theirs["best_epoch"]})
    lines = ["| model | seeds | val MAE | test MAE | per seed (test) |", "|---|---:|---:|---:|---|"]
    for name, runs in rows.items():
        lines.append(f"| {name} | {len(runs)} | {mean_std([r['val_mae'] for r in runs])} | "
                     f"{mean_std([r['test_mae'] for r in runs])} | "
                     + ", ".join(f"{r['test_mae']:.4f}" for r in runs) + " |")
    a = [r["test_mae"] for r in rows["molsepnorm share"]]
    b = [r["test_mae"] for r in rows["hf-graphormer"]]
    diff = sum(a) / len(a) - sum(b) / len(b)
    spread = max(_std(a), _std(b))
    lines.append(f"\nmean difference {diff:+.4f} (molsepnorm - HF); largest seed std {spread:.4f}; "
                 f"ZINC subset, {args.epochs} epochs, seeds {args.seeds}")
    table = "\n".join(lines) + "\n"
    (out / "summary.md").write_text(table)
    (out / "results.json").write_text(json.dumps({"rows": rows, "epochs": args.epochs,
                                                  "config": CONFIG.read_text()}, indent=2) + "\n")
    print(table)
    return 0


def _std(values: list[float]) -> float:
    if len(values) < 2:
        return 0.0
    m = sum(values) / len(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))


if __name__ == "__main__":
    sys.exit(main())
