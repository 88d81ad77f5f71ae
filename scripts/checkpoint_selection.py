"""Which checkpoint should a classification run keep?  An ablation probe.

One default ``molsepnorm train`` run on a comparison table (``compare_chemprop.py``'s CSV
with its split column, the same flags), with early stopping off, observed after every
epoch: the raw weights' validation and test scores, a moving average of the weights
(tracked beside the run: the trajectory is the default's), and the weights themselves.
Afterwards every selection rule is replayed on the same trajectory, each with the
default stopping rule (``train.config.earliest_stop`` / ``auto_patience``) applied to its
own validation criterion:

- ``raw/rocauc``: the default: the epoch of best validation ROC-AUC;
- ``raw/loss``: the epoch of lowest validation log loss (chemprop's rule);
- ``ema<d>/rocauc``, ``ema<d>/loss``: the same for the moving average of decay ``d``;
- ``soup-top<k>/<criterion>``: the uniform average of the weights (and BatchNorm
  statistics) of the ``k`` best epochs by the criterion, up to where the rule stops;
- ``soup-greedy/rocauc``: Wortsman et al. 2022's greedy soup: epochs in order of
  validation ROC-AUC, each kept if the average's validation ROC-AUC does not drop.

Test figures are recorded for every epoch only so that the rules can be compared after
the fact; no rule looks at them.

    python scripts/checkpoint_selection.py --dataset molhiv --seed 0 --threads 1 \\
        --work runs/selection --out docs/accuracy/selection/molhiv-seed0.json
    python scripts/checkpoint_selection.py --summary docs/accuracy/selection/molhiv-seed*.json
"""
from __future__ import annotations

import argparse
import copy
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch

from molsepnorm.inference.metrics import compute_metrics
from molsepnorm.train.soup import average_weights

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare_chemprop as cc  # noqa: E402  (the comparison's tables, so the data and flags match)


def _scores(y: np.ndarray, p: np.ndarray) -> dict[str, float]:
    """ROC-AUC and log loss of one binary column (rows with a label)."""
    metrics = compute_metrics("binary", y, p)
    return {"rocauc": metrics["rocauc"], "loss": metrics["logloss"]}


