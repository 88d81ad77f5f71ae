"""ZINC through PyG's own ``torch_geometric.datasets.ZINC``: ``zinc-subset`` and ``zinc`` (full).

Raw data: ``<data root>/ZINC/raw/{train,val,test}.pickle`` and ``{train,val,test}.index``
(PyG's raw layout).  PyG writes ``subset/processed`` / ``full/processed`` under its
``root``, so ``root`` is a cache folder ``<cache>/processed/<key>/`` whose ``raw/`` holds
symlinks to the source files; the source is never written to.

Full ZINC needs the original pickles of ``molecules.zip`` (PyG's ``ZINC.url``).  The
staged shared copy holds the subset layout only: its pickles are full-length lists with
``None`` everywhere but at the 12,000 subset positions.  That is detected up front (one
look at ``test.pickle``) and reported as a :class:`DatasetFormatError` that says what to
download, instead of PyG's ``TypeError`` from deep inside ``process()``.
"""
from __future__ import annotations

import pickle
from pathlib import Path
from types import SimpleNamespace
from typing import Optional

import numpy as np
from torch_geometric.datasets import ZINC

from molsepnorm.data.cache import (
    GraphormerPreTransform,
    build_once,
    cache_key,
    ensure_source,
    files_fingerprint,
    link_tree,
    third_party_bars,
)
from molsepnorm.data.registry import DatasetSplits, register_dataset
from molsepnorm.errors import DatasetFormatError, DatasetNotFoundError

RAW_FILES = ("train.pickle", "val.pickle", "test.pickle", "train.index", "val.index", "test.index")
"""What PyG's ZINC needs in ``raw/`` (``raw_file_names``)."""
OPTIONAL_RAW_FILES = ("atom_dict.pickle", "bond_dict.pickle")
FULL_SIZES = {"train": 220_011, "val": 24_445, "test": 5_000}
TARGET = "logP_SA_cycle_normalized"  # penalized logP, PyG's name for it
DOWNLOAD_TIMEOUT_S = 60.0


class _CachedZINC(ZINC):
    """PyG's ZINC reading from a cache folder; it must never download there."""

    def download(self) -> None:
        raise DatasetNotFoundError(
            f"the raw files linked into the ZINC cache {self.raw_dir} are gone (was the data root moved?); "
            f"delete {self.root} and load again")


def _how_to_get(raw: Path) -> str:
    return (f"Download molecules.zip from {ZINC.url}, unzip it and put its train.pickle, val.pickle, "
            f"test.pickle, atom_dict.pickle and bond_dict.pickle into {raw}, together with "
            f"train.index, val.index and test.index from {ZINC.split_url.format('<split>')}.")


def _fetch_raw(scratch: Path) -> Path:
    """PyG's own ``ZINC.download`` into ``scratch``; returns the ``raw/`` it filled."""
    (scratch / "raw").mkdir()  # as PyG's Dataset._download does before calling download()
    ZINC.download(SimpleNamespace(root=str(scratch), raw_dir=str(scratch / "raw"),
                                  url=ZINC.url, split_url=ZINC.split_url))
    return scratch / "raw"


def ensure_raw(raw: Path, download: bool = True) -> None:
    """Make sure ``raw`` holds PyG's six raw files, downloading them only into an empty folder
    (see :func:`~molsepnorm.data.cache.ensure_source` for the errors)."""
    ensure_source(
        raw, RAW_FILES, data_root=raw.parent.parent, url=ZINC.url, how_to_get=_how_to_get(raw),
        fetch=_fetch_raw, download=download, partial_what="ZINC's raw files",
        missing=lambda listing: f"ZINC's raw files are missing from {raw} ({listing})",
        failed=f"ZINC's raw files are missing from {raw} and downloading them failed",
        timeout_s=DOWNLOAD_TIMEOUT_S)


