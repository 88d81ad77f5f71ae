"""The library entry points behind ``molsepnorm train``: :func:`train` and :func:`resume`.

>>> from molsepnorm.train import load_experiment_config, train
>>> config = load_experiment_config("configs/tiny.yaml", {"data.dataset": "nci-tpsa", "train.epochs": 2})
>>> result = train(config, out="runs/tiny")
>>> from molsepnorm.inference import evaluate_checkpoint
>>> evaluate_checkpoint("runs/tiny/best.pt", split="test")["metrics"]["mae"]
"""
from __future__ import annotations

import datetime as _dt
import json
import logging
import os
from pathlib import Path
from typing import Any, Callable, Optional, Union

import numpy as np

from molsepnorm._torch_state import callers_random_state
from molsepnorm.errors import DatasetFormatError, MolsepnormError
from molsepnorm.formats import output_stem
from molsepnorm.train import distributed as ddp
from molsepnorm.config import read_yaml
from molsepnorm.train.config import ExperimentConfig
from molsepnorm.checkpoint.run_dir import RunDir
from molsepnorm.train.logs import close_logger, setup_logger
from molsepnorm.train.trainable import check_trainable, refuse_unlabelled_file

PathLike = Union[str, os.PathLike]
log = logging.getLogger("molsepnorm.train")


def default_run_dir(config: ExperimentConfig, root: PathLike = "runs") -> Path:
    """``runs/<data set>-<norm>-seed<N>-<YYYYmmdd-HHMMSS>``."""
    stem = output_stem(str(config.data.dataset))  # a name (zinc-subset) is its own stem
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path(root) / f"{stem}-{config.model.get('norm', 'sep')}-seed{config.train.seed}-{stamp}"


def load_splits(config: ExperimentConfig, env: ddp.DistEnv) -> Any:
    """``load_dataset`` for the data section; rank 0 first, so a cache is built only once.
    Its warnings (rows left out, copies across splits) go to ``train.log`` too, from rank 0."""
    from molsepnorm.data.registry import load_dataset

    def load() -> Any:
        splits = load_dataset(config.data.dataset, root=config.data.data_root, **config.data.options)
        check_trainable(splits)
        return splits.with_train_fraction(float(config.data.train_fraction), int(config.data.train_fraction_seed))

    splits = ddp.on_main(env, lambda: _logging_warnings(load), what="load the data")  # a failure raises on every rank
    if env.is_main:
        return splits
    import warnings

    with warnings.catch_warnings():  # rank 0 has said it (rows left out, copies across splits): once is enough
        warnings.simplefilter("ignore")
        return load()


def _logging_warnings(load: Callable[[], Any]) -> Any:
    """``load()``, whose warnings (rows left out, duplicates across splits) are also written to
    ``train.log``, where the run's record belongs, and then issued as ever."""
    import warnings

    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            return load()
    finally:  # a load that fails keeps the warnings it gave first
        for w in caught:
            if issubclass(w.category, UserWarning):
                log.warning("%s", w.message, extra={"file_only": True})  # the terminal shows the warning itself
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def _with_vocabulary_hint(err: DatasetFormatError, config: ExperimentConfig, vocab_given: bool) -> Exception:
    """``err``, told where the vocabulary that refused its molecules came from when the user did
    not choose it: the ``--init`` encoder's (a ZINC-vocabulary encoder reads 9 elements only)."""
    vocab = config.data.options.get("vocab")
    if vocab_given or vocab != "zinc" or "is not in the zinc vocabulary" not in str(err):
        return err
    return DatasetFormatError(f"{err}\nThe zinc vocabulary is that of --init {config.train.init}, whose encoder reads "
                              "only the ZINC benchmark's atom types; an encoder of the ogb vocabulary reads every "
                              "element: --init auto (the default, which picks one for a file), --init "
                              "molhiv-encoder, or --init none")


