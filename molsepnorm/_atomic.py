"""Writing a file so that a crash never leaves half of it: :func:`atomic_write`."""
from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import IO, Any, Iterator, Union

PathLike = Union[str, os.PathLike]


@contextlib.contextmanager
def atomic_write(path: PathLike, mode: str = "w", **open_kwargs: Any) -> Iterator[IO[Any]]:
    """Open ``<path>.tmp`` for writing; when the block ends without an error, flush, fsync
    and rename it over ``path`` (``os.replace``: atomic on POSIX and Windows), else remove
    it.  A reader sees the previous file or the whole new one, never a torn one.  The
    folder is created if missing.  Text modes default to UTF-8.

        with atomic_write("results.json") as fh:
            fh.write(text)
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    if "b" not in mode:
        open_kwargs.setdefault("encoding", "utf-8")
    try:
        with open(tmp, mode, **open_kwargs) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
