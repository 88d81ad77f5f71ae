"""Fine-tuning from a pretrained encoder against training from scratch, few labels.

The pretraining issue's goal: with only a fraction of a data set's training molecules
labelled, ``molsepnorm train --init <encoder>`` should reach a clearly lower test error
than ``molsepnorm train`` from scratch with the same defaults.  For each seed this trains
both ways on the data set with its training split reduced to a random ``--fraction``
(``data.train_fraction``, drawn with ``data.train_fraction_seed``, 0 unless ``--set`` says
otherwise: the same molecules for every run; validation and test as they are), with the
library's defaults, and writes the test metrics and the ratio of
the means as JSON.  On regression the defaults blend a fingerprint companion into what
``best.pt`` predicts (``train.companion``), which can be the whole prediction in both arms
(nci-tpsa): the Graphormer's own test metrics and their ratio are written beside the
blend's (``graphormer_test``, ``graphormer_mae_mean``, ``graphormer_ratio_init_over_scratch``).

    python scripts/finetune_gain.py --dataset nci-tpsa --encoder runs/pretrain-moses/encoder.pt \\
        --seeds 0 1 2 --out docs/pretraining/finetune-nci-tpsa-10pct.json

With ``--runs-init`` and ``--runs-scratch`` it trains nothing: it summarizes finished run
directories of each arm (``molsepnorm train ... --out DIR``, each DIR's ``results.json`` and
``config.yaml``), after checking that both arms trained on the same data, fraction and
subset, the first from an encoder and the second with ``--init none``:

    python scripts/finetune_gain.py --runs-init runs/ft-s* --runs-scratch runs/scratch-s* --out summary.json

Beside the means and their ratio it writes a 95 % bootstrap interval of the ratio (the
seeds of each arm resampled, 10,000 draws, numpy seed 0) and the one-sided Mann-Whitney p
of "fine-tuned errs less" (scipy).
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


def from_run(path: Path) -> dict:
    """The row :func:`run` returns, read from a finished run directory (and its config)."""
    from molsepnorm.config import read_yaml

    results, config = json.loads((path / "results.json").read_text()), read_yaml(path / "config.yaml")
    companion = results.get("companion") or {}
    return {"seed": results["seed"], "init": config["train"].get("init") or "none", "run": str(path),  # null: none
            "test": results["test"], "val": results["val"],
            "graphormer_test": (companion.get("scores") or {}).get("graphormer", {}).get("test"),
            "novel": (companion.get("novel") or {}).get("chosen"), "best_epoch": results["best_epoch"],
            "epochs": results["epochs"], "data": {"dataset": config["data"]["dataset"],
                                                  "options": config["data"].get("options") or {},
                                                  "train_fraction": config["data"].get("train_fraction", 1.0),
                                                  "train_fraction_seed": config["data"].get("train_fraction_seed", 0)}}


def ratio_interval(init: list[float], scratch: list[float], draws: int = 10_000) -> tuple[float, float]:
    """95 % bootstrap interval of mean(init) / mean(scratch), each arm's seeds resampled."""
    import numpy as np

    rng = np.random.default_rng(0)
    a, b = np.asarray(init), np.asarray(scratch)
    ratios = (rng.choice(a, (draws, a.size)).mean(1) / rng.choice(b, (draws, b.size)).mean(1))
    low, high = np.percentile(ratios, [2.5, 97.5])
    return float(low), float(high)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="nci-tpsa", help="a named data set or a CSV / SDF file")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="config overrides of both arms, e.g. train.epochs=100 (YAML values)")
    parser.add_argument("--init-set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="config overrides of the fine-tuned arm only, after --set (a fine-tuning recipe)")
    parser.add_argument("--arms", nargs="+", choices=("scratch", "init"), default=["scratch", "init"],
                        help="which arms to run (the ratio needs both)")
    parser.add_argument("--encoder", help="the pretrained encoder checkpoint (or a bundled name); needed to train")
    parser.add_argument("--runs-init", nargs="+", type=Path, default=[], metavar="DIR",
                        help="finished fine-tuned runs to summarize (nothing is trained)")
    parser.add_argument("--runs-scratch", nargs="+", type=Path, default=[], metavar="DIR",
                        help="finished runs from scratch to summarize, with --runs-init")
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
    if args.runs_init or args.runs_scratch:
        if not (args.runs_init and args.runs_scratch):
            parser.error("give both --runs-init and --runs-scratch")
        given = [flag for flag, value in (("--set", args.set), ("--init-set", args.init_set),
                                          ("--encoder", args.encoder)) if value]
        if given:
            parser.error(f"{', '.join(given)}: the runs' own settings are read; nothing is trained")
        rows = [from_run(path) for path in [*args.runs_init, *args.runs_scratch]]
        if len({json.dumps(row["data"], sort_keys=True) for row in rows}) != 1:
            parser.error("the runs did not all train on the same data, loading options, fraction and subset")
        if any((row["init"] == "none") != (row["run"] in map(str, args.runs_scratch)) for row in rows):
            parser.error("every --runs-scratch run, and none of --runs-init, must have trained with --init none")
        args.dataset, args.fraction = rows[0]["data"]["dataset"], rows[0]["data"]["train_fraction"]
        args.encoder = ", ".join(sorted({row["init"] for row in rows if row["init"] != "none"}))
    elif args.encoder is None:
        parser.error("--encoder is needed to train (or give --runs-init and --runs-scratch)")
    for row in rows:  # summarized runs
        print(f"{row['run']}: seed {row['seed']} init {row['init']} test MAE {row['test']['mae']:.4f}", flush=True)
    seeds = [] if rows else args.seeds
    for seed in seeds:
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
        summary["ratio_interval_95"] = ratio_interval(summary["init"]["maes"], summary["scratch"]["maes"])
        from scipy.stats import mannwhitneyu

        summary["mannwhitney_p_init_lower"] = float(mannwhitneyu(summary["init"]["maes"], summary["scratch"]["maes"],
                                                                 alternative="less").pvalue)
        print(f"ratio {summary['ratio_init_over_scratch']:.3f} (95 % bootstrap interval "
              f"{summary['ratio_interval_95'][0]:.3f}-{summary['ratio_interval_95'][1]:.3f}; one-sided Mann-Whitney "
              f"p {summary['mannwhitney_p_init_lower']:.3g}; {len(summary['init']['maes'])} and "
              f"{len(summary['scratch']['maes'])} runs)")
        if all("graphormer_mae_mean" in summary[tag] for tag in ("init", "scratch")):
            summary["graphormer_ratio_init_over_scratch"] = (summary["init"]["graphormer_mae_mean"]
                                                             / summary["scratch"]["graphormer_mae_mean"])
            print(f"the Graphormer alone: ratio {summary['graphormer_ratio_init_over_scratch']:.3f}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    summarized = bool(args.runs_init)  # the runs' settings are in each row ("data", "init"), not in the flags
    Path(args.out).write_text(json.dumps({
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "mode": "summarized finished runs" if summarized else "trained", "dataset": args.dataset,
        "fraction": args.fraction, "encoder": args.encoder,
        **({} if summarized else {"overrides": overrides, "init_overrides": init_overrides, "threads": args.threads,
                                  "machine": platform.platform()}),
        "summary": summary, "runs": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
