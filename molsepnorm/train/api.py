"""The library entry points behind ``molsepnorm train`` and ``molsepnorm evaluate``.

>>> from molsepnorm.train import load_experiment_config, train, evaluate_checkpoint
>>> config = load_experiment_config("configs/tiny.yaml", {"data.dataset": "nci-tpsa", "train.epochs": 2})
>>> result = train(config, out="runs/tiny")
>>> evaluate_checkpoint("runs/tiny/best.pt", split="test")["metrics"]["mae"]
"""
from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import re
import warnings
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np

from molsepnorm.errors import MolsepnormError
from molsepnorm.train import distributed as ddp
from molsepnorm.train.config import ExperimentConfig, read_yaml
from molsepnorm.train.run_dir import RunDir, close_logger, setup_logger

PathLike = Union[str, os.PathLike]
log = logging.getLogger("molsepnorm.train")


def default_run_dir(config: ExperimentConfig, root: PathLike = "runs") -> Path:
    """``runs/<data set>-<norm>-seed<N>-<YYYYmmdd-HHMMSS>``."""
    stem = Path(str(config.data.dataset)).name
    stem = re.sub(r"\.(csv|tsv|tab)(\.gz)?$", "", stem, flags=re.IGNORECASE)
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path(root) / f"{stem}-{config.model.get('norm', 'sep')}-seed{config.train.seed}-{stamp}"


def load_splits(config: ExperimentConfig, env: ddp.DistEnv) -> Any:
    """``load_dataset`` for the data section; rank 0 first, so a cache is built only once."""
    from molsepnorm.data.registry import load_dataset

    def load() -> Any:
        return load_dataset(config.data.dataset, root=config.data.data_root, **config.data.options)

    if env.is_main:
        error = None
        try:
            splits = load()
        except Exception as exc:  # the others must not wait forever at the barrier
            error = exc
        ddp.broadcast_object(None if error is None else f"rank 0 could not load the data: {error}", env)
        if error is not None:
            raise error
        return splits
    message = ddp.broadcast_object(None, env)
    if message is not None:
        raise MolsepnormError(message)
    return load()


def _on_main(env: ddp.DistEnv, action: Any) -> Any:
    """Run ``action()`` on rank 0; if it raises, raise on every rank (no rank left waiting)."""
    result, error = None, None
    if env.is_main:
        try:
            result = action()
        except Exception as exc:
            error = exc
    message = ddp.broadcast_object(None if error is None else str(error), env)
    if error is not None:
        raise error
    if message is not None:
        raise MolsepnormError(message)
    return result


def train(config: ExperimentConfig, out: Optional[PathLike] = None, console: bool = True) -> Any:
    """Train a model as configured and write its run directory.

    Under torchrun, call it on every process: DDP is set up from the environment.

    Args:
        config: the experiment (see :func:`~molsepnorm.train.config.load_experiment_config`).
        out: the run directory (default :func:`default_run_dir`); must not hold a run yet.
        console: log to the terminal as well as to ``train.log``.

    Returns:
        The :class:`~molsepnorm.train.loop.FitResult`.
    """
    from molsepnorm.train.loop import Trainer

    config.validate()
    env = ddp.setup(config.train.device)
    try:
        run_dir = RunDir(out) if out is not None else None
        if env.is_main and run_dir is None:
            run_dir = RunDir(default_run_dir(config))
        _on_main(env, lambda: run_dir.create())
        setup_logger(run_dir if env.is_main else None, env.is_main, console=console)
        splits = load_splits(config, env)
        trainer = Trainer(config, splits, run_dir=run_dir, env=env)
        if env.is_main:
            config.save_yaml(run_dir.config)  # resolved: model section completed by the trainer
            run_dir.write_split(splits.split_indices, {"dataset": splits.name, "source": str(splits.source),
                                                        **{k: v for k, v in splits.info.items()}})
        return trainer.fit()
    finally:
        close_logger()
        ddp.teardown()


def resume(
    run_dir: PathLike,
    device: Optional[str] = None,
    data_root: Optional[PathLike] = None,
    progress: Optional[bool] = None,
    console: bool = True,
) -> Any:
    """Continue an interrupted run from its ``last.pt``, exactly where it stopped.

    The run's own ``config.yaml`` is used; only the device, the data root (raw data may
    have moved) and the progress bar may change.  The split must be the same molecules
    as recorded in ``split.json``.

    Returns:
        The :class:`~molsepnorm.train.loop.FitResult` of the whole run.
    """
    from molsepnorm.train.checkpoint import load_checkpoint
    from molsepnorm.train.loop import Trainer

    rd = RunDir(run_dir)
    rd.check_resumable()
    config = ExperimentConfig.from_dict(read_yaml(rd.config), source=str(rd.config))
    if device is not None:
        config.train.device = device
    if data_root is not None:
        config.data.data_root = str(data_root)
    if progress is not None:
        config.train.progress = progress
    config.validate()
    env = ddp.setup(config.train.device)
    try:
        setup_logger(rd if env.is_main else None, env.is_main, console=console)
        checkpoint = load_checkpoint(rd.last)
        splits = load_splits(config, env)
        _check_same_split(rd, splits)
        trainer = Trainer(config, splits, run_dir=rd, env=env)
        trainer.load_training_state(checkpoint)
        if env.is_main:
            for stale in rd.remove_stale_temporaries():
                log.info("removed %s, a file torn by the interruption", stale.name)
            rd.truncate_metrics(trainer.state.epoch)
            log.info("resumed %s at epoch %d, step %d (batch %d of the epoch)", rd.path, trainer.state.epoch + 1,
                     trainer.state.step, trainer.state.batch_in_epoch)
        return trainer.fit()
    finally:
        close_logger()
        ddp.teardown()


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


