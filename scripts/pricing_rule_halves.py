"""How well does each way of choosing the pricing of unseen atoms generalize? Validation
halves of finished runs (molsepnorm.train.novel_atoms; docs/pretraining.md, "Which rule: the
simplest unless another is clearly better").

For each ``best.pt``, every pricing rule the library tries (``candidate_rules``: input
embeddings or final atom states, k in 1, 3, 5, and, where the blend weighs a molecule
with an unseen atom apart, that weight as for the others) prices the run's validation
molecules; then, in ``--halvings`` random halvings of the validation split (numpy seed 0),
each way of choosing chooses on one half and is scored on the other (both ways round):

- ``best of all``: the rule with the lowest error on the half, kept where it gains 2 % on
  no pricing (session 58's rule, until a38f460);
- ``default first``: the nearest environment in the input embeddings where it gains 2 %,
  another rule only where it gains 10 % on that (``pick_rule``, the library's rule since);
- ``default only``: the nearest environment in the input embeddings where it gains 2 %,
  no other rule;
- each rule alone, and no pricing.

Only the validation split is read: the test split is left for the measurement of the rule
chosen here. The blend's weight on a molecule with an unseen atom "as it was" is the one
saved, which is the one before the choice unless the run kept a ``weight as covered``
rule (such a run is refused).

    python scripts/pricing_rule_halves.py runs/s59/tpsa10-*/best.pt --json docs/pretraining/pricing-rule-halves.json
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from molsepnorm.checkpoint import Checkpoint, checkpoint_data
from molsepnorm.inference import Runner, run
from molsepnorm.train.novel_atoms import DEFAULT_RULE, MIN_GAIN, candidate_rules, environment_pools, pick_rule


def validation_predictions(path: Path) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The run's validation targets (M,) and its predictions (M,) under each rule (first target)."""
    results = path.parent / "results.json"
    record = json.loads(results.read_text()) if results.is_file() else {}
    chosen = ((record.get("companion") or {}).get("novel") or {}).get("chosen", "")
    if chosen.endswith("weight as covered"):
        raise SystemExit(f"{path}: its run kept {chosen!r}, so the weight before the choice is not saved")
    checkpoint = Checkpoint.load(path)
    val, _ = checkpoint_data(checkpoint, split="val")
    train, _ = checkpoint_data(checkpoint, split="train")
    runner = Runner.from_checkpoint(checkpoint)
    companion = runner.model.companion
    if companion is None or companion.counts != "raw":
        raise SystemExit(f"{path}: no group-contribution companion (raw counts), so no unseen atom is priced")
    companion.set_novel_pricing(0, 0)
    weight, novel = companion.weight.clone(), companion.weight_novel.clone()
    graphs = list(val)
    out = run([runner], graphs, batch_size=128)
    preds = {"none": out.values[0][:, 0]}
    pools, known = environment_pools(runner.model, list(train))
    for name, space, k, novel_weight in candidate_rules(pools, weight, novel):
        companion.set_novel_pricing(space, k, *pools[space], known)
        companion.set_weights(weight, novel_weight)
        preds[name] = run([runner], graphs, batch_size=128).values[0][:, 0]
    return out.targets[:, 0], preds


def choices(y: np.ndarray, preds: dict[str, np.ndarray], choose: np.ndarray, score: np.ndarray) -> dict[str, float]:
    """Each way of choosing, chosen on the rows ``choose`` and scored (MAE) on ``score``."""
    def mae(name: str, rows: np.ndarray) -> float:
        return float(np.mean(np.abs(preds[name][rows] - y[rows])))

    tried = {name: mae(name, choose) for name in preds}
    best = min((name for name in preds if name != "none"), key=tried.get)
    best_of_all = best if tried[best] <= (1 - MIN_GAIN) * tried["none"] else "none"
    only = {name: tried[name] for name in ("none", DEFAULT_RULE) if name in tried}
    out = {"best of all": mae(best_of_all, score), "default first": mae(pick_rule(tried, "mae"), score),
           "default only": mae(pick_rule(only, "mae"), score)}
    out.update({name: mae(name, score) for name in preds})
    return out


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoints", nargs="+", type=Path)
    parser.add_argument("--halvings", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    runs, groups = {}, defaultdict(lambda: defaultdict(list))
    for path in args.checkpoints:
        y, preds = validation_predictions(path)
        scores = defaultdict(list)
        for _ in range(args.halvings):
            order = rng.permutation(len(y))
            for a, b in ((order[: len(y) // 2], order[len(y) // 2:]), (order[len(y) // 2:], order[: len(y) // 2])):
                for name, value in choices(y, preds, a, b).items():
                    scores[name].append(value)
        runs[str(path)] = {name: float(np.mean(values)) for name, values in scores.items()}
        group = re.sub(r"-s\d+$", "", path.parent.name)  # the run's directory, less its seed: one arm
        for name, value in runs[str(path)].items():
            groups[group][name].append(value)
        print(f"{path}: " + ", ".join(f"{name} {value:.4f}" for name, value in runs[str(path)].items()), flush=True)
    summary = {group: {name: float(np.mean(values)) for name, values in names.items()}
               for group, names in groups.items()}
    for group, names in summary.items():
        print(f"{group} ({len(groups[group]['none'])} runs): best of all {names['best of all']:.4f}, default first "
              f"{names['default first']:.4f}, default only {names['default only']:.4f}, no pricing {names['none']:.4f}")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"command": "python scripts/pricing_rule_halves.py " + " ".join(
            sys.argv[1:] if argv is None else argv), "halvings": args.halvings, "groups": summary, "runs": runs},
            indent=1) + "\n")


if __name__ == "__main__":
    main()
