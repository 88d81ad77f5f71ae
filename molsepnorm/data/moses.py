"""``moses``: the MOSES benchmark's 1.9M drug-like SMILES, an unlabelled corpus.

MOSES (Polykovskiy et al., *Molecular Sets (MOSES): A Benchmarking Platform for
Molecular Generation Models*, Frontiers in Pharmacology 2020) filtered ZINC Clean Leads
to molecules of 250-350 Da with at most 7 rotatable bonds, no charged atoms, only C N S
O F Cl Br H, and medicinal-chemistry / PAINS filters applied.  It ships three gzip CSVs
with one column, ``SMILES``:

==================  ===========  ===========================  =========================
MOSES split          molecules    part of :class:`DatasetSplits`  why
==================  ===========  ===========================  =========================
``train``            1,584,663    ``train``
``test``               176,074    ``val``                       random hold-out: same
                                                                distribution as train
``test_scaffolds``     176,225    ``test``                      Bemis-Murcko scaffolds
                                                                absent from train/test
==================  ===========  ===========================  =========================

Files are read from ``<data root>/moses/{train,test,test_scaffolds}.csv.gz``.  When they
are absent and the data root is writable they are downloaded from the MOSES repository
(``molecularsets/moses``, ``moses/dataset/data/``, stored in Git LFS and served from
GitHub's LFS media host) and each is checked against the size and sha256 recorded in that
repository's LFS pointers (:data:`FILES`) before it is kept.  The ``molsets`` 0.3.1 wheel
on PyPI holds the same three files byte for byte.

Two ways in, both streaming from the gzip files and neither featurizing eagerly:

* :func:`moses_smiles` iterates the SMILES of one split, one string at a time in flat
  memory (a pretraining corpus);
* ``load_dataset("moses")`` returns a :class:`DatasetSplits` whose parts are
  :class:`~molsepnorm.data.lazy.LazyGraphs`: the SMILES held compactly (about 95 MiB for
  all three splits) and each molecule featurized when it is read.  Featurizing all 1.9M
  molecules into a cache would take tens of minutes and gigabytes before the first
  batch, so it is never done here.  ``limit=N`` keeps the first N molecules of each split.
  The set has no targets: ``task`` is ``"unlabelled"``, ``metric`` None.
"""
from __future__ import annotations

import gzip
import hashlib
import itertools
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

import numpy as np

from molsepnorm.data.cache import ensure_source, note
from molsepnorm.data.lazy import ConcatSmiles, LazyGraphs, SmilesColumn
from molsepnorm.data.paths import PathLike, resolve_data_root
from molsepnorm.data.registry import UNLABELLED, DatasetSplits, register_dataset
from molsepnorm.errors import DatasetFormatError

FOLDER = "moses"
HEADER = "SMILES"
BASE_URL = "https://media.githubusercontent.com/media/molecularsets/moses/master/moses/dataset/data/"
"""Where the MOSES repository's Git LFS files are served (its README links its data this way)."""
DOWNLOAD_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class MosesFile:
    """One MOSES split file as published: name, size in bytes, sha256, data rows."""

    name: str
    size: int
    sha256: str
    rows: int


#: The published files, keyed by MOSES split name; size and sha256 from the Git LFS pointers of
#: ``molecularsets/moses`` (``moses/dataset/data/*.csv.gz``), which the molsets 0.3.1 wheel matches.
FILES: dict[str, MosesFile] = {
    "train": MosesFile("train.csv.gz", 10_238_967,
                       "786f0313aa6b9ba5514df685f885742a70ea8d86f1a4fa48115f7f80a634265c", 1_584_663),
    "test": MosesFile("test.csv.gz", 1_367_572,
                      "f896fbf3764f88d94670b9959e5872c600c12152a18233823e820761b7a791b2", 176_074),
    "test_scaffolds": MosesFile("test_scaffolds.csv.gz", 1_274_114,
                                "adffb2192c1bfe31ab0e13154d4af19a37dc18bdbf3cd7b4491e04405128adde", 176_225),
}
MOSES_SPLITS = tuple(FILES)
#: part of :class:`DatasetSplits` -> MOSES split
PART_OF_SPLIT = {"train": "train", "val": "test", "test": "test_scaffolds"}


