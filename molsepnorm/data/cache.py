"""Processed caches: keys, locking, atomic builds, links to raw files, and what gets cached.

A processed data set lives in ``<cache>/processed/<key>/`` and counts as built only when
it holds the marker file :data:`COMPLETE` (JSON describing the build).  It is built by
:func:`build_once`:

1. take ``filelock.FileLock(<cache>/processed/.<key>.lock)``, so two processes (pytest-xdist
   workers, two training runs) never build the same cache at once; the second one waits
   and then finds the cache ready;
2. build into a fresh temporary folder ``<cache>/processed/.<key>.building-XXXX``;
3. write the marker, then ``os.replace`` the folder onto ``<key>``.

A crash at any point leaves at most a ``.building`` folder (removed by the next build)
and never a ``<key>`` folder that loads as complete.  Raw files are never copied into or
written next to the source: :func:`link_tree` mirrors them into the cache with symlinks.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import json
import logging
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Optional, Sequence
from urllib.parse import urlparse

from filelock import FileLock, Timeout

from molsepnorm.data.paths import PathLike, processed_root

if TYPE_CHECKING:  # torch and PyG are imported on use: locking and keys stay light
    from torch_geometric.data import Data

log = logging.getLogger("molsepnorm.data")

COMPLETE = "COMPLETE.json"
"""Marker file of a finished cache; written last, inside the temporary build folder."""


def note(message: str) -> None:
    """One line for the user: logged, and printed to stderr when logging is not configured."""
    log.info(message)
    if not logging.getLogger().hasHandlers() and not log.hasHandlers():
        print(f"molsepnorm: {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def third_party_bars(progress: Optional[bool], *modules: str) -> Iterator[None]:
    """Silence the tqdm bars of PyG / OGB modules while ``progress`` is False.

    Those loops (``from tqdm import tqdm`` at module level) take no option to turn their
    bars off, so the module's ``tqdm`` name is swapped for a disabled one for the
    duration of a build.  With ``progress`` None or True they are left as they are.
    """
    if progress is not False:
        yield
        return
    from tqdm import tqdm

    saved = []
    for name in modules:
        module = importlib.import_module(name)
        saved.append((module, module.tqdm))
        module.tqdm = functools.partial(tqdm, disable=True)
    try:
        yield
    finally:
        for module, original in saved:
            module.tqdm = original


# --------------------------------------------------------------------------- keys


def file_sha256(path: PathLike, chunk: int = 1 << 20) -> str:
    """sha256 of a file's bytes (hex)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def files_fingerprint(paths: Iterable[PathLike]) -> str:
    """A cheap fingerprint of raw files: resolved path, size and mtime of each (hex, 16 chars).

    Used for the large benchmark folders, where hashing every byte on every load would
    cost more than the load itself; a file replaced in place changes size or mtime.
    """
    digest = hashlib.sha256()
    for path in sorted(Path(p).resolve() for p in paths):
        stat = path.stat()
        digest.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def cache_key(name: str, vocab: str, **parts: Any) -> str:
    """``<name>-<vocab>-f<featurizer version>-e<encoding version>-<hash of parts>``.

    ``parts`` is everything else the cached content depends on (source fingerprint,
    options); it must be JSON-serializable.  The versions come from
    :data:`molsepnorm.chem.FEATURIZER_VERSION` and
    :data:`molsepnorm.encodings.ENCODING_VERSION`, so a change of either never reuses a
    stale cache.
    """
    from molsepnorm.chem import FEATURIZER_VERSION
    from molsepnorm.encodings import ENCODING_VERSION

    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:60]
    return f"{safe}-{vocab}-f{FEATURIZER_VERSION}-e{ENCODING_VERSION}-{hashlib.sha256(blob).hexdigest()[:12]}"


# --------------------------------------------------------------------------- building


def cache_dir_for(key: str) -> Path:
    """``<cache>/processed/<key>`` (not created)."""
    return processed_root() / key


def is_complete(path: Path) -> bool:
    """Whether ``path`` is a finished cache (holds the :data:`COMPLETE` marker)."""
    return (path / COMPLETE).is_file()


