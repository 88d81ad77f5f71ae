"""``load_dataset``: every data set behind one call, and the :class:`DatasetSplits` it returns.

Named data sets are registered with :func:`register_dataset`; the built-in ones
(``zinc-subset``, ``zinc``, ``molhiv``, ``nci-tpsa``, ``moses``) register themselves when their
module is imported, which :func:`load_dataset` does on first use.  A path is read by the
format its suffix names (:mod:`molsepnorm.formats`, the table ``predict`` and ``pretrain``
read by): a CSV / TSV by :mod:`molsepnorm.data.csv_dataset`, an SD file by
:mod:`molsepnorm.data.sdf_dataset`, a file of SMILES per line by
:mod:`molsepnorm.data.smi_dataset`; an existing file of another suffix as a CSV.

Adding a data set: a module ``molsepnorm/data/my_set.py`` with ::

    @register_dataset("my-set", "my-alias")
    def load_my_set(root: Path, **options) -> DatasetSplits:
        ...

and its name in :data:`_BUILTIN_MODULES` (else it is never imported, and ``my-set`` is
unknown).  ``root`` is the resolved data root (see :mod:`molsepnorm.data.paths`); the
splits' ``metric`` is a name of :data:`molsepnorm.metric_names.HIGHER_IS_BETTER` (an
OGB data set's evaluator: ``molsepnorm.inference.metrics.OGB_EVALUATORS``).
"""
from __future__ import annotations

import difflib
import importlib
import inspect
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

import numpy as np

from molsepnorm.data.paths import PathLike, resolve_data_root
from molsepnorm.errors import DatasetNotFoundError, MolsepnormError
from molsepnorm.formats import file_format
from molsepnorm.metric_names import HIGHER_IS_BETTER

if TYPE_CHECKING:
    import pandas as pd

SPLIT_NAMES = ("train", "val", "test")
PARTS = (*SPLIT_NAMES, "all")  # what a model can be scored or embedded on ("all": the three together)
_SPLIT_ALIASES = {"train": "train", "val": "val", "valid": "val", "validation": "val", "test": "test"}
UNLABELLED = "unlabelled"  # the task of a corpus without targets (moses): no metric, nothing to fit
_BUILTIN_MODULES = ("molsepnorm.data.zinc", "molsepnorm.data.molhiv", "molsepnorm.data.nci",
                    "molsepnorm.data.moses")


@dataclass(frozen=True)
class SkippedRow:
    """A record of the source that is not in the data set, and why."""

    row: int  # line number in the source file (a header is line 1); an SDF record's first line
    smiles: str  # as given; an SDF record's as RDKit writes it ("" when unreadable)
    reason: str
    record: Optional[int] = None  # 1-based record number where records span lines (SDF)
    id: Optional[Any] = None  # the record's id (an SDF title, an id column / field), if known

    def __str__(self) -> str:
        where = f"row {self.row}" if self.record is None else f"record {self.record} (line {self.row}"
        if self.id is not None:
            where += f", id {self.id!r}" if self.record is not None else f" (id {self.id!r})"
        where += ")" if self.record is not None else ""
        if self.record is not None and not self.smiles:  # an SDF record RDKit could not read
            return f"{where}: {self.reason}"
        return f"{where}: {self.smiles!r}: {self.reason}"


