"""molsepnorm's speed, measured, and side by side with HuggingFace's Graphormer.

    python scripts/benchmark.py                         # everything, 1 thread; the peer if .peer-venv exists
    python scripts/benchmark.py --threads 2             # the same with 2 torch threads
    python scripts/benchmark.py --parts preprocess,train --peer-python /path/to/venv/bin/python
    python scripts/benchmark.py --quick                 # small sizes: a minute, for checking the plumbing
    python scripts/benchmark.py --compile               # also time torch.compile'd training steps

What is measured (all on real molecules, warm-up excluded, ``time.perf_counter``):

(a) ``preprocess``: SMILES -> model-ready sample with all structural encodings, molecules/s,
    on the first ``--preprocess-n`` ogbg-molhiv SMILES (``mapping/mol.csv.gz`` under
    ``$MOLSEPNORM_DATA`` or ``../shared/data``).  Ours: ``featurize_graph(smiles, "ogb")``,
    what ``molsepnorm predict`` runs: OGB features, degree, shortest-path distances and
    the next-hop table as NumPy arrays (the reference's ``preprocess_item`` returns NumPy
    arrays too); the same as a PyG ``Data`` is reported beside it.
(b) ``train``: the training step ``molsepnorm train`` runs -- the trainer's own
    ``TrainStep``: forward, loss, backward, clipping at norm 5, AdamW, learning-rate
    schedule, finite checks -- of Graphormer-slim (``configs/zinc-slim.yaml``: 12 layers,
    hidden 80, FFN 80, 8 heads, dropout 0.1, pre-LN, SepNorm) on ``--batches`` batches of
    ``--batch-size`` graphs drawn at random (seeded) from the training split of
    zinc-subset and of ogbg-molhiv; graphs/s for the step alone and with the collate
    function that pads the batch.  Also the same molecules regrouped into size-bucketed
    batches (what ``--batching bucket`` buys).  Both sides' steps run with glibc serving
    large blocks from its heap, as ``molsepnorm train`` does on CPU (``--cpu-malloc
    heap``, :mod:`molsepnorm.train.allocator`); ``--cpu-malloc default`` times both with
    glibc's default instead (a run of its own: a grown heap serves later requests anyway).
    Then a training epoch through ``Trainer.fit`` (its loader, metrics, checkpoints and
    validation; molhiv's cut at ``--epoch-steps``), graphs/s from the run's metrics row.
(c) ``predict``: ``molsepnorm predict`` end to end from a ``.smi`` of ``--predict-n``
    SMILES to the output CSV, molecules/s and peak resident memory, in a fresh process
    (``scripts/bench_predict.py``).
(d) ``flops``: FLOPs per graph of one forward and forward + backward, counted by
    ``torch.utils.flop_counter.FlopCounterMode`` (matrix products only: softmax,
    norms and element-wise work are not counted, so the fraction is a lower bound), and
    the fraction of the machine's peak the training step reaches, against a measured
    float32 GEMM peak (``torch.mm`` of 2048 x 2048 at the same thread count).

The peer (``--peer-python``, default ``.peer-venv/bin/python`` when it exists) is
HuggingFace transformers 4.57.6's ``transformers.models.deprecated.graphormer`` in its own
virtual environment, never a dependency of molsepnorm: create it with
``bash scripts/peer/setup_hf_env.sh`` (python 3.11, torch 2.13.0, transformers 4.57.6,
Cython 0.29.37, ogb).  This script writes the same molecules and the same batches to a
folder, runs ``scripts/peer/hf_graphormer_bench.py`` there with the same model
dimensions, batch size and thread count, and reports the ratios.

Results: a table on stdout and JSON at ``--out``.  docs/benchmarks.md holds the figures.
"""
from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SLIM = REPO / "configs" / "zinc-slim.yaml"
TRAIN_SETS = ("zinc-subset", "molhiv")


# ----------------------------------------------------------------------------- inputs
def data_root() -> Path:
    for root in (os.environ.get("MOLSEPNORM_DATA"), str(REPO.parent / "shared" / "data")):
        if root and (Path(root) / "ogbg_molhiv").is_dir():
            return Path(root)
    raise SystemExit("no ogbg_molhiv under $MOLSEPNORM_DATA or ../shared/data: set MOLSEPNORM_DATA")


