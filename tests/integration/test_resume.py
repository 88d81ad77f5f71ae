"""Exact resume: a run killed with SIGKILL mid-epoch and resumed ends like an uninterrupted one.

Both runs are real ``molsepnorm train`` processes on CPU with one thread and a fixed
seed; the comparison is exact (``==`` on floats), per epoch and at the end.
"""
from __future__ import annotations

import json
import random
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

from molsepnorm.checkpoint import Checkpoint, CheckpointError

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "configs" / "tiny.yaml"
TIMING = {"epoch_seconds", "eval_seconds", "graphs_per_second"}


#: what train_args gives: 240 training molecules in batches of 32
STEPS_PER_EPOCH = 8
#: the epochs of the long runs of the random-moment kill test
LONG_EPOCHS = 8


def train_args(csv: Path, out: Path) -> list[str]:
    # 240 training molecules in batches of 32: STEPS_PER_EPOCH steps per epoch, 32 in all; last.pt every 3
    # steps and at every epoch's end
    return ["--config", str(TINY), "--dataset", str(csv), "--epochs", "4", "--batch-size", "32", "--seed", "7",
            "--batching", "random", "--checkpoint-every", "3", "--checkpoint-seconds", "0", "--threads", "1",
            "--no-progress", "--out", str(out)]


def cli(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "molsepnorm.cli.train", *args]


def run_ok(args: list[str]) -> subprocess.CompletedProcess:
    done = subprocess.run(cli(args), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def rows(run: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if k not in TIMING}
            for line in (run / "metrics.jsonl").read_text().splitlines()]


def results(run: Path) -> dict:
    """The run's results.json without the companion fit's wall time, which no two runs share."""
    out = json.loads((run / "results.json").read_text())
    out.get("companion", {}).pop("seconds", None)
    return out


def last_state(run: Path) -> dict | None:
    try:
        return Checkpoint.load(run / "last.pt").training_state["progress"]
    except CheckpointError:
        return None


def test_sigkill_mid_epoch_then_resume_matches_an_uninterrupted_run(tmp_path, write_tpsa_csv, sigkill_when):
    csv = write_tpsa_csv(tmp_path / "tpsa300.csv")
    full, killed = tmp_path / "full", tmp_path / "killed"
    run_ok(train_args(csv, full))

    def mid_epoch() -> bool:
        state = last_state(killed)
        return state is not None and state["step"] >= 5 and state["batch_in_epoch"] > 0

    assert sigkill_when(cli(train_args(csv, killed)), mid_epoch) == -signal.SIGKILL
    assert not (killed / "results.json").exists()
    interrupted_at = last_state(killed)
    assert interrupted_at is not None and interrupted_at["step"] < 32

    run_ok(["--resume", str(killed), "--no-progress"])

    assert rows(killed) == rows(full)  # every epoch's train loss and validation metrics
    assert results(killed) == results(full)
    assert "resumed" in (killed / "train.log").read_text()
    records = [Checkpoint.load(run / "best.pt").config["model"] for run in (killed, full)]
    assert records[0] == records[1]  # the companion's features as chosen, in both
    assert records[0]["companion_radius"] == Checkpoint.load(full / "best.pt").model_config["companion_radius"]


def test_default_writes_last_pt_every_30_seconds_and_a_kill_resumes_from_the_older_one(tmp_path, write_tpsa_csv,
                                                                                       sigkill_when):
    """By default (train.checkpoint_every_seconds 30) a short run writes last.pt before its first
    step and after its last epoch only; killed after two epochs it resumes from step 0, drops
    the metrics rows written since, and ends like an uninterrupted run."""
    csv = write_tpsa_csv(tmp_path / "tpsa300.csv")
    full, killed = tmp_path / "full", tmp_path / "killed"
    run_ok(train_args(csv, full))
    args = [a for a in train_args(csv, killed) if a not in ("--checkpoint-every", "3", "--checkpoint-seconds", "0")]
    assert len(args) == len(train_args(csv, killed)) - 4

    def two_epochs() -> bool:
        metrics = killed / "metrics.jsonl"
        return metrics.exists() and len(metrics.read_text().splitlines()) >= 2

    assert sigkill_when(cli(args), two_epochs) == -signal.SIGKILL
    assert last_state(killed)["step"] == 0  # no epoch's end wrote it: less than 30 s of training
    run_ok(["--resume", str(killed), "--no-progress"])
    assert rows(killed) == rows(full)
    assert results(killed) == results(full)
    assert last_state(killed)["epoch"] == 4 and last_state(killed)["step"] == 32  # the last epoch wrote it


