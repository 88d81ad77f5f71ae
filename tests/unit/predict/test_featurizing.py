"""``resolve_workers``: how many featurization processes ``--workers auto`` starts."""
from __future__ import annotations

from pathlib import Path

import pytest

from molsepnorm.predict import featurizing
from molsepnorm.predict.featurizing import AUTO_WORKERS_MIN_BYTES, resolve_workers


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    large, small = tmp_path / "large.smi", tmp_path / "small.smi"
    line = b"CC(=O)Oc1ccccc1C(=O)O aspirin\n"
    large.write_bytes(line * (AUTO_WORKERS_MIN_BYTES // len(line) + 1))
    small.write_bytes(line * 10)
    return large, small


def test_auto_starts_one_worker_for_a_large_file_when_two_cpus_are_usable(files, monkeypatch):
    large, small = files
    monkeypatch.setattr(featurizing, "usable_cpus", lambda: 2)
    assert resolve_workers("auto", large) == 1
    assert resolve_workers("auto", str(large)) == 1
    assert resolve_workers("auto", small) == 0  # about one chunk: nothing to overlap
    assert resolve_workers("auto", "-") == 0 and resolve_workers("auto", None) == 0  # standard input, no file
    assert resolve_workers("auto", large.with_name("missing.smi")) == 0  # the reader reports the missing file
    monkeypatch.setattr(featurizing, "usable_cpus", lambda: 1)
    assert resolve_workers("auto", large) == 0  # one CPU: the model and featurization would take turns anyway


@pytest.mark.parametrize("given", [0, 1, 3])
def test_a_number_is_taken_as_given(files, given):
    assert resolve_workers(given, files[1]) == given


@pytest.mark.parametrize("bad", [-1, "two", 1.5, True, None])
def test_anything_else_is_refused(bad):
    with pytest.raises(ValueError, match="workers must be 'auto' or a number >= 0"):
        resolve_workers(bad)