def molhiv_smiles(n: Optional[int]) -> list[str]:
    """The first ``n`` SMILES of ogbg-molhiv, in the data set's order."""
    path = data_root() / "ogbg_molhiv" / "mapping" / "mol.csv.gz"
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        smiles = [row["smiles"] for row in csv.DictReader(fh)]
    return smiles[:n] if n else smiles


def model_config(dataset: str, **overrides: Any):
    """Graphormer-slim (configs/zinc-slim.yaml) in the vocabulary of ``dataset``."""
    from molsepnorm.nn import GraphormerConfig

    config = GraphormerConfig.from_yaml(SLIM).to_dict()
    if dataset == "molhiv":
        config.update(vocab="ogb", atom_dims=None, bond_dims=None, multi_hop_max_dist=5)
    config.update(overrides)
    return GraphormerConfig.from_dict(config)


def pick_batches(dataset: Any, batch_size: int, batches: int, seed: int) -> list[list[int]]:
    """``batches`` random batches of training-split indices (seeded; as a shuffled loader draws them)."""
    order = np.random.default_rng(seed).permutation(len(dataset))
    return [order[i * batch_size:(i + 1) * batch_size].tolist() for i in range(batches)]


def bucketed(dataset: Any, chosen: list[list[int]]) -> list[list[int]]:
    """The same molecules, sorted by size and cut into batches of the same count."""
    flat = [i for b in chosen for i in b]
    flat.sort(key=lambda i: int(dataset[i].num_nodes))
    size = len(chosen[0])
    return [flat[i:i + size] for i in range(0, len(flat), size)]


def export_batches(dataset: Any, chosen: list[list[int]], path: Path) -> None:
    """The batches' raw graphs (features, edges, targets) for the peer, concatenated."""
    graphs = [dataset[i] for b in chosen for i in b]
    x = [g.x.view(g.num_nodes, -1).numpy() for g in graphs]
    ea = [g.edge_attr.view(g.edge_index.size(1), -1).numpy() for g in graphs]
    np.savez(path, x=np.concatenate(x).astype(np.int64),
             edge_index=np.concatenate([g.edge_index.numpy() for g in graphs], axis=1).astype(np.int64),
             edge_attr=np.concatenate(ea).astype(np.int64),
             y=np.array([float(g.y.view(-1)[0]) for g in graphs], dtype=np.float32),
             num_nodes=np.array([g.num_nodes for g in graphs], dtype=np.int64),
             num_edges=np.array([g.edge_index.size(1) for g in graphs], dtype=np.int64),
             batch_sizes=np.array([len(b) for b in chosen], dtype=np.int64))


# ----------------------------------------------------------------------------- (a)
def bench_preprocess(smiles: Sequence[str]) -> dict[str, Any]:
    """SMILES -> encoded sample, one molecule at a time as a data pipeline does it.

    ``featurize_graph(s, "ogb")`` is what ``molsepnorm predict`` runs: the model-ready
    sample as NumPy arrays (the reference's ``preprocess_item`` returns a dict of NumPy
    arrays too).  Also timed, for the record: the same wrapped in a PyG ``Data``
    (``featurize(s, "ogb", encodings=True)``), ``encode(featurize(s))`` (the graph search
    instead of RDKit's distance matrix), and the features alone.
    """
    from molsepnorm.chem import featurize, featurize_graph
    from molsepnorm.encodings import encode
    from molsepnorm.errors import InvalidMoleculeError

    def run(fn: Any) -> tuple[float, int]:
        failed = 0
        t0 = time.perf_counter()
        for s in smiles:
            try:
                fn(s)
            except InvalidMoleculeError:
                failed += 1
        return time.perf_counter() - t0, failed

    pipeline = lambda s: featurize_graph(s, "ogb")  # noqa: E731
    as_data = lambda s: featurize(s, "ogb", encodings=True)  # noqa: E731
    separate = lambda s: encode(featurize(s, "ogb"))  # noqa: E731
    for fn in (pipeline, as_data, separate):  # warm-up: imports, RDKit and numpy first calls
        for s in smiles[:200]:
            try:
                fn(s)
            except InvalidMoleculeError:
                pass
    seconds, failed = run(pipeline)
    data_seconds, _ = run(as_data)
    separate_seconds, _ = run(separate)
    features_seconds, _ = run(lambda s: featurize(s, "ogb"))
    return {"n": len(smiles), "ok": len(smiles) - failed, "failed": failed, "seconds": round(seconds, 3),
            "mol_per_s": round(len(smiles) / seconds, 1),
            "as_pyg_data_mol_per_s": round(len(smiles) / data_seconds, 1),
            "featurize_only_mol_per_s": round(len(smiles) / features_seconds, 1),
            "featurize_then_encode_mol_per_s": round(len(smiles) / separate_seconds, 1)}