def evaluate_checkpoint(
    checkpoint: PathLike,
    dataset: Optional[str] = None,
    split: str = "test",
    data_root: Optional[PathLike] = None,
    options: Optional[dict[str, Any]] = None,
    batch_size: int = 128,
    device: str = "cpu",
) -> dict[str, Any]:
    """Metrics of a checkpoint's model on a split of a data set.

    Args:
        checkpoint: a ``best.pt`` / ``last.pt`` file.
        dataset: data set name or CSV (default: the one the model was trained on, with the
            same loading options, hence the same split).
        split: ``train``, ``val``, ``test``, or ``all`` (the three together).
        data_root: folder of the raw data sets.
        options: ``load_dataset`` options (default: the training run's, for its own data set).
        batch_size: molecules per batch.
        device: ``cpu``, ``cuda`` or ``auto``.

    Returns:
        ``{"checkpoint", "dataset", "split", "num_molecules", "task", "metrics"}``.
    """
    from molsepnorm.data.collate import GraphCollator
    from molsepnorm.data.registry import load_dataset
    from molsepnorm.train.checkpoint import load_checkpoint, model_from_checkpoint, target_scaler_from_checkpoint
    from molsepnorm.train.loop import predict_dataset
    from molsepnorm.train.metrics import compute_metrics

    ckpt = load_checkpoint(checkpoint)
    trained_on = ckpt.get("data", {})
    if dataset is None:
        dataset = trained_on.get("dataset")
        if dataset is None:
            raise MolsepnormError(f"{checkpoint}: the checkpoint names no data set; give --dataset")
    if options is None:
        options = dict(trained_on.get("options", {})) if dataset == trained_on.get("dataset") else {}
    if data_root is None and dataset == trained_on.get("dataset"):
        trained_root = (ckpt.get("config", {}).get("data", {}) or {}).get("data_root")
        if trained_root and Path(trained_root).is_dir():  # else $MOLSEPNORM_DATA / the default
            data_root = trained_root
    if dataset != trained_on.get("dataset") and _is_table(dataset):
        options.setdefault("vocab", ckpt["featurizer"]["vocab"])  # featurize as the model expects
    splits = load_dataset(dataset, root=data_root, **options)
    _check_compatible(ckpt, splits, str(checkpoint))
    if split == "all":
        from torch.utils.data import ConcatDataset

        data = ConcatDataset([splits.train, splits.val, splits.test])
    else:
        data = splits[split]
    dev = ddp.resolve_device(device)
    model = model_from_checkpoint(ckpt).to(dev)
    task = ckpt["task"]
    bf16 = dev.type == "cuda"
    y_true, y_pred = predict_dataset(
        model, data, task=task["type"], scaler=target_scaler_from_checkpoint(ckpt),
        collate=GraphCollator(ckpt["featurizer"]["multi_hop_max_dist"]), batch_size=batch_size, device=dev,
        bf16=bf16,
    )
    metrics = compute_metrics(task["type"], y_true, y_pred, task["target_names"], dataset=splits.name)
    return {"checkpoint": str(checkpoint), "dataset": splits.name, "split": split, "num_molecules": len(data),
            "task": task["type"], "target_names": list(task["target_names"]), "metrics": metrics}


def _is_table(name: str) -> bool:
    return name.lower().endswith((".csv", ".tsv", ".tab", ".csv.gz", ".tsv.gz")) or Path(name).is_file()


def _check_compatible(ckpt: dict[str, Any], splits: Any, path: str) -> None:
    """The data set must be featurized like the training data and have as many targets."""
    from molsepnorm.chem import FEATURIZER_VERSION
    from molsepnorm.encodings import ENCODING_VERSION

    feat = ckpt["featurizer"]
    if splits.vocab != feat["vocab"]:
        raise MolsepnormError(f"{path}: the model reads the {feat['vocab']!r} atom vocabulary but {splits.name} "
                              f"is featurized with {splits.vocab!r}")
    if splits.task != ckpt["task"]["type"]:
        raise MolsepnormError(f"{path}: a {ckpt['task']['type']} model cannot be scored on the {splits.task} "
                              f"data set {splits.name}")
    n_model = len(ckpt["task"]["target_names"])
    if splits.num_tasks != n_model:
        raise MolsepnormError(f"{path}: the model predicts {n_model} target(s) "
                              f"({', '.join(ckpt['task']['target_names'])}) but {splits.name} has "
                              f"{splits.num_tasks} ({', '.join(splits.target_names)})")
    if list(splits.target_names) != list(ckpt["task"]["target_names"]):
        warnings.warn(f"{path}: target names differ: model {ckpt['task']['target_names']}, "
                      f"data {splits.target_names}; scoring column by column", stacklevel=3)
    if (feat["featurizer_version"], feat["encoding_version"]) != (FEATURIZER_VERSION, ENCODING_VERSION):
        warnings.warn(f"{path}: trained with featurizer v{feat['featurizer_version']} / encodings "
                      f"v{feat['encoding_version']}, this molsepnorm has v{FEATURIZER_VERSION} / "
                      f"v{ENCODING_VERSION}: predictions may be off", stacklevel=3)
