"""The molecules a checkpoint is evaluated or analyzed on: by default its own training data.

Used by ``evaluate``, ``analyze`` and ``add_companion`` alike: without a data set named,
the one the model was trained on, with the training run's loading options (hence the very
same split), the part of its training split it was trained on (``data.train_fraction``, drawn
with ``data.train_fraction_seed``) and
its data root when that folder still exists; a CSV of another data set is featurized in
the model's vocabulary.  A file is the model's own when the checkpoint names it and the
user names no other, or when the file the user names is the one training read; it is read
where the checkpoint recorded it (an absolute path), whatever folder the command runs in,
with the columns and targets training read.  A pretrained encoder's own file corpus is
read as molecules only, with the SMILES and id columns pretraining read.
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, MutableMapping, Optional, Union

from molsepnorm.checkpoint.checkpoint import PRETRAINED, Checkpoint
from molsepnorm.errors import MolsepnormError

PathLike = Union[str, os.PathLike]
FILE_OPTIONS = ("smiles_column", "target_columns", "id_column", "task", "vocab", "sep", "on_invalid")
"""``load_dataset`` options that say how a file is read (its columns, which rows are in it),
not how it is split: a model's own file keeps its training run's, even where other options
are given."""


@dataclass(frozen=True)
class _Located:
    """The data set a command names, seen from a checkpoint (see :func:`_locate`)."""

    dataset: str  # the name or path to read (the model's own when none is named)
    trained_on_file: bool  # training read a file (CSV / SDF / .smi), not a named data set
    recorded: Optional[Path]  # where training read its file (absolute), None when unknown
    same: bool  # the data set named is the one the model was trained on


def _locate(checkpoint: Checkpoint, dataset: Optional[str]) -> _Located:
    """Whether ``dataset`` (None: the model's own) is the data the model was trained on: a
    named data set by its name, a file by where it is (the one training read, whatever the
    name it is given by), or by its name where training recorded no absolute path.

    Raises:
        MolsepnormError: no data set named and the checkpoint names none.
    """
    from molsepnorm.data.registry import looks_like_table

    trained_on = checkpoint.data
    named = dataset is not None
    if dataset is None:
        dataset = trained_on.dataset
        if dataset is None:
            raise MolsepnormError(f"{checkpoint.name}: the checkpoint names no data set; give --dataset")
    dataset = str(dataset)
    trained_on_file = trained_on.dataset is not None and looks_like_table(str(trained_on.dataset))
    # where training read its file (recorded absolute; a relative one, of older checkpoints, tells nothing)
    recorded = Path(trained_on.source) if trained_on_file and trained_on.source else None
    if recorded is not None and not recorded.is_absolute():
        recorded = None
    here = Path(dataset).expanduser()
    recorded_exists = recorded is not None and recorded.is_file()
    if named and recorded_exists and here.is_file() and looks_like_table(dataset):
        same = here.samefile(recorded)  # a file is the model's own by where it is, not by its name
    elif named and not recorded_exists and trained_on_file and trained_on.sha256 and here.is_file() \
            and looks_like_table(dataset):
        from molsepnorm.data.cache import file_sha256

        same = file_sha256(here) == trained_on.sha256  # the file has moved: the model's own by its content
    else:
        same = dataset == trained_on.dataset
    return _Located(dataset, trained_on_file, recorded, same)


def default_split(checkpoint: Checkpoint, dataset: Optional[PathLike] = None,
                  options: Optional[dict[str, Any]] = None) -> str:
    """The part of ``dataset`` to score ``checkpoint`` on when none is asked for: ``all`` of a
    file other than the one the model was trained on, unless ``options`` say how to split it
    (an external set is scored whole); else ``test`` (the model's own data, a named
    benchmark data set)."""
    from molsepnorm.data.registry import looks_like_table

    if dataset is None or "split" in (options or {}):
        return "test"
    where = _locate(checkpoint, str(dataset))
    return "all" if not where.same and looks_like_table(where.dataset) else "test"


def checkpoint_data(
    checkpoint: Checkpoint,
    dataset: Optional[str] = None,
    split: str = "test",
    data_root: Optional[PathLike] = None,
    options: Optional[dict[str, Any]] = None,
    targets: bool = True,
    loaded: Optional[MutableMapping[Any, Any]] = None,
) -> tuple[Any, Any]:
    """``(graphs of the split, DatasetSplits)`` to run ``checkpoint`` on.

    Args:
        checkpoint: the model.
        dataset: a data set name or file (default: the model's training data set).
        split: ``train``, ``val``, ``test`` or ``all`` (the three together).
        data_root: folder of the raw data sets (default: the training run's if it still
            exists, else ``$MOLSEPNORM_DATA`` ...).
        options: :func:`~molsepnorm.data.load_dataset` options (default: the training
            run's, for its own data set, whose training split is then the molecules the run
            trained on: with ``data.train_fraction`` below 1, that fraction of it, drawn
            with ``data.train_fraction_seed``); for
            the model's own file, those given are added to how training read it
            (:data:`FILE_OPTIONS`, and its target columns).
        targets: also require the same task and number of targets (scoring); False for
            embeddings, where only the featurization must match.
        loaded: a memo of loaded data sets shared across calls (several checkpoints).

    Raises:
        MolsepnormError: no data set to use, or data featurized unlike the model's.
    """
    from molsepnorm.data.registry import PARTS, is_smi, load_dataset, looks_like_table

    if split not in PARTS:
        raise MolsepnormError(f"unknown split {split!r}; use one of {', '.join(PARTS)}")
    trained_on = checkpoint.data
    named = dataset is not None
    where = _locate(checkpoint, dataset)
    dataset, recorded, same = where.dataset, where.recorded, where.same
    recorded_exists = recorded is not None and recorded.is_file()
    here = Path(dataset).expanduser()
    here_exists = here.is_file()
    trained_on_file = where.trained_on_file
    own_file = same and trained_on_file  # the model's own CSV / SDF / .smi
    if own_file and not recorded_exists and not here_exists:
        where = f"{recorded}, where training read it," if recorded is not None else f"{dataset}"
        how = ("a file of the same content is read and split as training did" if trained_on.sha256 else
               "this checkpoint does not record the file's content, so give the split too (--split test and "
               "training's --split-by / --split-seed)")
        raise MolsepnormError(f"{checkpoint.name}: the file it was trained on, {where} is gone; give it where it "
                              f"is now with --dataset PATH (dataset= in Python): {how}")
    if own_file and recorded_exists:
        dataset = str(recorded)  # from any folder, and never a namesake in this one
    elif own_file and not named and recorded is not None and here_exists:
        from molsepnorm._stacklevel import outside_package_stacklevel

        warnings.warn(f"{checkpoint.name}: the file it was trained on, {recorded}, no longer exists; reading "
                      f"{here.resolve()} instead", UserWarning, stacklevel=outside_package_stacklevel())
    # a pretrained encoder's options are its corpus reader's (pretrain), not the data set's
    reuse = same and checkpoint.task.type != PRETRAINED
    given = options is not None
    own_split = reuse and not given  # the run's own split: keep only what it trained on
    options = dict(options) if given else (dict(trained_on.options) if reuse else {})
    if own_file and reuse:  # the file read as training read it, whatever else is given
        for option in FILE_OPTIONS:
            if option in trained_on.options:
                options.setdefault(option, trained_on.options[option])
        # the targets training resolved: a default that has changed since cannot move them
        options.setdefault("target_columns", list(checkpoint.task.target_names))
    elif own_file:  # an encoder's file corpus (options given win over these)
        for column in ("smiles_column", "id_column"):  # a table's columns as pretraining read them
            if trained_on.options.get(column) is not None:
                options.setdefault(column, trained_on.options[column])
        if not is_smi(dataset):
            options.setdefault("target_columns", [])  # molecules only, whatever other columns it has
        options.setdefault("on_invalid", "skip")  # pretraining left them out, each logged: so does this
    if data_root is None and same and trained_on.data_root and Path(trained_on.data_root).is_dir():
        data_root = trained_on.data_root
    if not reuse and looks_like_table(dataset):
        options.setdefault("vocab", checkpoint.featurizer.vocab)  # featurize as the model expects
    key = (dataset, None if data_root is None else str(data_root), repr(sorted(options.items())))
    if loaded is not None and key in loaded:
        splits = loaded[key]
    else:
        splits = load_dataset(dataset, root=data_root, **options)
        if loaded is not None:
            loaded[key] = splits
    checkpoint.check_data(splits, targets=targets)
    trained_data = checkpoint.config.get("data") or {}
    fraction = float(trained_data.get("train_fraction", 1.0))
    if own_split and fraction < 1:  # the seeded subset training drew (seed 0 before it could be chosen)
        splits = splits.with_train_fraction(fraction, int(trained_data.get("train_fraction_seed", 0)))
    if reuse:
        _warn_if_changed(checkpoint, splits, own_split)
    if split == "all":
        from torch.utils.data import ConcatDataset

        return ConcatDataset([splits[part] for part in splits.parts("all")]), splits
    return splits[split], splits


def _warn_if_changed(checkpoint: Checkpoint, splits: Any, own_split: bool) -> None:
    """Warn when the data read as the model's own is not what training read: a file whose
    content has changed since (its sha256, where the checkpoint recorded one), or, for the
    run's own split, other split sizes.  Its split is then not the model's, and its
    validation or test molecules may be ones the model was trained on."""
    from molsepnorm._stacklevel import outside_package_stacklevel

    trained_on = checkpoint.data
    now = splits.info.get("sha256") if isinstance(splits.info, dict) else None
    sizes = dict(splits.sizes)
    reasons = []
    if trained_on.sha256 and now and now != trained_on.sha256:
        reasons.append(f"its content has changed since training (sha256 {trained_on.sha256[:12]}... then, "
                       f"{now[:12]}... now)")
    recorded = {part: int(trained_on.sizes[part]) for part in sizes if part in trained_on.sizes}
    if own_split and recorded and any(recorded[part] != sizes[part] for part in recorded):
        reasons.append("its split differs from training's (train / val / test "
                       + " / ".join(str(recorded.get(part, "?")) for part in sizes) + " then, "
                       + " / ".join(str(sizes[part]) for part in sizes) + " now)")
    if reasons:
        risk = ("its validation and test molecules may include molecules the model was trained on" if len(reasons) > 1
                or not reasons[0].startswith("its content") else "where rows were added, removed or moved, its "
                "split is not the model's, and where targets were edited, the scores are not those of training")
        warnings.warn(f"{checkpoint.name}: {splits.source} is not the data it was trained on: {'; '.join(reasons)}: "
                      f"{risk}", UserWarning, stacklevel=outside_package_stacklevel())