@dataclass
class DatasetSplits:
    """A data set split into train / val / test, plus what a trainer needs to know about it.

    Every graph of ``train`` / ``val`` / ``test`` is a PyG ``Data`` with ``x``,
    ``edge_index``, ``edge_attr``, ``num_nodes``, ``y`` (float32 ``[1, T]``, NaN for a
    missing target) and the Graphormer encodings ``degree``, ``spd``, ``path_next``.

    Attributes:
        name: data set name (``"zinc-subset"``, ``"molhiv"``, a CSV's file name, ...).
        train, val, test: PyG datasets of ``Data`` objects.
        task: ``"regression"``, ``"binary"`` (binary classification, one logit per target)
            or ``"unlabelled"`` (a corpus without targets: graphs carry no ``y``,
            ``target_names`` is empty, ``metric`` None; see :attr:`labelled`).
        target_names: one name per column of ``y``.
        vocab: atom/bond vocabulary of ``x`` / ``edge_attr``: ``"ogb"`` or ``"zinc"``.
        metric: model-selection metric: ``"mae"`` (regression) or ``"rocauc"`` (binary);
            None for an unlabelled corpus.
        split_indices: ``{"train", "val", "test"}`` -> int64 indices into the full data
            set: OGB graph ids for molhiv; positions in train+val+test concatenated for
            ZINC; 0-based data rows of the file for CSV / NCI; 0-based records (record
            number - 1) for SDF.
        source: where the raw data was read.
        cache_dir: where the processed cache lives (None: nothing cached, e.g. moses,
            whose graphs are featurized when read).
        evaluator: OGB's ``Evaluator`` where the data set has one (molhiv), else None.
        skipped: source records that are not in the data set (invalid molecules with
            ``on_invalid="skip"``, records whose targets are all missing).
        smiles: SMILES of the full data set, indexed like ``split_indices``, when cheap
            to provide (None for ZINC).
        ids: ids of the full data set, indexed like ``split_indices``: an SDF's titles (or
            its ``id_column`` field), a CSV's ``id_column``; None when there are none.
        info: anything else worth recording (split method, seed, ...).
    """

    name: str
    train: Any
    val: Any
    test: Any
    task: str
    target_names: list[str]
    vocab: str
    metric: Optional[str]
    split_indices: dict[str, np.ndarray]
    source: Path
    cache_dir: Optional[Path]
    evaluator: Any = None
    skipped: list[SkippedRow] = field(default_factory=list)
    smiles: Optional[list[str]] = None
    ids: Optional[list[Any]] = None
    info: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, split: str):
        """``splits["train"]``; also accepts ``"valid"`` / ``"validation"`` for ``val``."""
        key = _SPLIT_ALIASES.get(str(split).lower())
        if key is None:
            raise KeyError(f"unknown split {split!r}; use one of {', '.join(SPLIT_NAMES)}")
        return getattr(self, key)

    def with_train_fraction(self, fraction: float, seed: int = 0) -> "DatasetSplits":
        """A copy whose training split keeps a random ``fraction`` of its molecules (at least
        one), drawn with ``seed``, in their original order; validation and test are
        untouched.  The few-labels setting of semi-supervised learning and fine-tuning:
        the others are left out of training, not deleted (``info["train_fraction"]``).

        Raises:
            ValueError: ``fraction`` is not in (0, 1].
        """
        import dataclasses

        if not 0 < fraction <= 1:
            raise ValueError(f"train_fraction must be in (0, 1], got {fraction}")
        if fraction == 1:
            return self
        n = len(self.train)
        keep = np.sort(np.random.default_rng(seed).choice(n, max(1, round(fraction * n)), replace=False))
        indices = dict(self.split_indices)
        indices["train"] = np.asarray(self.split_indices["train"])[keep]
        info = {**self.info, "train_fraction": {"fraction": fraction, "seed": seed, "kept": int(len(keep)),
                                                "of": int(n)}}
        return dataclasses.replace(self, train=self.train[keep.tolist()], split_indices=indices, info=info)

    def parts(self, split: str) -> tuple[str, ...]:
        """The splits ``split`` stands for: itself, or train, val and test, in that order, for ``"all"``."""
        if split == "all":
            return SPLIT_NAMES
        key = _SPLIT_ALIASES.get(str(split).lower())
        if key is None:
            raise KeyError(f"unknown split {split!r}; use one of {', '.join(PARTS)}")
        return (key,)

    def indices(self, split: str) -> np.ndarray:
        """The data-set indices (:attr:`split_indices`) of the molecules of ``split``
        (:meth:`parts`), in the order the split holds them."""
        chunks = [np.asarray(self.split_indices[part], dtype=np.int64) for part in self.parts(split)]
        return np.concatenate(chunks)

    def smiles_of(self, split: str) -> Optional[list[str]]:
        """The SMILES of the molecules of ``split`` in its order; None where the data set keeps
        none (ZINC)."""
        if self.smiles is None:
            return None
        return [self.smiles[i] for i in self.indices(split)]

    @property
    def num_tasks(self) -> int:
        """Number of targets (columns of ``y``)."""
        return len(self.target_names)

    @property
    def sizes(self) -> dict[str, int]:
        """Number of molecules per split."""
        return {split: len(getattr(self, split)) for split in SPLIT_NAMES}

    @property
    def labelled(self) -> bool:
        """Whether the graphs carry targets (False for an unlabelled corpus such as moses)."""
        return self.task != UNLABELLED

    @property
    def higher_is_better(self) -> bool:
        """Whether a larger :attr:`metric` is a better model (ROC-AUC) or a smaller one (MAE)."""
        if not self.labelled:
            raise MolsepnormError(f"data set {self.name!r} is unlabelled: it has no metric")
        return HIGHER_IS_BETTER[str(self.metric)]

    def to_frame(self) -> "pd.DataFrame":
        """The molecules of the three splits as a table in the data set's order: ``smiles``,
        one float64 column per target (NaN where missing; none for an unlabelled corpus)
        and ``split``, indexed by the data set's index (:attr:`split_indices`).  Molecules
        in no split (training rows left out by :meth:`with_train_fraction`) are not in it.
        What a peer tool, or a CSV data set, reads as its input with this split.

        Raises:
            MolsepnormError: the data set keeps no SMILES (ZINC), or a target is named
                ``smiles`` or ``split``.
        """
        import pandas as pd

        if self.smiles is None:
            raise MolsepnormError(f"data set {self.name!r} keeps no SMILES for its molecules: it has no table")
        clash = sorted({"smiles", "split"} & set(self.target_names))
        if clash:
            raise MolsepnormError(f"data set {self.name!r} has a target named {clash[0]!r}, a column of the table "
                                  f"itself: rename the target")
        index = np.concatenate([np.asarray(self.split_indices[part], dtype=np.int64) for part in SPLIT_NAMES])
        frame = pd.DataFrame({"smiles": [self.smiles[i] for i in index]}, index=index)
        if self.labelled:
            y = [g.y.view(-1).double().numpy() for part in SPLIT_NAMES for g in self[part]]
            values = np.stack(y) if y else np.empty((0, self.num_tasks))
            for t, name in enumerate(self.target_names):
                frame[name] = values[:, t]
        frame["split"] = [part for part in SPLIT_NAMES for _ in range(len(self.split_indices[part]))]
        return frame.sort_index()

    def __repr__(self) -> str:
        sizes = ", ".join(f"{k}={v:,}" for k, v in self.sizes.items())
        extra = f", skipped={len(self.skipped)}" if self.skipped else ""
        return (f"DatasetSplits(name={self.name!r}, {sizes}, task={self.task!r}, "
                f"targets={self.target_names}, vocab={self.vocab!r}, metric={self.metric!r}{extra})")