def moses_folder(root: Optional[PathLike] = None) -> Path:
    """``<data root>/moses`` (see :func:`~molsepnorm.data.paths.resolve_data_root`)."""
    return resolve_data_root(root) / FOLDER


def _how_to_get(folder: Path, base_url: str) -> str:
    names = ", ".join(f.name for f in FILES.values())
    return (f"Download {names} from {base_url} (or take moses/dataset/data/*.csv.gz out of the molsets 0.3.1 "
            f"wheel on PyPI) into {folder}.")


def download_moses(folder: Path, base_url: str = BASE_URL, files: Optional[dict[str, MosesFile]] = None,
                   timeout_s: float = DOWNLOAD_TIMEOUT_S) -> None:
    """Download the split files into the existing ``folder``, each verified before it is kept.

    Each file is streamed to ``<name>.part`` and renamed only once its size and sha256
    match ``files`` (default :data:`FILES`).

    Raises:
        ValueError: a file's size or sha256 differs from the published one (the partial
            file is removed).
        OSError / urllib.error.URLError: the download itself failed.
    """
    for spec in (files or FILES).values():
        url = base_url.rstrip("/") + "/" + spec.name
        part = folder / f"{spec.name}.part"
        digest = hashlib.sha256()
        size = 0
        try:
            with urllib.request.urlopen(url, timeout=timeout_s) as response, open(part, "wb") as out:
                while block := response.read(1 << 20):
                    digest.update(block)
                    size += len(block)
                    out.write(block)
            if size != spec.size or digest.hexdigest() != spec.sha256:
                raise ValueError(f"{url}: got {size:,} bytes with sha256 {digest.hexdigest()}, expected "
                                 f"{spec.size:,} bytes with sha256 {spec.sha256}: not the published MOSES file")
            part.replace(folder / spec.name)
        finally:
            part.unlink(missing_ok=True)


def ensure_moses(root: Optional[PathLike] = None, download: bool = True, base_url: str = BASE_URL) -> Path:
    """The MOSES folder of the data root, downloading the files into it when it is absent or
    empty and the data root is writable.

    Raises:
        DatasetNotFoundError: files missing and not downloadable (the folder holds some of
            them, ``download=False``, a read-only data root, no network, a bad checksum).
    """
    data_root = resolve_data_root(root)
    folder = data_root / FOLDER

    def fetch(scratch: Path) -> Path:
        target = scratch / FOLDER
        target.mkdir()
        download_moses(target, base_url)
        return target

    ensure_source(folder, [f.name for f in FILES.values()], data_root=data_root, url=base_url,
                  how_to_get=_how_to_get(folder, base_url), fetch=fetch, download=download,
                  partial_what="the MOSES files",
                  missing=lambda listing: f"MOSES not found: {folder} is missing ({listing})",
                  failed=f"MOSES is missing from {folder} and downloading it failed",
                  timeout_s=DOWNLOAD_TIMEOUT_S)
    return folder


def _split_file(split: str, folder: Path) -> Path:
    if split not in FILES:
        raise ValueError(f"unknown MOSES split {split!r}; use one of {', '.join(MOSES_SPLITS)} "
                         f"(load_dataset('moses') maps them to train / val / test)")
    return folder / FILES[split].name


def _check_header(line: bytes, path: Path) -> None:
    text = line.decode("utf-8-sig", errors="replace").strip()
    if text != HEADER:
        raise DatasetFormatError(f"{path}, row 1: expected the header {HEADER!r} (one column of SMILES), "
                                 f"got {text[:80]!r}")


