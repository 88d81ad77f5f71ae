"""What today's companion would do on trained models: refit it and compare.

For each ``best.pt`` given, :func:`molsepnorm.train.add_companion` fits the companion as a
training run that ends today would (on the run's own training split; for regression the
features and blend weights chosen on its validation split) and writes the blended model to
``--out-dir``. The script prints, per checkpoint, the features and weights chosen and the
test metric of the checkpoint as it was beside the refitted one's, and writes them all to
``--json``. The Graphormer's weights are not touched, so the difference is the companion's
alone: what the same training run would have given with today's code.

    python scripts/refit_companion.py runs/a/best.pt runs/b/best.pt --out-dir runs/refit --json refit.json
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoints", nargs="+", help="best.pt files (regression or binary classification)")
    parser.add_argument("--out-dir", type=Path, required=True, help="where the refitted models are written")
    parser.add_argument("--json", type=Path, help="write every checkpoint's figures here")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    import torch

    from molsepnorm.checkpoint import Checkpoint
    from molsepnorm.train import add_companion
    from molsepnorm.train.blend import format_weights
    from molsepnorm.train.companion import feature_name

    torch.set_num_threads(args.threads)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for i, path in enumerate(args.checkpoints):
        before = Checkpoint.load(path)
        metric = before.task.metric
        out = args.out_dir / f"{i}-{Path(path).parent.parent.name}.pt"
        fit = add_companion(path, out)
        after = Checkpoint.load(out)
        row = {"checkpoint": path, "refitted": str(out), "metric": metric,
               "features": feature_name(fit.radius, fit.properties), "validation_by_features": fit.features,
               "weights": fit.weights, "weights_novel": fit.weights_novel,
               "test_before": before.metrics["test"][metric], "test_after": after.metrics["test"][metric],
               "graphormer_test": fit.scores["graphormer"]["test"][metric], "fit_seconds": fit.seconds}
        rows.append(row)
        print(f"{path}: {row['features']}, weight {format_weights(fit.weights, fit.weights_novel)}; test {metric} "
              f"{row['test_before']:.4f} -> {row['test_after']:.4f} (Graphormer alone {row['graphormer_test']:.4f}); "
              f"fit {fit.seconds:.1f} s",
              flush=True)
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