def build_once(key: str, build: Callable[[Path], Optional[dict]], what: str) -> Path:
    """The folder of cache ``key``, built by ``build(tmp_dir)`` unless already complete.

    Args:
        key: cache key, see :func:`cache_key`.
        build: fills the empty folder it is given; may return a JSON-serializable dict
            stored in the marker.  If it raises, nothing is left behind.
        what: a short description for the one-line "building" note.

    Returns:
        ``<cache>/processed/<key>``, complete.
    """
    final = cache_dir_for(key)
    if is_complete(final):
        return final
    lock = FileLock(str(final.parent / f".{key}.lock"))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        note(f"waiting for another process that is building {what} ({final})")
        lock.acquire()
    try:
        if is_complete(final):
            return final
        for stale in final.parent.glob(f".{key}.building-*"):  # left by a crashed build
            shutil.rmtree(stale, ignore_errors=True)
        note(f"building {what} once into {final} (this can take a while)")
        start = time.perf_counter()
        tmp = Path(tempfile.mkdtemp(prefix=f".{key}.building-", dir=final.parent))
        try:
            info = build(tmp) or {}
            seconds = time.perf_counter() - start
            marker = {"key": key, "what": what, "built_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
                      "seconds": round(seconds, 2), **info}
            (tmp / COMPLETE).write_text(json.dumps(marker, indent=2, default=str))
            tmp.chmod(0o777 & ~_umask())  # mkdtemp made it 0700; a finished cache is as shareable as any folder
            if final.exists() or final.is_symlink():  # an incomplete leftover
                shutil.rmtree(final, ignore_errors=True)
            os.replace(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        note(f"built {what} in {seconds:.1f} s")
        return final
    finally:
        lock.release()


def remove_cache(path: Path) -> None:
    """Delete a processed cache folder and its lock file, waiting for a build in progress."""
    lock = path.parent / f".{path.name}.lock"
    with FileLock(str(lock)):
        shutil.rmtree(path, ignore_errors=True)
    lock.unlink(missing_ok=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def read_marker(path: Path) -> dict:
    """The JSON stored in a complete cache's marker."""
    return json.loads((path / COMPLETE).read_text())


def link_tree(source: Path, target: Path, names: Optional[Iterable[str]] = None) -> None:
    """Mirror ``source`` into ``target``: real folders, a symlink per file.

    Per-file links (not one link per folder) keep every write a loader might make inside
    ``target`` (``processed/`` next to ``raw/``, a download's ``rm raw``) away from the
    source.  Where symlinks are impossible (some Windows and network file systems) the
    file is copied.

    Args:
        source: existing folder.
        target: folder to create or fill.
        names: top-level entries of ``source`` to mirror (default: all).
    """
    target.mkdir(parents=True, exist_ok=True)
    entries = [source / n for n in names] if names is not None else sorted(source.iterdir())
    for entry in entries:
        if not entry.exists():
            continue
        dest = target / entry.name
        if entry.is_dir():
            link_tree(entry, dest)
        else:
            try:
                os.symlink(entry.resolve(), dest)
            except OSError:
                shutil.copy2(entry, dest)


# --------------------------------------------------------------------------- network


def url_reachable(url: str, timeout: float = 3.0) -> bool:
    """Whether a TCP connection to ``url``'s host opens within ``timeout`` seconds.

    Name resolution has no timeout of its own, so the attempt runs in a daemon thread
    that is abandoned when the time is up: an offline machine answers in ``timeout``
    seconds at most instead of hanging inside a download.
    """
    parsed = urlparse(url)
    host = parsed.hostname
    if not host:
        return False
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    result: list[bool] = []

    def attempt() -> None:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                result.append(True)
        except OSError:
            result.append(False)

    thread = threading.Thread(target=attempt, daemon=True)
    thread.start()
    thread.join(timeout)
    return bool(result and result[0])


# --------------------------------------------------------------------------- what is cached


class GraphormerPreTransform:
    """The ``pre_transform`` of every data set: targets to ``[1, T]`` float32, then encodings.

    Applied once per molecule before caching.  It stores ``num_nodes`` explicitly, turns
    ``y`` into a float32 row (``[1]`` from PyG's ZINC, ``[1, 1]`` long from OGB), and adds
    ``degree``, ``spd`` and ``path_next`` through
    :class:`molsepnorm.encodings.GraphormerEncoding`.  Its ``repr`` names the encoding
    version, so PyG's check of the cached ``pre_transform.pt`` stays quiet across runs.

    Args:
        bar: optional tqdm bar advanced once per molecule, for loops (OGB's) that show
            none while pre-transforming; not part of the repr.
    """

    def __init__(self, bar: Any = None) -> None:
        from molsepnorm.encodings import GraphormerEncoding

        self.encoding = GraphormerEncoding()
        self.bar = bar

    def __call__(self, data: "Data") -> "Data":
        import torch

        if data.x is not None:
            data.num_nodes = int(data.x.size(0))
        if getattr(data, "y", None) is not None:
            data.y = torch.as_tensor(data.y).to(torch.float32).reshape(1, -1)
        data = self.encoding(data)
        if self.bar is not None:
            self.bar.update(1)
        return data

    def __repr__(self) -> str:
        from molsepnorm.encodings import ENCODING_VERSION

        return f"GraphormerPreTransform(y=float32[1,T], encoding=GraphormerEncoding v{ENCODING_VERSION})"


def ensure_source(
    target: Path,
    required: Sequence[str],
    *,
    data_root: Path,
    url: str,
    how_to_get: str,
    fetch: Callable[[Path], Path],
    download: bool = True,
    partial_what: str,
    missing: Callable[[str], str],
    failed: str,
    timeout_s: float = 60.0,
) -> None:
    """Make sure ``target`` holds every file of ``required``, downloading only into an empty
    folder of a writable data root.

    Args:
        target: the source folder of a data set (never written when it holds anything).
        required: paths relative to ``target`` the official loader reads.
        data_root: the folder a download would write into (checked for writability).
        url: where the official loader downloads from (checked for reachability first).
        how_to_get: the sentence telling a user how to put the files there by hand.
        fetch: downloads into the scratch folder it is given and returns the folder that
            becomes ``target`` (the official loader's own download code).
        partial_what, missing, failed: the wording of the errors: "<target> holds part of
            <partial_what>", ``missing(listing)`` opens the not-found messages, ``failed``
            opens the message of a failed download.
        timeout_s: socket timeout during the download (urllib in PyG/OGB has none).

    Raises:
        DatasetNotFoundError: files are missing and cannot be downloaded: the folder holds
            some of them (never touched then), downloads are off, the data root is not
            writable, or the download host cannot be reached.
    """
    from molsepnorm.data.paths import is_writable_dir
    from molsepnorm.errors import DatasetNotFoundError

    absent = [name for name in required if not (target / name).is_file()]
    if not absent:
        return
    listing = ", ".join(absent)
    if target.is_dir() and any(target.iterdir()):
        raise DatasetNotFoundError(
            f"{target} holds part of {partial_what}; missing: {listing}. Nothing is downloaded into a folder "
            f"that holds part of a data set. {how_to_get}")
    if not download:
        raise DatasetNotFoundError(f"{missing(listing)} and download=False. {how_to_get}")
    if not is_writable_dir(data_root):
        raise DatasetNotFoundError(f"{missing(listing)} and the data root {data_root} is not writable, so the "
                                   f"files cannot be downloaded there. {how_to_get}")
    if not url_reachable(url):
        raise DatasetNotFoundError(f"{missing(listing)} and the download host of {url} cannot be reached "
                                   f"(no network?). {how_to_get}")
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}.download-", dir=target.parent))
    note(f"downloading {partial_what} from {url} into {target}")
    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(timeout_s)
    try:
        fetched = fetch(scratch)
        if target.exists():
            target.rmdir()  # empty: checked above
        os.replace(fetched, target)
    except Exception as err:
        raise DatasetNotFoundError(f"{failed} ({err}). {how_to_get}") from err
    finally:
        socket.setdefaulttimeout(previous)
        shutil.rmtree(scratch, ignore_errors=True)
