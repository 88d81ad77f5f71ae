"""Can a pretrained encoder price the atom environments the group-contribution model never saw,
when it is given examples of such atoms? (nci-tpsa, 10 % of the labels)

The linear model fits its 399 training molecules almost exactly, so neither a residual
model nor extra features learn anything about unseen environments from them
(docs/pretraining.md: "Where the pretraining issue's goals stand"). Cross-fitting makes
such examples: the training molecules are split into ten folds; the linear model fitted
on nine predicts the tenth, in which some atoms have an environment (radius 0: the whole
OGB feature row) the other nine never show. The residual of those molecules is regressed
(ridge, penalty chosen on the validation split) on the sum of the encoder's final states of
their novel atoms; at test time the linear model of all 399 molecules is corrected by it
on every molecule with a novel atom. The encoder is frozen: ``--encoder`` against randomly
initialized Graphormers of its configuration (the control). Nothing is trained but ridges.

    python scripts/crossfit_novel.py --encoder molhiv-encoder --random-seeds 0 1 2 \\
        --out docs/pretraining/crossfit-novel-nci-tpsa-10pct.json
"""
from __future__ import annotations

import json
from typing import Any, Callable, Optional

import numpy as np
import torch
from torch.utils.data import DataLoader

from encoder_contributions import PARTS, companion_inputs, encoder_arguments  # scripts/, beside this one
from molsepnorm.checkpoint import Checkpoint, resolve_model
from molsepnorm.data.collate import GraphCollator
from molsepnorm.nn.graphormer import Graphormer, GraphormerConfig
from molsepnorm.train.companion import GROUP_L2, ridge

PENALTIES = (0.01, 0.1, 1.0, 10.0, 100.0, 1e3, 1e4, 1e5, 1e6)  # on features scaled to mean |value| 1


def atom_states(model: Graphormer, graphs: list[Any]) -> list[np.ndarray]:
    """Per molecule, ``(atoms, D)``: the encoder's final atom states, eval mode."""
    model.eval()
    loader = DataLoader(graphs, batch_size=128, collate_fn=GraphCollator(model.config.multi_hop_max_dist))
    out = []
    with torch.inference_mode():
        for batch in loader:
            h = model.encode(batch)[:, 1:]  # (B, N, D)
            out.extend(h[i, :int(batch.node_mask[i].sum())].double().numpy() for i in range(h.size(0)))
    return out


def novel_sum(states: np.ndarray, keys: list[tuple], seen: set) -> tuple[np.ndarray, bool]:
    """The sum of the states of the atoms whose environment is not in ``seen``, and whether there is one."""
    rows = [j for j, key in enumerate(keys) if key not in seen]
    return (states[rows].sum(0) if rows else np.zeros(states.shape[1])), bool(rows)


def main(argv: Optional[list[str]] = None) -> None:
    args = encoder_arguments(__doc__.split("\n\n")[0], argv,
                             lambda parser: parser.add_argument("--folds", type=int, default=10))

    parts, X, y = companion_inputs(args.dataset, args.fraction)
    keys = {p: [[tuple(row) for row in g.x.tolist()] for g in parts[p]] for p in PARTS}

    def linear(rows: np.ndarray) -> Callable[[Any], np.ndarray]:  # the library's regression companion, radius 0
        mean, std = y["train"][rows].mean(), y["train"][rows].std()
        coef, intercept = ridge(X["train"][rows], (y["train"][rows] - mean) / std, alpha=GROUP_L2 * len(rows))
        return lambda A: (A @ coef + intercept) * std + mean

    n = len(y["train"])
    folds = np.random.default_rng(0).permutation(n) % args.folds
    everything = linear(np.arange(n))
    seen_all = {key for ks in keys["train"] for key in ks}
    base = {p: everything(X[p]) for p in ("val", "test")}

    def arm(name: str, model: Graphormer) -> dict[str, Any]:
        states = {p: atom_states(model, parts[p]) for p in PARTS}
        F, R = [], []
        for k in range(args.folds):
            inside, held = np.flatnonzero(folds != k), np.flatnonzero(folds == k)
            predicted = linear(inside)(X["train"][held])
            seen = {key for i in inside for key in keys["train"][i]}
            for j, i in enumerate(held):
                f, novel = novel_sum(states["train"][i], keys["train"][i], seen)
                if novel:
                    F.append(f)
                    R.append(y["train"][i] - predicted[j])
        F, R = np.asarray(F), np.asarray(R)
        unit = np.abs(F).mean() + 1e-12
        found = {p: [novel_sum(states[p][i], keys[p][i], seen_all) for i in range(len(y[p]))] for p in ("val", "test")}
        feats = {p: np.array([f for f, _ in found[p]]) / unit for p in found}
        novel = {p: np.array([v for _, v in found[p]]) for p in found}

        def corrected(p: str, w: np.ndarray) -> np.ndarray:
            return base[p] + novel[p] * (feats[p] @ w)

        fits = {}
        for penalty in PENALTIES:
            A = F / unit
            w = np.linalg.solve(A.T @ A + penalty * np.eye(A.shape[1]), A.T @ R)
            fits[penalty] = (float(np.abs(corrected("val", w) - y["val"]).mean()), w)
        penalty = min(PENALTIES, key=lambda q: fits[q][0])  # chosen on validation
        error = np.abs(corrected("test", fits[penalty][1]) - y["test"])
        before = np.abs(base["test"] - y["test"])
        row = {"encoder": name, "examples": int(len(R)), "penalty": penalty, "val_mae": fits[penalty][0],
               "test_mae": float(error.mean()), "test_mae_novel": float(error[novel["test"]].mean()),
               "test_novel": int(novel["test"].sum())}
        print(f"{name:24s} {len(R)} cross-fitted examples, penalty {penalty:<6} val {row['val_mae']:.4f}  "
              f"test {row['test_mae']:.4f} (novel {row['test_mae_novel']:.2f} on {row['test_novel']}; the linear "
              f"model alone {before.mean():.4f}, novel {before[novel['test']].mean():.2f})", flush=True)
        return row

    checkpoint = Checkpoint.load(resolve_model(args.encoder))
    report: dict[str, Any] = {
        "dataset": args.dataset, "fraction": args.fraction, "folds": args.folds,
        "linear alone": {p: float(np.abs(base[p] - y[p]).mean()) for p in ("val", "test")},
        "novel test molecules": {"count": int(sum(any(k not in seen_all for k in ks) for ks in keys["test"])),
                                 "linear alone": float(np.mean([abs(base["test"][i] - y["test"][i])
                                                                for i, ks in enumerate(keys["test"])
                                                                if any(k not in seen_all for k in ks)]))},
        "arms": [arm(str(args.encoder), checkpoint.build_model())]}
    for seed in args.random_seeds:
        torch.manual_seed(seed)
        report["arms"].append(arm(f"random (seed {seed})", Graphormer(GraphormerConfig.from_dict(checkpoint.model_config))))
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
