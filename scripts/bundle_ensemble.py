"""Ship the best.pt files of several runs as a bundled ensemble, and record its metrics.

A bundled ensemble (:mod:`molsepnorm.checkpoint.bundled`) is the same preset trained with
different seeds; ``predict`` and ``evaluate`` average its members' predictions.  This checks
the runs' ``best.pt`` files (best.pt files of the preset's data set, able to form an
ensemble, each with the seed its member file name carries), scores them as an ensemble on
their data set's validation and test splits with
:func:`molsepnorm.inference.evaluate.evaluate_checkpoint`, and only then copies them to the
member files the registry names (in its order) and writes ``<name>.metrics.json`` beside
them: the ensemble's metrics (what ``molsepnorm models`` lists; no member checkpoint holds
them), each member's file, sha256, seed, its own metrics scored in the same evaluation
(``scored``) and those its training run recorded (``metrics``), and the command.

    python scripts/bundle_ensemble.py hiv-activity runs/hiv-s0/run/best.pt runs/hiv-s1/run/best.pt \\
        runs/hiv-s2/run/best.pt
    python scripts/bundle_ensemble.py hiv-activity --metrics-only   # score the files already shipped
"""
from __future__ import annotations

import argparse
import hashlib
import json
import platform
import shlex
import shutil
import sys
import time
from pathlib import Path
from typing import Any


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("name", help="a bundled ensemble's name (molsepnorm/checkpoint/bundled.py)")
    parser.add_argument("runs", nargs="*", help="the members' best.pt files, in the registry's order")
    parser.add_argument("--metrics-only", action="store_true", help="score the shipped members; copy nothing")
    parser.add_argument("--data-root", default=None, help="folder of the raw data sets, if not the runs'")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads for torch")
    args = parser.parse_args(argv)

    import torch
    import yaml

    from molsepnorm.checkpoint import Checkpoint, check_ensemble
    from molsepnorm.checkpoint.bundled import BUNDLED, ensemble_metrics_path
    from molsepnorm.inference.evaluate import evaluate_checkpoint

    torch.set_num_threads(args.threads)
    model = BUNDLED.get(args.name)
    if model is None or not model.is_ensemble:
        raise SystemExit(f"{args.name!r} is not a bundled ensemble (ensembles: "
                         f"{', '.join(m.name for m in BUNDLED.values() if m.is_ensemble) or 'none'})")
    if args.metrics_only == bool(args.runs):
        raise SystemExit("give the members' best.pt files, or --metrics-only")
    if args.runs and len(args.runs) != len(model.paths):
        raise SystemExit(f"{args.name} has {len(model.paths)} members ({', '.join(model.checkpoints)}); "
                         f"got {len(args.runs)} files")
    sources = [Path(r) for r in args.runs] if args.runs else model.paths
    # everything is checked and scored before a shipped file changes
    checkpoints = [Checkpoint.load(path) for path in sources]
    check_ensemble(checkpoints)
    preset = yaml.safe_load(model.preset_path.read_text(encoding="utf-8"))
    for source, checkpoint, member in zip(sources, checkpoints, model.checkpoints):
        seed = checkpoint.config["train"]["seed"]
        problems = [f"a {checkpoint.kind} checkpoint, not a best.pt"] if checkpoint.kind != "best" else []
        if checkpoint.data.dataset != preset["data"]["dataset"]:
            problems.append(f"trained on {checkpoint.data.dataset}, the preset on {preset['data']['dataset']}")
        if f"seed{seed}" not in member:
            problems.append(f"seed {seed}, but it would ship as {member}")
        if problems:
            raise SystemExit(f"{source}: " + "; ".join(problems))
    start = time.perf_counter()
    metrics, sizes, dataset = {}, {}, ""
    scored: list[dict[str, Any]] = [{} for _ in sources]  # each member's own figures, scored beside the mean
    for split in ("val", "test"):
        report = evaluate_checkpoint([str(s) for s in sources], split=split, data_root=args.data_root)
        metrics[split], sizes[split], dataset = report["metrics"], report["num_molecules"], report["dataset"]
        for own, member_metrics in zip(scored, report["member_metrics"]):
            own[split] = member_metrics
        print(f"{args.name} on {dataset} {split} ({report['num_molecules']:,} molecules): "
              + ", ".join(f"{k} {v:.4f}" for k, v in report["metrics"].items() if isinstance(v, float)))
    seconds = time.perf_counter() - start
    for source, path in zip(args.runs, model.paths):
        shutil.copyfile(source, path)
        print(f"{source} -> {path}")
    members = []
    for path, own in zip(model.paths, scored):
        checkpoint = Checkpoint.load(path)
        members.append({"file": path.name, "bytes": path.stat().st_size,
                        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
                        "seed": checkpoint.config["train"]["seed"], "scored": own,
                        "metrics": checkpoint.metrics})  # "metrics": what its training run recorded
    record = {
        "name": args.name,
        "command": " ".join(shlex.quote(a) for a in [Path(sys.executable).name, *sys.argv]),
        "how": "molsepnorm.inference.evaluate.evaluate_checkpoint: the mean of the members' predictions",
        "dataset": dataset,
        "num_molecules": sizes,
        "metrics": metrics,
        "members": members,
        "seconds": round(seconds, 1),
        "machine": {"platform": platform.platform(), "threads": args.threads},
        "versions": {"python": platform.python_version(), "torch": torch.__version__},
    }
    out = ensemble_metrics_path(model)
    tmp = out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    tmp.replace(out)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
