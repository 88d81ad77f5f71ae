#!/usr/bin/env python
"""Peer side of the speed comparison: HuggingFace transformers' (deprecated) Graphormer.

Run this with the *peer* venv's python (see setup_hf_env.sh), never with ours; it does
not import molsepnorm.

    python scripts/peer/hf_graphormer_bench.py --work DIR --out result.json
    python scripts/peer/hf_graphormer_bench.py --make-test-work DIR [--n-smiles 500 ...]

DIR holds config.json, smiles.txt and batches-<set>.npz (layout: see ``load_batches``).
Measured, each with torch.set_num_threads(threads), time.perf_counter, warm-up excluded:

* preprocessing: SMILES -> ogb.utils.smiles2graph -> collating_graphormer.preprocess_item
  (the two stages timed separately; unparsable SMILES counted, not fatal);
* training per set: HF GraphormerDataCollator on preprocessed items, then
  forward + backward + AdamW step on GraphormerForGraphClassification; and the
  on-the-fly path (preprocess_item for the batch's graphs + collate + step).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

# HF's offset used by convert_to_single_emb: feature column c of value v becomes
# v + 1 + 512 * c (then shifted once or twice more by preprocess_item).
HF_FEATURE_OFFSET = 512
UNREACHABLE = 510  # algos_graphormer.UNREACHABLE_NODE_DISTANCE

MOLHIV_CSV = "ogbg_molhiv/mapping/mol.csv.gz"
ZINC_RAW = "ZINC/raw"


# --------------------------------------------------------------------------- utils
def _proc_status_mb(field: str) -> float:
    """A memory field of /proc/self/status (``VmRSS``, ``VmHWM``) in MiB; NaN where there is none."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return float("nan")


def _rss_now_mb() -> float:
    return _proc_status_mb("VmRSS")