@callers_random_state()
def train(config: ExperimentConfig, out: Optional[PathLike] = None, console: bool = True,
          init: Optional[PathLike] = None, freeze_encoder: Optional[bool] = None) -> Any:
    """Train a model as configured and write its run directory.

    Under torchrun, call it on every process: DDP is set up from the environment.

    Args:
        config: the experiment (see :func:`~molsepnorm.train.config.load_experiment_config`).
        out: the run directory (default :func:`default_run_dir`); must not hold a run yet.
        console: log to the terminal as well as to ``train.log``.
        init: fine-tune: a checkpoint (``molsepnorm pretrain``'s ``encoder.pt``, a
            ``best.pt``) or bundled model name whose encoder starts the model, ``"none"``
            (from scratch) or ``"auto"`` (``train.init``, whose default is ``"auto"``: the
            bundled encoder of the data's vocabulary if the model is its architecture; see
            :mod:`molsepnorm.train.init`); None: the config's.
        freeze_encoder: train the head only (``train.freeze_encoder``).

    Returns:
        The :class:`~molsepnorm.train.loop.FitResult`.
    """
    from molsepnorm.train.config import apply_overrides
    from molsepnorm.train.init import with_init_vocabulary
    from molsepnorm.train.loop import Trainer

    if init is not None or freeze_encoder is not None:
        config = apply_overrides(config, {"train.init": None if init is None else str(init),
                                          "train.freeze_encoder": freeze_encoder})
    config.validate()
    refuse_unlabelled_file(config.data.dataset)
    vocab_given = "vocab" in config.data.options
    config = with_init_vocabulary(config)
    env = ddp.setup(config.train.device)
    try:
        run_dir = RunDir(out) if out is not None else None
        if env.is_main and run_dir is None:
            run_dir = RunDir(default_run_dir(config))
        ddp.on_main(env, lambda: run_dir.create())
        setup_logger(run_dir if env.is_main else None, env.is_main, console=console)
        try:
            splits = load_splits(config, env)
        except DatasetFormatError as err:
            hinted = _with_vocabulary_hint(err, config, vocab_given)
            if hinted is err:
                raise
            raise hinted from err
        trainer = Trainer(config, splits, run_dir=run_dir, env=env)
        if env.is_main:
            trainer.config.save_yaml(run_dir.config)  # resolved: model section completed by the data
            info = {"dataset": splits.name, "source": str(splits.source), **dict(splits.info)}
            if splits.skipped:  # the source's records left out, each with its row and reason
                info["skipped"] = [str(row) for row in splits.skipped]
            run_dir.write_split(splits.split_indices, info)
        return trainer.fit()
    finally:
        close_logger()
        ddp.teardown()


@callers_random_state()
def resume(
    run_dir: PathLike,
    device: Optional[str] = None,
    data_root: Optional[PathLike] = None,
    progress: Optional[bool] = None,
    console: bool = True,
    dataset: Optional[PathLike] = None,
) -> Any:
    """Continue an interrupted run from its ``last.pt``, exactly where it stopped.

    The run's own ``config.yaml`` is used; only the device, the data root (raw data may
    have moved), the progress bar and, for a run on a file, where that file now is
    (``dataset``: the same content, checked against the sha256 the checkpoint recorded)
    may change.  The split must be the same molecules as recorded in ``split.json``.

    Returns:
        The :class:`~molsepnorm.train.loop.FitResult` of the whole run.
    """
    from molsepnorm.checkpoint import Checkpoint
    from molsepnorm.train.loop import Trainer

    rd, config = read_resumable(run_dir, ExperimentConfig.from_dict, device, data_root, progress)
    env = ddp.setup(config.train.device)
    try:
        setup_logger(rd if env.is_main else None, env.is_main, console=console)
        checkpoint = Checkpoint.load(rd.last)
        # the model as last.pt built it: a run begun by an older molsepnorm has a config.yaml
        # without the model keys added since, which Checkpoint.load completes
        config.model = dict(checkpoint.model_config)
        config.train.init = None  # the weights come from last.pt (the init checkpoint may be gone)
        if dataset is not None:
            moved = _moved_file(dataset, config, checkpoint)
            log.info("%s has moved: reading %s, the same content (sha256)", config.data.dataset, moved)
            config.data.dataset = moved
        elif (recorded := where_recorded(config.data.dataset, checkpoint)) is not None:
            log.info("%s is not found from this folder: reading %s, where training read it", config.data.dataset,
                     recorded)
            config.data.dataset = recorded
        splits = load_splits(config, env)
        _check_same_split(rd, splits)
        trainer = Trainer(config, splits, run_dir=rd, env=env)
        trainer.load_training_state(checkpoint)
        if env.is_main:
            tidy_interrupted(rd, trainer.state.epoch)
            log.info("resumed %s at epoch %d, step %d (batch %d of the epoch)", rd.path, trainer.state.epoch + 1,
                     trainer.state.step, trainer.state.batch_in_epoch)
        return trainer.fit()
    finally:
        close_logger()
        ddp.teardown()


