"""Which regression companion, and which blend rule?  A screen on trained checkpoints.

For each regression ``best.pt`` given (a run trained without a companion, or with one: its
Graphormer alone is what is read), the script fits linear models on the hashed
substructure counts of the run's own training split (:func:`molsepnorm.train.companion.
substructure_features`; the same hash the companion uses) and scores, on the run's
validation and test splits, the Graphormer alone, each linear model alone and their blends
``(1 - w) * Graphormer + w * linear``, also with one weight for the molecules whose every
substructure occurs in the training split and another for the rest. Variants: the largest
substructure radius, the counts as they are (``raw``: a group-contribution model) or as
``log(1 + count)`` (the classification companion's features), and the ridge penalty per
training molecule.

Nothing is trained and no checkpoint is changed. Test figures are printed beside the
validation figures so that selection rules can be compared after the fact; the rule the
library uses (:meth:`molsepnorm.train.blend.ValidationBlend.choose`) reads validation only.

    python scripts/companion_screen.py runs/a/best.pt runs/b/best.pt --out screen.json
    python scripts/companion_screen.py --summary screen.json
    python scripts/companion_screen.py --summary screen.json --by-coverage test
    python scripts/companion_screen.py runs/a/best.pt --radii 0 --counts raw --l2 1e-5 --properties --out p.json
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Optional

import numpy as np


def screen(checkpoint: str, bits: int, radii: list[int], counts: list[str], l2s: list[float],
           weights: list[float], threads: int, properties: bool = False) -> dict:
    """Validation and test MAE of every (radius, counts, l2, weight) variant for one checkpoint;
    ``properties``: every variant also counts each atom's feature values one by one."""
    import torch

    from molsepnorm.checkpoint import Checkpoint, checkpoint_data
    from molsepnorm.data.columns import num_atoms
    from molsepnorm.inference.runner import Runner, run
    from molsepnorm.train.blend import covered_by
    from molsepnorm.train.companion import ridge, substructure_features

    torch.set_num_threads(threads)
    ckpt = Checkpoint.load(checkpoint)
    if ckpt.task.type != "regression" or len(ckpt.task.target_names) != 1:
        raise SystemExit(f"{checkpoint}: the screen reads single-target regression models")
    net = ckpt.build_model().eval()
    if net.companion is not None:
        net.companion.set_weights(0.0)  # the Graphormer alone
    runner = Runner(net, "regression", ckpt.target_scaling)
    parts = {}
    for part in ("train", "val", "test"):
        graphs, _ = checkpoint_data(ckpt, split=part)
        out = run([runner], graphs)
        parts[part] = {"graphs": graphs, "pred": out.values[0][:, 0], "y": out.targets[:, 0]}
    mae = lambda a, b: float(np.mean(np.abs(a - b)))  # noqa: E731
    result = {"graphormer": {p: mae(parts[p]["pred"], parts[p]["y"]) for p in ("val", "test")}, "variants": {},
              "by_coverage": {}, "properties": properties}
    y_train = parts["train"]["y"]
    labelled = np.isfinite(y_train)  # the companion's solver, on the labelled training molecules as it fits
    for radius in radii:
        for kind in counts:
            X = {p: substructure_features(parts[p]["graphs"], num_atoms(parts[p]["graphs"]), bits, radius,
                                          counts=kind, properties=properties)[0] for p in parts}
            # covered: every bucket of the molecule occurs in the training split (the library's rule)
            seen = np.asarray((X["train"] != 0).sum(0)).ravel() > 0
            covered = {p: covered_by(X[p], seen) for p in ("val", "test")}
            for l2 in l2s:
                coef, intercept = ridge(X["train"][labelled], y_train[labelled], alpha=l2 * int(labelled.sum()))
                own = {p: X[p] @ coef + intercept for p in ("val", "test")}
                result["by_coverage"][f"r{radius}-{kind}-l2={l2:g}"] = {
                    p: by_coverage(parts[p]["pred"], own[p], parts[p]["y"], covered[p]) for p in ("val", "test")}
                for w in weights:
                    key = f"r{radius}-{kind}-l2={l2:g}-w={w:g}"
                    result["variants"][key] = {
                        p: mae((1 - w) * parts[p]["pred"] + w * own[p], parts[p]["y"]) for p in ("val", "test")}
                    for w_novel in weights:  # (covered, novel) pairs
                        ws = {p: np.where(covered[p], w, w_novel) for p in ("val", "test")}
                        result["variants"][f"{key}/{w_novel:g}"] = {
                            p: mae((1 - ws[p]) * parts[p]["pred"] + ws[p] * own[p], parts[p]["y"])
                            for p in ("val", "test")}
    return result


