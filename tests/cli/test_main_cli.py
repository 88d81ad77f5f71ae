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