def _rss_peak_mb() -> float:
    """Peak resident set size since start (or since the last _reset_rss_peak)."""
    peak = _proc_status_mb("VmHWM")
    if peak == peak:  # not NaN
        return peak
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _reset_rss_peak() -> bool:
    """Linux: writing 5 to clear_refs resets VmHWM to the current RSS."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def _mem_available_bytes() -> int:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 8 << 30


def _r(x, nd=3):
    """Round for the JSON: nd significant-ish decimals, keep ints as ints."""
    if x is None:
        return None
    if isinstance(x, (int, np.integer)):
        return int(x)
    x = float(x)
    if not math.isfinite(x):
        return None
    if x == 0:
        return 0.0
    digits = max(nd - int(math.floor(math.log10(abs(x)))) - 1, 0)
    return round(x, digits)


def _gib(nbytes: float) -> float:
    return _r(nbytes / 2**30, 4)


def _versions() -> dict:
    import importlib.metadata as md

    out = {"python": sys.version.split()[0]}
    for dist in ("torch", "transformers", "Cython", "numpy", "ogb", "rdkit"):
        try:
            out[dist.lower()] = md.version(dist)
        except md.PackageNotFoundError:
            out[dist.lower()] = None
    return out


# ---------------------------------------------------------------- work-dir format
def load_batches(path: Path):
    """Read batches-<set>.npz into a list of batches, each a list of graph dicts.

    Keys: x (sumN, F) int64, edge_index (2, sumE) int64 with node ids local to each
    graph, edge_attr (sumE, Fe) int64, y (G,) float32, num_nodes (G,), num_edges (G,),
    batch_sizes (nb,): consecutive graphs form a batch.
    """
    z = np.load(path)
    x = np.asarray(z["x"], dtype=np.int64)
    if x.ndim == 1:
        x = x[:, None]
    ei = np.asarray(z["edge_index"], dtype=np.int64)
    ea = np.asarray(z["edge_attr"], dtype=np.int64)
    if ea.ndim == 1:
        ea = ea[:, None]
    y = np.asarray(z["y"], dtype=np.float32).reshape(len(z["num_nodes"]), -1)
    nn_ = np.asarray(z["num_nodes"], dtype=np.int64)
    ne_ = np.asarray(z["num_edges"], dtype=np.int64)
    bs = np.asarray(z["batch_sizes"], dtype=np.int64)
    if bs.sum() != len(nn_):
        raise ValueError(f"{path}: batch_sizes sum {bs.sum()} != number of graphs {len(nn_)}")
    n_off = np.concatenate([[0], np.cumsum(nn_)])
    e_off = np.concatenate([[0], np.cumsum(ne_)])
    graphs = []
    for g in range(len(nn_)):
        a, b = n_off[g], n_off[g + 1]
        c, d = e_off[g], e_off[g + 1]
        graphs.append(
            {
                "node_feat": x[a:b],
                "edge_index": ei[:, c:d],
                "edge_attr": ea[c:d],
                "num_nodes": int(nn_[g]),
                "labels": y[g].astype(np.float64),  # collator: one-element float => regression
            }
        )
    batches, k = [], 0
    for size in bs:
        batches.append(graphs[k : k + int(size)])
        k += int(size)
    return batches, {"node_cols": x.shape[1], "edge_cols": ea.shape[1],
                     "node_max": int(x.max()) if x.size else 0,
                     "edge_max": int(ea.max()) if ea.size else 0,
                     "y_binary": bool(np.isin(y, [0.0, 1.0]).all())}


def _graph_from_ogb(g: dict, y: float) -> dict:
    return {"x": g["node_feat"], "edge_index": g["edge_index"], "edge_attr": g["edge_feat"],
            "num_nodes": int(g["num_nodes"]), "y": float(y)}


def _write_npz(path: Path, graphs: list, batch_size: int, n_batches: int):
    graphs = graphs[: batch_size * n_batches]
    sizes = [batch_size] * (len(graphs) // batch_size)
    if len(graphs) % batch_size:
        sizes.append(len(graphs) % batch_size)
    np.savez(
        path,
        x=np.concatenate([g["x"] for g in graphs]).astype(np.int64),
        edge_index=np.concatenate([g["edge_index"] for g in graphs], axis=1).astype(np.int64),
        edge_attr=np.concatenate([g["edge_attr"] for g in graphs]).astype(np.int64),
        y=np.array([g["y"] for g in graphs], dtype=np.float32),
        num_nodes=np.array([g["num_nodes"] for g in graphs], dtype=np.int64),
        num_edges=np.array([g["edge_index"].shape[1] for g in graphs], dtype=np.int64),
        batch_sizes=np.array(sizes, dtype=np.int64),
    )


def make_test_work(out: Path, data_root: Path, n_smiles: int, n_batches: int, batch_size: int,
                   repeats: int, seed: int = 0):
    """Create a small work dir from the staged data, without molsepnorm.

    molhiv: ogb smiles2graph on a seeded random sample of ogbg-molhiv SMILES (salts
    included, as in the real set). zinc-subset: real ZINC-subset validation graphs
    read from the benchmarking-gnns pickle (atom type -> x[:, 0], bond type 1..3 ->
    edge_attr[:, 0], both edge directions).
    """
    import csv
    import gzip
    import pickle

    from ogb.utils import smiles2graph
    from rdkit import RDLogger

    RDLogger.DisableLog("rdApp.*")
    out.mkdir(parents=True, exist_ok=True)
    with gzip.open(data_root / MOLHIV_CSV, "rt") as fh:
        rows = list(csv.DictReader(fh))
    smiles = [r["smiles"] for r in rows]
    labels = [float(r["HIV_active"]) for r in rows]
    (out / "smiles.txt").write_text("\n".join(smiles[:n_smiles]) + "\n")

    rng = np.random.default_rng(seed)
    hiv = []
    for i in rng.permutation(len(smiles)):
        if len(hiv) >= n_batches * batch_size:
            break
        try:
            g = smiles2graph(smiles[i])
        except Exception:  # unparsable with this RDKit
            continue
        if g["num_nodes"] > 0:
            hiv.append(_graph_from_ogb(g, labels[i]))
    _write_npz(out / "batches-molhiv.npz", hiv, batch_size, n_batches)

    sets = ["molhiv"]
    zdir = data_root / ZINC_RAW
    if (zdir / "val.pickle").exists():
        import torch  # the pickle holds torch tensors

        torch.set_num_threads(1)
        with open(zdir / "val.pickle", "rb") as fh:
            mols = pickle.load(fh)
        index = [int(t) for t in (zdir / "val.index").read_text().split(",") if t.strip()]
        zinc = []
        for i in index[: n_batches * batch_size]:
            m = mols[i]
            adj = m["bond_type"].numpy().astype(np.int64)
            src, dst = np.nonzero(adj)  # symmetric: both directions present
            zinc.append({"x": m["atom_type"].numpy().astype(np.int64)[:, None],
                         "edge_index": np.stack([src, dst]).astype(np.int64),
                         "edge_attr": adj[src, dst][:, None],
                         "num_nodes": int(m["num_atom"]),
                         "y": float(m["logP_SA_cycle_normalized"].reshape(-1)[0])})
        del mols
        _write_npz(out / "batches-zinc-subset.npz", zinc, batch_size, n_batches)
        sets.insert(0, "zinc-subset")

    cfg = {
        "threads": 1, "warmup": 2, "repeats": repeats, "preprocess_n": n_smiles,
        "model": {"num_layers": 12, "hidden_dim": 80, "ffn_dim": 80, "num_heads": 8,
                  "dropout": 0.1, "attention_dropout": 0.1, "activation_dropout": 0.1,
                  "pre_ln": True, "multi_hop_max_dist": 20, "spatial_pos_max": 20,
                  "num_tasks": 1},
        "train_sets": sets,
        "model_by_set": {"molhiv": {"multi_hop_max_dist": 5}},
    }
    (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    print(f"wrote test work dir {out}: sets {sets}, {len(hiv)} molhiv graphs, {n_smiles} SMILES")


# ------------------------------------------------------------------- HF imports
def pyx_build_dir() -> Path:
    """Keep pyximport's build inside the peer venv (not ~/.pyxbld), so the .so always
    matches this venv's numpy/Cython and goes away with the venv."""
    return Path(sys.prefix) / "pyxbld"