Loader = Callable[..., DatasetSplits]
_REGISTRY: dict[str, Loader] = {}
_CANONICAL: dict[str, str] = {}


def register_dataset(name: str, *aliases: str) -> Callable[[Loader], Loader]:
    """Decorator registering ``loader(root: Path, **options) -> DatasetSplits`` under names."""

    def decorate(loader: Loader) -> Loader:
        for key in (name, *aliases):
            _REGISTRY[key.lower()] = loader
            _CANONICAL[key.lower()] = name
        return loader

    return decorate


def _load_builtins() -> None:
    for module in _BUILTIN_MODULES:
        importlib.import_module(module)


def available_datasets() -> list[str]:
    """Registered data set names (aliases included)."""
    _load_builtins()
    return sorted(_REGISTRY)


def looks_like_table(name: str) -> bool:
    """Whether ``name`` is read as a file (CSV / TSV / SDF / .smi, see :mod:`molsepnorm.formats`)
    rather than a registered data set: a molecule file's suffix, or an existing file."""
    return file_format(name) is not None or Path(name).expanduser().is_file()


def is_sdf(name: PathLike) -> bool:
    """Whether ``name`` is read as an SD file (``.sdf`` / ``.sd`` / ``.mol``, optionally gzipped)."""
    return file_format(name) == "sdf"


def is_smi(name: PathLike) -> bool:
    """Whether ``name`` is read as a file of unlabelled SMILES (``.smi`` / ``.smiles`` / ``.ism``
    / ``.can`` / ``.txt``, optionally gzipped), as ``predict`` and ``pretrain`` read it."""
    return file_format(name) == "smi"