@pytest.mark.parametrize("batching, ema", [("random", None), ("bucket", None), ("bucket", 0.9)])
def test_resume_from_a_mid_epoch_checkpoint_in_process(tmp_path, interrupt_training, batching, ema, write_tpsa_csv):
    """Deterministic mid-epoch interruption (step 7; last.pt at step 6, batch 6 of epoch 1),
    with shuffled batches and with size-bucketed ones (the default), and with a moving
    average of the weights (which last.pt must carry)."""
    from molsepnorm.train.api import resume, train
    from molsepnorm.train.config import load_experiment_config

    csv = write_tpsa_csv(tmp_path / "tpsa300.csv")
    config = lambda: load_experiment_config(TINY, {  # noqa: E731
        "data.dataset": str(csv), "train.epochs": 2, "train.batch_size": 32, "train.seed": 3,
        "train.checkpoint_every_steps": 3, "train.checkpoint_every_seconds": 0, "train.threads": 1, "train.progress": False,
        "train.batching": batching, "train.ema_decay": ema})
    full = train(config(), out=tmp_path / "full", console=False)

    with interrupt_training(7):
        train(config(), out=tmp_path / "cut", console=False)
    state = last_state(tmp_path / "cut")
    assert (state["step"], state["epoch"], state["batch_in_epoch"]) == (6, 0, 6)

    resumed = resume(tmp_path / "cut", console=False)
    assert resumed.test == full.test and resumed.val == full.val
    assert resumed.steps == full.steps
    if batching == "random":
        assert full.steps == 16  # 240 molecules in batches of 32, 2 epochs
    assert rows(tmp_path / "cut") == rows(tmp_path / "full")


def test_a_run_begun_with_a_relative_data_path_resumes_from_another_folder(tmp_path, interrupt_training,
                                                                          write_tpsa_csv, monkeypatch):
    """config.yaml keeps the file as it was given (``tpsa.csv``, relative to where the run
    began); a resume from another folder reads it where training recorded it, and the run
    ends as an uninterrupted one."""
    from molsepnorm.train.api import resume, train
    from molsepnorm.train.config import load_experiment_config

    (tmp_path / "start").mkdir()
    (tmp_path / "elsewhere").mkdir()
    table = write_tpsa_csv(tmp_path / "start" / "tpsa.csv", n=120)
    table.write_text(table.read_text() + "C1CC,40.0\n")  # a row left out, said in train.log by both runs
    monkeypatch.chdir(tmp_path / "start")
    config = lambda: load_experiment_config(TINY, {  # noqa: E731
        "data.dataset": "tpsa.csv", "data.on_invalid": "skip", "train.epochs": 2, "train.batch_size": 32,
        "train.seed": 3,
        "train.checkpoint_every_steps": 2, "train.checkpoint_every_seconds": 0, "train.threads": 1,
        "train.progress": False})
    full = train(config(), out=tmp_path / "full", console=False)
    with interrupt_training(3):
        train(config(), out=tmp_path / "cut", console=False)
    assert "dataset: tpsa.csv" in (tmp_path / "cut" / "config.yaml").read_text()
    monkeypatch.chdir(tmp_path / "elsewhere")  # no tpsa.csv here
    resumed = resume(tmp_path / "cut", console=False)
    assert resumed.test == full.test and rows(tmp_path / "cut") == rows(tmp_path / "full")
    log = (tmp_path / "cut" / "train.log").read_text()
    assert f"tpsa.csv is not found from this folder: reading {tmp_path / 'start' / 'tpsa.csv'}" in log
    assert log.count("1 row(s) left out of the data set") == 2  # training's and the resume's reading


