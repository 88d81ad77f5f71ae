"""molsepnorm._atomic.atomic_write: the whole new file or the previous one, never a torn one."""
from __future__ import annotations

import pytest

from molsepnorm._atomic import atomic_write


def test_a_finished_write_replaces_the_file(tmp_path):
    path = tmp_path / "new" / "results.json"
    with atomic_write(path) as fh:
        fh.write("é 1\n")
        assert not path.exists()  # nothing at the target until the block ends
    assert path.read_text(encoding="utf-8") == "é 1\n"
    with atomic_write(path, "wb") as fh:
        fh.write(b"2")
    assert path.read_bytes() == b"2"
    assert [p.name for p in path.parent.iterdir()] == ["results.json"]


def test_a_failed_write_keeps_the_previous_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "results.json"
    path.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_write(path) as fh:
            fh.write("half of the new")
            raise RuntimeError("killed")
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]
