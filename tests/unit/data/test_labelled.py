"""What the CSV and SDF readers share: a target's value, the split option, the data file."""
from __future__ import annotations

import math

import pytest

from molsepnorm.data.labelled import data_file, parse_split, parse_target
from molsepnorm.errors import DatasetNotFoundError


@pytest.mark.parametrize("text", ["", "  ", "NA", "nan", "None", " null ", "n/a"])
def test_missing_tokens_are_missing(text):
    assert parse_target(text) is None


@pytest.mark.parametrize("text", ["abc", "inf", "-Infinity", "1,5", "-nan"])
def test_anything_but_a_finite_number_is_nan(text):
    assert math.isnan(parse_target(text))


def test_numbers_are_read():
    assert parse_target(" 12.5 ") == 12.5 and parse_target("-3e2") == -300.0


def test_split_options():
    assert parse_split("Random") == ("random", None) and parse_split("SCAFFOLD") == ("scaffold", None)
    assert parse_split("Column:Fold") == ("column", "Fold")
    assert parse_split("fold") == (None, "fold")


def test_data_file(tmp_path):
    with pytest.raises(DatasetNotFoundError, match="missing.csv does not exist"):
        data_file(tmp_path / "missing.csv")
    (tmp_path / "a.csv").write_text("smiles\n")
    assert data_file(tmp_path / "." / "a.csv") == (tmp_path / "a.csv").resolve()
