"""Embedding analysis of a SepNorm vs ShareNorm comparison (``scripts/compare_norms.py``), per seed.

For every seed whose ``sep-seed<S>`` and ``share-seed<S>`` runs are both finished
(``results.json`` written), runs :func:`molsepnorm.analysis.analyze_checkpoints` on the two
``best.pt`` files (graph-token embeddings of the chosen split) and writes
``OUT/seed<S>/{analysis.json, spectrum.png, summary.png}``; then prints a markdown table of
effective rank, uniformity and top-1 variance share, per seed and as mean ± std over seeds,
and writes it to ``OUT/summary.md``.  Unfinished seeds are listed and skipped.

Example::

    MOLSEPNORM_DATA=/path/to/data python scripts/analyze_comparison.py runs/compare-zinc-cpu \
        --split test --out runs/compare-zinc-cpu/analysis

Each seed's numbers are those of ``molsepnorm analyze --model RUNS/sep-seed<S>/best.pt
--model RUNS/share-seed<S>/best.pt --split test --out OUT/seed<S>``.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Optional, Sequence

NORMS = ("sep", "share")
COLUMNS = (("effective_rank", "effective rank", "{:.2f}"), ("uniformity", "uniformity", "{:.3f}"),
           ("explained_variance_top1", "top-1 variance share", "{:.3f}"), ("components_90", "dims for 90 %", "{:.1f}"))


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", help="folder of the <norm>-seed<S> run directories")
    p.add_argument("--out", default=None, help="output folder (default: RUNS/analysis)")
    p.add_argument("--seeds", nargs="+", type=int, default=None, help="seeds to analyze (default: all found)")
    p.add_argument("--split", default="test", choices=["train", "val", "test", "all"])
    p.add_argument("--data-root", default=None, help="folder of the raw data sets")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    return p.parse_args(argv)


def finished(run: Path) -> bool:
    return (run / "results.json").is_file() and (run / "best.pt").is_file()


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    import torch

    from molsepnorm.analysis import analyze_checkpoints

    torch.set_num_threads(args.threads)
    runs = Path(args.runs)
    out = Path(args.out) if args.out else runs / "analysis"
    seeds = args.seeds
    if seeds is None:
        seeds = sorted({int(p.name.rsplit("seed", 1)[1]) for p in runs.glob("*-seed*") if p.name.rsplit("seed", 1)[1].isdigit()})
    per_seed: dict[int, dict[str, dict]] = {}
    for seed in seeds:
        dirs = [runs / f"{norm}-seed{seed}" for norm in NORMS]
        if not all(finished(d) for d in dirs):
            print(f"seed {seed}: not finished ({', '.join(str(d) for d in dirs if not finished(d))}), skipped",
                  file=sys.stderr)
            continue
        result = analyze_checkpoints([d / "best.pt" for d in dirs], split=args.split, labels=["SepNorm", "ShareNorm"],
                                     data_root=args.data_root)
        result.save(out / f"seed{seed}")
        per_seed[seed] = result.metrics
        print(f"seed {seed}\n{result.table()}\n", file=sys.stderr)
    if not per_seed:
        print("no finished seed to analyze", file=sys.stderr)
        return 1
    lines = ["| model | seeds | " + " | ".join(c[1] for c in COLUMNS) + " |",
             "|---|---|" + "---|" * len(COLUMNS)]
    for label in ("SepNorm", "ShareNorm"):
        cells = []
        for key, _, fmt in COLUMNS:
            values = [float(m[label][key]) for m in per_seed.values()]
            cell = fmt.format(statistics.fmean(values))
            if len(values) > 1:
                cell += " ± " + fmt.format(statistics.stdev(values))
            cells.append(cell)
        lines.append(f"| {label} | {', '.join(map(str, per_seed))} | " + " | ".join(cells) + " |")
    table = "\n".join(lines)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.md").write_text(f"Graph-token embeddings, {args.split} split (mean ± std over seeds)\n\n"
                                    f"{table}\n", encoding="utf-8")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
