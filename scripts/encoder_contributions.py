"""Can a pretrained encoder price the atom environments the group-contribution model has never seen?

On nci-tpsa with 10 % of its labels the regression companion (ridge on the raw counts of
every atom's radius-0 environment with its feature values, the variant training picks
there) takes the whole prediction in both arms, so the encoder never reaches it; half its
error lies on the few test molecules with an environment no training molecule has
(docs/pretraining.md, "Where the pretraining issue's goals stand", the paragraph on where the
linear model's error lies). This script asks whether the
encoder's *atom* representations, summed over each molecule, help that linear model: a
sum of per-atom vectors is additive like TPSA, and an encoder pretrained on other molecules
may place an unseen environment near seen ones.

For the encoder given and for randomly initialized Graphormers of the same configuration
(the from-scratch control, one per ``--random-seeds``), it appends to the companion's
features the per-molecule sum of either the input atom embeddings (atom and degree
encodings) or the final atom states, times a scale chosen on the validation split, fits
the same ridge (penalty ``1e-5`` per molecule on standardized targets) on the training
molecules and reports validation and test MAE, on all molecules and on those with a novel
environment. Nothing is trained. The summed input embeddings are a linear function of the
counts the linear model already reads, so they cannot gain: they check the plumbing.

    python scripts/encoder_contributions.py --encoder molhiv-encoder --random-seeds 0 1 2 \\
        --out docs/pretraining/encoder-contributions-nci-tpsa-10pct.json
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np
import torch
from scipy import sparse
from torch.utils.data import DataLoader

from molsepnorm.checkpoint import Checkpoint, resolve_model
from molsepnorm.data import load_dataset
from molsepnorm.data.collate import GraphCollator
from molsepnorm.data.columns import num_atoms
from molsepnorm.nn.graphormer import Graphormer, GraphormerConfig
from molsepnorm.train.blend import covered_by
from molsepnorm.train.companion import GROUP_L2, ridge, substructure_features

PARTS = ("train", "val", "test")
SCALES = (0.001, 0.01, 0.03, 0.1, 0.3, 1.0)  # times 1 / mean |feature| on the training split


def atom_sums(model: Graphormer, parts: dict[str, list[Any]], which: str) -> dict[str, np.ndarray]:
    """(M, D) per split: the sum over each molecule's atoms of its input embedding
    (``which="input"``) or its final state (``"final"``), eval mode."""
    model.eval()
    out = {}
    for part, graphs in parts.items():
        loader = DataLoader(graphs, batch_size=128, collate_fn=GraphCollator(model.config.multi_hop_max_dist))
        rows = []
        with torch.inference_mode():
            for batch in loader:
                if which == "final":
                    h = model.encode(batch)[:, 1:]  # (B, N, D)
                else:
                    h = model.atom_encoder(batch.x) + model.degree_encoder(batch.degree)  # (B, N, D)
                rows.append((h * batch.node_mask.unsqueeze(-1)).sum(1).double().numpy())
        out[part] = np.concatenate(rows)
    return out


def encoder_arguments(description: str, argv: Optional[list[str]],
                      more: Optional[Callable[[argparse.ArgumentParser], None]] = None) -> argparse.Namespace:
    """The options these measurements share (the encoder, its random controls, the data set and
    its labelled fraction, threads, the JSON out), parsed, with torch's threads set."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--encoder", default="molhiv-encoder", help="bundled encoder name or encoder.pt")
    parser.add_argument("--dataset", default="nci-tpsa")
    parser.add_argument("--fraction", type=float, default=0.1, help="training molecules kept (seed 0 draw)")
    parser.add_argument("--random-seeds", type=int, nargs="*", default=[0, 1, 2])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path)
    if more is not None:
        more(parser)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    return args


def companion_inputs(dataset: str, fraction: float) -> tuple[dict[str, list[Any]], dict[str, Any], dict[str, np.ndarray]]:
    """Per split: the graphs (the training split drawn down to ``fraction``, seed 0, as the
    runs of that setting train), the linear model's features as training fits them on this
    setting (radius 0 with atom properties, raw counts) and the first target."""
    splits = load_dataset(dataset, progress=False).with_train_fraction(fraction, seed=0)
    parts = {p: list(splits[p]) for p in PARTS}
    X, y = {}, {}
    for p, graphs in parts.items():
        X[p], targets = substructure_features(graphs, num_atoms(graphs), 16384, 0, counts="raw", properties=True)
        y[p] = targets[:, 0]
    return parts, X, y


def main(argv: Optional[list[str]] = None) -> None:
    args = encoder_arguments(__doc__.split("\n\n")[0], argv)

    parts, X, y = companion_inputs(args.dataset, args.fraction)
    seen = np.asarray((X["train"] != 0).sum(0)).ravel() > 0
    novel = {p: ~covered_by(X[p], seen) for p in PARTS}
    mean, std = y["train"].mean(), y["train"].std()

    def score(extra: Optional[dict[str, np.ndarray]], scale: float) -> dict[str, dict[str, float]]:
        def features(p: str) -> Any:
            return X[p] if extra is None else sparse.hstack([X[p], sparse.csr_matrix(extra[p] * scale)]).tocsr()
        coef, intercept = ridge(features("train"), (y["train"] - mean) / std, alpha=GROUP_L2 * len(y["train"]))
        result = {}
        for p in ("val", "test"):
            error = np.abs((features(p) @ coef + intercept) * std + mean - y[p])
            result[p] = {"mae": float(error.mean()), "mae_covered": float(error[~novel[p]].mean()),
                         "mae_novel": float(error[novel[p]].mean()), "novel": int(novel[p].sum())}
        return result

    checkpoint = Checkpoint.load(resolve_model(args.encoder))
    encoders: list[tuple[str, Graphormer]] = [(str(args.encoder), checkpoint.build_model())]
    for seed in args.random_seeds:
        torch.manual_seed(seed)
        encoders.append((f"random (seed {seed})", Graphormer(GraphormerConfig.from_dict(checkpoint.model_config))))
    report: dict[str, Any] = {"dataset": args.dataset, "fraction": args.fraction, "l2": GROUP_L2,
                              "sizes": {p: len(parts[p]) for p in PARTS}, "linear alone": score(None, 0.0), "arms": []}
    print(f"the linear model alone: {report['linear alone']}")
    for name, model in encoders:
        for which in ("input", "final"):
            sums = atom_sums(model, parts, which)
            unit = 1.0 / (np.abs(sums["train"]).mean() + 1e-12)
            tried = {scale: score(sums, scale * unit) for scale in SCALES}
            best = min(SCALES, key=lambda s: tried[s]["val"]["mae"])  # chosen on validation
            row = {"encoder": name, "atoms": which, "scale": best, **tried[best]}
            report["arms"].append(row)
            print(f"{name:24s} {which:5s} scale {best:<6} val {row['val']['mae']:.4f}  test {row['test']['mae']:.4f} "
                  f"(covered {row['test']['mae_covered']:.3f}, novel {row['test']['mae_novel']:.2f} "
                  f"on {row['test']['novel']})", flush=True)
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
