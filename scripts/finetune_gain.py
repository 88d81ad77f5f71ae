"""Fine-tuning from a pretrained encoder against training from scratch, few labels.

The pretraining issue's goal: with only a fraction of a data set's training molecules
labelled, ``molsepnorm train --init <encoder>`` should reach a clearly lower test error
than ``molsepnorm train`` from scratch with the same defaults.  For each seed this trains
both ways on the data set with its training split reduced to a random ``--fraction``
(``data.train_fraction``: seed 0, the same molecules for every run; validation and test
as they are), with the library's defaults, and writes the test metrics and the ratio of
the means as JSON.  On regression the defaults blend a fingerprint companion into what
``best.pt`` predicts (``train.companion``), which can be the whole prediction in both arms
(nci-tpsa): the Graphormer's own test metrics and their ratio are written beside the
blend's (``graphormer_test``, ``graphormer_mae_mean``, ``graphormer_ratio_init_over_scratch``).

    python scripts/finetune_gain.py --dataset nci-tpsa --encoder runs/pretrain-moses/encoder.pt \\
        --seeds 0 1 2 --out docs/pretraining/finetune-nci-tpsa-10pct.json
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path



def run(dataset: str, fraction: float, seed: int, out: Path, init: str, threads: int,
        overrides: dict) -> dict:
    from molsepnorm.train import train
    from molsepnorm.train.config import load_experiment_config

    config = load_experiment_config(None, {
        "data.dataset": dataset, "data.train_fraction": fraction, "train.seed": seed, "train.progress": False,
        "train.threads": threads, **overrides})
    start = time.perf_counter()
    result = train(config, out=out, console=False, init=init)
    alone = result.companion["scores"]["graphormer"]["test"] if result.companion else None  # without the blend
    return {"seed": seed, "init": init, "test": result.test, "val": result.val, "graphormer_test": alone,
            "best_epoch": result.best_epoch, "epochs": result.epochs, "seconds": round(time.perf_counter() - start, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="nci-tpsa", help="a named data set or a CSV / SDF file")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="config overrides of both arms, e.g. train.epochs=100 (YAML values)")
    parser.add_argument("--init-set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="config overrides of the fine-tuned arm only, after --set (a fine-tuning recipe)")
    parser.add_argument("--arms", nargs="+", choices=("scratch", "init"), default=["scratch", "init"],
                        help="which arms to run (the ratio needs both)")
    parser.add_argument("--encoder", required=True, help="the pretrained encoder checkpoint (or a bundled name)")
    parser.add_argument("--fraction", type=float, default=0.1, help="share of the training split labelled")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--threads", type=int, default=1, help="torch threads of every run (both arms alike)")
    parser.add_argument("--work", default="runs/finetune-gain")
    parser.add_argument("--out", required=True, help="JSON file to write")
    args = parser.parse_args(argv)

    from molsepnorm._yaml import safe_load

    work = Path(args.work)
    def parse(items: list[str]) -> dict:
        return {key: safe_load(value) for key, value in (item.split("=", 1) for item in items)}

    overrides, init_overrides = parse(args.set), parse(args.init_set)
    rows = []
    for seed in args.seeds:
        for tag in args.arms:
            init = args.encoder if tag == "init" else "none"
            arm = {**overrides, **init_overrides} if tag == "init" else overrides
            row = run(args.dataset, args.fraction, seed, work / f"{tag}-seed{seed}", init, args.threads, arm)
            rows.append(row)
            print(f"seed {seed} {tag:8s} test MAE {row['test']['mae']:.3f}  ({row['seconds']:.0f} s, "
                  f"best epoch {row['best_epoch']} of {row['epochs']})", flush=True)
    summary = {}
    for tag in args.arms:
        maes = [r["test"]["mae"] for r in rows if (r["init"] != "none") == (tag == "init")]
        summary[tag] = {"mae_mean": statistics.fmean(maes), "mae_std": statistics.pstdev(maes), "maes": maes}
        alone = [r["graphormer_test"]["mae"] for r in rows
                 if (r["init"] != "none") == (tag == "init") and r["graphormer_test"] is not None]
        if alone and len(alone) == len(maes):
            summary[tag]["graphormer_mae_mean"] = statistics.fmean(alone)
        print(f"{tag} {summary[tag]['mae_mean']:.3f} ± {summary[tag]['mae_std']:.3f}"
              + (f" (the Graphormer alone {summary[tag]['graphormer_mae_mean']:.3f})"
                 if "graphormer_mae_mean" in summary[tag] else ""))
    if len(summary) == 2:
        summary["ratio_init_over_scratch"] = summary["init"]["mae_mean"] / summary["scratch"]["mae_mean"]
        print(f"ratio {summary['ratio_init_over_scratch']:.3f}")
        if all("graphormer_mae_mean" in summary[tag] for tag in ("init", "scratch")):
            summary["graphormer_ratio_init_over_scratch"] = (summary["init"]["graphormer_mae_mean"]
                                                             / summary["scratch"]["graphormer_mae_mean"])
            print(f"the Graphormer alone: ratio {summary['graphormer_ratio_init_over_scratch']:.3f}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({
        "command": " ".join([Path(sys.executable).name, *sys.argv]), "dataset": args.dataset,
        "fraction": args.fraction, "overrides": overrides, "init_overrides": init_overrides, "encoder": args.encoder,
        "threads": args.threads, "machine": platform.platform(),
        "summary": summary, "runs": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
