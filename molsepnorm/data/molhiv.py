"""ogbg-molhiv through OGB's own ``PygGraphPropPredDataset`` and ``Evaluator``.

Raw data: ``<data root>/ogbg_molhiv/`` in OGB's layout (``RELEASE_v1.txt``, ``raw/``,
``split/scaffold/``, ``mapping/``).  OGB processes into ``<its root>/ogbg_molhiv/processed``,
so its root is a cache folder ``<cache>/processed/<key>/`` holding an ``ogbg_molhiv/``
whose files are symlinks to the source.

ogb 1.3.6 pitfalls handled here:

* without ``RELEASE_v1.txt`` it asks ``input()`` whether to re-download: the file is
  required up front, and ogb runs with an empty stdin, so nothing can ever block;
* with torch >= 2.6 its ``torch.load`` needs PyG's classes as safe globals;
* importing ogb starts a PyPI version check unless ``OUTDATED_IGNORE`` is set;
* a missing data set is downloaded only into a writable data root without any
  ``ogbg_molhiv/`` folder, after a short connectivity check, never into a partial one.
"""
from __future__ import annotations

import contextlib
import functools
import io
import os
import sys
import warnings
from pathlib import Path
from typing import Iterator, Optional

import numpy as np

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

os.environ.setdefault("OUTDATED_IGNORE", "1")  # before ogb is first imported

OGB_NAME = "ogbg-molhiv"
FOLDER = "ogbg_molhiv"
REQUIRED_FILES = (
    "RELEASE_v1.txt",
    "raw/edge.csv.gz", "raw/node-feat.csv.gz", "raw/edge-feat.csv.gz",
    "raw/num-node-list.csv.gz", "raw/num-edge-list.csv.gz", "raw/graph-label.csv.gz",
    "split/scaffold/train.csv.gz", "split/scaffold/valid.csv.gz", "split/scaffold/test.csv.gz",
)
SMILES_FILE = "mapping/mol.csv.gz"  # optional: SMILES of every graph
DEFAULT_URL = "http://snap.stanford.edu/ogb/data/graphproppred/csv_mol_download/hiv.zip"
DOWNLOAD_TIMEOUT_S = 60.0


def register_safe_globals() -> None:
    """Allow ``torch.load(weights_only=True)`` (torch >= 2.6) to read OGB's processed file."""
    import torch
    from torch_geometric.data.data import DataEdgeAttr, DataTensorAttr
    from torch_geometric.data.storage import GlobalStorage

    torch.serialization.add_safe_globals([DataEdgeAttr, DataTensorAttr, GlobalStorage])


@contextlib.contextmanager
def no_stdin() -> Iterator[None]:
    """Run with an empty stdin: an ``input()`` prompt raises ``EOFError`` instead of blocking."""
    saved = sys.stdin
    sys.stdin = io.StringIO("")
    try:
        yield
    finally:
        sys.stdin = saved


@functools.lru_cache(maxsize=None)
def _dataset_class() -> type:
    from ogb.graphproppred import PygGraphPropPredDataset

    class CachedPygGraphPropPredDataset(PygGraphPropPredDataset):
        """OGB's data set reading from a cache folder; it must never download there."""

        def download(self) -> None:
            raise DatasetNotFoundError(
                f"the raw files linked into the molhiv cache {self.raw_dir} are gone (was the data root "
                f"moved?); delete {self.original_root} and load again")

    return CachedPygGraphPropPredDataset


def download_url_and_name() -> tuple[str, str]:
    """OGB's download URL of ogbg-molhiv and the folder name inside its zip."""
    try:
        import pandas as pd
        import ogb.graphproppred

        master = pd.read_csv(Path(ogb.graphproppred.__file__).parent / "master.csv", index_col=0,
                             keep_default_na=False)
        return str(master[OGB_NAME]["url"]), str(master[OGB_NAME]["download_name"])
    except Exception:  # pragma: no cover - ogb's table moved
        return DEFAULT_URL, "hiv"


def _how_to_get(source: Path) -> str:
    url, inner = download_url_and_name()
    return (f"Download {url}, unzip it and rename the folder {inner!r} it contains to {source} "
            f"(it must hold {', '.join(REQUIRED_FILES)}; {SMILES_FILE} is optional).")