def by_coverage(graphormer: np.ndarray, linear: np.ndarray, y: np.ndarray, covered: np.ndarray) -> dict:
    """MAE of each model alone on the covered molecules, the novel ones and all, with the counts."""
    groups = {"covered": covered, "novel": ~covered, "all": np.ones_like(covered)}
    out = {"molecules": {g: int(rows.sum()) for g, rows in groups.items()}}
    for model, pred in (("graphormer", graphormer), ("linear", linear)):
        out[model] = {g: float(np.mean(np.abs(pred[rows] - y[rows]))) if rows.any() else None
                      for g, rows in groups.items()}
    return out


def coverage_table(results: dict, radius: Optional[int], kind: str, l2: float, part: str) -> None:
    """Per checkpoint: the ``part`` MAE of the Graphormer and of the linear model alone on the
    molecules whose every substructure occurs in the training split, the others, and all
    (``radius`` None: the radius validation chooses)."""
    print(f"{part} MAE by coverage: radius {'chosen on validation' if radius is None else radius}, {kind} counts, "
          f"l2 {l2:g}, atom properties {screened_properties(results)} (linear / Graphormer)")
    print(f"{'checkpoint':70s} {'covered':>22s} {'novel':>22s} {'all':>22s}")
    for name, res in results.items():
        key = f"r{chosen_radius(res, radius, kind, l2)}-{kind}-l2={l2:g}"
        if key not in res.get("by_coverage", {}):
            raise SystemExit(f"{name}: no coverage figures for {key} (rerun the screen with these variants)")
        table = res["by_coverage"][key][part]
        cells = []
        for group in ("covered", "novel", "all"):
            lin, gra = table["linear"][group], table["graphormer"][group]
            figures = "-" if lin is None else f"{lin:.4f} / {gra:.4f}"
            cells.append(f"({table['molecules'][group]}) {figures}")
        print(f"{name[-70:]:70s} {cells[0]:>22s} {cells[1]:>22s} {cells[2]:>22s}")


def screened_properties(results: dict) -> str:
    """Whether the screens in ``results`` counted atom properties (JSON from before the option: no)."""
    return "/".join(map(str, sorted({bool(res.get("properties", False)) for res in results.values()})))


def chosen_radius(res: dict, radius: Optional[int], kind: str, l2: float) -> int:
    """``radius``, or with None the library's choice (:func:`molsepnorm.train.companion.fit_companion`)
    among the screen's radii: the one whose linear model alone has the lowest validation MAE.
    The library tries each radius with and without atom properties; a screen holds one of
    the two (``--properties``); ``scripts/refit_companion.py`` replays the whole choice on
    trained models."""
    if radius is not None:
        return radius
    alone = {int(key[1:].split("-")[0]): v["val"] for key, v in res["variants"].items()
             if key.endswith(f"-{kind}-l2={l2:g}-w=1")}
    return min(alone, key=alone.get)


