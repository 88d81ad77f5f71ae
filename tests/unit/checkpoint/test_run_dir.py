"""Run directory: refuses to overwrite a run, keeps metrics rows, prints a summary table."""
from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from molsepnorm.checkpoint.run_dir import RunDir, RunDirError
from molsepnorm.inference.metrics import summary_table


def test_create_refuses_a_directory_that_holds_a_run(tmp_path):
    rd = RunDir(tmp_path / "run")
    rd.create()
    rd.append_metrics({"epoch": 1, "val_mae": 0.5})
    with pytest.raises(RunDirError, match=r"--resume .*run; in Python, resume\('.*run'\)\), or choose another run "
                                          r"directory \(--out; out=\)"):
        RunDir(tmp_path / "run").create()


def test_metrics_rows_csv_and_truncation(tmp_path):
    rd = RunDir(tmp_path)
    rd.create()
    for epoch in (1, 2, 3):
        rd.append_metrics({"epoch": epoch, "train_loss": 1.0 / epoch, "val_mae": float("nan") if epoch == 2 else 0.1})
    rows = rd.read_metrics()
    assert [r["epoch"] for r in rows] == [1, 2, 3]
    assert rows[1]["val_mae"] is None  # JSON has no NaN
    with open(rd.metrics_csv, newline="") as fh:
        assert [r["epoch"] for r in csv.DictReader(fh)] == ["1", "2", "3"]
    with open(rd.metrics_jsonl, "a") as fh:
        fh.write('{"epoch": 4, "val_')  # a row torn by a kill
    assert len(rd.read_metrics()) == 3
    rd.truncate_metrics(2)
    assert [r["epoch"] for r in rd.read_metrics()] == [1, 2]


def test_split_file_records_indices(tmp_path):
    rd = RunDir(tmp_path)
    rd.write_split({"train": np.array([3, 1]), "val": np.array([0]), "test": np.array([2])}, {"seed": 0})
    data = json.loads(rd.split.read_text())
    assert data["indices"]["train"] == [3, 1] and data["sizes"]["test"] == 1


def test_check_resumable_names_what_is_missing(tmp_path):
    with pytest.raises(RunDirError, match="does not exist"):
        RunDir(tmp_path / "none").check_resumable()
    (tmp_path / "config.yaml").write_text("{}")
    with pytest.raises(RunDirError, match="last.pt"):
        RunDir(tmp_path).check_resumable()


def test_summary_table():
    table = summary_table({"val": {"mae": 0.12345, "rmse": 0.2, "mae/x": 1.0}, "test": {"mae": 0.13, "rmse": float("nan")}})
    lines = table.splitlines()
    assert lines[0].split() == ["split", "mae", "rmse"]
    assert lines[1].split() == ["val", "0.1235", "0.2000"]
    assert lines[2].split() == ["test", "0.1300", "nan"]