def import_hf():
    """Import HF's Graphormer pieces; builds algos_graphormer.pyx on first use.

    collating_graphormer calls pyximport.install() at import time; pyximport keeps the
    first installed importer, so installing ours first only changes the build folder.
    """
    import pyximport

    pyximport.install(build_dir=str(pyx_build_dir()), setup_args={"include_dirs": np.get_include()})
    from transformers.models.deprecated.graphormer import (GraphormerConfig,
                                                           GraphormerForGraphClassification)
    from transformers.models.deprecated.graphormer import collating_graphormer as cg

    return GraphormerConfig, GraphormerForGraphClassification, cg


def prepare() -> None:
    """Build the Cython extension and run one tiny preprocess/collate/train step."""
    import torch

    torch.set_num_threads(1)
    t0 = time.perf_counter()
    GraphormerConfig, Model, cg = import_hf()
    t1 = time.perf_counter()
    raw = [{"node_feat": np.zeros((n, 1), dtype=np.int64), "num_nodes": n, "labels": [0.5],
            "edge_index": np.array([[i for i in range(n - 1)] + [i + 1 for i in range(n - 1)],
                                    [i + 1 for i in range(n - 1)] + [i for i in range(n - 1)]]),
            "edge_attr": np.ones((2 * (n - 1), 1), dtype=np.int64)} for n in (3, 5)]
    torch.manual_seed(0)
    items = [cg.preprocess_item(r) for r in raw]
    assert int(items[0]["spatial_pos"][0, 2]) == 3, items[0]["spatial_pos"]
    batch = cg.GraphormerDataCollator()(items)
    model = Model(GraphormerConfig(num_hidden_layers=1, embedding_dim=16, ffn_embedding_dim=16,
                                   num_attention_heads=2, num_atoms=512, num_edges=512))
    out = model(**batch)
    out.loss.backward()
    print(f"[peer-setup] algos_graphormer: {cg.algos_graphormer.__file__}")
    print(f"[peer-setup] import {t1 - t0:.1f}s, smoke test ok (loss {float(out.loss.detach()):.3f})")


# ---------------------------------------------------------------------- benchmark
def _input_edges_alloc_bytes(items, n_edge_cols: int) -> int:
    """Bytes of the (B, N, N, max_dist, Fe) int64 input_edges tensor the collator makes."""
    n_max = max(int(it["num_nodes"]) for it in items)
    d_max = max(int(it["input_edges"].shape[2]) for it in items)
    return len(items) * n_max * n_max * d_max * n_edge_cols * 8


def _trim(item: dict, hops: int) -> dict:
    ie = item["input_edges"]
    if ie.shape[2] > hops:
        item["input_edges"] = np.ascontiguousarray(ie[:, :, :hops, :])
    return item


