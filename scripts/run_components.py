"""Each molsepnorm run of ``compare_chemprop.py`` work folders, as one JSON: what its blend did.

    python scripts/run_components.py runs/s41/timed/results.json [...] > components.json

For every molsepnorm row of each ``results.json`` the script reads the run directory its
train command wrote (``--out``): from ``results.json`` the best epoch, how the run stopped,
the validation and test metrics of what ``best.pt`` predicts (``blend``) and the companion
(features chosen, blend weights, each model's validation and test metrics); from
``metrics.jsonl`` every epoch's validation MAE of the Graphormer and of the blend (for
classification the Graphormer's ROC-AUC), the blend's weights and the epoch's seconds.
docs/accuracy.md ("The blend picks the epoch") quotes these figures; the run directories
themselves are not committed.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

HISTORY_KEYS = ("epoch", "val_mae", "val_blend_mae", "val_rocauc", "blend_weight", "eval_seconds", "epoch_seconds")
COMPANION_KEYS = ("radius", "properties", "weights", "weights_novel", "features", "scores")


def rounded(value: Any, digits: int = 5) -> Any:
    """``value`` with every float rounded to ``digits`` significant digits (a smaller file)."""
    if isinstance(value, float):
        return float(f"{value:.{digits}g}")
    if isinstance(value, dict):
        return {k: rounded(v, digits) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v, digits) for v in value]
    return value


def components(results_path: str) -> list[dict[str, Any]]:
    """One entry per molsepnorm run of a ``compare_chemprop.py`` results.json."""
    with open(results_path) as f:
        compared = json.load(f)
    runs = []
    for row in compared["results"]:
        if row["tool"] != "molsepnorm":
            continue
        run_dir = row["train_command"].split("--out ")[1].split()[0]
        with open(f"{run_dir}/results.json") as f:
            result = json.load(f)
        with open(f"{run_dir}/metrics.jsonl") as f:
            history = [json.loads(line) for line in f]
        companion = result.get("companion") or {}
        runs.append({
            "results": results_path, "dataset": row["dataset"], "seed": row["seed"],
            "train_command": row["train_command"], "best_epoch": result["best_epoch"], "epochs": result["epochs"],
            "stopped": result["stopped"], "blend": {part: result[part] for part in ("val", "test")},
            "companion": {k: companion.get(k) for k in COMPANION_KEYS},
            "history": [{k: epoch[k] for k in HISTORY_KEYS if k in epoch} for epoch in history],
        })
    return runs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", help="results.json files written by compare_chemprop.py")
    args = parser.parse_args(argv)
    out = {"command": "python scripts/run_components.py " + " ".join(args.results),
           "runs": [run for path in args.results for run in components(path)]}
    json.dump(rounded(out), sys.stdout, separators=(",", ":"))
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