class Probe:
    """Patches :class:`~molsepnorm.train.loop.Trainer` to record each epoch (see module docstring)."""

    def __init__(self, ema_decays: list[float]) -> None:
        self.ema_decays = ema_decays
        self.emas: dict[str, Any] = {}
        self.epochs: list[dict[str, Any]] = []  # per epoch: {"raw": {"val":..., "test":...}, "ema0.999": ...}
        self.states: list[dict[str, torch.Tensor]] = []  # raw weights after each epoch (CPU)
        self.trainer: Any = None
        self.last_val: Optional[np.ndarray] = None

    def install(self) -> None:
        from molsepnorm.train import loop
        from molsepnorm.train.ema import WeightEMA

        probe = self
        init, step, end, predict = (loop.Trainer.__init__, loop.Trainer._train_step, loop.Trainer._end_epoch,
                                    loop.Trainer.predict)

        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            init(self, *args, **kwargs)
            probe.trainer = self
            probe.emas = {f"ema{d:g}": WeightEMA(loop.ddp.unwrap(self.model), d) for d in probe.ema_decays}

        def _train_step(self: Any, batch: Any, index: int) -> Any:
            done = step(self, batch, index)
            if done is not None:
                for ema in probe.emas.values():
                    ema.update(loop.ddp.unwrap(self.model))
            return done

        def predict_(self: Any, split: Any) -> Any:
            out = predict(self, split)
            if isinstance(split, str) and split == "val":
                probe.last_val = out  # the trainer's own validation pass, reused
            return out

        def _end_epoch(self: Any) -> None:
            end(self)
            probe.record(self)

        loop.Trainer.__init__ = __init__  # type: ignore[method-assign]
        loop.Trainer._train_step = _train_step  # type: ignore[method-assign]
        loop.Trainer.predict = predict_  # type: ignore[method-assign]
        loop.Trainer._end_epoch = _end_epoch  # type: ignore[method-assign]

    def predict_with(self, trainer: Any, module: torch.nn.Module, split: str) -> tuple[np.ndarray, np.ndarray]:
        from molsepnorm.inference.runner import Runner, run

        runner = Runner(module, trainer.task, trainer.scaler)
        out = run([runner], trainer.splits[split], batch_size=trainer.tc.eval_batch_size or 2 * trainer.tc.batch_size,
                  sizes=trainer.sizes[split])
        return out.targets, out.values[0]

    def record(self, trainer: Any) -> None:
        assert self.last_val is not None
        row: dict[str, Any] = {"epoch": trainer.state.epoch}
        yv, pv = self.last_val
        yt, pt = self.predict_with(trainer, trainer.eval_model, "test")
        row["raw"] = {"val": _scores(yv[:, 0], pv[:, 0]), "test": _scores(yt[:, 0], pt[:, 0])}
        for name, ema in self.emas.items():
            yv2, pv2 = self.predict_with(trainer, ema.module, "val")
            yt2, pt2 = self.predict_with(trainer, ema.module, "test")
            row[name] = {"val": _scores(yv2[:, 0], pv2[:, 0]), "test": _scores(yt2[:, 0], pt2[:, 0])}
        self.states.append({k: v.detach().to("cpu", copy=True) for k, v in trainer.eval_model.state_dict().items()})
        self.epochs.append(row)
        print(f"  epoch {row['epoch']}: " + "  ".join(
            f"{k} val {v['val']['rocauc']:.4f}/{v['val']['loss']:.4f} test {v['test']['rocauc']:.4f}"
            for k, v in row.items() if k != "epoch"), flush=True)

    def score_state(self, state: dict[str, torch.Tensor],
                    splits: tuple[str, ...] = ("val", "test")) -> dict[str, dict[str, float]]:
        """Scores of a state dict (a soup) on ``splits``, in a copy of the model."""
        module = copy.deepcopy(self.trainer.eval_model)
        module.load_state_dict(state)
        out = {}
        for split in splits:
            y, p = self.predict_with(self.trainer, module, split)
            out[split] = _scores(y[:, 0], p[:, 0])
        return out


def stop_epoch(values: list[float], higher: bool, epochs: int) -> int:
    """The number of epochs the default stopping rule (patience "auto") runs on this curve."""
    from molsepnorm.train.config import earliest_stop, resolve_patience

    patience = resolve_patience("auto", epochs)
    first = earliest_stop("auto", epochs)
    best, bad = None, 0
    for e, v in enumerate(values):  # e epochs done at the start of epoch e + 1
        if patience is not None and bad >= patience and e >= first:
            return e
        if best is None or (v > best if higher else v < best):
            best, bad = v, 0
        else:
            bad += 1
    return len(values)


def replay(probe: Probe, epochs: int) -> dict[str, Any]:
    """Every rule of the module docstring on the recorded trajectory."""
    rules: dict[str, Any] = {}
    rows = probe.epochs
    for model in ["raw", *probe.emas]:
        for crit, higher in (("rocauc", True), ("loss", False)):
            curve = [r[model]["val"][crit] for r in rows]
            stop = stop_epoch(curve, higher, epochs)
            window = curve[:stop]
            best = int(np.argmax(window) if higher else np.argmin(window))
            rules[f"{model}/{crit}"] = {"stop": stop, "epoch": best + 1, "val": rows[best][model]["val"],
                                        "test": rows[best][model]["test"]}
    for crit, higher in (("rocauc", True), ("loss", False)):
        curve = [r["raw"]["val"][crit] for r in rows]
        stop = stop_epoch(curve, higher, epochs)
        order = sorted(range(stop), key=lambda i: -curve[i] if higher else curve[i])
        for k in (3, 5):
            chosen = sorted(order[:k])
            got = probe.score_state(average_weights([probe.states[i] for i in chosen]))
            rules[f"soup-top{k}/{crit}"] = {"stop": stop, "epochs": [i + 1 for i in chosen], **got}
        if crit == "rocauc":
            kept = [order[0]]
            best_val = curve[order[0]]
            for i in order[1:]:  # the trials need validation only
                trial = probe.score_state(average_weights([probe.states[j] for j in kept + [i]]), ("val",))
                if trial["val"]["rocauc"] >= best_val:
                    kept.append(i)
                    best_val = trial["val"]["rocauc"]
            got = (probe.score_state(average_weights([probe.states[j] for j in kept])) if len(kept) > 1
                   else {"val": rows[kept[0]]["raw"]["val"], "test": rows[kept[0]]["raw"]["test"]})
            rules["soup-greedy/rocauc"] = {"stop": stop, "epochs": sorted(j + 1 for j in kept), **got}
    return rules