def test_a_run_whose_data_file_moved_resumes_when_told_where_it_is_and_only_on_the_same_content(
        tmp_path, interrupt_training, write_tpsa_csv):
    from molsepnorm.errors import MolsepnormError
    from molsepnorm.train.api import resume, train
    from molsepnorm.train.config import load_experiment_config

    (tmp_path / "data").mkdir()
    csv = write_tpsa_csv(tmp_path / "data" / "tpsa.csv", n=120)
    config = lambda: load_experiment_config(TINY, {  # noqa: E731
        "data.dataset": str(csv), "train.epochs": 2, "train.batch_size": 32, "train.seed": 3,
        "train.checkpoint_every_steps": 2, "train.checkpoint_every_seconds": 0, "train.threads": 1,
        "train.progress": False})
    full = train(config(), out=tmp_path / "full", console=False)
    with interrupt_training(3):
        train(config(), out=tmp_path / "cut", console=False)
    (tmp_path / "data").rename(tmp_path / "renamed")
    moved = tmp_path / "renamed" / "tpsa.csv"
    edited = tmp_path / "edited.csv"  # the same rows, one target changed
    lines = moved.read_text().splitlines()
    edited.write_text("\n".join([*lines[:5], lines[5].rsplit(",", 1)[0] + ",1.0", *lines[6:]]) + "\n")
    with pytest.raises(MolsepnormError, match=r"edited\.csv is not the file this run trained on .*content differs"):
        resume(tmp_path / "cut", console=False, dataset=edited)
    resumed = resume(tmp_path / "cut", console=False, dataset=moved)
    assert resumed.test == full.test and rows(tmp_path / "cut") == rows(tmp_path / "full")
    assert f"{csv} has moved: reading {moved}, the same content" in (tmp_path / "cut" / "train.log").read_text()


def test_resume_keeps_the_best_epochs_that_average_best_will_average(tmp_path, interrupt_training, write_tpsa_csv):
    """Killed in epoch 2 (last.pt at step 9, after epoch 1 was ranked): last.pt carries epoch
    1's weights, and the resumed run averages the same epochs into the same best.pt."""
    from molsepnorm.train.api import resume, train
    from molsepnorm.train.config import load_experiment_config

    csv = write_tpsa_csv(tmp_path / "tpsa300.csv")
    config = lambda: load_experiment_config(TINY, {  # noqa: E731
        "data.dataset": str(csv), "train.epochs": 3, "train.batch_size": 32, "train.seed": 3, "train.patience": "off",
        "train.checkpoint_every_steps": 3, "train.checkpoint_every_seconds": 0, "train.threads": 1,
        "train.progress": False, "train.batching": "random", "train.average_best": 3})
    full = train(config(), out=tmp_path / "full", console=False)
    with interrupt_training(10):
        train(config(), out=tmp_path / "cut", console=False)
    cut = Checkpoint.load(tmp_path / "cut" / "last.pt")
    assert cut.training_state["progress"]["epoch"] == 1 and len(cut.training_state["top_epochs"]) == 1

    resumed = resume(tmp_path / "cut", console=False)
    assert full.averaged_epochs == resumed.averaged_epochs == [1, 2, 3]  # epoch 1's weights came from last.pt
    assert resumed.val == full.val and resumed.test == full.test
    soup = Checkpoint.load(tmp_path / "cut" / "best.pt").state_dict
    assert all(torch.equal(t, soup[k]) for k, t in Checkpoint.load(tmp_path / "full" / "best.pt").state_dict.items())