def bench_preprocess(smiles, warmup: int, ogb_smiles2graph, preprocess_item) -> dict:
    def one(s):
        t0 = time.perf_counter()
        try:
            g = ogb_smiles2graph(s)
        except Exception:
            return time.perf_counter() - t0, 0.0, None
        t1 = time.perf_counter()
        item = {"node_feat": g["node_feat"], "edge_index": g["edge_index"],
                "edge_attr": g["edge_feat"], "num_nodes": int(g["num_nodes"]), "labels": [0.0]}
        try:
            item = preprocess_item(item)
        except Exception:
            return t1 - t0, time.perf_counter() - t1, None
        return t1 - t0, time.perf_counter() - t1, item

    for s in smiles[:warmup]:
        one(s)
    t_graph = t_prep = 0.0
    failures, n_atoms, dists, ie_bytes = 0, [], [], []
    worst = None  # largest input_edges among the disconnected molecules
    t_all = time.perf_counter()
    for s in smiles:
        a, b, item = one(s)
        t_graph += a
        t_prep += b
        if item is None:
            failures += 1
            continue
        ie = item["input_edges"]
        n_atoms.append(item["num_nodes"])
        dists.append(int(ie.shape[2]))
        ie_bytes.append(ie.nbytes)
        if ie.shape[2] == UNREACHABLE and (worst is None or ie.nbytes > worst[2]):
            worst = (item["num_nodes"], ie.shape, ie.nbytes)
    t_all = time.perf_counter() - t_all
    n = len(smiles)
    dists = np.array(dists)
    res = {
        "n": n, "failures": failures, "ok": n - failures,
        "total_s": _r(t_all), "smiles2graph_s": _r(t_graph), "preprocess_item_s": _r(t_prep),
        "mol_per_s": _r(n / t_all), "mol_per_s_ok": _r((n - failures) / t_all),
        "smiles2graph_ms_per_mol": _r(1e3 * t_graph / n),
        "preprocess_item_ms_per_mol": _r(1e3 * t_prep / max(n - failures, 1)),
        "disconnected_max_dist_510": int((dists == UNREACHABLE).sum()),
        "max_dist_median": _r(float(np.median(dists))) if len(dists) else None,
        "max_dist_median_connected": _r(float(np.median(dists[dists < UNREACHABLE])))
        if (dists < UNREACHABLE).any() else None,
        "input_edges_mib_median": _r(np.median(ie_bytes) / 2**20) if ie_bytes else None,
        "input_edges_mib_max": _r(max(ie_bytes) / 2**20) if ie_bytes else None,
        "atoms_median": _r(float(np.median(n_atoms))) if n_atoms else None,
    }
    if worst is not None:
        res["worst_disconnected_item"] = {"num_nodes": worst[0], "input_edges_shape": list(worst[1]),
                                          "input_edges_mib_int32": _r(worst[2] / 2**20)}
    return res


