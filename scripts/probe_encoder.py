"""Linear probe of frozen encoders: how much of a property their head's input already holds.

For each checkpoint (a pretrained ``encoder.pt``, a trained model, or ``random``: the same
architecture with fresh weights, seed 0), the vector the task head reads (``cls+sum``:
the graph token and the scaled sum of the atom states, after the final norm) is computed
for every molecule of a data set's train and test splits in eval mode, and a linear model
is fitted on the training molecules on the graph token, the atom sum, and both: for
regression a ridge regression (scikit-learn ``RidgeCV``, alpha chosen by leave-one-out),
scored by test MAE; for a binary task (molhiv) a logistic regression on standardized
features (``LogisticRegressionCV``, C chosen by 5-fold ROC-AUC on the training split),
scored by test ROC-AUC (OGB's Evaluator for molhiv: ``compute_metrics``).  The scores are
printed and written as JSON.  No weight of the encoder changes: this measures what
pretraining put into the representation, apart from what fine-tuning does with it.

    python scripts/probe_encoder.py --dataset nci-tpsa --train-fraction 0.1 \\
        random runs/pretrain-moses/encoder.pt --out docs/pretraining/probe-nci-tpsa-10pct.json
    python scripts/probe_encoder.py --dataset molhiv random molhiv-encoder --out probe-molhiv.json
"""
from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import numpy as np


#: the probes' inputs: column blocks of the ``cls+sum`` readout (in units of hidden_dim), and their names
FEATURES = {"cls": (0, 1, "the graph token"), "atom_sum": (1, 2, "the atom sum"), "both": (0, 2, "both")}


def readout_features(model, data) -> np.ndarray:
    """(M, F) head inputs of ``model`` on the graphs of ``data``, in data order."""
    import torch

    from molsepnorm.data.collate import GraphCollator

    collate = GraphCollator(model.config.multi_hop_max_dist)
    rows = []
    model.eval()
    with torch.inference_mode():
        for start in range(0, len(data), 128):
            batch = collate([data[i] for i in range(start, min(start + 128, len(data)))])
            rows.append(model.readout(model.encode(batch), batch).float().numpy())
    return np.concatenate(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoints", nargs="+", help="checkpoint files or bundled names; 'random' for fresh weights")
    parser.add_argument("--dataset", default="nci-tpsa")
    parser.add_argument("--train-fraction", type=float, default=1.0)
    parser.add_argument("--features", default=",".join(FEATURES),
                        help=f"what the probes read, comma-separated: {', '.join(FEATURES)} (default all three)")
    parser.add_argument("--out", help="JSON file to write")
    args = parser.parse_args(argv)
    args.features = [name.strip() for name in args.features.split(",")]
    if unknown := [name for name in args.features if name not in FEATURES]:
        parser.error(f"--features: unknown {', '.join(unknown)}; choose from {', '.join(FEATURES)}")

    import torch
    from sklearn.linear_model import LogisticRegressionCV, RidgeCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from molsepnorm.checkpoint import Checkpoint
    from molsepnorm.data import load_dataset
    from molsepnorm.inference.metrics import compute_metrics
    from molsepnorm.nn.graphormer import Graphormer, GraphormerConfig

    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", category=FutureWarning, module="sklearn")  # LogisticRegressionCV's API notices
    splits = load_dataset(args.dataset, progress=False).with_train_fraction(args.train_fraction)
    if splits.num_tasks != 1 or splits.task not in ("regression", "binary"):
        parser.error(f"{args.dataset}: the probe fits one regression or binary target, not {splits.num_tasks} "
                     f"{splits.task} targets")
    binary = splits.task == "binary"
    metric = "rocauc" if binary else "mae"
    y = {s: np.array([float(g.y.view(-1)[0]) for g in splits[s]]) for s in ("train", "test")}

    def probe_score(train_x: np.ndarray, test_x: np.ndarray) -> float:
        if binary:
            model = make_pipeline(StandardScaler(), LogisticRegressionCV(
                Cs=np.logspace(-4, 2, 7), cv=5, scoring="roc_auc", max_iter=2000)).fit(train_x, y["train"])
            scores = model.predict_proba(test_x)[:, 1]
        else:
            scores = RidgeCV(alphas=np.logspace(-4, 3, 15)).fit(train_x, y["train"]).predict(test_x)
        return float(compute_metrics(splits.task, y["test"], scores, dataset=splits.name)[metric])
    reference = Checkpoint.load(next(c for c in args.checkpoints if c != "random"))  # "random"'s architecture
    results = []
    for spec in args.checkpoints:
        if spec == "random":
            torch.manual_seed(0)
            model = Graphormer(GraphormerConfig.from_dict(dict(reference.model_config)))
        else:
            model = Checkpoint.load(spec).build_model()
        X = {s: readout_features(model, splits[s]) for s in ("train", "test")}
        D = model.config.hidden_dim
        row = {"checkpoint": spec}
        for name in args.features:
            first, last, _ = FEATURES[name]
            columns = slice(first * D, last * D)
            row[name] = probe_score(X["train"][:, columns], X["test"][:, columns])
        results.append(row)
        print(f"{spec}: test {metric} of a linear probe on " + ", ".join(
            f"{FEATURES[name][2]} {row[name]:.3f}" for name in args.features), flush=True)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({
            "command": " ".join(["python", *sys.argv]), "dataset": args.dataset, "metric": metric,
            "train_fraction": args.train_fraction, "sizes": {s: len(y[s]) for s in y}, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
