"""SepNorm vs ShareNorm over several seeds: train each (norm, seed), then a mean ± std table.

Every (norm, seed) gets its own run directory ``OUT/<norm>-seed<S>``.  The script is
resumable: a run with ``results.json`` is done and skipped, a run with ``last.pt`` only
is resumed (``--resume``), anything else is started.  Run it again after an interruption
and it picks up where it stopped; the table is rebuilt from the ``results.json`` files.

Example (ZINC subset, Graphormer-slim recipe shortened to 100 epochs, 3 seeds)::

    python scripts/compare_norms.py --config configs/zinc-slim.yaml --dataset zinc-subset \
        --epochs 100 --seeds 0 1 2 --out runs/compare-zinc

writes ``runs/compare-zinc/summary.md``::

    | norm  | runs | val mae         | test mae        | test rmse | ...
    | sep   | 3    | 0.2410 ± 0.0050 | 0.2390 ± 0.0061 | ...
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any, Optional, Sequence


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", required=True, help="YAML preset (model/train/data), e.g. configs/zinc-slim.yaml")
    p.add_argument("--dataset", default=None, help="data set name or CSV (default: the preset's)")
    p.add_argument("--data-root", default=None, help="folder of the raw data sets")
    p.add_argument("--norms", nargs="+", default=["sep", "share"], choices=["sep", "share"])
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--epochs", type=int, default=None, help="override the preset's epochs")
    p.add_argument("--max-steps", type=int, default=None, help="override the preset's step budget")
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--lr", type=float, default=None)
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default=None)
    p.add_argument("--out", required=True, help="folder of the run directories and summary.md")
    p.add_argument("--summary-only", action="store_true", help="only rebuild the table from finished runs")
    p.add_argument("--no-progress", action="store_true")
    return p.parse_args(argv)


def run_one(args: argparse.Namespace, norm: str, seed: int, run_dir: Path) -> str:
    """Train, resume or skip one (norm, seed); returns what was done."""
    from molsepnorm.train.api import resume, train
    from molsepnorm.train.config import load_experiment_config

    if (run_dir / "results.json").is_file():
        return "done"
    progress = False if args.no_progress else None
    if (run_dir / "last.pt").is_file():
        resume(run_dir, device=args.device, data_root=args.data_root, progress=progress)
        return "resumed"
    if run_dir.exists():  # started but no checkpoint yet: start again from scratch
        for leftover in ("metrics.jsonl", "metrics.csv"):
            (run_dir / leftover).unlink(missing_ok=True)
    overrides = {
        "model.norm": norm, "train.init": "none", "train.seed": seed, "data.dataset": args.dataset, "data.data_root": args.data_root,
        "train.epochs": args.epochs, "train.max_steps": args.max_steps, "train.batch_size": args.batch_size,
        "train.lr": args.lr, "train.device": args.device, "train.progress": progress,
    }
    train(load_experiment_config(args.config, overrides), out=run_dir)
    return "trained"


def mean_std(values: Sequence[float]) -> str:
    """``mean ± std`` (sample standard deviation, as OGB reports), or ``-``."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return "-"
    mean = sum(finite) / len(finite)
    std = math.sqrt(sum((v - mean) ** 2 for v in finite) / (len(finite) - 1)) if len(finite) > 1 else 0.0
    return f"{mean:.4f} ± {std:.4f}"


def graphormer_alone(result: dict[str, Any]) -> dict[str, Any]:
    """A run's ``results.json`` with the Graphormer's own val / test metrics where it blended
    a companion (``companion.scores.graphormer``), else as it is."""
    scores = ((result.get("companion") or {}).get("scores") or {}).get("graphormer")
    return {**result, "val": scores["val"], "test": scores["test"]} if scores else result


def summary(out: Path, norms: Sequence[str], seeds: Sequence[int]) -> str:
    """A markdown table of the finished runs, one row per norm: the Graphormer's own metrics
    (a run that blended a fingerprint companion is scored without it: the norms differ in
    the Graphormer, which a companion predicting alone would hide)."""
    results: dict[str, list[dict[str, Any]]] = {}
    for norm in norms:
        for seed in seeds:
            path = out / f"{norm}-seed{seed}" / "results.json"
            if path.is_file():
                results.setdefault(norm, []).append(graphormer_alone(json.loads(path.read_text())))
    if not results:
        return "no finished runs yet\n"
    first = next(iter(results.values()))[0]
    metric = first["metric"]
    test_keys = [k for k in first["test"] if "/" not in k]
    header = ["norm", "runs", f"val {metric}", *(f"test {k}" for k in test_keys)]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for norm, runs in results.items():
        cells = [norm, str(len(runs)), mean_std([r["val"].get(metric) for r in runs])]
        cells += [mean_std([r["test"].get(k) for r in runs]) for k in test_keys]
        lines.append("| " + " | ".join(cells) + " |")
    seeds_done = {norm: sorted(r["seed"] for r in runs) for norm, runs in results.items()}
    note = f"\n{first['dataset']}; seeds per norm: {seeds_done}; mean ± sample std over seeds.\n"
    return "\n".join(lines) + "\n" + note


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not args.summary_only:
        for seed in args.seeds:  # seed-major: an interrupted sweep still has both norms per seed
            for norm in args.norms:
                what = run_one(args, norm, seed, out / f"{norm}-seed{seed}")
                print(f"compare_norms: {norm} seed {seed}: {what}", file=sys.stderr)
    table = summary(out, args.norms, args.seeds)
    (out / "summary.md").write_text(table, encoding="utf-8")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