def probe_untrimmed(raw_batch, hops, e_cols, preprocess_item, collator, model, torch,
                    k_max: int = 8) -> dict:
    """What the 510 issue costs in practice, on a sub-batch small enough to be safe.

    Takes the largest disconnected graph of the batch (max_dist 510), measures
    preprocess_item and the collator for it alone, then for it plus up to k_max-1
    connected graphs no larger than it (so the padded N stays the same), and checks
    that the model's output is the same with input_edges trimmed to `hops`.
    """
    items = [preprocess_item(dict(g)) for g in raw_batch]
    disc = [i for i, it in enumerate(items) if it["input_edges"].shape[2] == UNREACHABLE]
    if not disc:
        return {"note": "no disconnected graph in the batch"}
    w = max(disc, key=lambda i: items[i]["num_nodes"])
    n_w = items[w]["num_nodes"]

    def measured(fn):
        import gc

        gc.collect()
        _reset_rss_peak()
        base = _rss_now_mb()
        t0 = time.perf_counter()
        out = fn()
        dt = time.perf_counter() - t0
        return out, dt, _rss_peak_mb() - base

    import tracemalloc  # numpy reports its buffers to tracemalloc; RSS is too coarse here

    t0 = time.perf_counter()
    item_w = preprocess_item(dict(raw_batch[w]))
    t_pre = time.perf_counter() - t0
    tracemalloc.start()  # second run, for memory only (tracing slows it down)
    preprocess_item(dict(raw_batch[w]))
    peak_pre = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    t0 = time.perf_counter()
    one = collator([dict(item_w)])
    t_col1 = time.perf_counter() - t0
    res = {
        "worst_graph": {"num_nodes": n_w, "input_edges_shape": list(item_w["input_edges"].shape),
                        "preprocess_item_s": _r(t_pre),
                        "preprocess_item_peak_traced_mb": _r(peak_pre / 2**20),
                        "collate_alone_s": _r(t_col1),
                        "collated_input_edges_mb": _r(one["input_edges"].nelement() * 8 / 2**20),
                        "note": "in a batch every graph slot is padded to the batch's largest N "
                                "and max_dist 510, whichever graph they come from"},
    }
    del one
    others = [i for i, it in enumerate(items) if i != w and it["num_nodes"] <= n_w][: k_max - 1]
    sub = [items[w]] + [items[i] for i in others]
    est = _input_edges_alloc_bytes(sub, e_cols)
    batch_u, t_u, mb_u = measured(lambda: collator([dict(it) for it in sub]))
    trimmed = [_trim(dict(it), hops) for it in sub]
    batch_t, t_t, mb_t = measured(lambda: collator([dict(it) for it in trimmed]))
    was_training = model.training
    model.eval()
    fwd = ("input_nodes", "input_edges", "attn_bias", "in_degree", "out_degree", "spatial_pos",
           "attn_edge_type")
    with torch.no_grad():
        lu = model(**{k: batch_u[k] for k in fwd}).logits
        lt = model(**{k: batch_t[k] for k in fwd}).logits
    model.train(was_training)
    res["sub_batch"] = {
        "graphs": len(sub), "padded_nodes": n_w,
        "untrimmed_input_edges_estimate_mb": _r(est / 2**20),
        "untrimmed_collate_s": _r(t_u), "untrimmed_collate_peak_rss_delta_mb": _r(mb_u),
        "trimmed_collate_s": _r(t_t), "trimmed_collate_peak_rss_delta_mb": _r(mb_t),
        "max_abs_logit_diff_trimmed_vs_untrimmed": float((lu - lt).abs().max()),
    }
    return res


