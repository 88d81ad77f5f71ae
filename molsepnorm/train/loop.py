"""The :class:`Trainer`: epochs of optimisation steps, evaluation, checkpoints, exact resume.

Read top to bottom:

1. ``__init__``: the resolved config (the caller's is never changed), the model, the
   target scaler, the batch sampler, AdamW with warm-up then linear decay, and the
   :class:`~molsepnorm.train.step.TrainStep` that every batch goes through;
2. :meth:`Trainer.fit`: epochs until the epoch / step budget or early stopping;
3. :meth:`Trainer._train_epoch`: the steps of one epoch (a non-finite batch stops the run
   or is skipped, ``train.on_nonfinite``);
4. :meth:`Trainer._end_epoch`: validation through the shared
   :func:`~molsepnorm.inference.run`, a row in ``metrics.jsonl``, ``best.pt`` when the
   validation metric improves (or, with the blend below, ties with a better Graphormer),
   ``last.pt`` once ``train.checkpoint_every_seconds`` of training have passed since the
   previous one (and after the last epoch); with
   ``train.monitor_blend`` (regression) the metric is that of the Graphormer's blend with
   its fingerprint companion, fitted before the first epoch (:meth:`Trainer._prepare_blend`);
5. :meth:`Trainer._finish`: the best weights (or, with ``train.average_best``, the average
   of the best epochs' weights, :mod:`~molsepnorm.train.soup`), with ``train.companion``
   a fingerprint model fitted on the training split (now, or before the first epoch) and
   blended in (:mod:`~molsepnorm.train.companion`, :mod:`~molsepnorm.train.blend`), on the
   test split, ``best.pt``, ``results.json`` and ``test_predictions.csv`` (each test molecule's
   label and prediction, :func:`~molsepnorm.inference.evaluate.evaluation_frame`).

Checkpoints are :class:`~molsepnorm.checkpoint.Checkpoint` objects; ``last.pt`` also
carries the training state of :mod:`~molsepnorm.train.state`.
"""
from __future__ import annotations

import copy
import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Optional

import numpy as np
import torch
from torch import Tensor, nn
from torch.utils.data import DataLoader, Sampler

from molsepnorm import _stop
from molsepnorm.checkpoint import (ApplicabilityDomain, Checkpoint, DataProvenance, FeaturizerSpec, TargetScaler,
                                   TaskSpec)
from molsepnorm.checkpoint.run_dir import RunDir
from molsepnorm.data.collate import GraphBatch, GraphCollator
from molsepnorm.data.columns import num_atoms, targets
from molsepnorm.errors import MolsepnormError
from molsepnorm.inference.evaluate import applicability_warnings, evaluation_frame, write_evaluation_csv
from molsepnorm.inference.metrics import compute_metrics, is_ahead, is_better, summary_table
from molsepnorm.metric_names import HIGHER_IS_BETTER
from molsepnorm.inference.runner import Runner, run
from molsepnorm.train import distributed as ddp
from molsepnorm.train.batching import bucketed_batch_norm, make_train_sampler
from molsepnorm.train.blend import ValidationBlend, component_scores, format_weights
from molsepnorm.train.companion import CompanionFit, feature_name, fit_blend, prepare_blend
from molsepnorm.train.config import (ExperimentConfig, earliest_stop, resolve_average_best, resolve_monitor,
                                     resolve_patience, with_task_defaults)
from molsepnorm.train.ema import WeightEMA
from molsepnorm.train import novel_atoms
from molsepnorm.train.init import (encoder_eval, freeze_encoder, init_config, init_scaler, load_init_weights,
                                   resolve_init)
from molsepnorm.train.logs import LOGGER_NAME
from molsepnorm.train.schedule import make_scheduler, resolve_warmup
from molsepnorm.train.soup import TopEpochs
from molsepnorm.train.state import (Progress, capture_rng_state, reseed_after_resize, restore_rng_state,
                                    seed_everything, seed_rank, training_state)
from molsepnorm.train.optimizer import make_adamw
from molsepnorm.train.step import TrainStep, resolve_loss, skip_or_stop
from molsepnorm.train.trainable import check_trainable

log = logging.getLogger(LOGGER_NAME)

#: under DDP, the steps between checks for a signal's stop (each check is a collective)
STOP_CHECK_EVERY = 10


@dataclass
class FitResult:
    """What :meth:`Trainer.fit` returns."""

    run_dir: Optional[Path]
    best_epoch: Optional[int]  # 1-based epoch of the best checkpoint; None if no finite metric
    val: dict[str, float]  # validation metrics of the best checkpoint
    test: dict[str, float]  # test metrics of the best checkpoint
    steps: int
    epochs: int  # epochs completed
    stopped: str  # "epochs", "max_steps" or "early_stopping"
    history: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    averaged_epochs: list[int] = field(default_factory=list)  # train.average_best: the epochs best.pt averages
    companion: Optional[dict[str, Any]] = None  # train.companion: what was fitted and each model's scores
    monitor: str = ""  # the validation metric that picked best.pt (train.monitor, resolved)


