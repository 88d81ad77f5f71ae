"""molsepnorm against chemprop v2, as a new user would compare them: both CLIs, defaults.

    bash scripts/peer/setup_chemprop_env.sh                  # once: .chemprop-venv/ (chemprop 2.3.1)
    python scripts/compare_chemprop.py                       # nci-tpsa, zinc-subset, molhiv; seed 0
    python scripts/compare_chemprop.py --datasets nci-tpsa --seeds 0 1 2
    python scripts/compare_chemprop.py --csv my.csv --target-columns logS --split-by scaffold
    python scripts/compare_chemprop.py --datasets nci-tpsa --ours-args "--epochs 50"   # a non-default
    bash scripts/setup_user_env.sh                           # once: .user-venv/ (molsepnorm alone)
    python scripts/compare_chemprop.py --ours-python .user-venv/bin/python ...

For every data set the script writes one table, ``data.csv`` (``smiles``, the target
columns, ``split`` = train / val / test), and a ``test.csv`` of the test rows, then for
each tool and seed:

1. trains through the tool's CLI with its defaults on ``data.csv`` and that split column
   (``molsepnorm train --dataset data.csv --split-by column:split``; ``chemprop train
   -i data.csv --splits-column split``), and records the command's wall time;
2. predicts ``test.csv`` through the tool's own ``predict`` command;
3. scores those predictions against the test targets: MAE, RMSE, R² (regression),
   ROC-AUC (binary; OGB's Evaluator for molhiv, scikit-learn's ``roc_auc_score``
   otherwise).

Splits: nci-tpsa is molsepnorm's own seeded random split of RDKit's NCI first-5K with
TPSA; zinc-subset the benchmark's 10,000 / 1,000 / 1,000 (SMILES from the raw pickles);
molhiv OGB's scaffold split (MoleculeNet HIV.csv rows in OGB's order).  A user CSV keeps
its own split column (``--split-by column:NAME``) or is split once here with
molsepnorm's random / scaffold splitter, so both tools see the same rows.  Rows whose
SMILES RDKit cannot parse are left out of both tools' input (chemprop stops at the first
such row) and counted in the output.

chemprop runs from its own virtual environment (``--chemprop``, default
``.chemprop-venv/bin/chemprop``), never a dependency of molsepnorm.  molsepnorm runs with
this script's Python unless ``--ours-python`` names another: ``.user-venv/bin/python``
(``bash scripts/setup_user_env.sh``) holds molsepnorm and its dependencies alone, as a
user installs it, where the development environment also has the test extras.  Both
tools see the same environment variables: no thread settings beyond what each does by
default.

Output: a Markdown table on stdout and JSON at ``--out`` (commands, wall times, metrics,
versions, machine).  docs/accuracy.md holds the figures.
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import platform
import shlex
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pandas as pd
from rdkit import Chem, RDLogger

REPO = Path(__file__).resolve().parent.parent
BUILTINS = ("nci-tpsa", "zinc-subset", "molhiv")


# --------------------------------------------------------------------------- the tables
class Table:
    """One data set as both tools get it: a DataFrame with ``smiles``, targets, ``split``."""

    def __init__(self, name: str, frame: pd.DataFrame, targets: list[str], task: str,
                 dropped: list[tuple[int, str]], note: str) -> None:
        self.name, self.frame, self.targets, self.task = name, frame, targets, task
        self.dropped, self.note = dropped, note

    def write(self, folder: Path) -> tuple[Path, Path]:
        folder.mkdir(parents=True, exist_ok=True)
        data, test = folder / "data.csv", folder / "test.csv"
        self.frame.to_csv(data, index=False)
        # what each tool predicts: the test SMILES alone, so no target column can leak in
        self.frame.loc[self.frame["split"] == "test", ["smiles"]].to_csv(test, index=False)
        return data, test


def _parsable(smiles: list[str]) -> np.ndarray:
    RDLogger.DisableLog("rdApp.*")
    try:
        return np.array([Chem.MolFromSmiles(s) is not None for s in smiles])
    finally:
        RDLogger.EnableLog("rdApp.*")


def _keep_parsable(name: str, frame: pd.DataFrame, targets: list[str], task: str, note: str,
                   row_offset: int = 2, dropped_before: Optional[list[tuple[int, str]]] = None) -> Table:
    """``frame`` without the rows RDKit cannot parse; ``dropped`` lists them (file row, SMILES)."""
    ok = _parsable(frame["smiles"].astype(str).tolist())
    dropped = [(int(i) + row_offset, str(s)) for i, s in zip(frame.index[~ok], frame["smiles"][~ok])]
    return Table(name, frame[ok].reset_index(drop=True), targets, task, (dropped_before or []) + dropped, note)


def _split_column(n: int, indices: dict[str, np.ndarray]) -> np.ndarray:
    labels = np.full(n, "", dtype=object)
    for part, idx in indices.items():
        labels[np.asarray(idx, dtype=np.int64)] = part
    return labels


def _table_from_splits(name: str, data_root: Optional[str], target: str, task: str, note: str) -> Table:
    """A built-in data set with SMILES (nci-tpsa, molhiv) as a table: its targets and split."""
    from molsepnorm.data import load_dataset

    with warnings.catch_warnings():  # the rows RDKit cannot parse: counted in the report instead
        warnings.simplefilter("ignore")
        splits = load_dataset(name, root=data_root, progress=False)
    frame = splits.to_frame().rename(columns={splits.target_names[0]: target})
    if task == "classification":
        frame[target] = frame[target].astype(int)
    return _keep_parsable(name, frame, [target], task, note, dropped_before=[(r.row, r.smiles) for r in splits.skipped])


def table_nci_tpsa(data_root: Optional[str]) -> Table:
    return _table_from_splits("nci-tpsa", data_root, "tpsa", "regression",
                              "RDKit NCI first-5K with TPSA, molsepnorm's seeded random split (seed 0)")


def table_molhiv(data_root: Optional[str]) -> Table:
    return _table_from_splits("molhiv", data_root, "HIV_active", "classification",
                              "ogbg-molhiv: MoleculeNet HIV.csv in OGB's order, OGB's scaffold split")


def table_zinc_subset(data_root: Optional[str]) -> Table:
    from molsepnorm.data.paths import resolve_data_root

    raw = resolve_data_root(data_root) / "ZINC" / "raw"
    rows = []
    for part in ("train", "val", "test"):
        with open(raw / f"{part}.pickle", "rb") as handle:
            mols = pickle.load(handle)
        index = [int(i) for i in (raw / f"{part}.index").read_text().replace(",", " ").split()]
        for i in index:
            rows.append((mols[i]["SMILES"], float(mols[i]["logP_SA_cycle_normalized"][0]), part))
    frame = pd.DataFrame(rows, columns=["smiles", "penalized_logp", "split"])
    return _keep_parsable("zinc-subset", frame, ["penalized_logp"], "regression",
                          "ZINC subset 10,000 / 1,000 / 1,000 (benchmark split), SMILES from the raw pickles")


def table_csv(path: str, smiles_column: str, target_columns: Optional[str], split_by: str,
              seed: int, task: Optional[str]) -> Table:
    from molsepnorm.data.csv_dataset import read_table
    from molsepnorm.data.registry import normalize_split_name
    from molsepnorm.data.splits import murcko_scaffold, random_split, scaffold_split

    source = read_table(Path(path), None)
    if split_by.startswith("column:"):
        split_col = split_by.split(":", 1)[1]
    else:
        split_col = None
    targets = ([t.strip() for t in target_columns.split(",")] if target_columns
               else [c for c in source.columns if c not in (smiles_column, split_col)])
    frame = source[[smiles_column, *targets]].rename(columns={smiles_column: "smiles"})
    name = Path(path).stem
    labels = source[split_col].map(lambda v: normalize_split_name(v) or "") if split_col else ""
    table = _keep_parsable(name, frame.assign(split=labels), targets, "regression", f"{path}")
    if split_col is None:
        n = len(table.frame)
        if split_by == "scaffold":
            mols = [Chem.MolFromSmiles(s) for s in table.frame["smiles"]]
            parts = scaffold_split([murcko_scaffold(m) for m in mols], seed=seed)
        elif split_by == "random":
            parts = random_split(n, seed=seed)
        else:
            raise SystemExit(f"--split-by {split_by!r}: use random, scaffold or column:NAME")
        table.frame["split"] = _split_column(n, parts)
        table.note += f", molsepnorm's {split_by} split (seed {seed})"
    else:
        table.note += f", split column {split_col!r}"
    values = table.frame[targets].to_numpy(dtype=float)
    binary = np.isin(values[~np.isnan(values)], (0.0, 1.0)).all()
    table.task = task or ("classification" if binary else "regression")
    return table


# --------------------------------------------------------------------------- running the tools
def run(command: list[str], log: Path, env: dict[str, str]) -> float:
    """Run ``command`` with stdout/stderr to ``log``; its wall time in seconds. Exits on failure."""
    start = time.perf_counter()
    with open(log, "w") as handle:
        handle.write("$ " + shlex.join(command) + "\n")
        handle.flush()
        done = subprocess.run(command, stdout=handle, stderr=subprocess.STDOUT, env=env)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        tail = log.read_text().splitlines()[-25:]
        raise SystemExit(f"command failed ({done.returncode}): {shlex.join(command)}\n  log {log}:\n"
                         + "\n".join(tail))
    return seconds


def train_ours(table: Table, data: Path, test: Path, out: Path, seed: int, extra: list[str],
               env: dict[str, str], python: str) -> dict[str, Any]:
    molsepnorm = [python, "-m", "molsepnorm"]
    train = [*molsepnorm, "train", "--dataset", str(data), "--smiles-column", "smiles",
             "--target-columns", ",".join(table.targets), "--split-by", "column:split",
             "--seed", str(seed), "--out", str(out / "run"), "--no-progress", *extra]
    predict = [*molsepnorm, "predict", str(test), "--model", str(out / "run" / "best.pt"),
               "--smiles-column", "smiles", "--out", str(out / "test_predictions.csv"),
               "--preview", "0", "--no-progress"]
    train_s = run(train, out / "train.log", env)
    predict_s = run(predict, out / "predict.log", env)
    preds = pd.read_csv(out / "test_predictions.csv")
    if preds["error"].notna().any():
        bad = preds[preds["error"].notna()].head(3).to_dict("records")
        raise SystemExit(f"molsepnorm predict left rows unpredicted: {bad}")
    results = json.loads((out / "run" / "results.json").read_text())
    return {"train_command": shlex.join(train), "predict_command": shlex.join(predict),
            "train_seconds": train_s, "predict_seconds": predict_s,
            "epochs": results.get("epochs"), "best_epoch": results.get("best_epoch"),
            "own_test_metrics": results.get("test"),  # the trainer's own score: a cross-check
            "predictions": preds[table.targets].to_numpy(dtype=float)}


def train_chemprop(table: Table, data: Path, test: Path, out: Path, seed: int, chemprop: str,
                   extra: list[str], env: dict[str, str]) -> dict[str, Any]:
    train = [chemprop, "train", "-i", str(data), "-s", "smiles", "--target-columns", *table.targets,
             "-t", table.task, "--splits-column", "split", "--data-seed", str(seed),
             "--pytorch-seed", str(seed), "-o", str(out / "run"), *extra]
    predict = [chemprop, "predict", "-i", str(test), "-s", "smiles", "--model-paths", str(out / "run"),
               "-o", str(out / "test_predictions.csv")]
    train_s = run(train, out / "train.log", env)
    predict_s = run(predict, out / "predict.log", env)
    preds = pd.read_csv(out / "test_predictions.csv")
    return {"train_command": shlex.join(train), "predict_command": shlex.join(predict),
            "train_seconds": train_s, "predict_seconds": predict_s,
            "predictions": preds[table.targets].to_numpy(dtype=float)}


# --------------------------------------------------------------------------- metrics
def score(table: Table, predictions: np.ndarray) -> dict[str, float]:
    from sklearn.metrics import mean_absolute_error, mean_squared_error, r2_score, roc_auc_score

    truth = table.frame.loc[table.frame["split"] == "test", table.targets].to_numpy(dtype=float)
    if predictions.shape != truth.shape:
        raise SystemExit(f"{table.name}: predictions {predictions.shape} vs test targets {truth.shape}")
    out: dict[str, float] = {}
    for j, target in enumerate(table.targets):
        mask = ~np.isnan(truth[:, j])
        y, p = truth[mask, j], predictions[mask, j]
        if np.isnan(p).any():
            raise SystemExit(f"{table.name}: {int(np.isnan(p).sum())} NaN predictions for {target}")
        suffix = "" if len(table.targets) == 1 else f"_{target}"
        if table.task == "classification":
            if table.name == "molhiv":
                from ogb.graphproppred import Evaluator

                auc = Evaluator("ogbg-molhiv").eval({"y_true": y[:, None], "y_pred": p[:, None]})["rocauc"]
            else:
                auc = roc_auc_score(y, p)
            out[f"rocauc{suffix}"] = float(auc)
        else:
            out[f"mae{suffix}"] = float(mean_absolute_error(y, p))
            out[f"rmse{suffix}"] = float(np.sqrt(mean_squared_error(y, p)))
            out[f"r2{suffix}"] = float(r2_score(y, p))
    return out


# --------------------------------------------------------------------------- report
_VERSIONS = """import importlib.metadata as m, platform, sys
print(platform.python_version())
for name in sys.argv[1:]:
    try:
        print(m.version(name))
    except m.PackageNotFoundError:
        print("absent")"""


def installed(python: str, names: list[str]) -> dict[str, str]:
    """``{"python": ..., name: version or "absent", ...}`` in the environment of ``python``."""
    text = subprocess.run([python, "-c", _VERSIONS, *names], capture_output=True, text=True).stdout.split()
    return dict(zip(["python", *names], text))


def versions(chemprop: Optional[str], ours_python: str) -> dict[str, str]:
    ours = installed(ours_python, ["torch", "molsepnorm", "transformers"])
    info = {"python": ours.get("python", "?"), "torch": ours.get("torch", "?"), "molsepnorm": ours.get("molsepnorm", "?"),
            "transformers_in_molsepnorm_env": ours.get("transformers", "?"), "molsepnorm_python": ours_python}
    if chemprop:
        peer = installed(str(Path(chemprop).with_name("python")), ["chemprop", "torch", "lightning"])
        info.update({f"chemprop_{k}" if k != "chemprop" else k: v for k, v in peer.items() if k != "python"})
    return info


def summary(results: list[dict[str, Any]]) -> str:
    lines = ["| data set | tool | seeds | test metric (mean ± std) | train wall s (mean) | ratio of times |",
             "|---|---|---:|---|---:|---:|"]
    by_key: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in results:
        by_key.setdefault((row["dataset"], row["tool"]), []).append(row)
    for (dataset, tool), rows in by_key.items():
        metric = "rocauc" if "rocauc" in rows[0]["metrics"] else "mae"
        values = np.array([r["metrics"][metric] for r in rows])
        times = np.array([r["train_seconds"] for r in rows])
        other = by_key.get((dataset, "chemprop"))
        ratio = f"{times.mean() / np.mean([r['train_seconds'] for r in other]):.2f}" if other else ""
        extra = f", R² {np.mean([r['metrics']['r2'] for r in rows]):.3f}" if metric == "mae" else ""
        lines.append(f"| {dataset} | {tool} | {len(rows)} | {metric} {values.mean():.4f} ± {values.std():.4f}"
                     f"{extra} | {times.mean():.0f} | {ratio} |")
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="*", default=None, choices=BUILTINS,
                        help="built-in data sets to compare on (default: all three, or none when --csv is given)")
    parser.add_argument("--csv", action="append", default=[], help="a user CSV / TSV (repeatable)")
    parser.add_argument("--smiles-column", default="smiles", help="CSV: SMILES column")
    parser.add_argument("--target-columns", default=None, help="CSV: comma-separated targets")
    parser.add_argument("--split-by", default="random", help="CSV: random | scaffold | column:NAME")
    parser.add_argument("--task", choices=("regression", "classification"), default=None,
                        help="CSV: default binary 0/1 targets -> classification, else regression")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0], help="training seeds of both tools")
    parser.add_argument("--tools", nargs="+", choices=("molsepnorm", "chemprop"),
                        default=["molsepnorm", "chemprop"])
    parser.add_argument("--ours-args", default="", help="extra flags for `molsepnorm train` (quoted)")
    parser.add_argument("--chemprop-args", default="", help="extra flags for `chemprop train` (quoted)")
    parser.add_argument("--ours-python", default=sys.executable,
                        help="the Python that runs molsepnorm (default: this one); .user-venv/bin/python "
                             "after `bash scripts/setup_user_env.sh` is a user's install, without the test extras")
    parser.add_argument("--chemprop", default=str(REPO / ".chemprop-venv" / "bin" / "chemprop"),
                        help="the chemprop executable of its venv")
    parser.add_argument("--data-root", default=None, help="data root (default $MOLSEPNORM_DATA)")
    parser.add_argument("--work", default="runs/compare-chemprop", help="folder for tables, runs, logs")
    parser.add_argument("--out", default=None, help="JSON output (default <work>/results.json)")
    args = parser.parse_args(argv)

    if "chemprop" in args.tools and not Path(args.chemprop).exists():
        raise SystemExit(f"{args.chemprop} not found: run `bash scripts/peer/setup_chemprop_env.sh` "
                         "or pass --chemprop / --tools molsepnorm")
    builders = {"nci-tpsa": table_nci_tpsa, "zinc-subset": table_zinc_subset, "molhiv": table_molhiv}
    if args.datasets is None:
        args.datasets = [] if args.csv else list(BUILTINS)
    tables = [builders[name](args.data_root) for name in args.datasets]
    tables += [table_csv(p, args.smiles_column, args.target_columns, args.split_by, 0, args.task)
               for p in args.csv]
    work = Path(args.work)
    env = dict(os.environ, OUTDATED_IGNORE="1", PYTHONWARNINGS="ignore")
    results: list[dict[str, Any]] = []
    out_path = Path(args.out) if args.out else work / "results.json"
    report: dict[str, Any] = {
        "command": shlex.join([sys.executable, *sys.argv]), "machine": {"cores": os.cpu_count(),
                                                                       "platform": platform.platform()},
        "versions": versions(args.chemprop if "chemprop" in args.tools else None, args.ours_python),
        "datasets": {}, "results": results}
    for table in tables:
        folder = work / table.name
        data, test = table.write(folder)
        sizes = table.frame["split"].value_counts().to_dict()
        report["datasets"][table.name] = {"note": table.note, "task": table.task, "targets": table.targets,
                                          "sizes": sizes, "dropped_unparsable": len(table.dropped),
                                          "dropped_rows": table.dropped[:20]}
        print(f"[{table.name}] {sizes}, task {table.task}, {len(table.dropped)} unparsable rows left out",
              flush=True)
        for seed in args.seeds:
            for tool in args.tools:
                out = folder / f"{tool}-seed{seed}"
                out.mkdir(parents=True, exist_ok=True)
                if tool == "molsepnorm":
                    if (out / "run").exists():
                        raise SystemExit(f"{out / 'run'} exists: remove it or pick another --work")
                    got = train_ours(table, data, test, out, seed, shlex.split(args.ours_args), env,
                                     args.ours_python)
                else:
                    got = train_chemprop(table, data, test, out, seed, args.chemprop,
                                         shlex.split(args.chemprop_args), env)
                metrics = score(table, got.pop("predictions"))
                row = {"dataset": table.name, "tool": tool, "seed": seed, **got, "metrics": metrics}
                results.append(row)
                print(f"  {tool:<10} seed {seed}: {metrics}  train {got['train_seconds']:.0f} s", flush=True)
                out_path.parent.mkdir(parents=True, exist_ok=True)
                out_path.write_text(json.dumps(report, indent=2) + "\n")
    print()
    print(summary(results))
    print(f"\nJSON: {out_path}")


if __name__ == "__main__":
    main()
