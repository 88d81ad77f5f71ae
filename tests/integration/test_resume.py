"""Exact resume: a run killed with SIGKILL mid-epoch and resumed ends like an uninterrupted one.

Both runs are real ``molsepnorm train`` processes on CPU with one thread and a fixed
seed; the comparison is exact (``==`` on floats), per epoch and at the end.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from molsepnorm.train.checkpoint import CheckpointError, load_checkpoint

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "configs" / "tiny.yaml"
TIMING = {"epoch_seconds", "eval_seconds", "graphs_per_second"}


def write_tpsa_csv(path: Path, n: int = 300) -> Path:
    """The first ``n`` molecules of RDKit's ``NCI/first_5k.tpsa.csv`` as ``smiles,tpsa``."""
    from molsepnorm.data.nci import read_tpsa_file, tpsa_file

    table, _ = read_tpsa_file(tpsa_file())
    table.iloc[:n].to_csv(path, index=False)
    return path


def train_args(csv: Path, out: Path) -> list[str]:
    # 240 training molecules in batches of 32: 8 steps per epoch, 32 in all; last.pt every 3 steps
    return ["--config", str(TINY), "--dataset", str(csv), "--epochs", "4", "--batch-size", "32", "--seed", "7",
            "--checkpoint-every", "3", "--threads", "1", "--no-progress", "--out", str(out)]


def cli(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "molsepnorm.cli.train", *args]


def run_ok(args: list[str]) -> subprocess.CompletedProcess:
    done = subprocess.run(cli(args), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def rows(run: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if k not in TIMING}
            for line in (run / "metrics.jsonl").read_text().splitlines()]


def last_state(run: Path) -> dict | None:
    try:
        return load_checkpoint(run / "last.pt")["training_state"]["progress"]
    except CheckpointError:
        return None


def test_sigkill_mid_epoch_then_resume_matches_an_uninterrupted_run(tmp_path):
    csv = write_tpsa_csv(tmp_path / "tpsa300.csv")
    full, killed = tmp_path / "full", tmp_path / "killed"
    run_ok(train_args(csv, full))

    proc = subprocess.Popen(cli(train_args(csv, killed)), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            state = last_state(killed)
            if state is not None and state["step"] >= 5 and state["batch_in_epoch"] > 0:
                break
            time.sleep(0.01)
        assert proc.poll() is None, "the run ended before it could be killed: " + proc.stderr.read().decode()[-2000:]
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    assert not (killed / "results.json").exists()
    interrupted_at = last_state(killed)
    assert interrupted_at is not None and interrupted_at["step"] < 32

    run_ok(["--resume", str(killed), "--no-progress"])

    assert rows(killed) == rows(full)  # every epoch's train loss and validation metrics
    assert json.loads((killed / "results.json").read_text()) == json.loads((full / "results.json").read_text())
    assert "resumed" in (killed / "train.log").read_text()


def test_resume_from_a_mid_epoch_checkpoint_in_process(tmp_path, monkeypatch):
    """Deterministic mid-epoch interruption (step 7; last.pt at step 6, batch 6 of epoch 1)."""
    from molsepnorm.train import loop
    from molsepnorm.train.api import resume, train
    from molsepnorm.train.config import load_experiment_config

    csv = write_tpsa_csv(tmp_path / "tpsa300.csv")
    config = lambda: load_experiment_config(TINY, {  # noqa: E731
        "data.dataset": str(csv), "train.epochs": 2, "train.batch_size": 32, "train.seed": 3,
        "train.checkpoint_every_steps": 3, "train.threads": 1, "train.progress": False})
    full = train(config(), out=tmp_path / "full", console=False)

    step = loop.Trainer._train_step

    def interrupted(self, batch, index):
        if self.state.step == 7:
            raise KeyboardInterrupt("simulated kill")
        return step(self, batch, index)

    monkeypatch.setattr(loop.Trainer, "_train_step", interrupted)
    with pytest.raises(KeyboardInterrupt):
        train(config(), out=tmp_path / "cut", console=False)
    state = last_state(tmp_path / "cut")
    assert (state["step"], state["epoch"], state["batch_in_epoch"]) == (6, 0, 6)
    monkeypatch.setattr(loop.Trainer, "_train_step", step)

    resumed = resume(tmp_path / "cut", console=False)
    assert resumed.test == full.test and resumed.val == full.val
    assert resumed.steps == full.steps == 16
    assert rows(tmp_path / "cut") == rows(tmp_path / "full")


def test_resume_refuses_other_settings_and_missing_runs(tmp_path):
    from click.testing import CliRunner

    from molsepnorm.cli.train import train as train_cmd

    runner = CliRunner()
    result = runner.invoke(train_cmd, ["--resume", str(tmp_path), "--lr", "0.1"])
    assert result.exit_code == 2 and "--lr" in result.output
    result = runner.invoke(train_cmd, ["--resume", str(tmp_path / "none")])
    assert result.exit_code == 1 and "does not exist" in result.output
