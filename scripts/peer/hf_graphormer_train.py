#!/usr/bin/env python
"""Peer side of the reference check: train HF transformers' Graphormer on ZINC subset.

Run with the *peer* venv's python (scripts/peer/setup_hf_env.sh); it does not import
molsepnorm.  ``scripts/compare_hf_reference.py`` drives it and trains molsepnorm's
ShareNorm Graphormer with the same recipe beside it.

    .peer-venv/bin/python scripts/peer/hf_graphormer_train.py --data-root ../shared/data \\
        --seed 0 --epochs 50 --out hf-seed0.json

The recipe, written out here so that both sides can be read against each other:

* data: the benchmark's ZINC subset (10,000 / 1,000 / 1,000) from the raw pickles, atom
  type -> one node column, bond type 1..3 -> one edge column, both edge directions; each
  graph preprocessed once by HF's ``preprocess_item`` (input_edges cut to the model's
  ``multi_hop_max_dist`` hops, which is all the model reads);
* target: standardized with the training mean and std; L1 loss on the standardized
  target (HF's own loss for one output would be MSE, so it is computed here);
* batches: ``--batch-size`` graphs drawn at random each epoch (seeded);
* AdamW (betas 0.9 / 0.999, eps 1e-8, weight decay 0.01) over every parameter, peak lr
  ``--lr``, linear warm-up over ``--warmup-fraction`` of the steps then linear decay to
  1e-9 at the last step, gradient norm clipped at 5, no step on a non-finite loss;
* after every epoch the validation MAE; the weights of the best epoch are scored on the
  test split.

Model: ``GraphormerForGraphClassification`` with ``pre_layernorm=True``,
``apply_graphormer_init=True`` (the reference N(0, 0.02) initialization), no dropout.
Known differences from molsepnorm's pre-LN Graphormer, left as HF has them: HF's encoder
defines a final LayerNorm but never applies it; its head is Linear -> GELU -> LayerNorm ->
Linear on the graph token (molsepnorm: final norm -> Linear); it adds separate in- and
out-degree embeddings (equal for molecules); the collator masks pairs further apart than
``spatial_pos_max`` (20).
"""
from __future__ import annotations

import argparse
import copy
import json
import math
import pickle
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hf_graphormer_bench import (HF_FEATURE_OFFSET, ZINC_RAW, _trim,  # noqa: E402
                                 _versions, import_hf)

SPLITS = ("train", "val", "test")


def zinc_subset_graphs(data_root: Path, split: str) -> list[dict]:
    """The benchmark's ZINC-subset graphs of ``split`` as HF raw items (node_feat, edge_index, ...)."""
    import torch  # the pickles hold torch tensors

    folder = data_root / ZINC_RAW
    with open(folder / f"{split}.pickle", "rb") as fh:
        mols = pickle.load(fh)
    index = [int(t) for t in (folder / f"{split}.index").read_text().split(",") if t.strip()]
    graphs = []
    for i in index:
        m = mols[i]
        adj = m["bond_type"].numpy().astype(np.int64)
        src, dst = np.nonzero(adj)  # symmetric: both directions present
        graphs.append({"node_feat": m["atom_type"].numpy().astype(np.int64)[:, None],
                       "edge_index": np.stack([src, dst]).astype(np.int64),
                       "edge_attr": adj[src, dst][:, None],
                       "num_nodes": int(m["num_atom"]),
                       "y": float(torch.as_tensor(m["logP_SA_cycle_normalized"]).reshape(-1)[0])})
    return graphs


