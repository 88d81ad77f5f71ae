"""The ``molsepnorm`` command itself: help, version, and the ``prepare`` verb."""
from __future__ import annotations

import subprocess
import sys

from click.testing import CliRunner

from molsepnorm.cli.main import cli
from molsepnorm.version import __version__


def test_console_script_help_and_version():
    # the installed entry point, as a user runs it
    out = subprocess.run([sys.executable, "-m", "molsepnorm", "--help"], capture_output=True, text=True, check=True)
    assert "prepare" in out.stdout and "SepNorm" in out.stdout
    out = subprocess.run([sys.executable, "-m", "molsepnorm", "--version"], capture_output=True, text=True, check=True)
    assert __version__ in out.stdout


def test_prepare_prints_splits_and_padding():
    result = CliRunner().invoke(cli, ["prepare", "--dataset", "nci-tpsa"])
    assert result.exit_code == 0, result.output
    assert "nci-tpsa: regression" in result.output
    assert "train 3,993  val 499  test 499" in result.output
    assert "size-bucketed" in result.output


def test_prepare_unknown_dataset_is_a_clear_error():
    result = CliRunner().invoke(cli, ["prepare", "--dataset", "molhvi"])
    assert result.exit_code != 0
    assert "Did you mean 'molhiv'" in result.output
    assert "Traceback" not in result.output


def test_a_command_freezes_the_collector_at_exit_and_loses_no_output(tmp_path):
    """Every verb registers gc.freeze at exit (the interpreter's last collections are
    skipped); the files a command writes and its log are complete all the same."""
    import atexit
    import gc

    registered = []
    original = atexit.register
    atexit.register = lambda fn, *a, **k: registered.append(fn) or fn  # type: ignore[assignment]
    try:
        result = CliRunner().invoke(cli, ["models"])
    finally:
        atexit.register = original  # type: ignore[assignment]
    assert result.exit_code == 0, result.output
    assert registered.count(gc.freeze) == 1

    smi = tmp_path / "in.smi"
    smi.write_text("".join(f"{'C' * (i % 9 + 1)}O m{i}\n" for i in range(300)))
    out = tmp_path / "out.csv"
    done = subprocess.run([sys.executable, "-m", "molsepnorm", "predict", str(smi), "--out", str(out), "--threads", "1",
                           "--no-progress", "--preview", "0"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    import pandas as pd

    frame = pd.read_csv(out)
    assert frame["id"].tolist() == [f"m{i}" for i in range(300)]
    assert frame["error"].isna().all() and frame["HIV_active"].between(0, 1).all()  # the default model


def test_a_warning_reads_as_one_message_without_python_source_lines(tmp_path):
    import warnings

    table = tmp_path / "mols.csv"
    table.write_text("smiles,y\nCCO,1.0\nC1CC,2.0\n" + "".join(f"{'C' * n}O,{n}.5\n" for n in range(1, 30)))
    before = warnings.showwarning
    result = CliRunner().invoke(cli, ["prepare", "--dataset", str(table), "--on-invalid", "skip"])
    assert result.exit_code == 0, result.output
    assert f"Warning: {table}: 1 row(s) left out of the data set" in result.output
    assert "row 3: 'C1CC': SMILES parse error" in result.output
    assert "UserWarning" not in result.output and ".py:" not in result.output  # no file, line or source
    assert warnings.showwarning is before  # the command's format ends with it
