"""Time the parts of one default training step on small molecules, and AdamW's four
implementations (PyTorch's per-tensor, for-each and fused, and the training loop's
``CachedFusedAdamW``, :mod:`molsepnorm.train.optimizer`).

The default model (``GraphormerConfig()``) on size-bucketed batches of 32 molecules of
nci-tpsa (RDKit's NCI sample, always installed), one thread by default:

    python scripts/bench_optimizer.py [--threads 2] [--repeats 50]

Prints milliseconds per call (best of 3 runs of ``--repeats`` calls).
"""
from __future__ import annotations

import argparse
import time
from typing import Callable

import torch


def best_ms(fn: Callable[[], object], repeats: int) -> float:
    fn()
    times = []
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(repeats):
            fn()
        times.append((time.perf_counter() - start) / repeats * 1e3)
    return min(times)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=50)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    import molsepnorm
    from molsepnorm.data.collate import GraphCollator
    from molsepnorm.data.columns import num_atoms
    from molsepnorm.nn import Graphormer, GraphormerConfig
    from molsepnorm.train.batching import make_train_sampler
    from molsepnorm.train.optimizer import CachedFusedAdamW

    kw = {"lr": 1e-9, "weight_decay": 0.01}

    splits = molsepnorm.load_dataset("nci-tpsa")
    cfg = GraphormerConfig.from_dict({"vocab": splits.vocab, "num_tasks": splits.num_tasks})  # the defaults
    model = Graphormer(cfg).train()
    sampler = make_train_sampler(num_atoms(splits.train), 32, "bucket", None, seed=0)
    sampler.set_epoch(0)
    collate = GraphCollator(cfg.multi_hop_max_dist)
    batch = collate([splits.train[i] for i in next(iter(sampler))])

    def forward_backward() -> None:
        model.zero_grad(set_to_none=True)
        model(batch).sum().backward()

    print(f"batch of {batch.num_graphs} molecules, {batch.node_mask.shape[1]} atom slots; "
          f"{sum(1 for _ in model.parameters())} parameter tensors; {args.threads} thread(s)")
    print(f"forward + backward      {best_ms(forward_backward, args.repeats):7.2f} ms")
    forward_backward()
    print(f"clip_grad_norm_         {best_ms(lambda: torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0), args.repeats):7.2f} ms")
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    print(f"get_total_norm          {best_ms(lambda: torch.nn.utils.get_total_norm(grads), args.repeats):7.2f} ms"
          "  (TrainStep: the norm; the scaling only when it clips)")
    for name, make in (("per-tensor", lambda: torch.optim.AdamW(model.parameters(), foreach=False, **kw)),
                       ("for-each", lambda: torch.optim.AdamW(model.parameters(), foreach=True, **kw)),
                       ("fused", lambda: torch.optim.AdamW(model.parameters(), fused=True, **kw)),
                       ("cached", lambda: CachedFusedAdamW(model.parameters(), **kw))):
        opt = make()
        print(f"AdamW step, {name:<11} {best_ms(opt.step, args.repeats):7.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
