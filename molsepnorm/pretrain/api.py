"""The library entry points behind ``molsepnorm pretrain``: :func:`pretrain` and :func:`resume`.

>>> from molsepnorm.pretrain import load_pretrain_config, pretrain
>>> config = load_pretrain_config("configs/tiny.yaml", {"corpus.corpus": "nci", "pretrain.max_steps": 100})
>>> result = pretrain(config, out="runs/pre-tiny")
>>> # then: molsepnorm train --init runs/pre-tiny/encoder.pt --dataset nci-tpsa ...
"""
from __future__ import annotations

import datetime as _dt
import logging
import os
from pathlib import Path
from typing import Any, Mapping, Optional, Union

from molsepnorm._torch_state import callers_random_state
from molsepnorm.checkpoint.run_dir import RunDir
from molsepnorm.formats import output_stem
from molsepnorm.pretrain.config import PretrainExperiment, load_pretrain_config
from molsepnorm.pretrain.loop import PretrainResult
from molsepnorm.train import distributed as ddp
from molsepnorm.train.api import read_resumable, tidy_interrupted, where_recorded
from molsepnorm.train.logs import LOGGER_NAME, close_logger, setup_logger

PathLike = Union[str, os.PathLike]
log = logging.getLogger(LOGGER_NAME)


def default_run_dir(config: PretrainExperiment, root: PathLike = "runs") -> Path:
    """``runs/pretrain-<corpus>-<objective>-seed<N>-<YYYYmmdd-HHMMSS>``."""
    stem = output_stem(str(config.corpus.corpus))
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path(root) / f"pretrain-{stem}-{config.pretrain.objective}-seed{config.pretrain.seed}-{stamp}"


@callers_random_state()
def pretrain(config: PretrainExperiment, out: Optional[PathLike] = None, console: bool = True) -> PretrainResult:
    """Pretrain a Graphormer encoder as configured and write its run directory.

    Under torchrun, call it on every process: DDP is set up from the environment.  The
    run directory holds ``config.yaml``, ``metrics.jsonl`` / ``metrics.csv``,
    ``train.log``, ``last.pt`` (resumable), and at the end ``encoder.pt`` and
    ``results.json``.

    Args:
        config: the experiment (see :func:`~molsepnorm.pretrain.config.load_pretrain_config`).
        out: the run directory (default :func:`default_run_dir`); must not hold a run yet.
        console: log to the terminal as well as to ``train.log``.
    """
    from molsepnorm.pretrain.loop import Pretrainer

    config.validate()
    env = ddp.setup(config.pretrain.device)
    try:
        run_dir = RunDir(out) if out is not None else (RunDir(default_run_dir(config)) if env.is_main else None)
        ddp.on_main(env, lambda: run_dir.create())
        setup_logger(run_dir if env.is_main else None, env.is_main, console=console)
        trainer = Pretrainer(config, run_dir=run_dir, env=env)
        if env.is_main:
            trainer.config.save_yaml(run_dir.config)
        return trainer.fit()
    finally:
        close_logger()
        ddp.teardown()


@callers_random_state()
def resume(run_dir: PathLike, device: Optional[str] = None, data_root: Optional[PathLike] = None,
           progress: Optional[bool] = None, console: bool = True) -> PretrainResult:
    """Continue an interrupted pretraining run from its ``last.pt``, exactly where it stopped.

    The run's own ``config.yaml`` is used; only the device, the data root and the progress
    bar may change.
    """
    from molsepnorm.checkpoint import Checkpoint
    from molsepnorm.pretrain.loop import Pretrainer

    rd, config = read_resumable(run_dir, saved_config, device, data_root, progress,
                                sections=("pretrain", "corpus"))
    env = ddp.setup(config.pretrain.device)
    try:
        setup_logger(rd if env.is_main else None, env.is_main, console=console)
        checkpoint = Checkpoint.load(rd.last)
        config.model = {k: v for k, v in checkpoint.model_config.items() if k != "num_tasks"}
        recorded = where_recorded(config.corpus.corpus, checkpoint)
        if recorded is not None:
            log.info("%s is not found from this folder: reading %s, where pretraining read it", config.corpus.corpus,
                     recorded)
            config.corpus.corpus = recorded
        trainer = Pretrainer(config, run_dir=rd, env=env)
        trainer.load_training_state(checkpoint)
        if env.is_main:
            tidy_interrupted(rd, trainer.state.step, key="step")
            rows = rd.read_metrics()
            if rows:
                trainer.last_row = rows[-1]
            log.info("resumed %s at step %d", rd.path, trainer.state.step)
        return trainer.fit()
    finally:
        close_logger()
        ddp.teardown()


def saved_config(raw: Mapping[str, Any], source: str) -> PretrainExperiment:
    """A run's own ``config.yaml``.  One written before the motif objective existed has no
    ``pretrain.motif_weight``: that run trained without it, whatever today's default."""
    pretrain = dict(raw.get("pretrain") or {})
    pretrain.setdefault("motif_weight", 0.0)
    return PretrainExperiment.from_dict({**raw, "pretrain": pretrain}, source=source)


__all__ = ["default_run_dir", "load_pretrain_config", "pretrain", "resume"]
