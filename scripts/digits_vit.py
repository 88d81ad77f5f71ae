"""SepNorm outside chemistry: a small ViT on scikit-learn's digits, SepNorm against ShareNorm.

The images are scikit-learn's 1,797 handwritten digits (8 x 8, shipped with the
library). The model is Hugging Face transformers' ``ViTForImageClassification`` built
from a small config (patches of 2 x 2: a [CLS] and 16 patch tokens, 4 layers of 64),
trained from scratch; its head reads the [CLS] after the final norm. Variants:

* ``share``: the model as transformers builds it (one LayerNorm per slot, ShareNorm);
* ``sep``: ``convert_to_sepnorm(model)`` with its defaults (BatchNorm for the [CLS],
  LayerNorm for the patches; the first slot, whose [CLS] input is the same learned vector
  for every image, keeps a LayerNorm for the [CLS]);
* ``sep-constant-bn`` (with ``--variants``): the same but with a BatchNorm in that first
  slot too (``constant_cls_norm=None``), the conversion the first-slot rule prevents.

For each variant and seed: test accuracy of the last epoch, the size of the [CLS] output
in eval against train mode on the test images, and the paper's embedding figures of the
test images' [CLS] embeddings (effective rank, uniformity; molsepnorm.analysis).

    python scripts/digits_vit.py --seeds 0 1 2 --out docs/sepnorm-vision
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np
import torch
from torch import nn

VARIANTS = ("share", "sep", "sep-constant-bn")


def load_digits_split(seed: int = 0) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Stratified 60 / 20 / 20 split of scikit-learn's digits; images (N, 1, 8, 8) scaled to [0, 1]."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
    y = torch.tensor(digits.target)
    idx = np.arange(len(y))
    train, rest = train_test_split(idx, test_size=0.4, stratify=digits.target, random_state=seed)
    val, test = train_test_split(rest, test_size=0.5, stratify=digits.target[rest], random_state=seed)
    return {name: (x[i], y[i]) for name, i in (("train", train), ("val", val), ("test", test))}


def build_model(variant: str, seed: int) -> nn.Module:
    import transformers

    from molsepnorm.nn import convert_to_sepnorm

    torch.manual_seed(seed)
    cfg = transformers.ViTConfig(image_size=8, patch_size=2, num_channels=1, hidden_size=64, num_hidden_layers=4,
                                 num_attention_heads=4, intermediate_size=128, hidden_dropout_prob=0.0,
                                 attention_probs_dropout_prob=0.0, num_labels=10)
    model = transformers.ViTForImageClassification(cfg)
    if variant == "sep":
        convert_to_sepnorm(model, verbose=False)
    elif variant == "sep-constant-bn":
        convert_to_sepnorm(model, verbose=False, constant_cls_norm=None)
    elif variant != "share":
        raise ValueError(f"unknown variant {variant!r}; expected one of {VARIANTS}")
    return model


@torch.no_grad()
def cls_embeddings(model: nn.Module, x: torch.Tensor, train_mode: bool = False) -> torch.Tensor:
    """The [CLS] after the final norm, what the classifier reads: (N, 64)."""
    model.train(train_mode)
    return model.vit(pixel_values=x).last_hidden_state[:, 0]


def run_one(variant: str, seed: int, data: dict, epochs: int, batch_size: int, lr: float) -> dict[str, Any]:
    model = build_model(variant, seed)
    x, y = data["train"]
    steps = epochs * -(-len(y) // batch_size)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.05)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.1)
    g = torch.Generator().manual_seed(seed)
    start = time.perf_counter()
    curve = []
    for epoch in range(epochs):
        model.train()
        order = torch.randperm(len(y), generator=g)
        for i in range(0, len(y), batch_size):
            batch = order[i:i + batch_size]
            if len(batch) < 2:
                continue
            loss = nn.functional.cross_entropy(model(pixel_values=x[batch]).logits, y[batch])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
        curve.append(accuracy(model, *data["val"]))
    seconds = time.perf_counter() - start
    xt, yt = data["test"]
    eval_cls, train_cls = cls_embeddings(model, xt, False), cls_embeddings(model, xt, True)
    return {
        "variant": variant, "seed": seed, "epochs": epochs, "train_seconds": seconds,
        "val_accuracy_curve": curve, "val_accuracy": curve[-1], "test_accuracy": accuracy(model, xt, yt),
        "cls_size_eval": float(eval_cls.abs().max()), "cls_size_train": float(train_cls.abs().max()),
        "embeddings": eval_cls,
    }


@torch.no_grad()
def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    model.eval()
    return float((model(pixel_values=x).logits.argmax(1) == y).float().mean())


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    a = np.asarray(values, dtype=float)
    return float(a.mean()), float(a.std(ddof=1)) if len(a) > 1 else 0.0


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    p.add_argument("--epochs", type=int, default=40)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", type=Path, required=True, help="folder for results.json and the figures")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    from molsepnorm.analysis import analyze_embeddings

    data = load_digits_split(0)
    runs = []
    for variant in args.variants:
        for seed in args.seeds:
            r = run_one(variant, seed, data, args.epochs, args.batch_size, args.lr)
            print(f"{variant:>16} seed {seed}: test accuracy {r['test_accuracy']:.4f}, |[CLS]| eval "
                  f"{r['cls_size_eval']:.3g} vs train {r['cls_size_train']:.3g}, {r['train_seconds']:.0f} s",
                  flush=True)
            runs.append(r)
    first = {v: next(r for r in runs if r["variant"] == v)["embeddings"] for v in args.variants}
    analysis = analyze_embeddings({f"{v} (seed {args.seeds[0]})": z for v, z in first.items()},
                                  title="digits ViT, test images", what="[CLS]")
    args.out.mkdir(parents=True, exist_ok=True)
    analysis.save(args.out)
    from molsepnorm.analysis.spectrum import spectrum_stats

    summary = {}
    for variant in args.variants:
        rows = [r for r in runs if r["variant"] == variant]
        stats = [spectrum_stats(r["embeddings"]) for r in rows]
        summary[variant] = {
            "test_accuracy": mean_std([r["test_accuracy"] for r in rows]),
            "effective_rank": mean_std([s["effective_rank"] for s in stats]),
            "uniformity": mean_std([s["uniformity"] for s in stats]),
            "explained_variance_top1": mean_std([s["explained_variance_top1"] for s in stats]),
            "cls_size_eval_over_train": mean_std([r["cls_size_eval"] / r["cls_size_train"] for r in rows]),
            "train_seconds": mean_std([r["train_seconds"] for r in rows]),
        }
        for r, s in zip(rows, stats):
            r.update(effective_rank=s["effective_rank"], uniformity=s["uniformity"])
    print("\n| variant | test accuracy | effective rank (of 64) | uniformity | top-1 variance share | "
          "eval / train [CLS] size |\n|---|---:|---:|---:|---:|---:|")
    for variant, s in summary.items():
        print(f"| {variant} | {s['test_accuracy'][0]:.4f} ± {s['test_accuracy'][1]:.4f} | "
              f"{s['effective_rank'][0]:.2f} ± {s['effective_rank'][1]:.2f} | "
              f"{s['uniformity'][0]:.3f} ± {s['uniformity'][1]:.3f} | "
              f"{s['explained_variance_top1'][0]:.3f} | {s['cls_size_eval_over_train'][0]:.3g} |")
    import transformers

    payload = {
        "command": "python " + " ".join([sys.argv[0], *(argv if argv is not None else sys.argv[1:])]),
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "transformers": transformers.__version__},
        "split": {k: int(len(v[1])) for k, v in data.items()},
        "summary": summary,
        "runs": [{k: v for k, v in r.items() if k != "embeddings"} for r in runs],
    }
    (args.out / "results.json").write_text(json.dumps(payload, indent=1) + "\n")
    print(f"\nwrote {args.out}/results.json, spectrum.png, summary.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
