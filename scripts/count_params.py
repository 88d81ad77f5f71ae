"""Print the parameter count of a Graphormer preset with SepNorm and with ShareNorm.

    python scripts/count_params.py configs/zinc-slim.yaml [--by-module]

The published Graphormer-slim (Ying et al., NeurIPS 2021) has 489,321 parameters; the
deviation from it is printed for reference.
"""
from __future__ import annotations

import argparse
from collections import Counter

from molsepnorm.nn.graphormer import Graphormer, GraphormerConfig

PUBLISHED_SLIM = 489_321


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config", help="YAML file with a top-level 'model:' mapping")
    ap.add_argument("--by-module", action="store_true", help="also break the count down by top-level module")
    args = ap.parse_args()
    base = GraphormerConfig.from_yaml(args.config)
    print(f"{args.config}: {base.num_layers} layers, hidden {base.hidden_dim}, FFN {base.ffn_dim}, "
          f"{base.num_heads} heads, vocab {base.vocab}, K={base.multi_hop_max_dist} (preset norm: {base.norm})")
    for norm in ("sep", "share"):
        model = Graphormer(GraphormerConfig.from_dict({**base.to_dict(), "norm": norm}))
        n = sum(p.numel() for p in model.parameters())
        print(f"  norm={norm:<6} {n:>10,d} parameters  ({(n - PUBLISHED_SLIM) / PUBLISHED_SLIM:+.2%} vs published slim {PUBLISHED_SLIM:,d})")
        if args.by_module:
            parts: Counter[str] = Counter()
            for name, p in model.named_parameters():
                parts[name.split(".")[0]] += p.numel()
            for name, k in parts.items():
                print(f"      {name:<16} {k:>10,d}")


if __name__ == "__main__":
    main()