def _featurize_chunk(smiles: Sequence[str]) -> list[Any]:
    """Worker: model-ready samples of a chunk (NumPy arrays: what crosses the process boundary)."""
    from molsepnorm.chem import featurize_graph
    from molsepnorm.errors import InvalidMoleculeError

    out = []
    for s in smiles:
        try:
            out.append(featurize_graph(s, "ogb"))
        except InvalidMoleculeError:
            out.append(None)
    return out


def bench_preprocess_workers(smiles: Sequence[str], workers: int, chunk: int = 250) -> dict[str, Any]:
    """The same in ``workers`` processes (as ``molsepnorm predict --workers``); pool start-up excluded."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        list(pool.map(_featurize_chunk, [smiles[:100]] * workers))  # start and warm every worker
        t0 = time.perf_counter()
        parts = list(pool.map(_featurize_chunk, [smiles[i:i + chunk] for i in range(0, len(smiles), chunk)]))
        seconds = time.perf_counter() - t0
    ok = sum(g is not None for part in parts for g in part)
    return {"workers": workers, "n": len(smiles), "ok": ok, "seconds": round(seconds, 3),
            "mol_per_s": round(len(smiles) / seconds, 1)}


# ----------------------------------------------------------------------------- (b)
def experiment(name: str, args: argparse.Namespace, **train: Any) -> Any:
    """The experiment `molsepnorm train --config configs/zinc-slim.yaml --dataset NAME` runs,
    with the benchmark's batch size, device, threads and malloc setting (molhiv: OGB
    vocabulary, 5 hops)."""
    from molsepnorm.train.config import load_experiment_config

    overrides = {"data.dataset": name, "train.init": "none", "train.batch_size": args.batch_size, "train.device": args.device,
                 "train.threads": args.threads, "train.cpu_malloc": args.cpu_malloc, "train.progress": False,
                 "train.epochs": 1, "train.max_steps": None, "train.seed": 0}
    if name == "molhiv":
        overrides.update({"model.vocab": "ogb", "model.multi_hop_max_dist": 5, "train.loss": "auto"})
    overrides.update({f"train.{k}": v for k, v in train.items()})
    return load_experiment_config(SLIM, overrides)


def _timed_steps(step: Any, batches: list, repeats: int, warmup: int, collate: Any,
                 device: str = "cpu") -> dict[str, Any]:
    """``step`` (the trainer's :class:`~molsepnorm.train.step.TrainStep`) on each padded batch."""
    import torch

    def sync() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    collated = [collate(b) for b in batches]
    for i in range(warmup):
        step(collated[i % len(collated)])
    sync()
    step_times, collate_times = [], []
    for _ in range(repeats):
        for raw, batch in zip(batches, collated):
            t0 = time.perf_counter()
            collate(raw)
            collate_times.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            done = step(batch)
            sync()
            step_times.append(time.perf_counter() - t0)
            if not done.applied:
                raise RuntimeError(f"benchmark step not applied: {done.problem}")
    graphs = sum(len(b) for b in batches) * repeats
    return {"graphs": graphs, "steps": len(step_times),
            "step_seconds_median": round(float(np.median(step_times)), 4),
            "graphs_per_s_step": round(graphs / sum(step_times), 1),
            "collate_seconds_median": round(float(np.median(collate_times)), 4),
            "graphs_per_s_with_collate": round(graphs / (sum(step_times) + sum(collate_times)), 1)}


def bench_train(name: str, splits: Any, chosen: list[list[int]], args: argparse.Namespace) -> dict[str, Any]:
    """Throughput of the training step `molsepnorm train` runs (the trainer's own
    :class:`~molsepnorm.train.step.TrainStep`: forward, loss, backward, clipping, AdamW,
    schedule) on the chosen batches, random and bucketed, under the trainer's malloc setting."""
    from molsepnorm.data.sampler import padding_fraction
    from molsepnorm.train.allocator import heap_for_large_blocks
    from molsepnorm.train.loop import Trainer

    dataset = splits.train
    config = experiment(name, args)
    results: dict[str, Any] = {"batch_size": args.batch_size}
    sizes = {i: int(dataset[i].num_nodes) for b in chosen for i in b}
    results["mean_atoms"] = round(float(np.mean(list(sizes.values()))), 2)
    dense = np.zeros(max(sizes) + 1, dtype=np.int64)
    dense[list(sizes)] = list(sizes.values())
    # glibc's default is timed by a run of its own (--cpu-malloc default): once the heap
    # has grown, it serves later requests from it whatever the setting.
    heap = args.cpu_malloc == "heap" and args.device == "cpu"
    for label, index_batches in [("random", chosen), ("bucketed", bucketed(dataset, chosen))]:
        raw = [[dataset[i] for i in b] for b in index_batches]
        trainer = Trainer(config, splits)
        trainer.model.train()
        with heap_for_large_blocks(heap):
            r = _timed_steps(trainer.step, raw, args.repeats, args.warmup, trainer.collate, args.device)
        r["padding_fraction"] = round(padding_fraction(dense, index_batches), 4)
        results[label] = r
        if label == "random":
            results["params"] = sum(p.numel() for p in trainer.model.parameters())
            results["multi_hop_max_dist"] = trainer.model_config.multi_hop_max_dist
    if args.compile:
        import torch

        raw = [[dataset[i] for i in b] for b in chosen]
        trainer = Trainer(config, splits)
        trainer.step.model = torch.compile(trainer.model, dynamic=True)
        with heap_for_large_blocks(heap):
            t0 = time.perf_counter()
            _timed_steps(trainer.step, raw[:1], 1, 0, trainer.collate, args.device)
            cold = time.perf_counter() - t0
            r = _timed_steps(trainer.step, raw, args.repeats, args.warmup, trainer.collate, args.device)
        r["cold_compile_seconds"] = round(cold, 1)
        results["compiled"] = r
    return results


def bench_epoch(name: str, splits: Any, args: argparse.Namespace) -> dict[str, Any]:
    """A training epoch through ``Trainer.fit`` (batches drawn and collated by its loader,
    progress, metrics row, last.pt / best.pt written, validation), as `molsepnorm train`
    runs it; on molhiv the epoch is cut at ``--epoch-steps`` steps.  The train part's
    graphs/s comes from the run's own metrics row."""
    from molsepnorm.train.loop import Trainer

    limit = {"max_steps": args.epoch_steps} if name == "molhiv" and args.epoch_steps else {}
    config = experiment(name, args, **limit)
    with tempfile.TemporaryDirectory(prefix="molsepnorm-epoch-") as tmp:
        trainer = Trainer(config, splits, run_dir=Path(tmp) / "run")
        trainer.run_dir.create()
        t0 = time.perf_counter()
        result = trainer.fit()
        total = time.perf_counter() - t0
    row = result.history[0]
    return {"steps": result.steps, "graphs": int(round(row["graphs_per_second"] * row["epoch_seconds"])),
            "train_seconds": round(row["epoch_seconds"], 1), "graphs_per_s_train": round(row["graphs_per_second"], 1),
            "validation_seconds": round(row["eval_seconds"], 1), "fit_seconds": round(total, 1)}


# ----------------------------------------------------------------------------- (c)
def bench_predict(n: int, threads: int) -> dict[str, Any]:
    command = [sys.executable, str(REPO / "scripts" / "bench_predict.py"), "--sizes", str(n), "--threads", str(threads)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------------------- (d)
def gemm_peak_gflops(threads: int, size: int = 2048, repeats: int = 10) -> float:
    """Measured float32 GEMM rate at this thread count: the practical peak of the machine."""
    import torch

    a, b = torch.randn(size, size), torch.randn(size, size)
    torch.mm(a, b)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - t0)
    return 2 * size ** 3 / best / 1e9


def bench_flops(name: str, dataset: Any, chosen: list[list[int]], step_seconds: float) -> dict[str, Any]:
    """FLOPs of one forward / forward + backward on the first batch, per graph."""
    import torch.nn.functional as F
    from torch.utils.flop_counter import FlopCounterMode

    from molsepnorm.data.collate import GraphCollator
    from molsepnorm.nn import Graphormer

    config = model_config(name)
    batch = GraphCollator(config.multi_hop_max_dist)([dataset[i] for i in chosen[0]])
    model = Graphormer(config).train()
    with FlopCounterMode(display=False) as fwd:
        model(batch)
    with FlopCounterMode(display=False) as both:
        out = model(batch)
        F.l1_loss(out.view(-1), batch.y.float().view(-1)).backward()
    graphs = len(chosen[0])
    flops_step = both.get_total_flops()
    return {"forward_flops_per_graph": fwd.get_total_flops() / graphs,
            "train_flops_per_graph": flops_step / graphs,
            "train_gflops_per_s": round(flops_step / step_seconds / 1e9, 2)}


# ----------------------------------------------------------------------------- machine
def machine(threads: int) -> dict[str, Any]:
    import torch

    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info = {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(), "torch": torch.__version__,
            "threads": threads, "platform": platform.platform()}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    try:
        import molsepnorm

        info["molsepnorm"] = molsepnorm.__version__
        info["commit"] = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                                        capture_output=True, text=True).stdout.strip()
    except Exception:  # noqa: BLE001 - informational only
        pass
    return info