def _fetch(scratch: Path) -> Path:
    """OGB's own download and unzip into ``scratch``; returns the data set folder it holds."""
    from ogb.utils.url import download_url, extract_zip

    url, inner = download_url_and_name()
    extract_zip(download_url(url, str(scratch)), str(scratch))
    return scratch / inner


def ensure_raw(source: Path, download: bool = True) -> None:
    """Make sure ``source`` (``<data root>/ogbg_molhiv``) holds every file OGB reads, downloading
    only into an empty folder (see :func:`~molsepnorm.data.cache.ensure_source` for the errors)."""
    ensure_source(
        source, REQUIRED_FILES, data_root=source.parent, url=download_url_and_name()[0],
        how_to_get=_how_to_get(source), fetch=_fetch, download=download, partial_what=OGB_NAME,
        missing=lambda listing: f"{OGB_NAME} not found: {source} is missing ({listing})",
        failed=f"{OGB_NAME} is missing from {source} and downloading it failed",
        timeout_s=DOWNLOAD_TIMEOUT_S)


def _open(root: Path, pre_transform: GraphormerPreTransform):
    register_safe_globals()
    try:
        with no_stdin(), warnings.catch_warnings():
            # ogb 1.3.6 wraps read-only numpy labels; harmless, the tensors are converted
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
            return _dataset_class()(name=OGB_NAME, root=str(root), pre_transform=pre_transform)
    except EOFError as err:  # ogb's "has been updated, re-download?" prompt
        raise DatasetFormatError(f"ogb asked to re-download {root / FOLDER}: its RELEASE file does not match "
                                 f"ogb's expected version") from err


def _read_smiles(source: Path) -> list[str] | None:
    path = source / SMILES_FILE
    if not path.is_file():
        return None
    import pandas as pd

    return pd.read_csv(path, usecols=["smiles"])["smiles"].astype(str).tolist()


def _count_graphs(source: Path) -> int:
    import pandas as pd

    return len(pd.read_csv(source / "raw" / "num-node-list.csv.gz", header=None))


@register_dataset("molhiv", OGB_NAME)
def load_molhiv(root: Path, download: bool = True, progress: Optional[bool] = None) -> DatasetSplits:
    """ogbg-molhiv: 41,127 molecules, binary HIV activity, OGB's scaffold split 32,901 / 4,113 / 4,113.

    ``download``: fetch the data set into an empty, writable data root when it is missing.
    ``progress``: show a bar while the encodings are computed (None: only on a terminal);
    False also hides OGB's own bars.
    """
    from ogb.graphproppred import Evaluator
    from tqdm.auto import tqdm

    source = root / FOLDER
    ensure_raw(source, download)
    linked = ["RELEASE_v1.txt", "raw", "split", "mapping"]
    key = cache_key(OGB_NAME, "ogb", source=str(source.resolve()),
                    fingerprint=files_fingerprint(source / n for n in REQUIRED_FILES))

    def build(tmp: Path) -> dict:
        link_tree(source, tmp / FOLDER, names=linked)
        bar = tqdm(total=_count_graphs(source), desc=f"encoding {OGB_NAME}", unit="mol",
                   disable=None if progress is None else not progress)
        with bar, third_party_bars(progress, "ogb.io.read_graph_pyg", "ogb.io.read_graph_raw"):
            _open(tmp, GraphormerPreTransform(bar=bar))
        return {"source": str(source)}

    cache = build_once(key, build, f"{OGB_NAME} (OGB graphs + Graphormer encodings)")
    dataset = _open(cache, GraphormerPreTransform())
    idx = dataset.get_idx_split()
    indices = {"train": idx["train"].numpy().astype(np.int64), "val": idx["valid"].numpy().astype(np.int64),
               "test": idx["test"].numpy().astype(np.int64)}
    return DatasetSplits(
        name="molhiv", train=dataset[idx["train"]], val=dataset[idx["valid"]], test=dataset[idx["test"]],
        task="binary", target_names=["HIV_active"], vocab="ogb", metric="rocauc", split_indices=indices,
        source=source, cache_dir=cache, evaluator=Evaluator(OGB_NAME), smiles=_read_smiles(source),
        info={"split": "OGB scaffold split (split/scaffold)"})
