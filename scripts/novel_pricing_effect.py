"""What the pricing of unseen atoms changed in finished runs: each ``best.pt`` scored on its
test split as saved and with the pricing turned off, the same weights otherwise.

    python scripts/novel_pricing_effect.py runs/s58/*/best.pt [--json docs/accuracy/novel-pricing-effect.json]

Prints, per run, the rule validation chose (``results.json``'s ``companion.novel``), the
number of test molecules holding an atom environment no training molecule has, and the
test metrics both ways (molsepnorm.train.novel_atoms; docs/accuracy.md).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Optional

import torch

from molsepnorm.checkpoint import Checkpoint, checkpoint_data
from molsepnorm.inference import Runner, run
from molsepnorm.inference.metrics import compute_metrics
from molsepnorm.train.novel_atoms import has_unseen_atoms


def score(path: Path) -> dict:
    checkpoint = Checkpoint.load(path)
    graphs, splits = checkpoint_data(checkpoint, split="test")  # the run's own data and split
    test = list(graphs)
    runner = Runner.from_checkpoint(checkpoint)
    model = runner.model
    out = {"run": str(path.parent), "dataset": splits.name, "chosen": "no companion"}
    results = path.parent / "results.json"
    if results.is_file():
        out["chosen"] = json.loads(results.read_text()).get("companion", {}).get("novel", {}).get("chosen", "-")
    if model.companion is None:
        return out
    out["test_molecules_unseen"] = has_unseen_atoms(model, test)
    for name in ("as saved", "pricing off"):
        if name == "pricing off":
            runner.model.companion.set_novel_pricing(0, 0)
        result = run([runner], test, batch_size=128)
        out[name] = compute_metrics(checkpoint.task.type, result.targets, result.values[0], splits.target_names)
    return out


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoints", nargs="+", type=Path)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    rows = [score(path) for path in args.checkpoints]
    for row in rows:
        if "as saved" in row:
            metric = "mae" if "mae" in row["as saved"] else "rocauc"
            print(f"{row['run']}: {row['chosen']}; {row['test_molecules_unseen']} test molecules with an unseen "
                  f"atom; test {metric} {row['as saved'][metric]:.4f} (pricing off: {row['pricing off'][metric]:.4f})")
        else:
            print(f"{row['run']}: {row['chosen']}")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"command": "python scripts/novel_pricing_effect.py " + " ".join(
            str(a) for a in (argv if argv is not None else __import__("sys").argv[1:])), "runs": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
