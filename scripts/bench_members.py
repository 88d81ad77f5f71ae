"""The forward time of an ensemble's members on featurized molecules, with the members one
at a time and side by side in threads, in one run.

    python scripts/bench_members.py --n 4000 --out members.json
    PYTHONPATH=/path/to/other/checkout python scripts/bench_members.py ...   # another commit's code

The first ``--n`` molhiv SMILES RDKit parses (``bench_predict.source_smiles``) are featurized
once in the model's vocabulary; then ``molsepnorm.inference.runner.run`` of every member
is timed with ``member_threads=1`` and ``"auto"`` alternately, ``--repeats`` times each,
after a warm-up on 500 molecules, with ``--threads`` torch threads.  Featurization, file
reading and writing are left out: this is the model's part of a prediction.  The outputs
of the two settings must agree to the bit.  JSON at ``--out``: the medians, every time,
the threads ``"auto"`` resolved to, and which molsepnorm (path, git commit) ran.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_predict import source_smiles  # noqa: E402  (the same molecules as the predict benchmark)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="hiv-activity", help="a bundled ensemble, or checkpoint paths")
    parser.add_argument("--n", type=int, default=4000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    import molsepnorm
    from molsepnorm.errors import InvalidMoleculeError
    from molsepnorm.inference.device import inference_process_settings, resolve_member_threads
    from molsepnorm.inference.runner import run
    from molsepnorm.predict import Predictor

    inference_process_settings(args.threads)
    predictor = Predictor.load(args.model)
    smiles, source = source_smiles()
    graphs = []
    for s in smiles:
        if len(graphs) == args.n:
            break
        try:
            graphs.append(predictor.featurize(s))
        except InvalidMoleculeError:
            continue
    runners = [m.runner for m in predictor.members]
    run(runners, graphs[:500], member_threads=1)
    times: dict[str, list[float]] = {"one at a time": [], "in threads": []}
    outputs = {}
    for _ in range(args.repeats):
        for name, setting in (("one at a time", 1), ("in threads", "auto")):
            start = time.perf_counter()
            outputs[name] = run(runners, graphs, member_threads=setting).values
            times[name].append(round(time.perf_counter() - start, 3))
    if not np.array_equal(outputs["one at a time"], outputs["in threads"]):
        raise SystemExit("the members' outputs differ between the two settings")
    medians = {name: statistics.median(t) for name, t in times.items()}
    package = Path(molsepnorm.__file__).resolve().parent
    commit = subprocess.run(["git", "-C", str(package), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or None
    report = {"command": " ".join([Path(sys.executable).name, *sys.argv]), "model": args.model,
              "members": len(runners), "molecules": len(graphs), "smiles_from": source, "torch_threads": args.threads,
              "auto_member_threads": resolve_member_threads("auto", len(runners), torch.device("cpu")),
              "seconds": times, "median_s": medians,
              "threads_speedup": round(medians["one at a time"] / medians["in threads"], 3),
              "molsepnorm": str(package), "commit": commit}
    for name, median in medians.items():
        print(f"{name:14s} {median:7.2f} s  {len(graphs) / median:7.0f} mol/s   {times[name]}")
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