# ----------------------------------------------------------------------------- the peer
def run_peer(python: str, work: Path, args: argparse.Namespace, smiles: list[str],
             sets: dict[str, tuple[Any, list[list[int]]]]) -> dict[str, Any]:
    """Write the same inputs for the peer, run it with its own interpreter, read its JSON."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "smiles.txt").write_text("\n".join(smiles) + "\n", encoding="utf-8")
    for name, (splits, chosen) in sets.items():
        export_batches(splits.train, chosen, work / f"batches-{name}.npz")
    slim = model_config("zinc-subset")
    config = {
        "threads": args.threads, "warmup": args.warmup, "repeats": args.repeats, "preprocess_n": len(smiles),
        "model": {k: getattr(slim, k) for k in ("num_layers", "hidden_dim", "ffn_dim", "num_heads", "dropout",
                                               "attention_dropout", "activation_dropout", "pre_ln",
                                               "multi_hop_max_dist", "num_tasks")},
        "train_sets": list(sets), "model_by_set": {"molhiv": {"multi_hop_max_dist": 5}},
        "device": args.device, "cpu_malloc": args.cpu_malloc,
    }
    (work / "config.json").write_text(json.dumps(config, indent=1))
    out = work / "peer.json"
    command = [python, str(REPO / "scripts" / "peer" / "hf_graphormer_bench.py"), "--work", str(work),
               "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"the peer benchmark failed ({' '.join(command)}):\n{done.stderr[-3000:]}")
    return json.loads(out.read_text())


def _peer_rate(theirs: dict[str, Any], key: str) -> Optional[float]:
    """graphs/s of one of the peer's timings (``step_only``, ``collate_plus_step``, ...)."""
    return (theirs.get(key) or {}).get("graphs_per_s")