def test_a_classification_run_begun_before_average_best_resumes_with_its_best_epoch(tmp_path, interrupt_training,
                                                                                    write_tpsa_csv):
    """Its last.pt holds no kept epochs and its config.yaml no average_best (so "auto": 5 today):
    the resume finishes, and best.pt is the best epoch's weights, as when the run began."""
    from molsepnorm._yaml import safe_load
    from molsepnorm.train.api import resume, train
    from molsepnorm.train.config import load_experiment_config

    csv = write_tpsa_csv(tmp_path / "polar300.csv", binary=True)
    config = lambda: load_experiment_config(TINY, {  # noqa: E731
        "data.dataset": str(csv), "train.epochs": 3, "train.batch_size": 32, "train.seed": 3, "train.patience": "off",
        "train.checkpoint_every_steps": 3, "train.checkpoint_every_seconds": 0, "train.threads": 1,
        "train.progress": False, "train.average_best": 1})
    full = train(config(), out=tmp_path / "full", console=False)
    with interrupt_training(10):
        train(config(), out=tmp_path / "cut", console=False)
    written = tmp_path / "cut" / "config.yaml"
    raw = safe_load(written.read_text())
    assert raw["train"].pop("average_best") == 1
    # nor a fingerprint companion (train.companion), which a resume fits at the end as today's runs do
    assert (raw["train"].pop("companion"), raw["train"].pop("companion_weight")) == ("auto", "auto")
    for key in ("companion_bits", "companion_radius", "companion_blend", "companion_counts"):
        raw["model"].pop(key)
    written.write_text(yaml.safe_dump(raw))
    last = Checkpoint.load(tmp_path / "cut" / "last.pt")
    assert "top_epochs" not in last.training_state
    last.state_dict = {k: v for k, v in last.state_dict.items() if not k.startswith("companion.")}
    last.model_config = {k: v for k, v in last.model_config.items() if not k.startswith("companion_")}
    last.save(tmp_path / "cut" / "last.pt")

    resumed = resume(tmp_path / "cut", console=False)
    assert resumed.averaged_epochs == [] and resumed.best_epoch == full.best_epoch
    assert resumed.companion["fitted"] == {"polar": True}
    assert resumed.test == full.test and rows(tmp_path / "cut") == rows(tmp_path / "full")
    assert "a run begun before train.average_best" in (tmp_path / "cut" / "train.log").read_text()


def test_a_regression_run_begun_before_monitor_blend_resumes_as_it_began(tmp_path, interrupt_training,
                                                                         write_tpsa_csv):
    """Its config.yaml has no monitor_blend (so true today) and its last.pt no record of the
    Graphormer's own best value: its best epoch so far was picked by the Graphormer's metric,
    so the resumed run goes on by that metric and fits the companion at the end, as it began."""
    from molsepnorm._yaml import safe_load
    from molsepnorm.train.api import resume, train
    from molsepnorm.train.config import load_experiment_config

    csv = write_tpsa_csv(tmp_path / "tpsa300.csv")
    config = lambda: load_experiment_config(TINY, {  # noqa: E731
        "data.dataset": str(csv), "train.epochs": 3, "train.batch_size": 32, "train.seed": 3, "train.patience": "off",
        "train.checkpoint_every_steps": 3, "train.checkpoint_every_seconds": 0, "train.threads": 1,
        "train.progress": False, "train.batching": "random", "train.monitor_blend": False})
    full = train(config(), out=tmp_path / "full", console=False)
    with interrupt_training(10):
        train(config(), out=tmp_path / "cut", console=False)
    written = tmp_path / "cut" / "config.yaml"
    raw = safe_load(written.read_text())
    assert raw["train"].pop("monitor_blend") is False
    written.write_text(yaml.safe_dump(raw))
    last = Checkpoint.load(tmp_path / "cut" / "last.pt")
    assert last.training_state["progress"].pop("best_model_value") == last.training_state["progress"]["best_value"]
    last.save(tmp_path / "cut" / "last.pt")

    resumed = resume(tmp_path / "cut", console=False)
    assert resumed.val == full.val and resumed.test == full.test and resumed.best_epoch == full.best_epoch
    assert rows(tmp_path / "cut") == rows(tmp_path / "full")  # no blend columns after the resume either
    assert "written before train.monitor_blend" in (tmp_path / "cut" / "train.log").read_text()


def test_resume_refuses_other_settings_and_missing_runs(tmp_path):
    from click.testing import CliRunner

    from molsepnorm.cli.train import train as train_cmd

    runner = CliRunner()
    result = runner.invoke(train_cmd, ["--resume", str(tmp_path), "--lr", "0.1"])
    assert result.exit_code == 2 and "--lr" in result.output
    result = runner.invoke(train_cmd, ["--resume", str(tmp_path / "none")])
    assert result.exit_code == 1 and "does not exist" in result.output