def resolve_config(config: ExperimentConfig, splits: Any) -> ExperimentConfig:
    """A copy of ``config`` completed by the data: the model's vocabulary and number of
    targets, and the data set's name when the splits were built in Python."""
    resolved = copy.deepcopy(config)
    if not resolved.data.dataset:
        resolved.data.dataset = str(splits.name)
    model = dict(resolved.model)
    vocab = model.get("vocab")
    if vocab is not None and vocab != splits.vocab:
        if model.get("atom_dims") is not None:  # a fully resolved config from another data set
            raise MolsepnormError(f"model vocabulary {vocab!r} does not match the data set's {splits.vocab!r}")
        log.warning("the config's model vocabulary is %r but %s is featurized with %r: the model follows the data "
                    "(pass --vocab %s to featurize a CSV like the config)", vocab, splits.name, splits.vocab, vocab)
        model.pop("atom_dims", None)
        model.pop("bond_dims", None)
    model["vocab"] = splits.vocab
    model["num_tasks"] = splits.num_tasks
    from molsepnorm.nn.graphormer import GraphormerConfig

    resolved.model = GraphormerConfig.from_dict(model).to_dict()
    return resolved


class Trainer:
    """Trains one Graphormer on a :class:`~molsepnorm.data.DatasetSplits`.

    Args:
        config: the experiment configuration (not modified: :attr:`config` is the
            resolved copy, with the data set's vocabulary and number of targets).
        splits: the data set (``load_dataset(...)``).
        run_dir: where to write (rank 0 only); None writes nothing.
        env: the distributed environment (default: this process alone, device from config).

    It seeds the global random generators with ``train.seed``, as a run must;
    :func:`molsepnorm.train.api.train`, the notebook's call, gives the caller's back.

    >>> trainer = Trainer(config, load_dataset("nci-tpsa"), run_dir="runs/demo")
    >>> result = trainer.fit()
    >>> result.test["mae"]
    """

    def __init__(
        self,
        config: ExperimentConfig,
        splits: Any,
        run_dir: Optional[RunDir | str | Path] = None,
        env: Optional[ddp.DistEnv] = None,
    ) -> None:
        from molsepnorm.nn.graphormer import Graphormer, GraphormerConfig

        config.validate()
        check_trainable(splits)  # targets, and training and validation molecules
        spec, self.init = resolve_init(config, splits.vocab, splits.task)  # fine-tuning; None: from scratch
        if spec != config.train.init:
            config = copy.deepcopy(config)
            config.train.init = spec  # what the run's config.yaml records
        config = with_task_defaults(config, splits.task, len(splits.train))
        self.config = resolve_config(init_config(config, self.init, splits) if self.init else config, splits)
        self.tc = tc = self.config.train
        self.splits = splits
        self.env = env or ddp.DistEnv(device=ddp.resolve_device(tc.device))
        self.device = self.env.device
        if run_dir is not None and not isinstance(run_dir, RunDir):
            run_dir = RunDir(run_dir)
        self.run_dir: Optional[RunDir] = run_dir if self.env.is_main else None
        self.task: str = splits.task
        self.metric: str = splits.metric
        if self.metric not in HIGHER_IS_BETTER:
            raise MolsepnormError(f"data set {splits.name!r} names an unknown metric {self.metric!r}")
        # what picks best.pt and stops early (results.json records it; config.yaml keeps the setting)
        self.monitor: str = resolve_monitor(tc.monitor, self.task, self.metric)
        loss = resolve_loss(tc.loss, self.task)
        self.use_bf16 = self.device.type == "cuda" and tc.precision in ("auto", "bf16")
        if tc.precision == "bf16" and self.device.type != "cuda":
            log.warning("precision bf16 is used on CUDA only; training in fp32 on %s", self.device)

        # the model: identical initial weights on every rank (DDP also broadcasts rank 0's)
        seed_everything(tc.seed)
        self.model_config = GraphormerConfig.from_dict(self.config.model)
        model: nn.Module = Graphormer(self.model_config)
        if self.init is not None:
            load_init_weights(model, self.init, splits)
        if tc.freeze_encoder:
            log.info("encoder frozen: %d parameters of the head train", freeze_encoder(model))
            if self.init is None:  # a probe of random features: fine when asked for, a surprise after init auto
                log.warning("the frozen encoder is randomly initialized (train.init %s: from scratch), so only a "
                            "head on random features trains; give --init ENCODER to probe a pretrained one",
                            tc.init)
        model = ddp.maybe_sync_batchnorm(model, self.env).to(self.device)
        self.model = ddp.wrap_ddp(model, self.env)
        self.collate = GraphCollator(self.model_config.multi_hop_max_dist)

        self.sizes = {split: num_atoms(splits[split]) for split in ("train", "val", "test")}
        self.scaler: Optional[TargetScaler] = None
        if self.task == "regression" and tc.standardize_targets:
            self.scaler = init_scaler(self.init, splits, TargetScaler.fit(targets(splits.train)))
        # the weights that are evaluated and saved: the model's, or their moving average
        self.ema = WeightEMA(ddp.unwrap(self.model), tc.ema_decay) if tc.ema_decay else None
        self.eval_model: nn.Module = self.ema.module if self.ema else ddp.unwrap(self.model)
        self.runner = Runner(self.eval_model, self.task, self.scaler, bf16=self.use_bf16)

        self.train_sampler = make_train_sampler(
            self.sizes["train"], tc.batch_size, tc.batching, tc.max_tokens, seed=tc.seed,
            num_replicas=self.env.world_size, rank=self.env.rank,
        )
        self.steps_per_epoch = len(self.train_sampler)  # type: ignore[arg-type]
        if self.steps_per_epoch == 0:
            raise MolsepnormError(f"data set {splits.name!r} has no training molecules")
        self.max_epochs, self.total_steps = self._budget()
        self.patience = resolve_patience(tc.patience, self.max_epochs)  # None: no early stopping
        self.earliest_stop = earliest_stop(tc.patience, self.max_epochs)
        # fused, with the step's bookkeeping cached on CPU: small steps are dominated by
        # per-operation costs (molsepnorm.train.optimizer; docs/benchmarks.md)
        self.optimizer = make_adamw(ddp.unwrap(self.model).parameters(), self.device, lr=tc.lr,
                                    betas=tuple(tc.adam_betas), eps=tc.adam_eps, weight_decay=tc.weight_decay)
        self.warmup_steps = resolve_warmup(tc.warmup_steps, tc.warmup_fraction, self.total_steps)
        self.scheduler = make_scheduler(self.optimizer, tc.lr, tc.end_lr, self.warmup_steps, self.total_steps)
        self.step = TrainStep(self.model, self.optimizer, self.scheduler, loss, self.scaler, tc.clip_norm,
                              self.device, self.use_bf16, self.env)
        if self.env.is_distributed:  # different dropout masks per rank, same weights
            seed_rank(tc.seed, self.env.rank)
        self.state = Progress()
        self._best_state: Optional[dict[str, Tensor]] = None
        # more than one: the best epochs' weights, averaged into best.pt at the end
        self.average_best = resolve_average_best(tc.average_best, self.task)
        self.top = TopEpochs(self.average_best, self.monitor) if self.average_best > 1 else None
        self._unsaved_seconds = 0.0  # training seconds since last.pt was last written
        self._domain: Optional[ApplicabilityDomain] = None  # built when the first checkpoint is written
        # train.monitor_blend: the companion fitted before the first epoch, and the blend's validation
        # metric (weights chosen every epoch) picks best.pt and drives early stopping. monitor_blend is
        # the intent (a resume of an older run turns it off); blend is set once the companion is fitted
        self.monitor_blend = (tc.monitor_blend and self.task == "regression" and tc.companion_weight == "auto"
                              and getattr(self.eval_model, "companion", None) is not None)
        self.blend: Optional[ValidationBlend] = None  # set by _prepare_blend
        self._companion_fit: Optional[CompanionFit] = None
        self._companion_state: dict[str, Tensor] = {}  # the fitted companion's buffers, weights 0

    def _budget(self) -> tuple[int, int]:
        """``(epochs to run, scheduler length in steps)`` from ``epochs`` and ``max_steps``."""
        from molsepnorm.train.config import auto_epochs

        epochs, max_steps = self.tc.epochs, self.tc.max_steps
        if epochs == "auto":
            epochs = auto_epochs(self.steps_per_epoch)
        if epochs is None:
            assert max_steps is not None
            # a bucketed epoch's length varies a little; the loop stops at max_steps anyway
            return math.ceil(max_steps / self.steps_per_epoch) + (1 if self.tc.batching == "bucket" else 0), max_steps
        total = epochs * self.steps_per_epoch
        return epochs, total if max_steps is None else min(total, max_steps)

    # ------------------------------------------------------------------ training
    def fit(self) -> FitResult:
        """Train until the epoch / step budget or early stopping, then test the best weights.

        On CPU with ``train.cpu_malloc: heap`` (the default), glibc's malloc serves large
        blocks from its heap while this runs, and torch uses ``train.threads`` threads:
        process-wide settings, restored when fit returns (:mod:`molsepnorm.train.allocator`,
        :mod:`molsepnorm._torch_state`).
        """
        from molsepnorm.train.allocator import heap_for_large_blocks

        from molsepnorm._torch_state import torch_threads

        with heap_for_large_blocks(self.device.type == "cpu" and self.tc.cpu_malloc == "heap"), \
                torch_threads(self.tc.threads if self.device.type == "cpu" else None):
            return self._fit()

    def _fit(self) -> FitResult:
        start = time.perf_counter()
        if not self.state.started:
            self._log_start()
            self._save_last()  # from now on the run directory always holds a resumable last.pt
        if self.monitor_blend and self.blend is None:
            self._prepare_blend()
        stopped = "epochs"
        with _stop.step_boundaries():  # a signal here ends the step, writes last.pt, then stops; later, at once
            while self.state.epoch < self.max_epochs:
                if self.tc.max_steps is not None and self.state.step >= self.tc.max_steps:
                    stopped = "max_steps"
                    break
                if self.patience is not None and self.state.bad_epochs >= self.patience \
                        and self.state.epoch >= self.earliest_stop:
                    stopped = "early_stopping"
                    break
                self._train_epoch()  # a last, partial epoch when max_steps ends it
                self._end_epoch()
            if self._unsaved_seconds > 0:  # the last epoch's state, whatever train.checkpoint_every_seconds says
                self._save_last()
            if ddp.any_rank(_stop.asked() is not None, self.env):  # asked during the last epoch's validation
                log.info("stopped by a signal after the last step, before testing; last.pt written: molsepnorm "
                         "train --resume %s", self.run_dir.path if self.run_dir is not None else "RUN")
                _stop.stop_now()
        if stopped == "epochs" and self.tc.max_steps is not None and self.state.step >= self.tc.max_steps \
                and (self.tc.epochs is None or self.state.epoch < self.max_epochs):
            stopped = "max_steps"
        result = self._finish(stopped, time.perf_counter() - start)
        if self.run_dir is not None:
            log.info("finished (%s) after %s, %s; best epoch %s", stopped, _count(result.epochs, "epoch"),
                     _count(result.steps, "step"), result.best_epoch)
        return result

    def _log_start(self) -> None:
        n_params = ddp.unwrap(self.model).num_parameters()
        s, mc, tc = self.splits, self.model_config, self.tc
        log.info("data %s: %s, targets %s; train %d, val %d, test %d", s.name, self.task,
                 ", ".join(s.target_names), len(s.train), len(s.val), len(s.test))
        if len(s.test) == 0:
            log.warning("the test split is empty: the run reports no test metrics")
        if self.task == "binary" and len(s.val):
            self._warn_one_class_val()
        log.info("model Graphormer norm=%s, %d layers, hidden %d, %d parameters, dropout %g; device %s%s", mc.norm,
                 mc.num_layers, mc.hidden_dim, n_params, mc.dropout, self.device,
                 f" x {self.env.world_size} processes" if self.env.is_distributed else "")
        stopping = "no early stopping"
        if self.patience is not None and max(self.patience, self.earliest_stop) >= self.max_epochs:
            stopping = f"no early stopping within {_count(self.max_epochs, 'epoch')}"
        elif self.patience is not None:
            stopping = (f"early stopping after {_count(self.patience, 'epoch')} without a better validation "
                        f"{self.monitor}" + (f", not before epoch {self.earliest_stop}" if self.earliest_stop else ""))
        log.info("training: %s%s x %s (%s in all, %d warm-up), batch %d, lr %g, loss %s%s; %s",
                 _count(self.max_epochs, "epoch"), " (auto)" if tc.epochs == "auto" else "",
                 _count(self.steps_per_epoch, "step"), _count(self.total_steps, "step"), self.warmup_steps,
                 tc.batch_size, tc.lr, self.step.loss, f", {self.scaler!r}" if self.scaler else "", stopping)
        by = f"validation {self.monitor}" + (" of the blend with the companion" if self.monitor_blend else "")
        log.info("best.pt: %s", f"the average of the {self.average_best} best epochs' weights by {by}" if self.top
                 else f"the best epoch's weights by {by}")
        bucketed = bucketed_batch_norm(mc, tc.batching)
        if bucketed:
            log.warning("%s. Prefer --batching random, or the batchrenorm kind (docs/accuracy.md).", bucketed)
        if self.run_dir is not None:
            log.info("run directory %s", self.run_dir.path)

    def _warn_one_class_val(self) -> None:
        """ROC-AUC (and PR-AUC) of a target whose validation molecules are of one class is
        undefined: say so before training, not after it as a missing ``best.pt``."""
        y = targets(self.splits.val)
        for t, name in enumerate(self.splits.target_names):
            labels = y[:, t][np.isfinite(y[:, t])]
            classes = np.unique(labels)
            if len(classes) < 2:
                held = f"all {int(classes[0])}" if len(classes) else "none labelled"
                log.warning("the validation split holds one class of %s (%d molecules, %s): its validation "
                            "metrics are undefined%s. Give a validation split with both classes (more molecules, "
                            "another --split-seed or --split-by, a split column)", name, len(labels), held,
                            ", and with one target no epoch can be chosen: the run would end without best.pt"
                            if y.shape[1] == 1 else "")

    def _loader(self, batch_sampler: Sampler[list[int]], seed: int) -> DataLoader:
        # an own generator: creating the iterator must not draw from the global RNG
        generator = torch.Generator()
        generator.manual_seed(seed)
        return DataLoader(self.splits.train, batch_sampler=batch_sampler, collate_fn=self.collate,
                          num_workers=self.tc.num_workers, pin_memory=self.device.type == "cuda", generator=generator)

    def _train_epoch(self) -> None:
        """The steps of epoch ``state.epoch``, from ``state.batch_in_epoch`` on (a resume)."""
        from tqdm import tqdm

        st, tc = self.state, self.tc
        self.model.train()
        if tc.freeze_encoder:
            encoder_eval(ddp.unwrap(self.model))
        self.train_sampler.set_epoch(st.epoch)  # type: ignore[attr-defined]
        skip = st.batch_in_epoch
        loader = self._loader(_SkipBatches(self.train_sampler, skip), tc.seed + st.epoch)
        remaining = len(loader)
        if tc.max_steps is not None:
            remaining = min(remaining, tc.max_steps - st.step)
        bar = tqdm(total=remaining, desc=f"epoch {st.epoch + 1}/{self.max_epochs}", unit="step",
                   disable=None if (tc.progress and self.env.is_main) else True,  # None: off without a terminal
                   leave=False, dynamic_ncols=True)
        t0 = time.perf_counter()
        try:
            for i, batch in enumerate(loader, start=skip):
                if tc.max_steps is not None and st.step >= tc.max_steps:
                    break
                done = self._train_step(batch, i)
                st.batch_in_epoch = i + 1
                bar.update(1)
                if done is None:  # a non-finite batch, skipped (train.on_nonfinite = "skip")
                    continue
                st.loss_sum += done.loss * done.graphs
                st.loss_graphs += done.graphs
                st.epoch_graphs += done.graphs
                if st.step % 5 == 0 or bar.n == bar.total:
                    seconds = st.epoch_seconds + time.perf_counter() - t0
                    bar.set_postfix(loss=f"{done.loss:.4f}", graphs_s=f"{st.epoch_graphs / seconds:.0f}",
                                    lr=f"{self.scheduler.get_last_lr()[0]:.2e}", refresh=False)
                if tc.checkpoint_every_steps and st.step % tc.checkpoint_every_steps == 0 \
                        and st.batch_in_epoch < len(self.train_sampler):  # type: ignore[arg-type]
                    st.epoch_seconds += time.perf_counter() - t0
                    t0 = time.perf_counter()
                    self._save_last()  # mid-epoch; the end of the epoch writes its own
                if self._stop_asked():
                    st.epoch_seconds += time.perf_counter() - t0
                    t0 = time.perf_counter()
                    self._save_last()
                    log.info("stopped by a signal after step %d (epoch %d, batch %d); last.pt written: "
                             "molsepnorm train --resume %s", st.step, st.epoch + 1, st.batch_in_epoch,
                             self.run_dir.path if self.run_dir is not None else "RUN")
                    _stop.stop_now()
        finally:
            bar.close()
            st.epoch_seconds += time.perf_counter() - t0

    def _stop_asked(self) -> bool:
        """A signal's stop (:mod:`molsepnorm._stop`), agreed by every rank after the same step:
        under DDP checked every ``STOP_CHECK_EVERY`` steps (a collective, which waits for the
        device), in one process after every step."""
        if self.env.is_distributed and self.state.step % STOP_CHECK_EVERY:
            return False
        return ddp.any_rank(_stop.asked() is not None, self.env)

    def _train_step(self, batch: GraphBatch, index: int) -> Optional[Any]:
        """:class:`~molsepnorm.train.step.TrainStep` on one batch, then the non-finite policy:
        stop with :class:`NonFiniteLossError` naming the step and batch (default), or skip
        the batch (returns None)."""
        done = self.step(batch)
        if done.applied:
            self.state.step += 1
            if self.ema is not None:
                self.ema.update(ddp.unwrap(self.model))
            self.state.skipped_in_a_row = 0
            return done
        st, tc = self.state, self.tc
        st.skipped_in_a_row = skip_or_stop(
            f"{done.problem} at {self._where(batch, index)}",
            "Try a lower --lr, gradient clipping (train.clip_norm), check the targets for extreme values, or skip "
            "such batches with --on-nonfinite skip.", tc.on_nonfinite, st.skipped_in_a_row, tc.max_skipped_batches,
            "train")
        st.skipped_batches += 1
        return None

    def _where(self, batch: GraphBatch, index: int) -> str:
        """The step and batch (and its first molecules) for a non-finite message: built only then."""
        st = self.state
        smiles = f"; molecules: {batch.smiles[:5]}{' ...' if len(batch.smiles) > 5 else ''}" if batch.smiles else ""
        return f"epoch {st.epoch + 1}, step {st.step + 1}, batch {index} of the epoch{smiles}"

    def _end_epoch(self) -> None:
        """Validate, log the epoch's row, write best.pt (if improved) and last.pt (if due)."""
        st = self.state
        sums = ddp.all_reduce_sum([st.loss_sum, float(st.loss_graphs), float(st.epoch_graphs), st.epoch_seconds],
                                  self.env)
        train_loss = sums[0] / sums[1] if sums[1] else float("nan")
        epoch_seconds = sums[3] / self.env.world_size
        graphs_per_s = sums[2] / epoch_seconds if epoch_seconds > 0 else float("nan")
        t_eval = time.perf_counter()
        y_val, predicted = self.predict("val")
        val = self._metrics(y_val, predicted)
        monitored, blend_row, choice = val, {}, None
        if self.blend is not None:  # train.monitor_blend
            choice = self.blend.choose(predicted)
            monitored = self._metrics(y_val, self.blend.predictions(predicted, choice))
            blend_row = {**{f"val_blend_{k}": v for k, v in monitored.items()},
                         "blend_weight": format_weights(choice.weights, choice.weights_novel)}
        eval_seconds = time.perf_counter() - t_eval
        st.epoch += 1
        st.batch_in_epoch = 0
        value = monitored.get(self.monitor, float("nan"))
        finite = _params_finite(self.eval_model)
        improved = is_better(self.monitor, value, st.best_value) and finite
        own = val.get(self.monitor, float("nan"))
        # train.monitor_blend: an epoch whose blend ties with the best (the Graphormer weighs nothing in
        # either) keeps the better Graphormer in best.pt, but is no progress for early stopping
        tiebreak = own if self.blend is not None else None
        kept = finite and is_ahead(self.monitor, value, tiebreak, st.best_value, st.best_model_value)
        if self.top is not None and finite:
            self.top.offer(value, st.epoch, self.eval_model.state_dict(), tiebreak=tiebreak)
        if kept:
            st.best_value, st.best_epoch, st.best_val, st.best_model_value = value, st.epoch, dict(monitored), own
            st.best_step = st.step
            self._best_state = self._weights_with(choice)
        st.bad_epochs = 0 if improved else st.bad_epochs + 1
        row = {"epoch": st.epoch, "step": st.step, "lr": self.scheduler.get_last_lr()[0],
               "train_loss": train_loss, **{f"val_{k}": v for k, v in val.items()}, **blend_row,
               f"best_val_{self.monitor}": st.best_value, "epoch_seconds": epoch_seconds,
               "eval_seconds": eval_seconds, "graphs_per_second": graphs_per_s}
        if self.tc.on_nonfinite == "skip":
            row["skipped_batches"] = st.skipped_batches
        st.loss_sum, st.loss_graphs, st.skipped_batches, st.epoch_graphs, st.epoch_seconds = 0.0, 0, 0, 0, 0.0
        if self.run_dir is not None:
            self.run_dir.append_metrics(row)
        log.info("epoch %d  step %d  train loss %.4f  val %s%s%s  (%.1f s, %.0f graphs/s)", st.epoch, st.step,
                 train_loss, _short(val), f"  blend {_short(monitored)} (weight {blend_row['blend_weight']})"
                 if blend_row else "", "  *best*" if kept else "", epoch_seconds, graphs_per_s)
        if kept and self.run_dir is not None:
            self._checkpoint("best", state_dict=self._best_state).save(self.run_dir.best)
        # epoch_seconds is the same on every rank (all-reduced), so all ranks agree on saving (a collective)
        self._unsaved_seconds += epoch_seconds
        if self._unsaved_seconds >= self.tc.checkpoint_every_seconds:
            self._save_last()

    # ------------------------------------------------------------------ evaluation
    def predict(self, split: str | Any) -> tuple[np.ndarray, np.ndarray]:
        """``(targets, predictions)`` ``(N, T)`` of a split name or a data set, in original units
        (probabilities for binary); under DDP every rank runs a share and receives all rows."""
        dataset = self.splits[split] if isinstance(split, str) else split
        out = run([self.runner], dataset, batch_size=self.tc.eval_batch_size or 2 * self.tc.batch_size,
                  sizes=self.sizes[split] if isinstance(split, str) else None, num_workers=self.tc.num_workers,
                  shard=(self.env.rank, self.env.world_size),
                  gather=lambda parts: ddp.all_gather_objects(parts, self.env))
        return out.targets, out.values[0]

    def evaluate(self, split: str | Any = "val") -> dict[str, float]:
        """Metrics of the current weights on a split name (``"val"``, ``"test"``, ``"train"``) or a data set."""
        return self._metrics(*self.predict(split))

    def _metrics(self, y_true: np.ndarray, y_pred: np.ndarray) -> dict[str, float]:
        return compute_metrics(self.task, y_true, y_pred, self.splits.target_names, dataset=self.splits.name)

    def _weights_with(self, choice: Any) -> dict[str, Tensor]:
        """A CPU copy of the evaluated weights; with a blend ``choice`` (train.monitor_blend),
        its weights set in the companion's buffers (and reset to 0 in the model afterwards)."""
        if choice is not None:  # only a model with a companion has a blend
            choice.set(self.eval_model.companion)
        try:
            return {k: v.detach().to("cpu", copy=True) for k, v in self.eval_model.state_dict().items()}
        finally:
            if choice is not None:
                self.eval_model.companion.set_weights(0.0)

    # ------------------------------------------------------------------ checkpoints
    def _model_state(self) -> dict[str, Tensor]:
        return ddp.unwrap(self.model).state_dict()

    def _checkpoint(self, kind: str, state_dict: Optional[dict[str, Tensor]] = None,
                    metrics: Optional[dict[str, Any]] = None) -> Checkpoint:
        """The current model (or ``state_dict``) as a :class:`~molsepnorm.checkpoint.Checkpoint`."""
        st, s, dc = self.state, self.splits, self.config.data
        return Checkpoint(
            model_config=self.model_config.to_dict(),
            state_dict=state_dict if state_dict is not None else self._model_state(),
            featurizer=FeaturizerSpec.current(s.vocab, self.model_config.multi_hop_max_dist),
            task=TaskSpec(self.task, tuple(s.target_names), self.metric, HIGHER_IS_BETTER[self.metric]),
            target_scaling=self.scaler,
            data=DataProvenance(dataset=str(dc.dataset), name=str(s.name), options=dict(dc.options),
                                source=str(s.source), sizes=dict(s.sizes), data_root=dc.data_root,
                                sha256=s.info.get("sha256")),
            config=self._config_record(),
            metrics=metrics if metrics is not None else {"val": dict(st.best_val)},
            kind=kind,
            epoch=st.best_epoch if kind == "best" else st.epoch,
            step=st.best_step if kind == "best" and st.best_step is not None else st.step,
            applicability=self._applicability(),
        )

    def _config_record(self) -> dict[str, Any]:
        """The run's configuration as a checkpoint records it: the companion's features as
        validation chose them (the model's), not as the configuration proposed them, so that
        a resumed run's checkpoints equal an uninterrupted one's."""
        config = self.config.to_dict()
        for key in ("companion_radius", "companion_properties"):
            config["model"][key] = getattr(self.model_config, key)
        return config

    def _applicability(self) -> ApplicabilityDomain:
        """The training split's applicability domain (what ``predict`` warns against), built once."""
        if self._domain is None:
            self._domain = ApplicabilityDomain.from_splits(self.splits)
            log.info("%s", self._domain.summary())
        return self._domain

    def _save_last(self) -> None:
        self._unsaved_seconds = 0.0
        # every rank's RNG state, so that a resumed DDP run also draws the same dropout masks
        rng = ddp.all_gather_objects(capture_rng_state(), self.env)
        if self.run_dir is None:
            return
        checkpoint = self._checkpoint("last")
        checkpoint.training_state = training_state(self.optimizer, self.scheduler, self.state, rng, self._best_state)
        if self.ema is not None:
            checkpoint.training_state["ema"] = self.ema.state_dict()
        if self.top is not None:
            checkpoint.training_state["top_epochs"] = self.top.state_dict()
        checkpoint.save(self.run_dir.last)

    def load_training_state(self, checkpoint: Checkpoint) -> None:
        """Restore model, optimizer, scheduler, progress and RNG from a ``last.pt`` checkpoint."""
        ts = checkpoint.training_state
        if ts is None:
            raise MolsepnormError(f"{checkpoint.name} has no training state (a best.pt?): resume from last.pt")
        ddp.unwrap(self.model).load_state_dict(checkpoint.state_dict)
        self.optimizer.load_state_dict(ts["optimizer"])
        self.scheduler.load_state_dict(ts["scheduler"])
        self.state = Progress.from_dict(ts["progress"])
        if self.monitor_blend and self.state.epoch > 0 and "best_model_value" not in ts["progress"]:
            log.warning("%s was written before train.monitor_blend: its best epochs were picked by the Graphormer's "
                        "own validation %s, and the run goes on so; the companion is fitted after the last epoch",
                        checkpoint.name, self.monitor)
            self.monitor_blend = False
        self._best_state = ts.get("best_model")
        if self.ema is not None:
            if ts.get("ema") is not None:
                self.ema.load_state_dict(ts["ema"])
            else:
                raise MolsepnormError(f"{checkpoint.name} was written without train.ema_decay: it cannot resume a "
                                      "run with a weight average")
        if self.top is not None:
            if ts.get("top_epochs") is None:  # a run begun before train.average_best existed
                log.warning("%s holds no kept epochs (a run begun before train.average_best): best.pt will be the "
                            "best epoch's weights", checkpoint.name)
                self.top = None
            else:
                self.top.load_state_dict(ts["top_epochs"])
        rngs = ts["rng"]
        if len(rngs) == self.env.world_size:
            restore_rng_state(rngs[self.env.rank])
        else:
            log.warning("checkpoint written by %d processes, resumed on %d: RNG streams are re-seeded, the run "
                        "continues but will not match an uninterrupted one exactly", len(rngs), self.env.world_size)
            reseed_after_resize(self.tc.seed, self.state.step, self.env.rank)

    # ------------------------------------------------------------------ the end
    def _finish(self, stopped: str, seconds: float) -> FitResult:
        st = self.state
        best_state = self._best_state
        if best_state is not None:
            self.eval_model.load_state_dict(best_state)
        else:
            log.warning("no epoch gave a finite validation %s: no best.pt; reporting the last weights", self.monitor)
        averaged: list[int] = []  # the epochs whose weights best.pt averages (train.average_best)
        if self.top is not None and len(self.top) > 1:
            best_state, averaged = self.top.average(), sorted(self.top.epochs)
            self.eval_model.load_state_dict(best_state)
            log.info("best.pt averages the weights of epochs %s, the %d best by validation %s%s",
                     ", ".join(map(str, averaged)), len(averaged), self.monitor,
                     " of the blend" if self.blend is not None else "")
        companion = self._fit_companion()
        if companion is not None and best_state is not None:
            best_state = {k: v.detach().clone() for k, v in self.eval_model.state_dict().items()}
        y_test, p_test = self.predict("test")
        test = self._metrics(y_test, p_test)
        # the best epoch's validation scores are known; an average's, a blend's or the last weights' are not
        known = best_state is not None and not averaged and companion is None
        val = dict(st.best_val) if known else self.evaluate("val")
        if averaged and st.best_value is not None:
            # what the epochs were ranked by: the blend (monitor_blend), else the Graphormer alone
            alone = companion is not None and self.blend is None
            mine = (companion.scores["graphormer"]["val"] if alone else val).get(self.monitor)
            if mine is not None and is_better(self.monitor, st.best_value, mine):
                # the best of several epochs on these molecules scores higher on them than it will on
                # others: below it is usual (docs/accuracy.md, "Choosing the checkpoint"), unless the run
                # was too short for the average to leave its weak first epochs out
                short = st.epoch < 2 * self.average_best
                (log.warning if short else log.info)(
                    "best.pt, the average of epochs %s, scores validation %s %.4f%s; the best epoch alone (%s) "
                    "%.4f. %s --average-best 1 keeps the best epoch's weights", ", ".join(map(str, averaged)),
                    self.monitor, mine, " (the Graphormer, before the companion's blend)" if alone else "",
                    st.best_epoch, st.best_value,
                    f"In {_count(st.epoch, 'epoch')} the average takes in weak early ones." if short else
                    "The best of several epochs scores higher on the molecules that chose it than on others; "
                    "the average predicts new molecules better (docs/accuracy.md, \"Choosing the checkpoint\").")
        history = self.run_dir.read_metrics() if self.run_dir is not None else []
        if self.run_dir is not None:
            if best_state is not None:
                metrics: dict[str, Any] = {"val": val, "test": test}
                if averaged:
                    metrics["averaged_epochs"] = averaged
                if companion is not None:
                    metrics["companion"] = companion.to_dict()
                best = self._checkpoint("best", state_dict=best_state, metrics=metrics)
                best.save(self.run_dir.best)
                flags = applicability_warnings([self._applicability()], self.splits.test,
                                               self.splits.smiles_of("test"), self.splits.vocab)
                frame = evaluation_frame(self.splits, "test", y_test, p_test, self.task, warning_column=flags)
                write_evaluation_csv(frame, self.run_dir.test_predictions, fixed_temporary=True)
            self.run_dir.write_results({
                "dataset": self.splits.name, "task": self.task, "metric": self.metric, "monitor": self.monitor,
                "norm": self.model_config.norm, "seed": self.tc.seed, "best_epoch": st.best_epoch,
                **({"averaged_epochs": averaged} if averaged else {}),
                **({"companion": companion.to_dict()} if companion is not None else {}),
                "epochs": st.epoch, "steps": st.step, "stopped": stopped, "val": val, "test": test,
            })
            # the CLI prints the table itself; on the terminal the log would repeat it
            log.info("best epoch %s (%s on validation)\n%s", st.best_epoch, self.monitor,
                     summary_table({"val": val, "test": test}), extra={"file_only": True})
        ddp.barrier(self.env)
        return FitResult(run_dir=self.run_dir.path if self.run_dir else None, best_epoch=st.best_epoch, val=val,
                         test=test, steps=st.step, epochs=st.epoch, stopped=stopped, history=history,
                         seconds=seconds, averaged_epochs=averaged,
                         companion=companion.to_dict() if companion is not None else None, monitor=self.monitor)

    def _prepare_blend(self) -> None:
        """train.monitor_blend: fit the companion on the training split before the first epoch
        (:func:`~molsepnorm.train.companion.prepare_blend`), its weights 0 while the Graphormer
        trains; :attr:`blend` then chooses and scores the blend after every epoch."""
        companion = self.eval_model.companion
        with torch.random.fork_rng(devices=[]):  # draws nothing from training's random streams: exact resume
            fit, blend = prepare_blend(companion, self.model_config, (self.splits.train, self.sizes["train"]),
                                       (self.splits.val, self.sizes["val"]), self.task, self.splits.target_names,
                                       self.tc.companion_weight, self.scaler, lambda: self.predict("val"),
                                       self.monitor)
        self._companion_state = {k: v.detach().clone() for k, v in companion.state_dict().items()}
        trained = ddp.unwrap(self.model).companion
        if trained is not companion:  # a weight average (train.ema_decay) averages the same fit
            trained.load_state_dict(self._companion_state)
            trained.radius, trained.properties = companion.radius, companion.properties
        self._companion_fit, self.blend = fit, blend
        if self.run_dir is not None:
            log.info("%s companion (%s) fitted on %d training molecules in %.1f s; best.pt and early "
                     "stopping follow the validation %s of its blend with the Graphormer, weights chosen every "
                     "epoch", fit.kind, feature_name(fit.radius, fit.properties), fit.molecules,
                     fit.seconds, self.monitor)

    def _fit_companion(self) -> Optional[CompanionFit]:
        """Fit the model's fingerprint companion (if it has one) on the training split (unless
        :meth:`_prepare_blend` did before the first epoch), choose a regression blend's weights
        on validation (``train.companion_weight: auto``) for the weights kept, and score the
        Graphormer alone, the companion alone and the blend (logged; results.json)."""
        companion = getattr(self.eval_model, "companion", None)
        if companion is None:
            return None
        if self.blend is not None:  # fitted before the first epoch: the weights for the weights kept
            assert self._companion_fit is not None
            fit = self._companion_fit
            # the fit itself, whatever the kept weights carry (an average's rounding, a run resumed from
            # last.pt), weights 0: the Graphormer alone
            companion.load_state_dict(self._companion_state)
            self.blend.settle(companion, fit, lambda: self.predict("val"))
        else:
            fit = fit_blend(companion, self.model_config, (self.splits.train, self.sizes["train"]),
                            (self.splits.val, self.sizes["val"]), self.task, self.splits.target_names,
                            self.tc.companion_weight, self.scaler, lambda: self.predict("val"), self.monitor)
        start = time.perf_counter()
        novel = novel_atoms.price_unseen_atoms(self.eval_model, fit, self.task, self.splits.target_names,
                                               self.splits.train, self.splits.val, self.monitor,
                                               lambda: self.evaluate("val")[self.monitor],
                                               batch_size=self.tc.eval_batch_size or 2 * self.tc.batch_size)
        if novel and novel["validation_molecules"] and self.run_dir is not None:
            log.info("unseen atoms (%d validation molecules hold an atom environment no training molecule has): %s "
                     "(%.1f s)", novel["validation_molecules"], novel_atoms.describe(novel, self.monitor),
                     time.perf_counter() - start)
        fit.scores = component_scores(companion, self.evaluate)
        if self.run_dir is not None:
            log.info("%s companion (%s) fitted on %d training molecules in %.1f s; validation %s: "
                     "Graphormer %.4f, companion %.4f; %s them with weight %s on the companion",
                     fit.kind, feature_name(fit.radius, fit.properties), fit.molecules, fit.seconds,
                     self.monitor,
                     fit.scores["graphormer"]["val"].get(self.monitor, float("nan")),
                     fit.scores["fingerprint"]["val"].get(self.monitor, float("nan")),
                     "best.pt blends" if self._best_state is not None else "the last weights (no best.pt) blend",
                     format_weights(fit.weights, fit.weights_novel))
        return fit


def _count(n: int, noun: str) -> str:
    """``1 epoch``, ``3 epochs``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


class _SkipBatches(Sampler[list[int]]):
    """A batch sampler without its first ``skip`` batches (resuming mid-epoch)."""

    def __init__(self, sampler: Sampler[list[int]], skip: int) -> None:
        self.sampler, self.skip = sampler, skip

    def __iter__(self) -> Iterator[list[int]]:
        for i, batch in enumerate(self.sampler):
            if i >= self.skip:
                yield batch

    def __len__(self) -> int:
        return max(0, len(self.sampler) - self.skip)  # type: ignore[arg-type]


def _params_finite(model: nn.Module) -> bool:
    """True when no parameter holds NaN or inf (such a model is never written as best)."""
    return all(bool(torch.isfinite(p).all()) for p in ddp.unwrap(model).parameters())


def _short(metrics: dict[str, float]) -> str:
    return " ".join(f"{k} {v:.4f}" for k, v in metrics.items() if "/" not in k)