def bench_train(name, batches, info, cfg, mcfg, threads, torch, hf) -> dict:
    GraphormerConfig, GraphormerForGraphClassification, preprocess_item, Collator = hf
    warmup, repeats = int(cfg.get("warmup", 2)), int(cfg.get("repeats", 3))
    hops = int(mcfg.get("multi_hop_max_dist", 5))
    spatial_pos_max = int(mcfg.get("spatial_pos_max", 20))  # the collator's own default is 20
    notes = []

    # Task/loss. HF's built-in loss for num_classes == 1 is MSE (it treats one output as
    # regression), so we compute the loss ourselves from the logits.
    task = (cfg.get("task_by_set") or {}).get(name)
    if task is None:
        task = "regression" if ("zinc" in name.lower() or not info["y_binary"]) else "binary"
    if task == "binary":
        loss_fn = torch.nn.BCEWithLogitsLoss()
        loss_name = "BCEWithLogits (computed from logits; HF's own loss for num_classes=1 would be MSE)"
    else:
        loss_fn = torch.nn.L1Loss()
        loss_name = "L1 (computed from logits; HF's own loss for num_classes=1 is MSE)"

    # Vocabularies: HF's convention is 512 slots per feature column (defaults 512*9
    # atoms / 512*3 edges for OGB's 9/3 columns); other sizes stay at HF defaults.
    n_cols, e_cols = info["node_cols"], info["edge_cols"]
    if info["node_max"] + 3 >= HF_FEATURE_OFFSET or info["edge_max"] + 3 >= HF_FEATURE_OFFSET:
        raise ValueError("feature values >= 509 collide under HF's offset-512 encoding")
    config = GraphormerConfig(
        num_classes=int(mcfg.get("num_tasks", 1)),
        num_atoms=HF_FEATURE_OFFSET * n_cols,
        num_edges=HF_FEATURE_OFFSET * e_cols,
        multi_hop_max_dist=hops,
        spatial_pos_max=spatial_pos_max,
        num_hidden_layers=int(mcfg["num_layers"]),
        embedding_dim=int(mcfg["hidden_dim"]),
        ffn_embedding_dim=int(mcfg["ffn_dim"]),
        num_attention_heads=int(mcfg["num_heads"]),
        dropout=float(mcfg.get("dropout", 0.1)),
        attention_dropout=float(mcfg.get("attention_dropout", 0.1)),
        activation_dropout=float(mcfg.get("activation_dropout", 0.1)),
        pre_layernorm=bool(mcfg.get("pre_ln", False)),
    )
    torch.manual_seed(0)
    model = GraphormerForGraphClassification(config)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=2e-4, weight_decay=0.01)
    # the same recipe as molsepnorm's training step: linear warm-up then linear decay,
    # gradient clipping at norm 5, and no step applied on a non-finite loss or gradient
    total_steps = 1_000_000
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / (0.1 * total_steps), max(0.0, (total_steps - s) / (0.9 * total_steps))))
    collator = Collator(spatial_pos_max=spatial_pos_max)
    params = sum(p.numel() for p in model.parameters())

    # Preprocess every graph once (untimed) for the collate path, and look at what
    # the untrimmed collator would allocate.
    pre = [[preprocess_item(dict(g)) for g in b] for b in batches]
    untrimmed = [_input_edges_alloc_bytes(b, e_cols) for b in pre]
    n510 = [sum(int(it["input_edges"].shape[2]) == UNREACHABLE for it in b) for b in pre]
    dmax = [max(int(it["input_edges"].shape[2]) for it in b) for b in pre]
    budget = float(cfg.get("max_input_edges_bytes", 0.25 * _mem_available_bytes()))
    trim_cfg = cfg.get("trim_input_edges", "auto")
    trim = bool(trim_cfg) if trim_cfg != "auto" else max(untrimmed) > budget
    res = {
        "graphs": sum(len(b) for b in batches), "batches": len(batches),
        "batch_sizes": sorted({len(b) for b in batches}),
        "task": task, "loss": loss_name,
        "collator_spatial_pos_max": spatial_pos_max, "multi_hop_max_dist": hops,
        "max_dist_per_batch": dmax, "graphs_with_max_dist_510_per_batch": n510,
        "untrimmed_input_edges_gib_per_batch": [_gib(b) for b in untrimmed],
        "trimmed_input_edges": trim,
    }
    if trim:
        reason = (f"untrimmed collator input_edges (B,N,N,max_dist,Fe) int64 would need up to "
                  f"{_gib(max(untrimmed))} GiB per batch (budget {_gib(budget)} GiB, "
                  f"MemAvailable {_gib(_mem_available_bytes())} GiB); max_dist is 510 for "
                  f"disconnected graphs. Each item's input_edges is cut to multi_hop_max_dist="
                  f"{hops} hops after preprocess_item; the model slices to those hops anyway, so "
                  f"outputs are unchanged.")
        res["trim_reason"] = reason if trim_cfg == "auto" else "forced by config trim_input_edges"
        pre = [[_trim(it, hops) for it in b] for b in pre]
        res["trimmed_input_edges_gib_per_batch"] = [_gib(_input_edges_alloc_bytes(b, e_cols)) for b in pre]
    if max(n510) > 0 and cfg.get("probe_untrimmed", True):
        worst_batch = int(np.argmax(untrimmed))
        res["untrimmed_probe"] = probe_untrimmed(batches[worst_batch], hops, e_cols, preprocess_item,
                                                 collator, model, torch)
        res["untrimmed_probe"]["batch"] = worst_batch

    fwd_keys = ("input_nodes", "input_edges", "attn_bias", "in_degree", "out_degree",
                "spatial_pos", "attn_edge_type")

    def step(batch):
        opt.zero_grad(set_to_none=True)
        out = model(**{k: batch[k] for k in fwd_keys}, return_dict=True)
        logits = out.logits.reshape(-1)
        y = batch["labels"].reshape(-1).float()
        loss = loss_fn(logits, y)
        if not bool(torch.isfinite(loss)):
            return float("nan")
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        if bool(torch.isfinite(norm)):
            opt.step()
            sched.step()
        return float(loss.detach())

    def collate(items):
        # Shallow copies: the collator replaces the dict's arrays by tensors in place.
        return collator([dict(it) for it in items])

    def on_the_fly(raw):
        items = [preprocess_item(dict(g)) for g in raw]
        if trim:
            items = [_trim(it, hops) for it in items]
        return items

    # Warm-up (not timed): `warmup` full on-the-fly steps, cycling over the batches.
    for i in range(warmup):
        step(collate(on_the_fly(batches[i % len(batches)])))
    trained = sum(p.numel() for p in model.parameters() if p.grad is not None)
    res["params"] = params
    res["params_receiving_grad"] = trained

    _reset_rss_peak()
    rss0 = _rss_now_mb()
    t_col, t_step, t_pre, sizes, losses, epoch_s = [], [], [], [], [], []
    for _ in range(repeats):
        e0 = time.perf_counter()
        for raw, items in zip(batches, pre):
            t0 = time.perf_counter()
            batch = collate(items)  # (i) collator on preprocessed items
            t1 = time.perf_counter()
            losses.append(step(batch))  # (ii) forward + backward + AdamW step
            t2 = time.perf_counter()
            del batch
            fresh = on_the_fly(raw)  # (iii) the reference's per-epoch preprocess_item
            t3 = time.perf_counter()
            del fresh
            t_col.append(t1 - t0)
            t_step.append(t2 - t1)
            t_pre.append(t3 - t2)
            sizes.append(len(items))
        epoch_s.append(time.perf_counter() - e0)
    t_col, t_step, t_pre, sizes = map(np.array, (t_col, t_step, t_pre, sizes))
    g = sizes.sum()

    def rates(t):
        return {"graphs_per_s": _r(g / t.sum()), "graphs_per_s_median": _r(float(np.median(sizes / t))),
                "total_s": _r(t.sum()), "median_batch_s": _r(float(np.median(t)))}

    res.update({
        "repeats": repeats, "warmup_steps": warmup, "timed_graphs": int(g),
        "step_only": rates(t_step),
        "collate_plus_step": rates(t_col + t_step),
        "preprocess_plus_collate_plus_step": rates(t_pre + t_col + t_step),
        "collate_only": rates(t_col),
        "preprocess_item_only": rates(t_pre),
        "epoch_s_collate_plus_step_plus_preprocess": [_r(e) for e in epoch_s],
        "final_loss": _r(losses[-1], 4),
        "rss_mb_before_timed": _r(rss0),
        "peak_rss_mb_timed": _r(_rss_peak_mb()),
        "notes": notes,
    })
    if trained != params:
        notes.append(f"{params - trained} parameters never get a gradient (with pre_layernorm=True "
                     "the encoder builds a final_layer_norm that its forward never applies)")
    return res