def check_full_layout(raw: Path) -> None:
    """Fail clearly if ``raw`` holds the subset layout (``None`` placeholders), not full ZINC."""
    with open(raw / "test.pickle", "rb") as handle:
        mols = pickle.load(handle)
    holes = sum(mol is None for mol in mols)
    if holes:
        raise DatasetFormatError(
            f"full ZINC cannot be built from {raw}: its pickles hold only the ZINC subset "
            f"({holes:,} of the {len(mols):,} entries of test.pickle are None placeholders; the full data set "
            f"has {FULL_SIZES['train']:,} / {FULL_SIZES['val']:,} / {FULL_SIZES['test']:,} molecules). "
            f"Use 'zinc-subset' for the 12,000-molecule benchmark. For full ZINC, download molecules.zip from "
            f"PyG's ZINC.url ({ZINC.url}), unzip it into <other root>/ZINC/raw together with train/val/test.index "
            f"({ZINC.split_url.format('<split>')}) -- a separate data root, do not overwrite this folder -- "
            f"and call load_dataset('zinc', root=<other root>).")


def _load(data_root: Path, subset: bool, download: bool, progress: Optional[bool]) -> DatasetSplits:
    name = "zinc-subset" if subset else "zinc"
    raw = data_root / "ZINC" / "raw"
    ensure_raw(raw, download)
    if not subset:
        check_full_layout(raw)
    linked = [n for n in RAW_FILES + OPTIONAL_RAW_FILES if (raw / n).is_file()]
    key = cache_key(name, "zinc", source=str(raw.resolve()),
                    fingerprint=files_fingerprint(raw / n for n in RAW_FILES), subset=subset)

    def build(tmp: Path) -> dict:
        link_tree(raw, tmp / "raw", names=linked)
        try:
            with third_party_bars(progress, "torch_geometric.datasets.zinc"):  # PyG's bar covers the encodings
                _CachedZINC(str(tmp), subset=subset, split="train", pre_transform=GraphormerPreTransform())
        except TypeError as err:  # a None placeholder that slipped past check_full_layout
            raise DatasetFormatError(f"{raw}: a molecule of the ZINC pickles is missing ({err}); "
                                     f"{'' if subset else 'the folder holds the subset layout only. '}"
                                     f"{_how_to_get(raw)}") from err
        return {"source": str(raw)}

    cache = build_once(key, build, f"{name} (PyG ZINC + Graphormer encodings)")
    pre_transform = GraphormerPreTransform()
    parts = {split: _CachedZINC(str(cache), subset=subset, split=split, pre_transform=pre_transform)
             for split in ("train", "val", "test")}
    offsets = np.cumsum([0] + [len(parts[s]) for s in ("train", "val", "test")])
    indices = {s: np.arange(offsets[i], offsets[i + 1], dtype=np.int64) for i, s in enumerate(("train", "val", "test"))}
    return DatasetSplits(
        name=name, train=parts["train"], val=parts["val"], test=parts["test"], task="regression",
        target_names=[TARGET], vocab="zinc", metric="mae", split_indices=indices, source=raw, cache_dir=cache,
        info={"split": "official ZINC split; split_indices index train + val + test concatenated",
              "subset": subset})


@register_dataset("zinc-subset", "zinc12k")
def load_zinc_subset(root: Path, download: bool = True, progress: Optional[bool] = None) -> DatasetSplits:
    """The 12,000-molecule ZINC benchmark (10,000 / 1,000 / 1,000), penalized logP regression.

    ``download``: fetch missing raw files into an empty, writable data root.
    ``progress``: False hides PyG's processing bars.
    """
    return _load(root, subset=True, download=download, progress=progress)


@register_dataset("zinc", "zinc-full")
def load_zinc_full(root: Path, download: bool = True, progress: Optional[bool] = None) -> DatasetSplits:
    """Full ZINC (220,011 / 24,445 / 5,000), penalized logP regression; needs PyG's molecules.zip.

    Options as for :func:`load_zinc_subset`.
    """
    return _load(root, subset=False, download=download, progress=progress)
