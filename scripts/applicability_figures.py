"""The figures behind the applicability threshold (docs/applicability.md).

For a model's applicability domain (default: the bundled ``tpsa-nci-small``), the
nearest-neighbour Tanimoto similarity to its training fingerprints of

* the model's own test split (molecules like the training ones), and
* a random sample of MOSES drug-like molecules (``<data root>/moses/test.csv.gz``),

as quantiles and as the share below candidate thresholds, then the share of each set
that the whole check (:meth:`ApplicabilityDomain.check`) flags, and why; and what the check
costs: ``Predictor.predict`` of the MOSES sample with and without it (one torch thread,
the best of ``--repeats`` interleaved runs).

    python scripts/applicability_figures.py --moses 2000 --json docs/applicability/tpsa-nci-small.json
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

THRESHOLDS = (0.10, 0.15, 0.20, 0.25, 0.30)
QUANTILES = (0.0, 0.01, 0.05, 0.10, 0.50)


def figures(domain, smiles: list[str]) -> dict:
    """Quantiles of the nearest-neighbour similarity, share below each threshold, and flags."""
    from molsepnorm.chem import featurize_graph, parse_molecule

    nearest, reasons = [], Counter()
    flagged = 0
    for s in smiles:
        mol = parse_molecule(s)
        nearest.append(domain.fingerprints.nearest(mol))
        found = domain.reasons(featurize_graph(s, domain.vocab), mol)
        flagged += bool(found)
        reasons.update(r.split(":")[0].split(" Tanimoto")[0] for r in found)
    nn = np.asarray(nearest)
    return {
        "molecules": len(smiles),
        "nn_tanimoto_quantiles": {f"{q:g}": round(float(np.quantile(nn, q)), 3) for q in QUANTILES},
        "share_below": {f"{t:.2f}": round(float((nn < t).mean()), 4) for t in THRESHOLDS},
        "flagged_share": round(flagged / len(smiles), 4),
        "reasons": dict(reasons.most_common()),
    }


def search_timing(domain, smiles: list[str]) -> dict:
    """The nearest-neighbour search alone: full (every block) and stopping at the threshold."""
    from molsepnorm.chem import parse_molecule

    sample = domain.fingerprints
    mols = [parse_molecule(s) for s in smiles]
    sample.nearest(mols[0])  # builds the RDKit vectors once
    out = {}
    for name, stop_at in (("full search (us per molecule)", None),
                          ("stop at the threshold (us per molecule)", domain.tanimoto_threshold)):
        start = time.perf_counter()
        for mol in mols:
            sample.nearest(mol, stop_at=stop_at)
        out[name] = round((time.perf_counter() - start) / len(mols) * 1e6)
    return out


def timing(model: str, smiles: list[str], repeats: int) -> dict:
    """Seconds per molecule of ``Predictor.predict`` with and without the check (best of ``repeats``)."""
    import torch

    from molsepnorm.predict import Predictor

    torch.set_num_threads(1)
    predictors = {"with check": Predictor.load(model), "without": Predictor.load(model, applicability=False)}
    best = {name: float("inf") for name in predictors}
    for _ in range(repeats):
        for name, predictor in predictors.items():
            start = time.perf_counter()
            predictor.predict(smiles)
            best[name] = min(best[name], time.perf_counter() - start)
    out = {f"{name} (molecules/s)": round(len(smiles) / seconds) for name, seconds in best.items()}
    out["extra time per molecule (us)"] = round((best["with check"] - best["without"]) / len(smiles) * 1e6)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="tpsa-nci-small", help="checkpoint or bundled name")
    parser.add_argument("--moses", type=int, default=500, help="MOSES molecules sampled (seed 0)")
    parser.add_argument("--data-root", default=None, help="data root holding moses/ (default $MOLSEPNORM_DATA)")
    parser.add_argument("--repeats", type=int, default=3, help="timing runs of each (0: no timing)")
    parser.add_argument("--json", default=None, help="also write the figures here")
    args = parser.parse_args(argv)

    import pandas as pd

    from molsepnorm.checkpoint import Checkpoint, checkpoint_data
    from molsepnorm.data.paths import resolve_data_root

    checkpoint = Checkpoint.load(args.model)
    domain = checkpoint.applicability
    if domain is None or domain.fingerprints is None:
        print(f"{args.model}: no applicability data with fingerprints", file=sys.stderr)
        return 1
    _, splits = checkpoint_data(checkpoint, split="test")
    test = [splits.smiles[int(i)] for i in splits.split_indices["test"]]
    moses_file = resolve_data_root(args.data_root) / "moses" / "test.csv.gz"
    moses = pd.read_csv(moses_file)["SMILES"].sample(args.moses, random_state=0).tolist()
    out = {"model": args.model, "domain": domain.summary(),
           "test split": figures(domain, test), f"MOSES test sample ({moses_file.name})": figures(domain, moses)}
    if args.repeats:
        out["similarity search, MOSES sample"] = search_timing(domain, moses)
        out["predict, MOSES sample"] = timing(args.model, moses, args.repeats)
    text = json.dumps(out, indent=2)
    print(text)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