def ratios(ours: dict[str, Any], peer: dict[str, Any]) -> dict[str, Any]:
    """Speed-up of molsepnorm over the peer (> 1: molsepnorm is faster), on the same work."""
    out: dict[str, Any] = {}
    if "preprocess" in ours and "preprocess" in peer:
        out["preprocess"] = round(ours["preprocess"]["mol_per_s"] / peer["preprocess"]["mol_per_s"], 2)
        out["preprocess_as_data"] = round(ours["preprocess"]["as_pyg_data_mol_per_s"]
                                          / peer["preprocess"]["mol_per_s"], 2)
        if "preprocess_workers" in ours:  # ours in N processes vs the reference's one
            out["preprocess_workers"] = round(ours["preprocess_workers"]["mol_per_s"]
                                              / peer["preprocess"]["mol_per_s"], 2)
    for name, mine in ours.get("train", {}).items():
        theirs = peer.get("train", {}).get(name)
        if not theirs:
            continue
        r: dict[str, Any] = {}
        pairs = (("step", "graphs_per_s_step", "step_only"),
                 ("step_with_collate", "graphs_per_s_with_collate", "collate_plus_step"),
                 # the reference recomputes its encodings each epoch; ours are cached
                 ("vs_reference_preprocessing_every_epoch", "graphs_per_s_with_collate",
                  "preprocess_plus_collate_plus_step"))
        for label, ours_key, peer_key in pairs:
            rate = _peer_rate(theirs, peer_key)
            if rate:
                r[label] = round(mine["random"][ours_key] / rate, 2)
        out[name] = r
    return out