def lr_multiplier(warmup: int, total: int, end_ratio: float):
    """Linear warm-up to the peak, then linear decay to ``end_ratio`` of it at ``total`` steps."""
    def multiplier(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        if step >= total:
            return end_ratio
        return end_ratio + (1.0 - end_ratio) * (total - step) / max(1, total - warmup)
    return multiplier


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-root", required=True, help="folder holding ZINC/raw (the shared data root)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=50)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--warmup-fraction", type=float, default=0.05)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=80)
    parser.add_argument("--ffn", type=int, default=80)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--hops", type=int, default=5, help="multi_hop_max_dist")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--limit", type=int, default=None, help="graphs per split (a smoke test)")
    parser.add_argument("--out", required=True, help="JSON result")
    args = parser.parse_args(argv)

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    start = time.perf_counter()
    GraphormerConfig, Model, cg = import_hf()
    root = Path(args.data_root)
    data = {}
    for split in SPLITS:
        graphs = zinc_subset_graphs(root, split)[: args.limit]
        items = []
        for g in graphs:
            item = _trim(cg.preprocess_item({**g, "labels": [g["y"]]}), args.hops)
            items.append(item)
        data[split] = (items, np.array([g["y"] for g in graphs], dtype=np.float64))
    prep_s = time.perf_counter() - start
    y_train = data["train"][1]
    mean, std = float(y_train.mean()), float(y_train.std())
    collator = cg.GraphormerDataCollator(spatial_pos_max=20)
    keys = ("input_nodes", "input_edges", "attn_bias", "in_degree", "out_degree", "spatial_pos", "attn_edge_type")

    torch.manual_seed(args.seed)
    config = GraphormerConfig(
        num_classes=1, num_atoms=HF_FEATURE_OFFSET, num_edges=HF_FEATURE_OFFSET,
        multi_hop_max_dist=args.hops, spatial_pos_max=20,
        num_hidden_layers=args.layers, embedding_dim=args.hidden, ffn_embedding_dim=args.ffn,
        num_attention_heads=args.heads, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
        pre_layernorm=True, apply_graphormer_init=True,
    )
    model = Model(config)
    n_train = len(data["train"][0])
    steps_per_epoch = math.ceil(n_train / args.batch_size)
    total = steps_per_epoch * args.epochs
    warmup = int(round(args.warmup_fraction * total))
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_multiplier(warmup, total, 1e-9 / args.lr))
    gen = torch.Generator().manual_seed(args.seed)

    def outputs(split: str) -> np.ndarray:
        model.eval()
        items, preds = data[split][0], []
        with torch.no_grad():
            for i in range(0, len(items), 2 * args.batch_size):
                batch = collator([dict(it) for it in items[i:i + 2 * args.batch_size]])
                logits = model(**{k: batch[k] for k in keys}, return_dict=True).logits.reshape(-1)
                preds.append(logits.double().numpy() * std + mean)
        model.train()
        return np.concatenate(preds)

    def mae(split: str) -> float:
        return float(np.abs(outputs(split) - data[split][1]).mean())

    history, best, best_state, skipped = [], (math.inf, 0), None, 0
    train_start = time.perf_counter()
    model.train()
    for epoch in range(1, args.epochs + 1):
        order = torch.randperm(n_train, generator=gen).tolist()
        losses = []
        for i in range(0, n_train, args.batch_size):
            chosen = [data["train"][0][j] for j in order[i:i + args.batch_size]]
            batch = collator([dict(it) for it in chosen])
            target = (torch.as_tensor(data["train"][1][order[i:i + args.batch_size]]) - mean) / std
            logits = model(**{k: batch[k] for k in keys}, return_dict=True).logits.reshape(-1)
            loss = torch.nn.functional.l1_loss(logits, target.float())
            if not bool(torch.isfinite(loss)):
                skipped += 1
                continue
            opt.zero_grad(set_to_none=True)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            if bool(torch.isfinite(norm)):
                opt.step()
                sched.step()
            else:
                skipped += 1
            losses.append(float(loss.detach()))
        val = mae("val")
        history.append({"epoch": epoch, "train_loss": float(np.mean(losses)), "val_mae": val})
        print(f"epoch {epoch} train loss {np.mean(losses):.4f} val mae {val:.4f}", flush=True)
        if val < best[0]:
            best, best_state = (val, epoch), copy.deepcopy(model.state_dict())
    train_s = time.perf_counter() - train_start
    model.load_state_dict(best_state)
    result = {
        "tool": "hf-graphormer", "seed": args.seed, "args": vars(args),
        "hf_config": config.to_dict(), "parameters": sum(p.numel() for p in model.parameters()),
        "steps": total, "warmup_steps": warmup, "skipped_steps": skipped,
        "best_epoch": best[1], "val_mae": best[0], "test_mae": mae("test"),
        "preprocess_seconds": prep_s, "train_seconds": train_s, "history": history,
        "target_mean": mean, "target_std": std, "versions": _versions(),
    }
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"test mae {result['test_mae']:.4f} (best epoch {best[1]}, val {best[0]:.4f}); "
          f"{train_s:.0f} s training, {prep_s:.0f} s preprocessing")
    return result


if __name__ == "__main__":
    main()
