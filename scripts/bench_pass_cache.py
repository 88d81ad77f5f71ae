"""Pretraining time with a corpus's graphs and graph-level targets kept across passes (the
default), against featurizing it and computing its targets every pass (``corpus.cache_mb: 0``:
the stream before the caches), in one process, one after the other, on the same preset; and
whether both runs end with the same weights.

    python scripts/bench_pass_cache.py --config molsepnorm/models/molhiv-encoder.yaml \
        --steps 1200 --threads 2 --out docs/pretraining/pass-cache.json

Prints and writes ``{"runs": {"cached": ..., "every pass": ...}, "ratio": ..., "same_weights":
...}``: each run's wall seconds, its training seconds as ``metrics.jsonl`` counts them, steps,
passes and molecules; ratio = cached / every pass, in wall seconds.  ``--cached-first``
runs the cached arm first (the first run of a process also pays for its imports).
"""
from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

import torch


def run(config: str, steps: int, threads: int, seed: int, cache: bool, out: Path) -> dict:
    from molsepnorm.checkpoint import Checkpoint
    from molsepnorm.pretrain.api import load_pretrain_config, pretrain

    cfg = load_pretrain_config(config, {"pretrain.max_steps": steps, "pretrain.threads": threads,
                                        "pretrain.seed": seed, "pretrain.progress": False,
                                        "pretrain.log_every": 100, **({} if cache else {"corpus.cache_mb": 0})})
    start = time.perf_counter()
    result = pretrain(cfg, out=out, console=False)
    wall = time.perf_counter() - start
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return {"wall_seconds": round(wall, 1), "seconds": round(rows[-1]["seconds"], 1), "steps": result.steps,
            "passes": rows[-1].get("pass"), "molecules": rows[-1].get("molecules"), "final_loss": rows[-1].get("loss"),
            "state": Checkpoint.load(out / "encoder.pt").state_dict}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="molsepnorm/models/molhiv-encoder.yaml")
    parser.add_argument("--steps", type=int, default=1200)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cached-first", action="store_true", help="run the cached arm first")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        arms = (("every pass", False), ("cached", True))
        for name, cache in (arms[::-1] if args.cached_first else arms):
            out = Path(tmp) / name.replace(" ", "-")
            runs[name] = run(args.config, args.steps, args.threads, args.seed, cache, out)
            print(name, {k: v for k, v in runs[name].items() if k != "state"}, flush=True)
    a, b = runs["cached"].pop("state"), runs["every pass"].pop("state")
    same = all(torch.equal(a[k], b[k]) for k in a)
    flags = " --cached-first" if args.cached_first else ""
    report = {"command": f"python scripts/bench_pass_cache.py --config {args.config} --steps {args.steps} "
                         f"--threads {args.threads} --seed {args.seed}{flags}",
              "machine": f"{platform.processor() or platform.machine()}, torch {torch.__version__}",
              "runs": runs,
              "ratio": round(runs["cached"]["wall_seconds"] / runs["every pass"]["wall_seconds"], 3),
              "same_weights": same}
    print(json.dumps({k: v for k, v in report.items() if k != "runs"}, indent=1))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