def run_bench(work: Path, out: Path):
    cfg = json.loads((work / "config.json").read_text())
    threads = int(cfg.get("threads", 1))
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(threads)
    import torch

    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    from ogb.utils import smiles2graph

    GraphormerConfig, GraphormerForGraphClassification, cg = import_hf()
    preprocess_item, GraphormerDataCollator = cg.preprocess_item, cg.GraphormerDataCollator
    import_s = time.perf_counter() - t0
    from rdkit import RDLogger

    RDLogger.DisableLog("rdApp.*")  # unparsable SMILES are counted, not printed

    result = {"versions": _versions(), "threads": threads, "import_s": _r(import_s),
              "notes": [
                  "preprocess_item reads node features from key 'node_feat' (as in the HF hub "
                  "ogbg datasets); an 'input_nodes' key on input is ignored and overwritten, so "
                  "items are given node_feat/edge_index/edge_attr/num_nodes/labels.",
                  "GraphormerConfig.spatial_pos_max is not used by the model; the masking "
                  "(attn_bias=-inf where spatial_pos=dist+1 >= spatial_pos_max, which includes "
                  "unreachable pairs) is done by GraphormerDataCollator(spatial_pos_max), default 20.",
                  "Timed step = zero_grad + forward + loss + backward + AdamW(lr 2e-4, wd 0.01) step; "
                  "collate_plus_step adds GraphormerDataCollator on preprocessed numpy items; "
                  "preprocess_plus_collate_plus_step adds preprocess_item on the batch's graphs "
                  "(what on_the_fly_processing / the reference does every epoch).",
                  "Vocabularies: num_atoms = 512 * node columns, num_edges = 512 * edge columns "
                  "(HF's offset-512 feature encoding; 512*9 / 512*3 are its defaults for OGB "
                  "features); everything else at HF defaults (edge_type multi_hop, num_spatial 512, "
                  "num_in/out_degree 512, num_edge_dis 128, apply_graphormer_init False).",
                  "HF's docs store preprocess_item output with datasets.map (Arrow), so its collator "
                  "then gets nested Python lists rather than numpy arrays; that slower path is not "
                  "timed here.",
              ]}

    smiles = [s.strip() for s in (work / "smiles.txt").read_text().splitlines() if s.strip()]
    smiles = smiles[: int(cfg.get("preprocess_n", len(smiles)))]
    if smiles:
        _reset_rss_peak()
        result["preprocess"] = bench_preprocess(smiles, int(cfg.get("warmup", 2)), smiles2graph,
                                                preprocess_item)
        result["preprocess"]["peak_rss_mb"] = _r(_rss_peak_mb())
        print(f"[hf-peer] preprocess: {result['preprocess']['mol_per_s']} mol/s", file=sys.stderr)

    hf = (GraphormerConfig, GraphormerForGraphClassification, preprocess_item, GraphormerDataCollator)
    result["train"] = {}
    # the same glibc malloc setting as our side's training steps (config "cpu_malloc"):
    # large blocks from the heap, not fresh mmaps, and the heap's free top kept; applied to
    # the training part only
    heap = cfg.get("cpu_malloc") == "heap" and _mallopt_heap(True)
    result["cpu_malloc"] = "heap" if heap else "default"
    for name in cfg.get("train_sets", []):
        path = work / f"batches-{name}.npz"
        if not path.exists():
            result["notes"].append(f"{path.name} missing: set {name} skipped")
            continue
        mcfg = dict(cfg["model"])
        mcfg.update((cfg.get("model_by_set") or {}).get(name, {}))
        batches, info = load_batches(path)
        r = bench_train(name, batches, info, cfg, mcfg, threads, torch, hf)
        result["train"][name] = r
        result.setdefault("params", r["params"])
        result.setdefault("params_by_set", {})[name] = r["params"]
        print(f"[hf-peer] {name}: step {r['step_only']['graphs_per_s']} g/s, collate+step "
              f"{r['collate_plus_step']['graphs_per_s']} g/s, on-the-fly "
              f"{r['preprocess_plus_collate_plus_step']['graphs_per_s']} g/s, "
              f"trimmed={r['trimmed_input_edges']}", file=sys.stderr)
        del batches
    if heap:
        _mallopt_heap(False)
    out.write_text(json.dumps(result, indent=2) + "\n")
    return result