def summary(results: dict, radius: Optional[int], kind: str, l2: float, min_gain: float, coverage: bool) -> None:
    """Per checkpoint: the Graphormer alone, and the blend whose weights validation chooses by
    the library's rule (:func:`molsepnorm.train.blend.pick_weights`, with ``min_gain``;
    ``coverage``: a second weight for molecules with a novel substructure, where the JSON
    has the pairs); ``radius`` None: the radius validation chooses (:func:`chosen_radius`)."""
    from molsepnorm.train.blend import BLEND_PAIRS, BLEND_WEIGHTS, pick_weights

    print(f"rule: radius {'chosen on validation' if radius is None else radius}, {kind} counts, l2 {l2:g}, "
          f"atom properties {screened_properties(results)}, weights {list(BLEND_WEIGHTS)}, minimum validation gain {min_gain:g}, "
          f"{'a weight for novel molecules' if coverage else 'one weight'}")
    print(f"{'checkpoint':70s} {'Graphormer val/test':>20s} {'radius':>6s} {'weights':>9s} {'blend val/test':>16s} "
          f"{'linear alone test':>18s}")
    for name, res in results.items():
        r = chosen_radius(res, radius, kind, l2)
        prefix = f"r{r}-{kind}-l2={l2:g}-w="
        variants = {w: res["variants"][f"{prefix}{w:g}"] for w in BLEND_WEIGHTS}
        pairs = {}
        if coverage and f"{prefix}0/0" in res["variants"]:
            pairs = {(a, b): res["variants"][f"{prefix}{a:g}/{b:g}"] for a, b in BLEND_PAIRS}
        chosen = pick_weights({w: v["val"] for w, v in variants.items()}, {k: v["val"] for k, v in pairs.items()},
                              higher_is_better=False, min_gain=min_gain)
        blend = pairs[chosen] if chosen[0] != chosen[1] else variants[chosen[0]]
        text = f"{chosen[0]:g}" if chosen[0] == chosen[1] else f"{chosen[0]:g}/{chosen[1]:g}"
        print(f"{name[-70:]:70s} {res['graphormer']['val']:9.4f}/{res['graphormer']['test']:<9.4f} {r:6d} {text:>9s} "
              f"{blend['val']:8.4f}/{blend['test']:<7.4f} {variants[1.0]['test']:18.4f}")


def main() -> None:
    from molsepnorm.train.blend import BLEND_WEIGHTS, MIN_VALIDATION_GAIN
    from molsepnorm.train.companion import GROUP_FEATURES

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoints", nargs="*", help="regression best.pt files")
    parser.add_argument("--bits", type=int, default=16384)
    parser.add_argument("--radii", type=int, nargs="+", default=sorted({r for r, _ in GROUP_FEATURES}),
                        help="largest substructure radii to try (default: the companion's)")
    parser.add_argument("--counts", nargs="+", default=["raw", "log"], choices=["raw", "log"])
    parser.add_argument("--l2", type=float, nargs="+", default=[1e-5, 1e-4, 1e-3, 1e-2])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--properties", action="store_true",
                        help="every variant also counts each atom's feature values (the library's atom properties)")
    parser.add_argument("--out", type=Path, help="JSON of every variant's scores")
    parser.add_argument("--summary", type=Path, nargs="+", help="print the rule's choice from earlier JSON files")
    parser.add_argument("--rule", nargs=3, default=["auto", "raw", "1e-5"], metavar=("RADIUS", "COUNTS", "L2"),
                        help="RADIUS 'auto': the library's choice on validation among the screen's radii "
                             "(with the atom properties the screen was run with, or without)")
    parser.add_argument("--min-gain", type=float, default=None, help="default: the library's MIN_VALIDATION_GAIN")
    parser.add_argument("--one-weight", action="store_true",
                        help="summary: one weight for every molecule (the rule before session 38)")
    parser.add_argument("--by-coverage", choices=["val", "test"],
                        help="summary: each model's MAE on covered and novel molecules of this split")
    args = parser.parse_args()

    if args.summary:
        results = {}
        for path in args.summary:
            results.update(json.loads(path.read_text()))
        radius = None if args.rule[0] == "auto" else int(args.rule[0])
        if args.by_coverage:
            coverage_table(results, radius, args.rule[1], float(args.rule[2]), args.by_coverage)
            return
        min_gain = MIN_VALIDATION_GAIN if args.min_gain is None else args.min_gain
        summary(results, radius, args.rule[1], float(args.rule[2]), min_gain, not args.one_weight)
        return
    results = {}
    for checkpoint in args.checkpoints:
        results[checkpoint] = screen(checkpoint, args.bits, args.radii, args.counts, args.l2, list(BLEND_WEIGHTS),
                                     args.threads, args.properties)
        print(checkpoint, "Graphormer", results[checkpoint]["graphormer"], flush=True)
        if args.out:
            args.out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
