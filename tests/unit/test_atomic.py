"""molsepnorm._atomic.atomic_write: the whole new file or the previous one, never a torn one."""
from __future__ import annotations

import os

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


def test_a_link_is_followed_and_the_files_mode_kept(tmp_path):
    real = tmp_path / "real.csv"
    real.write_text("old")
    real.chmod(0o640)
    link = tmp_path / "link.csv"
    link.symlink_to(real)
    with atomic_write(link) as fh:
        fh.write("new")
    assert link.is_symlink() and real.read_text() == "new"
    assert real.stat().st_mode & 0o777 == 0o640
    new = tmp_path / "new.csv"
    with atomic_write(new) as fh:
        fh.write("x")
    mask = os.umask(0)
    os.umask(mask)
    assert new.stat().st_mode & 0o777 == 0o666 & ~mask  # what any new file gets


def test_writers_never_share_a_temporary_and_a_users_tmp_file_is_left_alone(tmp_path):
    from molsepnorm._atomic import AtomicFile

    path = tmp_path / "out.csv"
    (tmp_path / "out.csv.tmp").write_text("the user's own")
    first, second = AtomicFile(path), AtomicFile(path)
    assert first.tmp != second.tmp and first.tmp.name.startswith(".out.csv.")
    first.handle.write("first")
    second.handle.write("second")
    second.commit()
    first.abort()
    assert path.read_text() == "second" and (tmp_path / "out.csv.tmp").read_text() == "the user's own"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv", "out.csv.tmp"]


def test_a_run_directorys_files_use_a_fixed_temporary_that_resume_can_find(tmp_path):
    from molsepnorm._atomic import AtomicFile

    target = AtomicFile(tmp_path / "last.pt", "wb", fixed_temporary=True)
    assert target.tmp == tmp_path / "last.pt.tmp" and target.tmp.exists()
    target.abort()
    assert not list(tmp_path.iterdir())


def test_only_whole_writes_and_a_pipe_is_written_in_place(tmp_path):
    import threading

    from molsepnorm._atomic import AtomicFile

    with pytest.raises(ValueError, match="mode must be one of"):
        AtomicFile(tmp_path / "log.txt", "a")
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    received = []
    reader = threading.Thread(target=lambda: received.append(open(pipe).read()), daemon=True)
    reader.start()
    with atomic_write(pipe) as fh:
        fh.write("through the pipe")
    reader.join(timeout=10)
    assert received == ["through the pipe"]
    assert pipe.is_fifo()  # not replaced by a regular file


def test_a_rename_that_fails_keeps_the_previous_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "out.csv"
    path.write_text("old")

    def full_disk(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    for fixed in (False, True):
        with pytest.raises(OSError, match="No space"):
            with atomic_write(path, fixed_temporary=fixed) as fh:
                fh.write("new")
        assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["out.csv"]


def test_a_torn_temporary_of_a_killed_run_is_replaced_whatever_its_mode(tmp_path):
    torn = tmp_path / "last.pt.tmp"
    torn.write_bytes(b"half")
    torn.chmod(0o444)
    with atomic_write(tmp_path / "last.pt", "wb", fixed_temporary=True) as fh:
        fh.write(b"whole")
    assert (tmp_path / "last.pt").read_bytes() == b"whole" and not torn.exists()
