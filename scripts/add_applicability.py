"""Add the applicability domain of its training split to a checkpoint, without retraining.

Checkpoints written before molsepnorm recorded the domain (the bundled ``tpsa-nci-small``
among them) predict without warnings.  This reloads the model's own training split --
the data set, loading options and data root its checkpoint records, hence the same split
-- builds the domain from it exactly as the trainer does
(:meth:`molsepnorm.checkpoint.ApplicabilityDomain.from_splits`) and writes the checkpoint
back with it; weights, metrics and every other entry stay as they were.

    python scripts/add_applicability.py molsepnorm/models/tpsa-nci-small.pt
    python scripts/add_applicability.py runs/a/best.pt --out runs/a/best-with-domain.pt
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", help="a checkpoint file (or a bundled model name, with --out)")
    parser.add_argument("--out", default=None, help="where to write (default: over the checkpoint)")
    parser.add_argument("--data-root", default=None, help="folder of the raw data sets, if not the run's")
    args = parser.parse_args(argv)

    from molsepnorm.checkpoint import ApplicabilityDomain, Checkpoint, checkpoint_data, resolve_model

    path = resolve_model(args.checkpoint)
    out = Path(args.out) if args.out else path
    checkpoint = Checkpoint.load(path)
    weights = {k: v.clone() for k, v in checkpoint.state_dict.items()}
    _, splits = checkpoint_data(checkpoint, split="train", data_root=args.data_root, targets=True)
    recorded = {k: int(v) for k, v in checkpoint.data.sizes.items()}
    if recorded and splits.sizes != recorded:
        print(f"error: {path} was trained on splits of sizes {recorded}, the data set loads as {splits.sizes}: "
              "not the same split", file=sys.stderr)
        return 1
    checkpoint.applicability = ApplicabilityDomain.from_splits(splits)
    checkpoint.save(out)

    again = Checkpoint.load(out)  # what was written: the same weights, and the domain
    assert again.state_dict.keys() == weights.keys() and all(torch.equal(again.state_dict[k], v)
                                                             for k, v in weights.items())
    assert again.applicability == checkpoint.applicability
    print(f"{out}: {again.applicability.summary()}; {out.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