# ----------------------------------------------------------------------------- report
def table(result: dict[str, Any]) -> str:
    rows: list[tuple[str, str, str, str]] = [("measure", "molsepnorm", "HF Graphormer", "ratio")]
    ours, peer, rat = result["ours"], result.get("peer") or {}, result.get("ratios", {})

    def fmt(v: Any, unit: str = "") -> str:
        return "-" if v is None else (f"{v:,.1f}{unit}" if isinstance(v, float) else f"{v:,}{unit}")

    if "preprocess" in ours:
        rows.append(("(a) preprocess SMILES -> sample, mol/s", fmt(ours["preprocess"]["mol_per_s"]),
                     fmt(peer.get("preprocess", {}).get("mol_per_s")), fmt(rat.get("preprocess"), "x")))
        if "as_pyg_data_mol_per_s" in ours["preprocess"]:
            rows.append(("(a) ... as a PyG Data, mol/s", fmt(ours["preprocess"]["as_pyg_data_mol_per_s"]),
                         fmt(peer.get("preprocess", {}).get("mol_per_s")), fmt(rat.get("preprocess_as_data"), "x")))
        if "preprocess_workers" in ours:
            w = ours["preprocess_workers"]
            rows.append((f"(a) ... ours in {w['workers']} processes, mol/s", fmt(w["mol_per_s"]),
                         fmt(peer.get("preprocess", {}).get("mol_per_s")), fmt(rat.get("preprocess_workers"), "x")))
    for name, mine in ours.get("train", {}).items():
        theirs, r = peer.get("train", {}).get(name, {}), rat.get(name, {})
        rows.append((f"(b) {name}: train step, graphs/s", fmt(mine["random"]["graphs_per_s_step"]),
                     fmt(_peer_rate(theirs, "step_only")), fmt(r.get("step"), "x")))
        rows.append((f"(b) {name}: collate + step, graphs/s", fmt(mine["random"]["graphs_per_s_with_collate"]),
                     fmt(_peer_rate(theirs, "collate_plus_step")), fmt(r.get("step_with_collate"), "x")))
        if _peer_rate(theirs, "preprocess_plus_collate_plus_step") is not None:
            rows.append((f"(b) {name}: ref. preprocessing every epoch", fmt(mine["random"]["graphs_per_s_with_collate"]),
                         fmt(_peer_rate(theirs, "preprocess_plus_collate_plus_step")),
                         fmt(r.get("vs_reference_preprocessing_every_epoch"), "x")))
        rows.append((f"(b) {name}: bucketed collate + step", fmt(mine["bucketed"]["graphs_per_s_with_collate"]),
                     "", ""))
        if "epoch" in mine:
            e = mine["epoch"]
            rows.append((f"(b) {name}: trainer epoch ({e['steps']} steps), graphs/s", fmt(e["graphs_per_s_train"]),
                         "", ""))
        if "compiled" in mine:
            rows.append((f"(b) {name}: compiled collate + step", fmt(mine["compiled"]["graphs_per_s_with_collate"]),
                         "", ""))
    if "predict" in ours:
        p = ours["predict"]
        rows.append((f"(c) predict {p['n']:,} SMILES, mol/s", fmt(p["mol_per_s"]), "", ""))
        rows.append(("(c) predict peak RSS, MiB", fmt(p["peak_rss_mib"]), "", ""))
    for name, f in ours.get("flops", {}).items():
        rows.append((f"(d) {name}: train GFLOP/graph (fwd+bwd)", f"{f['train_flops_per_graph'] / 1e9:.3f}", "", ""))
        rows.append((f"(d) {name}: train GFLOP/s, % of GEMM peak",
                     f"{f['train_gflops_per_s']:.1f} ({100 * f['fraction_of_gemm_peak']:.1f} %)", "", ""))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


