"""Where a CPU training epoch of the default ``molsepnorm train`` goes, in milliseconds per batch.

    python scripts/bench_train_epoch.py                      # ogbg-molhiv, 300 batches, 1 thread
    python scripts/bench_train_epoch.py --dataset nci-tpsa --batches 200 --threads 2
    PYTHONPATH=/path/to/older/checkout python scripts/bench_train_epoch.py   # the same for another commit

The trainer is built exactly as ``molsepnorm train --dataset D --threads T`` builds it
(default config: the bundled encoder, size-bucketed batches, task defaults), on an idle
machine ideally.  Then, over the first ``--batches`` batches of epoch 1 (seeded):

* ``loader``: the training loader alone -- reading the cached graphs and collating them
  into padded batches (``GraphCollator``), in the main process as ``num_workers: 0`` does;
* ``step``: the trainer's ``TrainStep`` on those batches (forward, loss, backward,
  clipping, AdamW, schedule), after ``--warmup`` untimed steps;
* ``validation``: one pass of ``Trainer.evaluate("val")``, as at every epoch's end;
* ``epoch estimate``: (loader + step) x steps per epoch + validation.

With ``--micro``, also the CPU operations written for the step, forward + backward on
the first timed batch's shapes, against PyTorch's own: ``molsepnorm.nn.dropout.dropout``
against ``F.dropout`` on the attention probabilities (B, H, L, L) and on token states
(B, L, D), and ``molsepnorm.nn.embedding.embedding`` against ``F.embedding`` for the
spatial encoding (B, N, N into the spatial table) and the atom features (B, N, F), and
``molsepnorm.nn.segment.gather_segment_sum`` against the ``index_add_`` form it replaced
for the edge encoding's sum of hop rows into atom pairs.

Each figure is the median of ``--repeats`` passes.  Nothing here is specific to the
current commit, so running it with ``PYTHONPATH`` set to another checkout times that
commit's code on the same batches (docs/benchmarks.md compares commits this way).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from benchmark import machine  # scripts/benchmark.py, beside this script


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", default="molhiv")
    parser.add_argument("--batches", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--micro", action="store_true", help="also time dropout, embedding and the hop sum against PyTorch's")
    parser.add_argument("--out", default=None, help="JSON output")
    args = parser.parse_args()

    import torch

    import molsepnorm
    from molsepnorm.data import load_dataset
    from molsepnorm.train import Trainer
    from molsepnorm.train.config import ExperimentConfig

    torch.set_num_threads(args.threads)
    splits = load_dataset(args.dataset)
    config = ExperimentConfig.from_dict({"data": {"dataset": args.dataset},
                                         "train": {"threads": args.threads, "seed": args.seed, "progress": False}})
    trainer = Trainer(config, splits, run_dir=None)
    trainer.train_sampler.set_epoch(0)

    def load() -> tuple[float, list]:
        batches = []
        start = time.perf_counter()
        for batch in trainer._loader(trainer.train_sampler, args.seed):
            batches.append(batch)
            if len(batches) == args.warmup + args.batches:
                break
        return time.perf_counter() - start, batches

    loader_s, steps_s, val_s = [], [], []
    for _ in range(args.repeats):
        seconds, batches = load()
        loader_s.append(seconds / len(batches))
        trainer.model.train()
        for batch in batches[:args.warmup]:
            trainer.step(batch)
        start = time.perf_counter()
        for batch in batches[args.warmup:]:
            trainer.step(batch)
        steps_s.append((time.perf_counter() - start) / (len(batches) - args.warmup))
        start = time.perf_counter()
        trainer.evaluate("val")
        val_s.append(time.perf_counter() - start)
    graphs = sum(b.num_graphs for b in batches[args.warmup:])
    loader, step, val = (statistics.median(v) for v in (loader_s, steps_s, val_s))
    epoch = (loader + step) * trainer.steps_per_epoch + val
    # the checkout that was imported (PYTHONPATH may point at another one than this script's)
    try:
        commit = subprocess.run(["git", "-C", os.path.dirname(molsepnorm.__file__), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
    except OSError:  # no git
        commit = ""
    result = {
        "command": " ".join([sys.executable, *sys.argv]),
        "machine": {**machine(args.threads), "commit": commit},  # scripts/benchmark.py's record, CPU model included
        "molsepnorm": os.path.dirname(molsepnorm.__file__),
        "threads": args.threads, "dataset": args.dataset,
        "batches": args.batches, "graphs": graphs, "steps_per_epoch": trainer.steps_per_epoch,
        "loader_ms_per_batch": 1e3 * loader, "step_ms_per_batch": 1e3 * step, "validation_s": val,
        "epoch_estimate_s": epoch, "passes": {"loader_s": loader_s, "step_s": steps_s, "validation_s": val_s},
    }
    print(f"{args.dataset}, commit {commit or '?'} ({result['molsepnorm']}), {args.threads} thread(s), "
          f"{args.batches} batches of {graphs / args.batches:.1f} molecules, median of {args.repeats}:")
    print(f"  loader {1e3 * loader:.2f} ms/batch, step {1e3 * step:.2f} ms/batch, validation {val:.2f} s; "
          f"epoch estimate {epoch:.1f} s ({trainer.steps_per_epoch} steps)")
    if args.micro:
        result["micro_us"] = micro(trainer.model, batches[args.warmup], args.repeats)
        for name, (ours, torch_s) in result["micro_us"].items():
            print(f"  {name}: ours {ours:.0f} us, PyTorch's {torch_s:.0f} us ({torch_s / ours:.2f}x)")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)


def micro(model, batch, repeats: int) -> dict[str, tuple[float, float]]:
    """Forward + backward microseconds of (ours, PyTorch's) on the shapes of ``batch``."""
    import torch
    import torch.nn.functional as F

    from molsepnorm.nn.dropout import dropout
    from molsepnorm.nn.embedding import embedding
    from molsepnorm.nn.encoders import hop_entries
    from molsepnorm.nn.segment import gather_segment_sum

    B, N = batch.node_mask.shape
    H, D = model.config.num_heads, model.config.hidden_dim
    spatial = model.attn_bias.spatial.embedding.weight.detach().clone().requires_grad_()
    atoms = model.atom_encoder.embedding.weight.detach().clone().requires_grad_()
    spd = batch.spd.clamp(0, spatial.size(0) - 1)
    x = batch.x + model.atom_encoder.offsets
    probs = torch.rand(B, H, N + 1, N + 1, requires_grad=True)
    states = torch.randn(B, N + 1, D, requires_grad=True)
    # the edge encoding's sum of tabulated hop rows into pairs, as EdgePathEncoder calls it
    K = min(batch.edge_path.size(-1), model.config.multi_hop_max_dist)
    E = batch.edge_attr.size(0)
    table = torch.randn(K * E, H, requires_grad=True)
    rows, pairs = hop_entries(batch.edge_path[..., :K], E)
    cases = {
        f"dropout p=0.1 on ({B}, {H}, {N + 1}, {N + 1})": (lambda: dropout(probs, 0.1), lambda: F.dropout(probs, 0.1)),
        f"dropout p=0.1 on ({B}, {N + 1}, {D})": (lambda: dropout(states, 0.1), lambda: F.dropout(states, 0.1)),
        f"spatial embedding ({B}, {N}, {N}) x {tuple(spatial.shape)}":
            (lambda: embedding(spd, spatial), lambda: F.embedding(spd, spatial)),
        f"atom embedding ({B}, {N}, {x.size(-1)}) x {tuple(atoms.shape)}":
            (lambda: embedding(x, atoms), lambda: F.embedding(x, atoms)),
        f"edge-encoding hop sum, {rows.numel()} rows of {tuple(table.shape)} into {B * N * N} pairs":
            (lambda: gather_segment_sum(table, rows, pairs, B * N * N),
             lambda: table.new_zeros(B * N * N, H).index_add_(0, pairs, table.index_select(0, rows))),
    }

    def timed(fn) -> float:
        grad = torch.randn_like(fn())  # a dense gradient, as in training (sum()'s is an expanded one)
        times = []
        for _ in range(repeats):
            for _ in range(5):
                fn().backward(grad)
            start = time.perf_counter()
            for _ in range(200):
                fn().backward(grad)
            times.append((time.perf_counter() - start) / 200 * 1e6)
        return statistics.median(times)

    return {name: (timed(ours), timed(theirs)) for name, (ours, theirs) in cases.items()}


if __name__ == "__main__":
    main()