def moses_smiles(split: str = "train", root: Optional[PathLike] = None, limit: Optional[int] = None,
                 download: bool = True) -> Iterator[str]:
    """The SMILES of one MOSES split, streamed from its gzip file in file order.

    Args:
        split: ``"train"``, ``"test"`` or ``"test_scaffolds"`` (MOSES's names).
        root: data root (default ``$MOLSEPNORM_DATA``, else ``<cache>/data``).
        limit: stop after this many SMILES (None: all).
        download: fetch missing files into a writable data root.

    Yields:
        SMILES strings; line ``k + 2`` of the file is the ``k``-th (0-based) one.

    Raises:
        DatasetFormatError: a wrong header, or a blank line (naming file and row).
    """
    _check_limit(limit)
    path = _split_file(split, ensure_moses(root, download))
    with gzip.open(path, "rb") as handle:
        header = handle.readline()
        _check_header(header, path)
        for row, line in enumerate(itertools.islice(handle, limit), start=2):
            text = line.decode("utf-8").strip()
            if not text:
                raise DatasetFormatError(f"{path}, row {row}: blank line where a SMILES was expected; "
                                         f"the file is damaged")
            yield text


def read_split(path: Path, limit: Optional[int] = None) -> SmilesColumn:
    """One split file as a compact :class:`SmilesColumn` (the first ``limit`` rows)."""
    _check_limit(limit)
    with gzip.open(path, "rb") as handle:
        header = handle.readline()
        _check_header(header, path)
        body = handle.read() if limit is None else b"".join(itertools.islice(handle, limit))
    return SmilesColumn.from_lines(body, str(path), first_line=2)


def _check_limit(limit: Optional[int]) -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be a positive integer or None, got {limit!r}")


@register_dataset("moses")
def load_moses(root: Path, vocab: str = "ogb", limit: Optional[int] = None, max_atoms: Optional[int] = None,
               download: bool = True, url: str = BASE_URL) -> DatasetSplits:
    """MOSES as an unlabelled :class:`DatasetSplits` whose graphs are featurized on access.

    Args:
        root: the data root (holding ``moses/``).
        vocab: featurizer vocabulary of the graphs, ``"ogb"`` or ``"zinc"``.
        limit: keep only the first ``limit`` molecules of each split (None: all 1.9M).
        max_atoms: molecules over this many heavy atoms fail when read (None: no limit).
        download: fetch missing files into a writable data root.
        url: where to download them from (a mirror of :data:`BASE_URL`); the files are
            checked against :data:`FILES` all the same.
    """
    if vocab not in ("ogb", "zinc"):
        raise ValueError(f"unknown vocab {vocab!r}; use 'ogb' or 'zinc'")
    folder = ensure_moses(root, download, url)
    columns = {part: read_split(_split_file(split, folder), limit) for part, split in PART_OF_SPLIT.items()}
    counts = {part: len(c) for part, c in columns.items()}
    offsets = np.cumsum([0, *counts.values()])
    indices = {part: np.arange(offsets[k], offsets[k + 1], dtype=np.int64) for k, part in enumerate(columns)}
    mib = sum(c.nbytes for c in columns.values()) / 2**20
    if limit is None:
        note(f"moses: {sum(counts.values()):,} SMILES held in {mib:.0f} MiB; graphs are featurized when read, "
             f"never cached (limit=N keeps the first N of each split)")
    return DatasetSplits(
        name="moses",
        train=LazyGraphs(columns["train"], vocab, max_atoms),
        val=LazyGraphs(columns["val"], vocab, max_atoms),
        test=LazyGraphs(columns["test"], vocab, max_atoms),
        task=UNLABELLED, target_names=[], vocab=vocab, metric=None, split_indices=indices, source=folder,
        cache_dir=None, smiles=ConcatSmiles(list(columns.values())),
        info={"moses_split_of": dict(PART_OF_SPLIT), "limit": limit, "featurized": "on access, not cached",
              "smiles_mib": round(mib, 1)},
    )