def dataframe_hint(value: Any) -> str:
    """For an in-memory table given where a data set's name or file is expected: how to make it one."""
    if type(value).__name__ == "DataFrame":
        return ": write the DataFrame to a CSV first (frame.to_csv('data.csv', index=False)) and give that path"
    return ""


def load_dataset(name: PathLike, root: Optional[PathLike] = None, **options: Any) -> DatasetSplits:
    """Load a data set with its train / val / test splits, building its cache on first use.

    Args:
        name: ``"zinc-subset"``, ``"zinc"`` (full ZINC), ``"molhiv"`` (alias
            ``"ogbg-molhiv"``), ``"nci-tpsa"``, a path to a CSV / TSV file of SMILES
            and targets (``.csv`` / ``.tsv`` / ``.tab``; see
            :func:`molsepnorm.data.csv_dataset.load_csv`), to an SD file (``.sdf`` /
            ``.sd`` / ``.mol``) whose data fields hold the targets (see
            :func:`molsepnorm.data.sdf_dataset.load_sdf`), or to a file of unlabelled
            SMILES (``.smi`` / ``.smiles`` / ``.ism`` / ``.can`` / ``.txt``;
            :func:`molsepnorm.data.smi_dataset.load_smi`); any of them optionally ``.gz``.
        root: data root holding the raw benchmark folders (``ZINC/``, ``ogbg_molhiv/``);
            default ``$MOLSEPNORM_DATA``, else ``<cache>/data``.  Never written to,
            except that a missing benchmark is downloaded there when it is writable.
        **options: loader options; e.g. ``seed`` and ``sizes`` (nci-tpsa), ``download``
            (zinc, molhiv), ``smiles_column``, ``target_columns``, ``split``, ...
            (CSV), ``target_columns``, ``id_column``, ``split``, ... (SDF), ``progress`` (all).

    Raises:
        DatasetNotFoundError: unknown name (with close matches), or raw files missing.
        DatasetFormatError: a file exists but cannot be used.
        TypeError: an option the loader does not accept, or ``name`` is not a str or path.
    """
    if not isinstance(name, (str, os.PathLike)):
        raise TypeError(f"load_dataset: name must be a data set name or a file path, got a {type(name).__name__}"
                        f"{dataframe_hint(name)}")
    text = str(name)
    file_loader = _file_loader(text) if isinstance(name, Path) or looks_like_table(text) else None
    if file_loader is not None:
        _check_options(f"{text} (a {file_format(text) or 'csv'} file)", file_loader, options, first="path")
        return file_loader(text, **options)
    _load_builtins()
    loader = _REGISTRY.get(text.lower())
    if loader is None:
        close = difflib.get_close_matches(text.lower(), list(_REGISTRY), n=3, cutoff=0.5)
        hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        raise DatasetNotFoundError(
            f"unknown data set {text!r}.{hint} Known data sets: {', '.join(sorted(set(_CANONICAL.values())))}; "
            "or give the path of a .csv / .tsv file of SMILES and targets, of an .sdf file whose data fields hold "
            "the targets, or of a .smi / .txt file of molecules (optionally .gz)."
        )
    _check_options(f"data set {_CANONICAL[text.lower()]!r}", loader, options)
    return loader(resolve_data_root(root), **options)


def _file_loader(path: str) -> Loader:
    """The loader of a molecule file, by its format (a file of no known suffix is a CSV)."""
    fmt = file_format(path)
    if fmt == "sdf":
        from molsepnorm.data.sdf_dataset import load_sdf

        return load_sdf
    if fmt == "smi":
        from molsepnorm.data.smi_dataset import load_smi

        return load_smi
    from molsepnorm.data.csv_dataset import load_csv

    return load_csv


def _check_options(what: str, loader: Callable[..., Any], options: dict[str, Any], first: str = "root") -> None:
    """A TypeError naming ``what`` and the options its loader takes, for any it does not."""
    params = inspect.signature(loader).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    accepted = [p for p in params if p != first]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise TypeError(f"{what} does not take option(s) {', '.join(unknown)}; "
                        f"it accepts: {', '.join(accepted) or 'none'}")


def normalize_split_name(value: str) -> Optional[str]:
    """``"train"`` / ``"val"`` / ``"test"`` for a split label (case-insensitive), else None."""
    return _SPLIT_ALIASES.get(str(value).strip().lower())
