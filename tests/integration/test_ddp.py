"""DDP on CPU: ``molsepnorm train --nproc 2`` runs 2 gloo processes through torchrun."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from molsepnorm.checkpoint import Checkpoint
from molsepnorm.inference import evaluate_checkpoint

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "configs" / "tiny.yaml"


def test_two_cpu_processes_train_with_rank0_io(tmp_path, write_tpsa_csv):
    csv = write_tpsa_csv(tmp_path / "tpsa300.csv")
    with open(csv, "a") as fh:  # a last row left out, with a warning
        fh.write("not-a-smiles,1.0\n")
    run = tmp_path / "ddp"
    # 240 training molecules, batches of 32: 8 batches per epoch, 4 per rank
    args = ["--nproc", "2", "--config", str(TINY), "--dataset", str(csv), "--epochs", "2", "--batch-size", "32",
            "--batching", "random", "--threads", "1", "--no-progress", "--on-invalid", "skip", "--out", str(run)]
    done = subprocess.run([sys.executable, "-m", "molsepnorm.cli.train", *args], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "torch.distributed.run" in done.stderr and "--nproc_per_node=2" in done.stderr
    assert done.stdout.count("best epoch") == 1  # the summary is printed by rank 0 only
    assert done.stderr.count("1 row(s) left out") == 1, done.stderr[-3000:]  # by rank 0 only, too

    log = (run / "train.log").read_text()
    assert "x 2 processes" in log
    assert log.count("epoch 1  step 4 ") == 1  # one writer; each rank took half the batches
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [(r["epoch"], r["step"]) for r in rows] == [(1, 4), (2, 8)]

    last = Checkpoint.load(run / "last.pt")
    assert last.training_state["world_size"] == 2
    rngs = last.training_state["rng"]
    assert len(rngs) == 2 and not (rngs[0]["torch"] == rngs[1]["torch"]).all()  # per-rank dropout streams
    results = json.loads((run / "results.json").read_text())
    report = evaluate_checkpoint(run / "best.pt", split="test")  # a DDP checkpoint loads in one CPU process
    # the same numbers up to float summation order (the ranks ran 1 thread, this process may not)
    assert report["metrics"]["mae"] == pytest.approx(results["test"]["mae"], rel=1e-4)