# --------------------------------------------------------------------------------------
# SIGKILL at random moments, and in the middle of a checkpoint write
# --------------------------------------------------------------------------------------
# A wrapper around `molsepnorm train` that SIGKILLs its own process at the N-th write of
# one checkpoint file: half-way through the bytes, after the bytes but before the rename,
# or just after the rename.  Everything else is the real CLI in a real process.
KILLER = r'''
import io, os, signal, sys

import torch

target, nth, mode, fraction = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
real_save, real_replace, writes = torch.save, os.replace, [0]


def die():
    os.kill(os.getpid(), signal.SIGKILL)


def save(obj, f, *args, **kwargs):
    if str(getattr(f, "name", "")).endswith(os.sep + target + ".tmp"):
        writes[0] += 1
        if writes[0] == nth and mode == "mid-write":
            buffer = io.BytesIO()
            real_save(obj, buffer, *args, **kwargs)
            data = buffer.getbuffer()
            f.write(data[: int(len(data) * fraction)])
            f.flush()
            os.fsync(f.fileno())
            die()
    return real_save(obj, f, *args, **kwargs)


def replace(src, dst, *args, **kwargs):
    mine = str(dst).endswith(os.sep + target) and writes[0] == nth
    if mine and mode == "before-rename":
        die()
    real_replace(src, dst, *args, **kwargs)
    if mine and mode == "after-rename":
        die()


torch.save, os.replace = save, replace
from molsepnorm.cli.train import train

sys.argv = ["molsepnorm-train", *sys.argv[5:]]
train()
'''


def long_args(csv: Path, out: Path, epochs: int) -> list[str]:
    args = train_args(csv, out)
    args[args.index("--epochs") + 1] = str(epochs)
    return args


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory, write_tpsa_csv):
    """An uninterrupted 4-epoch run (last.pt written 13 times: step 0, steps 3 and 6 of each epoch, each epoch end)."""
    tmp = tmp_path_factory.mktemp("reference")
    csv = write_tpsa_csv(tmp / "tpsa300.csv")
    run_ok(train_args(csv, tmp / "full"))
    return csv, tmp / "full"


#: The kills of the default run: each moment of a write once, both files; the other three
#: (target, moment) pairs run under ``-m slow`` (the same save function writes both files).
DEFAULT_KILLS = {("last.pt", "mid-write"), ("best.pt", "before-rename"), ("last.pt", "after-rename")}


def _kill_cases() -> list[Any]:
    rng = random.Random(20261122)  # fixed: the same cases every run
    cases = []
    for target, writes in (("last.pt", 13), ("best.pt", 2)):
        for mode in ("mid-write", "before-rename", "after-rename"):
            first = 2 if target == "last.pt" else 1  # killed in the very first last.pt write: nothing to resume
            case = (target, rng.randint(first, writes), mode, round(rng.uniform(0.05, 0.95), 2))
            marks = () if (target, mode) in DEFAULT_KILLS else (pytest.mark.slow,)
            cases.append(pytest.param(*case, marks=marks))
    return cases


@pytest.mark.parametrize("target,nth,mode,fraction", _kill_cases())
def test_sigkill_during_a_checkpoint_write_leaves_a_loadable_checkpoint_and_resumes(
        reference_run, tmp_path, target, nth, mode, fraction):
    csv, full = reference_run
    run = tmp_path / "killed"
    script = tmp_path / "killer.py"
    script.write_text(KILLER)
    done = subprocess.run([sys.executable, str(script), target, str(nth), mode, str(fraction),
                           *train_args(csv, run)], capture_output=True, text=True, timeout=300)
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    assert not (run / "results.json").exists()

    checkpoint = Checkpoint.load(run / "last.pt")  # never torn: the previous (or the new) complete file
    assert checkpoint.training_state["progress"]["step"] < 32
    if target == "best.pt" and (run / "best.pt").exists():
        Checkpoint.load(run / "best.pt")
    torn = run / (target + ".tmp")
    assert torn.exists() == (mode != "after-rename")
    if mode == "mid-write":
        with pytest.raises(CheckpointError, match=target):
            Checkpoint.load(torn)

    resumed = run_ok(["--resume", str(run), "--no-progress"])
    assert not list(run.glob("*.tmp"))
    if mode != "after-rename":
        assert f"removed {target}.tmp" in resumed.stderr + (run / "train.log").read_text()
    assert rows(run) == rows(full)
    assert results(run) == results(full)


