"""Writing a file so that a crash never leaves half of it: :class:`AtomicFile` and
:func:`atomic_write`, used for every output the package writes (checkpoints, run
directories, ``predict``'s tables, figures, ``evaluate``'s files).

The bytes go to a temporary file in the target's folder, are flushed and fsynced, and the
temporary file is renamed over the target (``os.replace``: atomic on POSIX and Windows), then the folder is
fsynced so that the rename survives a power cut.  A reader sees the previous file or the
whole new one, never a torn one.  A symbolic link is followed (the file it points to is
replaced, the link stays), except in a run directory; an existing file keeps its permission
bits (set when the write is complete); a new one gets those of any new file (0666 less the
umask); a target that exists and is not a regular file (``/dev/stdout``, a named pipe) is
written in place, since it cannot be replaced.

The temporary file is hidden and unique (``.<name>.<random>.part``: two writers never share
one, and a user's own file is never touched), except in a run directory and for checkpoints
(``fixed_temporary``): there it is ``<name>.tmp``, so that a resumed run knows what a killed
one left half-written and removes it (:meth:`molsepnorm.checkpoint.run_dir.RunDir.remove_stale_temporaries`);
one process writes those files.
"""
from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path
from typing import IO, Any, Iterator, Union

PathLike = Union[str, os.PathLike]
MODES = ("w", "wb")


class AtomicFile:
    """An output file that appears at ``target`` on :meth:`commit` and never on :meth:`abort`.

    Args:
        target: the file to write (its folder is created if missing).
        mode: ``"w"`` (text; UTF-8 unless ``encoding`` is given) or ``"wb"``.
        fixed_temporary: write to ``<target>.tmp`` instead of a unique hidden name (a run
            directory's files and checkpoints; see the module's docstring).
        open_kwargs: passed to :func:`open` (``encoding``, ``newline``).

    Attributes:
        handle: the open file to write to.
    """

    def __init__(self, target: PathLike, mode: str = "w", fixed_temporary: bool = False, **open_kwargs: Any) -> None:
        if mode not in MODES:
            raise ValueError(f"an atomic file is written whole: mode must be one of {MODES}, got {mode!r}")
        if "b" not in mode:
            open_kwargs.setdefault("encoding", "utf-8")
        path = Path(target)
        # a user's link to their file is followed; a run directory's temporary stays in the run directory
        self.target = Path(os.path.realpath(path)) if path.is_symlink() and not fixed_temporary else path
        self.tmp: Any = None
        if self.target.exists() and not self.target.is_file() and not self.target.is_symlink():
            self.handle: IO[Any] = open(self.target, mode, **open_kwargs)  # a device or a pipe: nothing to rename over
            return
        self.target.parent.mkdir(parents=True, exist_ok=True)
        create = mode.replace("w", "x")  # created here, never reused: mode 0666 less the umask, as any new file
        if fixed_temporary:
            self.tmp = self.target.with_name(self.target.name + ".tmp")
            self.tmp.unlink(missing_ok=True)  # a torn one (a killed run's), whatever its mode
            self.handle = open(self.tmp, create, **open_kwargs)
            return
        for _ in range(100):  # .<name>.<random>.part
            self.tmp = self.target.with_name(f".{self.target.name}.{secrets.token_hex(4)}.part")
            try:
                self.handle = open(self.tmp, create, **open_kwargs)
                return
            except FileExistsError:
                continue
        raise FileExistsError(f"no free temporary name beside {self.target}")

    def commit(self) -> Path:
        """Flush, fsync and rename the temporary file over the target (which keeps its
        permission bits); return the target."""
        self.handle.flush()
        if self.tmp is None:
            self.handle.close()
            return self.target
        os.fsync(self.handle.fileno())
        self.handle.close()
        try:
            if self.target.exists():
                os.chmod(self.tmp, stat.S_IMODE(os.stat(self.target).st_mode) & 0o777)
        except OSError:  # a file system without modes (some network mounts): the new file keeps its own
            pass
        os.replace(self.tmp, self.target)
        fsync_dir(self.target.parent)
        return self.target

    def abort(self) -> None:
        """Close and remove the temporary file; the target is left as it was."""
        if not self.handle.closed:
            self.handle.close()
        if self.tmp is not None:
            self.tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def atomic_write(path: PathLike, mode: str = "w", fixed_temporary: bool = False,
                 **open_kwargs: Any) -> Iterator[IO[Any]]:
    """An :class:`AtomicFile` as a ``with`` block: committed when the block ends, aborted
    when it raises.

        with atomic_write("results.json") as fh:
            fh.write(text)
    """
    target = AtomicFile(path, mode, fixed_temporary, **open_kwargs)
    try:
        yield target.handle
        target.commit()
    except BaseException:
        target.abort()
        raise


def fsync_dir(directory: PathLike) -> None:
    """Make a rename in ``directory`` durable (POSIX); a no-op where folders cannot be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
