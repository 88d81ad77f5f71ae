"""Where data sets are read from and where processed caches are written.

Data root (raw data, never processed in place; written to only to download a data set
it lacks, and only when writable):  ``data_root`` argument / ``--data-root``, else the
``MOLSEPNORM_DATA`` environment variable, else ``<cache>/data`` where the official
loaders download on a machine with internet.

Cache root (writable):  ``MOLSEPNORM_CACHE``, else ``$XDG_CACHE_HOME/molsepnorm``, else
``~/.cache/molsepnorm``.  Processed data sets live under ``<cache>/processed/<key>/``
where the key names the data set, the featurizer vocabulary and the featurizer and
structural-encoding versions, so a change of either never reuses a stale cache.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional, Union

PathLike = Union[str, os.PathLike]


def cache_root() -> Path:
    """The writable cache directory of molsepnorm (created on demand)."""
    env = os.environ.get("MOLSEPNORM_CACHE")
    if env:
        root = Path(env).expanduser()
    else:
        xdg = os.environ.get("XDG_CACHE_HOME")
        root = (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "molsepnorm"
    root.mkdir(parents=True, exist_ok=True)
    return root


def default_data_root() -> Path:
    """``<cache>/data``: where official loaders download when no data root is given."""
    return cache_root() / "data"


def resolve_data_root(data_root: Optional[PathLike] = None) -> Path:
    """The data root to read raw data sets from: argument, ``MOLSEPNORM_DATA``, default."""
    if data_root is not None:
        return Path(data_root).expanduser().resolve()
    env = os.environ.get("MOLSEPNORM_DATA")
    if env:
        return Path(env).expanduser().resolve()
    return default_data_root()


def processed_root() -> Path:
    """``<cache>/processed``: the parent of every processed data set cache (created on demand)."""
    path = cache_root() / "processed"
    path.mkdir(parents=True, exist_ok=True)
    return path


def is_writable_dir(path: PathLike) -> bool:
    """Whether ``path`` (or, if it does not exist yet, its nearest existing ancestor) may be written.

    Decided from metadata only, never by creating a probe file (the folder may be a
    read-only source).  A folder counts as read-only when its file system is mounted
    read-only, when ``os.access`` denies writing, or when its mode has no write bit at
    all: root passes every ``os.access`` check, but a ``dr-xr-xr-x`` data folder is
    read-only by intent.
    """
    probe = Path(path)
    while not probe.exists():
        if probe.parent == probe:
            return False
        probe = probe.parent
    if not probe.is_dir():
        return False
    try:
        if os.statvfs(probe).f_flag & getattr(os, "ST_RDONLY", 1):
            return False
    except (OSError, AttributeError):  # pragma: no cover - no statvfs (Windows)
        pass
    if not os.access(probe, os.W_OK):
        return False
    return bool(probe.stat().st_mode & 0o222)