def summarize(paths: list[str]) -> None:
    """Each rule's test ROC-AUC per seed, mean and std (population), and where it stopped."""
    reports = [json.loads(Path(p).read_text()) for p in paths]
    print(f"seeds {[r['seed'] for r in reports]}")
    print(f"{'rule':<22} {'test ROC-AUC per seed':<26} {'mean':>6} {'std':>6}  stop (epochs run)")
    for name in reports[0]["rules"]:
        tests = [r["rules"][name]["test"]["rocauc"] for r in reports]
        stops = [r["rules"][name]["stop"] for r in reports]
        print(f"{name:<22} {' / '.join(f'{t:.3f}' for t in tests):<26} {np.mean(tests):6.3f} {np.std(tests):6.3f}  "
              f"{stops}")


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="molhiv", choices=("molhiv",), help="a binary comparison table")
    parser.add_argument("--csv", default=None, help="a binary CSV with a smiles column and one target")
    parser.add_argument("--split-by", default="random", help="CSV: random | scaffold | column:NAME (as compare_chemprop)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--epochs", type=int, default=50, help="the default run's epochs (molhiv: 50, auto)")
    parser.add_argument("--ema", type=float, nargs="*", default=[0.999], help="moving-average decays to track")
    parser.add_argument("--ours-args", default="", help="extra flags for molsepnorm train (quoted)")
    parser.add_argument("--work", default="runs/checkpoint-selection")
    parser.add_argument("--out", help="JSON output")
    parser.add_argument("--summary", nargs="+", metavar="JSON", help="summarize earlier outputs over seeds, then stop")
    args = parser.parse_args(argv)
    if args.summary:
        return summarize(args.summary)
    if not args.out:
        parser.error("--out is required")

    if args.csv:
        table = cc.table_csv(args.csv, "smiles", None, args.split_by, 0, "classification")
    else:
        table = cc.table_molhiv(None)
    folder = Path(args.work) / table.name
    data, _ = table.write(folder)
    run_dir = folder / f"seed{args.seed}"
    if run_dir.exists():
        raise SystemExit(f"{run_dir} exists: remove it or pick another --work")
    flags = ["train", "--dataset", str(data), "--smiles-column", "smiles", "--target-columns",
             ",".join(table.targets), "--split-by", "column:split", "--seed", str(args.seed), "--out", str(run_dir),
             "--no-progress", "--threads", str(args.threads), "--epochs", str(args.epochs), "--patience", "off",
             *shlex.split(args.ours_args)]
    probe = Probe(args.ema)
    probe.install()
    from molsepnorm.cli.main import cli

    start = time.perf_counter()
    cli.main(flags, prog_name="molsepnorm", standalone_mode=False)
    seconds = time.perf_counter() - start
    rules = replay(probe, args.epochs)
    per_epoch = float(np.median([r["epoch_seconds"] for r in probe.trainer.run_dir.read_metrics()]))
    report = {"command": shlex.join([sys.executable, *sys.argv]), "train_flags": shlex.join(flags),
              "seed": args.seed, "threads": args.threads, "seconds": seconds,
              "median_epoch_seconds": per_epoch, "rules": rules, "epochs": probe.epochs}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print("\nrule                  stop  epoch(s)        val AUC  test AUC")
    for name, r in rules.items():
        print(f"{name:<22}{r['stop']:>4}  {str(r.get('epoch', r.get('epochs'))):<15} "
              f"{r['val']['rocauc']:.4f}   {r['test']['rocauc']:.4f}")
    print(f"JSON: {out}")


if __name__ == "__main__":
    main()
