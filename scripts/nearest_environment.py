"""Can a pretrained encoder price an atom environment the group-contribution model never saw
by the environments it resembles? (nci-tpsa, 10 % of the labels)

The linear model (radius 0 with atom properties, raw counts, fitted on the 399 training
molecules as training fits it) is a sum of per-atom contributions. For an atom whose
environment (its whole OGB feature row) no training molecule has, its contribution is
replaced by the mean contribution of its ``k`` nearest training atoms in the encoder's
space (cosine similarity of the final atom states, or of the input embeddings). No
example of an unseen atom is needed (unlike scripts/crossfit_novel.py): the encoder's
geometry alone decides. Which space and ``k``, or no replacement, is chosen on the
validation split. The encoder is frozen: ``--encoder`` against randomly initialized
Graphormers of its configuration (the control). Nothing is trained but the one ridge.

    python scripts/nearest_environment.py --encoder molhiv-encoder --random-seeds 0 1 2 \\
        --out docs/pretraining/nearest-environment-nci-tpsa-10pct.json
"""
from __future__ import annotations

import json
from typing import Any, Optional

import numpy as np
import torch
from torch.utils.data import DataLoader

from encoder_contributions import PARTS, companion_inputs, encoder_arguments  # scripts/, beside this one
from molsepnorm.checkpoint import Checkpoint, resolve_model
from molsepnorm.data.collate import GraphCollator
from molsepnorm.nn.fingerprint import _identifiers
from molsepnorm.nn.graphormer import Graphormer, GraphormerConfig
from molsepnorm.train.companion import GROUP_L2, ridge

BITS = 16384  # the regression companion's buckets (companion_inputs hashes with them)
NEIGHBOURS = (1, 3, 5, 10, 20)
SPACES = ("final", "input")


def per_atom(model: Graphormer, graphs: list[Any]) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    """Per molecule: the buckets ``(atoms, K)`` of its atoms' identifiers (radius 0 and the
    properties), and their final states and input embeddings ``(atoms, D)``, eval mode."""
    model.eval()
    loader = DataLoader(graphs, batch_size=128, collate_fn=GraphCollator(model.config.multi_hop_max_dist))
    buckets, final, inputs = [], [], []
    with torch.inference_mode():
        for batch in loader:
            ids = torch.stack([ident for _, ident in _identifiers(batch, 0, True)], -1) % BITS  # (B, N, K)
            h = model.encode(batch)[:, 1:]  # (B, N, D)
            e = model.atom_encoder(batch.x) + model.degree_encoder(batch.degree)  # (B, N, D)
            for i in range(h.size(0)):
                n = int(batch.node_mask[i].sum())
                buckets.append(ids[i, :n].numpy())
                final.append(h[i, :n].double().numpy())
                inputs.append(e[i, :n].double().numpy())
    return buckets, final, inputs


def unit(a: np.ndarray) -> np.ndarray:
    return a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)


def evaluate(model: Graphormer, parts: dict[str, list[Any]], X: dict[str, Any], y: dict[str, np.ndarray],
             keys: dict[str, list[list[tuple]]]) -> dict[str, Any]:
    mean, std = y["train"].mean(), y["train"].std()
    coef, intercept = ridge(X["train"], (y["train"] - mean) / std, alpha=GROUP_L2 * len(y["train"]))
    atoms = {p: per_atom(model, parts[p]) for p in PARTS}
    contribution = {p: [coef[b].sum(1) * std for b in atoms[p][0]] for p in PARTS}  # (atoms,) per molecule
    base = {p: np.asarray(X[p] @ coef + intercept) * std + mean for p in PARTS}
    for p in PARTS:  # the per-atom contributions add up to the linear model's prediction
        assert np.allclose([c.sum() + intercept * std + mean for c in contribution[p]], base[p], atol=1e-6)
    seen = {key for ks in keys["train"] for key in ks}
    pool_c = np.concatenate(contribution["train"])
    pool = {s: unit(np.concatenate(atoms["train"][1 if s == "final" else 2])) for s in SPACES}

    def predict(part: str, space: Optional[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        out, novel = base[part].copy(), np.zeros(len(base[part]), dtype=bool)
        for m, ks in enumerate(keys[part]):
            rows = [j for j, key in enumerate(ks) if key not in seen]
            if not rows:
                continue
            novel[m] = True
            if space is None:
                continue
            states = unit(atoms[part][1 if space == "final" else 2][m][rows])  # (r, D)
            nearest = np.argsort(-(states @ pool[space].T), axis=1)[:, :k]  # (r, k)
            out[m] += pool_c[nearest].mean(1).sum() - contribution[part][m][rows].sum()
        return out, novel

    rules = [(None, 0)] + [(s, k) for s in SPACES for k in NEIGHBOURS]
    table = []
    for space, k in rules:
        row: dict[str, Any] = {"space": space or "none", "k": k}
        for p in ("val", "test"):
            pred, novel = predict(p, space, k)
            err = np.abs(pred - y[p])
            row[f"{p}_mae"], row[f"{p}_novel_mae"], row[f"{p}_novel"] = float(err.mean()), float(err[novel].mean()), \
                int(novel.sum())
        table.append(row)
    chosen = min(table, key=lambda r: (r["val_mae"], r["space"] != "none"))  # a tie keeps the linear model
    return {"rules": table, "chosen": chosen}


def main(argv: Optional[list[str]] = None) -> None:
    args = encoder_arguments(__doc__.split("\n\n")[0], argv)

    parts, X, y = companion_inputs(args.dataset, args.fraction)
    keys = {p: [[tuple(row) for row in g.x.tolist()] for g in parts[p]] for p in PARTS}
    encoder = Checkpoint.load(resolve_model(args.encoder))
    models = {args.encoder: encoder.build_model()}
    for seed in args.random_seeds:
        torch.manual_seed(seed)
        models[f"random seed {seed}"] = Graphormer(GraphormerConfig.from_dict(dict(encoder.model_config)))
    results = {}
    for name, model in models.items():
        results[name] = evaluate(model, parts, X, y, keys)
        c = results[name]["chosen"]
        none = results[name]["rules"][0]
        print(f"{name:>16}: chosen {c['space']} k={c['k']}: val {c['val_mae']:.4f} (linear {none['val_mae']:.4f}), "
              f"test {c['test_mae']:.4f} (linear {none['test_mae']:.4f}), novel test molecules "
              f"{c['test_novel_mae']:.3f} (linear {none['test_novel_mae']:.3f}, {c['test_novel']} molecules)")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"command": "python scripts/nearest_environment.py " + " ".join(
            argv if argv is not None else __import__("sys").argv[1:]), "results": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