def read_resumable(run_dir: PathLike, from_dict: Callable[..., Any], device: Optional[str] = None,
                   data_root: Optional[PathLike] = None, progress: Optional[bool] = None,
                   sections: tuple[str, str] = ("train", "data")) -> tuple[RunDir, Any]:
    """The run directory to resume and its own ``config.yaml``, with only what a resume may
    change replaced, validated.

    Args:
        run_dir: the interrupted run (it must hold ``config.yaml`` and ``last.pt``).
        from_dict: the configuration class's ``from_dict`` (:class:`ExperimentConfig`,
            :class:`~molsepnorm.pretrain.config.PretrainExperiment`).
        device, data_root, progress: replace the run's when not None.
        sections: the configuration's section holding ``device`` and ``progress``, and
            the one holding ``data_root`` (``("pretrain", "corpus")`` for pretraining).

    Raises:
        RunDirError: the directory is not a resumable run.
        ConfigError: its ``config.yaml`` is not valid (with the changes).
    """
    rd = RunDir(run_dir)
    rd.check_resumable()
    config = from_dict(read_yaml(rd.config), source=str(rd.config))
    options, data = (getattr(config, name) for name in sections)
    if device is not None:
        options.device = device
    if data_root is not None:
        data.data_root = str(data_root)
    if progress is not None:
        options.progress = progress
    config.validate()
    return rd, config


def where_recorded(given: Any, checkpoint: Any) -> Optional[str]:
    """The file a resumed run should read when ``config.yaml`` names it by a path relative to
    the folder the run began in, and that path does not lead to it from here: the absolute
    path the checkpoint recorded, when it exists (None: read ``given`` as it is).  The
    resumed run checks the split (training) or the records it reads, as ever."""
    from molsepnorm.formats import file_format

    if given is None or file_format(str(given)) is None or Path(str(given)).expanduser().exists():
        return None
    recorded = checkpoint.data.recorded_file
    return recorded if recorded is not None and Path(recorded).is_file() else None


def _moved_file(dataset: PathLike, config: ExperimentConfig, checkpoint: Any) -> str:
    """``dataset``, the file a resumed run should read instead of the one ``config.yaml``
    names, checked to be the same content (the sha256 ``last.pt`` recorded).

    Raises:
        MolsepnormError: the run was not on a file, ``dataset`` is no file, or its content
            is not the run's (or the checkpoint, an older one, recorded none to compare).
    """
    from molsepnorm.data.cache import file_sha256
    from molsepnorm.formats import file_format

    if file_format(str(config.data.dataset)) is None:
        raise MolsepnormError(f"--dataset on resume gives where the run's file now is; this run trained on "
                              f"{config.data.dataset!r}, a named data set (use --data-root for its folder)")
    path = Path(dataset).expanduser()
    if not path.is_file():
        raise MolsepnormError(f"--dataset {dataset}: no such file")
    recorded = checkpoint.data.sha256
    if recorded is None:
        raise MolsepnormError(f"--dataset {dataset}: this run's last.pt does not record its file's content, so a "
                              f"moved file cannot be checked; put it back at {config.data.dataset}")
    if file_sha256(path) != recorded:
        raise MolsepnormError(f"--dataset {dataset} is not the file this run trained on ({config.data.dataset}): "
                              "its content differs; resuming on other data would not continue the run")
    return str(path.resolve())


def tidy_interrupted(rd: RunDir, position: int, key: str = "epoch") -> None:
    """On resuming, on rank 0: remove the files the interruption tore (logged) and the
    metrics rows written after ``last.pt`` (those whose ``key`` is past ``position``)."""
    for stale in rd.remove_stale_temporaries():
        log.info("removed %s, a file torn by the interruption", stale.name)
    rd.truncate_metrics(position, key=key)


def _check_same_split(rd: RunDir, splits: Any) -> None:
    if not rd.split.is_file():
        return
    recorded = json.loads(rd.split.read_text(encoding="utf-8"))["indices"]
    for name, indices in splits.split_indices.items():
        if not np.array_equal(np.asarray(recorded.get(name, []), dtype=np.int64), np.asarray(indices, dtype=np.int64)):
            raise MolsepnormError(
                f"cannot resume {rd.path}: the {name} split of {splits.name} differs from the one recorded in "
                f"{rd.split.name} (has the data file changed?)"
            )