def _mallopt_heap(on: bool) -> bool:
    """glibc's mallopt: M_MMAP_MAX 0 and M_TRIM_THRESHOLD 2 GiB (on), or glibc's defaults
    65536 and 128 KiB (off); False elsewhere.

    Its own copy of molsepnorm.train.allocator.heap_for_large_blocks: this script runs in
    the peer's environment and never imports molsepnorm."""
    import ctypes
    import ctypes.util
    import platform

    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    mmap_max, trim = (0, 2**31 - 1) if on else (65536, 128 * 1024)
    ok = libc.mallopt(ctypes.c_int(-4), ctypes.c_int(mmap_max)) == 1  # M_MMAP_MAX
    return ok and libc.mallopt(ctypes.c_int(-1), ctypes.c_int(trim)) == 1  # M_TRIM_THRESHOLD


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, help="work dir written by scripts/benchmark.py")
    ap.add_argument("--out", type=Path, help="result JSON")
    ap.add_argument("--make-test-work", type=Path, metavar="DIR",
                    help="write a small work dir from the staged data and exit")
    ap.add_argument("--prepare", action="store_true",
                    help="build HF's Cython extension and run a tiny smoke test (setup uses it)")
    ap.add_argument("--data-root", type=Path,
                    default=Path(os.environ.get("MOLSEPNORM_DATA",
                                                Path(__file__).resolve().parents[3] / "shared" / "data")),
                    help="folder holding ogbg_molhiv/ and ZINC/ (read only)")
    ap.add_argument("--n-smiles", type=int, default=500)
    ap.add_argument("--n-batches", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args(argv)
    if args.prepare:
        prepare()
        return 0
    if args.make_test_work:
        import torch

        torch.set_num_threads(1)
        make_test_work(args.make_test_work, args.data_root, args.n_smiles, args.n_batches,
                       args.batch_size, args.repeats)
        return 0
    if not (args.work and args.out):
        ap.error("--work and --out are required (or --make-test-work DIR)")
    run_bench(args.work, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