def _kill_at_random_moments(csv: Path, full: Path, run: Path, kills: int, seed: int) -> list[dict]:
    """Start, SIGKILL at a random moment, check last.pt loads, resume; ``kills`` times, then finish.

    Each kill waits until last.pt has passed a randomly drawn step (and the step of the kill before), then a
    random fraction of a second more: the moment falls anywhere in training, evaluation or a checkpoint write,
    and the kills spread over the run whatever the host's speed (a delay drawn in seconds alone landed every
    kill before the first step on a slow, shared CI host).
    """
    rng = random.Random(seed)
    steps_in_run = LONG_EPOCHS * STEPS_PER_EPOCH
    targets = sorted(rng.sample(range(1, steps_in_run - 4), kills))
    seen = []
    args = long_args(csv, run, epochs=LONG_EPOCHS)
    for k, target in enumerate(targets):
        after = max(target, seen[-1]["step"] + 1 if seen else 0)
        proc = subprocess.Popen(cli(args), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 240
            while proc.poll() is None and time.monotonic() < deadline:
                state = last_state(run)
                if state is not None and state["step"] >= after:
                    break
                time.sleep(0.02)
            time.sleep(rng.uniform(0.0, 0.5))
        finally:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        if proc.returncode == 0:  # finished before the kill
            break
        state = Checkpoint.load(run / "last.pt").training_state["progress"]  # always loadable
        seen.append({"kill": k, "step": state["step"], "epoch": state["epoch"]})
        args = ["--resume", str(run), "--no-progress"]
    else:
        run_ok(args)
    assert rows(run) == rows(full)
    assert results(run) == results(full)
    return seen


@pytest.fixture(scope="module")
def reference_run_8_epochs(reference_run, tmp_path_factory):
    csv, _ = reference_run
    full = tmp_path_factory.mktemp("reference8") / "full"
    run_ok(long_args(csv, full, epochs=LONG_EPOCHS))
    return csv, full


def test_sigkill_at_random_moments_then_resume_always_finishes_like_an_uninterrupted_run(
        reference_run_8_epochs, tmp_path):
    csv, full = reference_run_8_epochs
    seen = _kill_at_random_moments(csv, full, tmp_path / "run", kills=3, seed=1)
    assert seen, "no kill landed during training"
    steps = [s["step"] for s in seen]
    assert len(seen) >= 2 and steps == sorted(set(steps)), f"every resume must make progress: {seen}"


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(10))
def test_sigkill_at_random_moments_long(reference_run_8_epochs, tmp_path, seed):
    csv, full = reference_run_8_epochs
    seen = _kill_at_random_moments(csv, full, tmp_path / "run", kills=6, seed=100 + seed)
    print(f"seed {seed}: killed at {seen}")


def test_sigterm_finishes_the_step_writes_last_pt_and_the_run_resumes_exactly(tmp_path, write_tpsa_csv,
                                                                              sigterm_when):
    """SIGTERM (a batch system's time limit) or Ctrl-C from the command line: the step in
    progress ends, last.pt is written there, the status is 143, and --resume ends like an
    uninterrupted run.  Before, the run stopped at once and lost everything since the last
    checkpoint (by default: up to 30 s and the epoch in progress)."""
    csv = write_tpsa_csv(tmp_path / "tpsa300.csv")
    full, stopped = tmp_path / "full", tmp_path / "stopped"
    run_ok(train_args(csv, full))
    args = [a for a in train_args(csv, stopped) if a not in ("--checkpoint-every", "3", "--checkpoint-seconds", "0")]
    metrics = stopped / "metrics.jsonl"
    status, stderr = sigterm_when(cli(args), lambda: metrics.exists() and bool(metrics.read_text().strip()))
    assert status == 143, stderr[-2000:]
    assert "finishing this step and writing last.pt" in stderr and "Traceback" not in stderr
    state = last_state(stopped)
    assert 0 < state["step"] < 4 * STEPS_PER_EPOCH  # written where it stopped, not at step 0 (30 s rule)
    assert "stopped by a signal" in (stopped / "train.log").read_text()
    run_ok(["--resume", str(stopped), "--no-progress"])
    assert rows(stopped) == rows(full)
    assert results(stopped) == results(full)