# ----------------------------------------------------------------------------- main
def main(argv: Optional[Sequence[str]] = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default="preprocess,train,predict,flops")
    parser.add_argument("--threads", type=int, default=1, help="torch threads, for both sides (default 1)")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="cuda: bf16 autocast")
    parser.add_argument("--preprocess-n", type=int, default=5000)
    parser.add_argument("--preprocess-workers", type=int, default=2,
                        help="also time preprocessing in this many processes (1: skip)")
    parser.add_argument("--predict-n", type=int, default=100_000)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--batches", type=int, default=4, help="distinct batches per data set")
    parser.add_argument("--repeats", type=int, default=2, help="timed passes over the batches")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    parser.add_argument("--seed", type=int, default=0, help="which molecules form the batches")
    parser.add_argument("--compile", action="store_true", help="also time torch.compile'd steps")
    parser.add_argument("--epoch-steps", type=int, default=16,
                        help="molhiv's timed epoch is cut at this many steps (0: the whole epoch)")
    parser.add_argument("--cpu-malloc", default="heap", choices=["heap", "default"],
                        help="glibc malloc during the training steps of both sides, as `molsepnorm train "
                             "--cpu-malloc`")
    parser.add_argument("--peer-python", default=None,
                        help="python of the HF Graphormer venv (default .peer-venv/bin/python if present; 'none': skip)")
    parser.add_argument("--quick", action="store_true", help="small sizes, to check the plumbing")
    parser.add_argument("--out", default=None, help="JSON output (default runs/benchmark-<device>-<threads>t.json)")
    args = parser.parse_args(argv)
    if args.quick:
        args.preprocess_n, args.predict_n, args.batches, args.repeats, args.warmup = 500, 2000, 2, 1, 1
    parts = set(args.parts.split(","))

    import torch

    torch.set_num_threads(args.threads)
    os.environ.setdefault("MOLSEPNORM_DATA", str(data_root()))
    peer_python = args.peer_python
    if peer_python is None and (REPO / ".peer-venv" / "bin" / "python").exists():
        peer_python = str(REPO / ".peer-venv" / "bin" / "python")
    if peer_python == "none":
        peer_python = None

    result: dict[str, Any] = {"machine": machine(args.threads), "settings": vars(args).copy(), "ours": {}}
    smiles = molhiv_smiles(args.preprocess_n)
    if "preprocess" in parts:
        print(f"(a) preprocessing {len(smiles):,} molhiv SMILES ...", flush=True)
        result["ours"]["preprocess"] = bench_preprocess(smiles)
        if args.preprocess_workers > 1:
            result["ours"]["preprocess_workers"] = bench_preprocess_workers(smiles, args.preprocess_workers)

    sets: dict[str, tuple[Any, list[list[int]]]] = {}
    if parts & {"train", "flops"}:
        from molsepnorm.data import load_dataset

        for name in TRAIN_SETS:
            splits = load_dataset(name)
            sets[name] = (splits, pick_batches(splits.train, args.batch_size, args.batches, args.seed))
    if "train" in parts:
        result["ours"]["train"] = {}
        for name, (splits, chosen) in sets.items():
            print(f"(b) training steps on {name} ...", flush=True)
            result["ours"]["train"][name] = bench_train(name, splits, chosen, args)
            print(f"(b) a training epoch of {name} through the trainer ...", flush=True)
            result["ours"]["train"][name]["epoch"] = bench_epoch(name, splits, args)
    if "flops" in parts:
        peak = gemm_peak_gflops(args.threads)
        result["machine"]["gemm_peak_gflops"] = round(peak, 1)
        result["ours"]["flops"] = {}
        for name, (splits, chosen) in sets.items():
            step = result["ours"].get("train", {}).get(name, {}).get("random", {}).get("step_seconds_median")
            if step is None:
                continue
            f = bench_flops(name, splits.train, chosen, step)
            f["fraction_of_gemm_peak"] = round(f["train_gflops_per_s"] / peak, 4)
            result["ours"]["flops"][name] = f
    if "predict" in parts:
        print(f"(c) predicting {args.predict_n:,} SMILES ...", flush=True)
        result["ours"]["predict"] = bench_predict(args.predict_n, args.threads)

    if peer_python and parts & {"preprocess", "train"}:
        print(f"peer: HF Graphormer with {peer_python} ...", flush=True)
        with tempfile.TemporaryDirectory(prefix="molsepnorm-peer-") as tmp:
            peer_sets = sets if "train" in parts else {}
            peer = run_peer(peer_python, Path(tmp), args, smiles if "preprocess" in parts else [], peer_sets)
        result["peer"] = peer
        result["ratios"] = ratios(result["ours"], peer)
    result["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)

    out = Path(args.out) if args.out else REPO / "runs" / f"benchmark-{args.device}-{args.threads}t.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print()
    print(table(result))
    print(f"\nJSON: {out}")
    return result


if __name__ == "__main__":
    main()
