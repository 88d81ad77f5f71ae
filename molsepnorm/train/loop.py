"""The :class:`Trainer`: fit a Graphormer, evaluate it, checkpoint it, resume it exactly.

One epoch: shuffled batches (see :mod:`~molsepnorm.train.batching`), AdamW steps with
warm-up then linear decay, gradient clipping; then the validation split is evaluated,
a row is appended to ``metrics.jsonl``, ``best.pt`` is written when the validation metric
improves and ``last.pt`` always.  At the end the best weights are evaluated on the test
split and the summary table is printed.

Exact resume (CPU, fixed seed): ``last.pt`` holds the model, optimizer, scheduler, the
RNG states of python / numpy / torch (every rank's), the step, the epoch and the batches
already done in it, the best-so-far and the early-stopping counter, and the running sums
of the epoch's training loss.  Batches depend only on ``(seed, epoch)`` and the
DataLoaders draw their worker seeds from their own generators, so nothing else consumes
the global RNG: a resumed run takes the very same steps as an uninterrupted one.
"""
from __future__ import annotations

import contextlib
import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Optional

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import DataLoader, Sampler

from molsepnorm.data.collate import GraphBatch, GraphCollator
from molsepnorm.errors import MolsepnormError
from molsepnorm.train import distributed as ddp
from molsepnorm.train.batching import EvalBatches, make_train_sampler
from molsepnorm.train.checkpoint import capture_rng_state, restore_rng_state, save_checkpoint
from molsepnorm.train.config import ExperimentConfig
from molsepnorm.train.metrics import HIGHER_IS_BETTER, compute_metrics, is_better
from molsepnorm.train.run_dir import RunDir, summary_table
from molsepnorm.train.scaling import TargetScaler
from molsepnorm.train.schedule import make_scheduler, resolve_warmup

log = logging.getLogger("molsepnorm.train")


class NonFiniteLossError(MolsepnormError, FloatingPointError):
    """The training loss or its gradient became NaN or infinite; the message names the step and batch."""


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


@dataclass
class _State:
    """Mutable training progress; all of it goes into ``last.pt``."""

    step: int = 0
    epoch: int = 0  # epochs completed
    batch_in_epoch: int = 0  # batches of epoch ``epoch`` (0-based) already done
    best_value: Optional[float] = None
    best_epoch: Optional[int] = None
    best_val: dict[str, float] = field(default_factory=dict)
    bad_epochs: int = 0  # epochs without improvement (early stopping)
    loss_sum: float = 0.0  # sum over this epoch's batches of loss * graphs
    loss_graphs: int = 0
    skipped_batches: int = 0  # non-finite batches skipped this epoch (train.on_nonfinite = "skip")
    skipped_in_a_row: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def batch_loss(kind: str, out: Tensor, target: Tensor) -> Tensor:
    """Mean loss over the labelled entries of ``target`` (NaN = missing).

    A batch without any label gives a zero that still depends on every output, so DDP's
    gradient reduction sees every parameter.
    """
    mask = ~torch.isnan(target)
    if not bool(mask.any()):
        return out.sum() * 0.0
    o, t = out[mask], target[mask]
    if kind == "l1":
        return F.l1_loss(o, t)
    if kind == "mse":
        return F.mse_loss(o, t)
    if kind == "bce":
        return F.binary_cross_entropy_with_logits(o, t)
    raise ValueError(f"unknown loss {kind!r}")


def resolve_loss(loss: str, task: str) -> str:
    """``auto`` -> l1 for regression, bce for binary; checks the loss fits the task."""
    if loss == "auto":
        return "l1" if task == "regression" else "bce"
    if (task == "binary") != (loss == "bce"):
        raise MolsepnormError(f"loss {loss!r} does not fit a {task} task; use "
                              f"{'bce' if task == 'binary' else 'l1 or mse'} (or auto)")
    return loss


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


class Trainer:
    """Trains one Graphormer on a :class:`~molsepnorm.data.DatasetSplits`.

    Args:
        config: the experiment configuration; ``config.model`` is completed with the data
            set's vocabulary and number of targets.
        splits: the data set (``load_dataset(...)``).
        run_dir: where to write (rank 0 only); None writes nothing.
        env: the distributed environment (default: this process alone, device from config).

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

        config.train.validate()
        if not config.data.dataset:  # a data set built in Python rather than named
            config.data.dataset = str(splits.name)
        self.config = config
        self.tc = config.train
        self.splits = splits
        self.env = env or ddp.DistEnv(device=ddp.resolve_device(self.tc.device))
        self.device = self.env.device
        if run_dir is not None and not isinstance(run_dir, RunDir):
            run_dir = RunDir(run_dir)
        self.run_dir: Optional[RunDir] = run_dir if self.env.is_main else None
        if self.tc.threads and self.device.type == "cpu":
            torch.set_num_threads(self.tc.threads)
        self.task: str = splits.task
        self.metric: str = splits.metric
        if self.metric not in HIGHER_IS_BETTER:
            raise MolsepnormError(f"data set {splits.name!r} names an unknown metric {self.metric!r}")
        self.loss_kind = resolve_loss(self.tc.loss, self.task)
        self.use_bf16 = self.device.type == "cuda" and self.tc.precision in ("auto", "bf16")
        if self.tc.precision == "bf16" and self.device.type != "cuda":
            log.warning("precision bf16 is used on CUDA only; training in fp32 on %s", self.device)

        # the model: identical initial weights on every rank (DDP also broadcasts rank 0's)
        seed_everything(self.tc.seed)
        self.model_config = GraphormerConfig.from_dict(self._model_dict(config.model, splits))
        config.model = self.model_config.to_dict()
        model: nn.Module = Graphormer(self.model_config)
        model = ddp.maybe_sync_batchnorm(model, self.env).to(self.device)
        self.model = ddp.wrap_ddp(model, self.env)
        self.collate = GraphCollator(self.model_config.multi_hop_max_dist)

        self.sizes = {split: _sizes(splits[split]) for split in ("train", "val", "test")}
        self.scaler: Optional[TargetScaler] = None
        if self.task == "regression" and self.tc.standardize_targets:
            self.scaler = TargetScaler.fit(_targets(splits.train))

        self.train_sampler = make_train_sampler(
            self.sizes["train"], self.tc.batch_size, self.tc.batching, self.tc.max_tokens, seed=self.tc.seed,
            num_replicas=self.env.world_size, rank=self.env.rank,
        )
        self.steps_per_epoch = len(self.train_sampler)  # type: ignore[arg-type]
        if self.steps_per_epoch == 0:
            raise MolsepnormError(f"data set {splits.name!r} has no training molecules")
        self.max_epochs, self.total_steps = self._budget()
        self.optimizer = torch.optim.AdamW(
            unwrap_params(self.model), lr=self.tc.lr, betas=tuple(self.tc.adam_betas), eps=self.tc.adam_eps,
            weight_decay=self.tc.weight_decay,
        )
        self.warmup_steps = resolve_warmup(self.tc.warmup_steps, self.tc.warmup_fraction, self.total_steps)
        self.scheduler = make_scheduler(self.optimizer, self.tc.lr, self.tc.end_lr, self.warmup_steps, self.total_steps)
        if self.env.is_distributed:  # different dropout masks per rank, same weights
            torch.manual_seed(self.tc.seed + 1_000_003 * self.env.rank)
        self.state = _State()
        self._best_state: Optional[dict[str, Tensor]] = None

    # ------------------------------------------------------------------ setup helpers
    @staticmethod
    def _model_dict(model: dict[str, Any], splits: Any) -> dict[str, Any]:
        """The model section completed with the data set's vocabulary and number of targets."""
        out = dict(model)
        vocab = out.get("vocab")
        if vocab is not None and vocab != splits.vocab:
            if out.get("atom_dims") is not None:  # a fully resolved config from another data set
                raise MolsepnormError(f"model vocabulary {vocab!r} does not match the data set's {splits.vocab!r}")
            log.warning("the config's model vocabulary is %r but %s is featurized with %r: the model follows the "
                        "data (pass --vocab %s to featurize a CSV like the config)", vocab, splits.name, splits.vocab,
                        vocab)
            out.pop("atom_dims", None)
            out.pop("bond_dims", None)
        out["vocab"] = splits.vocab
        out["num_tasks"] = splits.num_tasks
        return out

    def _budget(self) -> tuple[int, int]:
        """``(epochs to run, scheduler length in steps)`` from ``epochs`` and ``max_steps``."""
        epochs, max_steps = self.tc.epochs, self.tc.max_steps
        if epochs is None:
            assert max_steps is not None
            # a bucketed epoch's length varies a little; the loop stops at max_steps anyway
            return math.ceil(max_steps / self.steps_per_epoch) + (1 if self.tc.batching == "bucket" else 0), max_steps
        total = epochs * self.steps_per_epoch
        return epochs, total if max_steps is None else min(total, max_steps)

    def _loader(self, dataset: Any, batch_sampler: Sampler[list[int]], seed: int) -> DataLoader:
        # an own generator: creating the iterator must not draw from the global RNG
        generator = torch.Generator()
        generator.manual_seed(seed)
        return DataLoader(
            dataset, batch_sampler=batch_sampler, collate_fn=self.collate, num_workers=self.tc.num_workers,
            pin_memory=self.device.type == "cuda", generator=generator,
        )

    def _autocast(self) -> contextlib.AbstractContextManager:
        if self.use_bf16:
            return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    # ------------------------------------------------------------------ training
    def fit(self) -> FitResult:
        """Train until the epoch / step budget or early stopping, then test the best weights.

        On CPU with ``train.cpu_malloc: heap`` (the default) glibc serves large tensors from
        its heap meanwhile (:mod:`molsepnorm.train.allocator`).
        """
        from molsepnorm.train.allocator import heap_for_large_blocks

        with heap_for_large_blocks(self.device.type == "cpu" and self.tc.cpu_malloc == "heap"):
            return self._fit()

    def _fit(self) -> FitResult:
        start = time.perf_counter()
        rd = self.run_dir
        if self.state.step == 0 and self.state.batch_in_epoch == 0 and self.state.epoch == 0:
            self._log_start()
            self._save_last()  # from now on the run directory always holds a resumable last.pt
        stopped = "epochs"
        while self.state.epoch < self.max_epochs:
            if self.tc.max_steps is not None and self.state.step >= self.tc.max_steps:
                stopped = "max_steps"
                break
            if self.tc.patience is not None and self.state.bad_epochs >= self.tc.patience:
                stopped = "early_stopping"
                break
            self._train_epoch()  # a last, partial epoch when max_steps ends it
            self._end_epoch()
        if stopped == "epochs" and self.tc.max_steps is not None and self.state.step >= self.tc.max_steps \
                and (self.tc.epochs is None or self.state.epoch < self.tc.epochs):
            stopped = "max_steps"
        result = self._finish(stopped, time.perf_counter() - start)
        if rd is not None:
            log.info("finished (%s) after %d epochs, %d steps; best epoch %s", stopped, result.epochs,
                     result.steps, result.best_epoch)
        return result

    def _log_start(self) -> None:
        n_params = sum(p.numel() for p in unwrap_params(self.model))
        s = self.splits
        log.info("data %s: %s, targets %s; train %d, val %d, test %d", s.name, self.task,
                 ", ".join(s.target_names), len(s.train), len(s.val), len(s.test))
        log.info("model Graphormer norm=%s, %d layers, hidden %d, %d parameters; device %s%s",
                 self.model_config.norm, self.model_config.num_layers, self.model_config.hidden_dim, n_params,
                 self.device, f" x {self.env.world_size} processes" if self.env.is_distributed else "")
        log.info("training: %d epochs x %d steps (%d steps in all, %d warm-up), batch %d, lr %g, loss %s%s",
                 self.max_epochs, self.steps_per_epoch, self.total_steps, self.warmup_steps, self.tc.batch_size,
                 self.tc.lr, self.loss_kind, f", {self.scaler!r}" if self.scaler else "")
        if self.run_dir is not None:
            log.info("run directory %s", self.run_dir.path)

    def _train_epoch(self) -> None:
        from tqdm import tqdm

        st, tc = self.state, self.tc
        self.model.train()
        self.train_sampler.set_epoch(st.epoch)  # type: ignore[attr-defined]
        skip = st.batch_in_epoch
        loader = self._loader(self.splits.train, _SkipBatches(self.train_sampler, skip), tc.seed + st.epoch)
        remaining = len(loader)
        if tc.max_steps is not None:
            remaining = min(remaining, tc.max_steps - st.step)
        bar = tqdm(total=remaining, desc=f"epoch {st.epoch + 1}/{self.max_epochs}", unit="step",
                   disable=None if (tc.progress and self.env.is_main) else True,  # None: off without a terminal
                   leave=False, dynamic_ncols=True)
        t0, graphs_seen = time.perf_counter(), 0
        try:
            for i, batch in enumerate(loader, start=skip):
                if tc.max_steps is not None and st.step >= tc.max_steps:
                    break
                done = self._train_step(batch, i)
                st.batch_in_epoch = i + 1
                bar.update(1)
                if done is None:  # a non-finite batch, skipped (train.on_nonfinite = "skip")
                    continue
                loss, n = done
                st.loss_sum += loss * n
                st.loss_graphs += n
                graphs_seen += n
                if st.step % 5 == 0 or bar.n == bar.total:
                    bar.set_postfix(loss=f"{loss:.4f}", graphs_s=f"{graphs_seen / (time.perf_counter() - t0):.0f}",
                                    lr=f"{self.scheduler.get_last_lr()[0]:.2e}", refresh=False)
                if tc.checkpoint_every_steps and st.step % tc.checkpoint_every_steps == 0 \
                        and st.batch_in_epoch < len(self.train_sampler):  # type: ignore[arg-type]
                    self._save_last()  # mid-epoch; the end of the epoch writes its own
        finally:
            bar.close()
        self._epoch_seconds = time.perf_counter() - t0
        self._epoch_graphs = graphs_seen

    def _train_step(self, batch: GraphBatch, index: int) -> Optional[tuple[float, int]]:
        """One optimizer step; returns ``(loss, graphs)``, or None for a skipped non-finite batch.

        A NaN or infinite loss, or a finite loss whose gradient norm is not finite, never
        reaches the weights: training stops with :class:`NonFiniteLossError` naming the
        step and batch, or (``train.on_nonfinite = "skip"``) the batch is skipped.
        """
        st, tc = self.state, self.tc
        batch = batch.to(self.device, non_blocking=True)
        target = batch.y.float()
        if self.scaler is not None:
            target = self.scaler.transform(target)
        with self._autocast():
            out = self.model(batch)
        loss = batch_loss(self.loss_kind, out.float(), target)
        finite = bool(torch.isfinite(loss))
        if ddp.any_rank(not finite, self.env):  # every rank decides together, none hangs in backward
            what = f"training loss is {float(loss.detach())}" if not finite else "training loss is not finite on another rank"
            return self._nonfinite(f"{what} at {self._where(batch, index)}")
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        # gradients are already all-reduced under DDP, so every rank sees the same norm
        grad_norm = nn.utils.clip_grad_norm_(self.model.parameters(),
                                             tc.clip_norm if tc.clip_norm is not None else float("inf"))
        if not bool(torch.isfinite(grad_norm)):
            self.optimizer.zero_grad(set_to_none=True)
            return self._nonfinite(
                f"gradient norm is {float(grad_norm)} (loss {float(loss.detach()):.4g}) at {self._where(batch, index)}")
        self.optimizer.step()
        self.scheduler.step()
        st.step += 1
        st.skipped_in_a_row = 0
        return float(loss.detach()), batch.num_graphs

    def _where(self, batch: GraphBatch, index: int) -> str:
        """The step and batch (and its first molecules) for a non-finite message: built only then."""
        st = self.state
        smiles = f"; molecules: {batch.smiles[:5]}{' ...' if len(batch.smiles) > 5 else ''}" if batch.smiles else ""
        return f"epoch {st.epoch + 1}, step {st.step + 1}, batch {index} of the epoch{smiles}"

    def _nonfinite(self, message: str) -> None:
        """Stop (default) or skip a batch whose loss or gradient is not finite."""
        st, tc = self.state, self.tc
        if tc.on_nonfinite != "skip":
            raise NonFiniteLossError(
                f"{message}. Try a lower --lr, gradient clipping (train.clip_norm), check the targets for extreme "
                "values, or skip such batches with --on-nonfinite skip."
            )
        st.skipped_in_a_row += 1
        if st.skipped_in_a_row > tc.max_skipped_batches:
            raise NonFiniteLossError(f"{message}: {st.skipped_in_a_row} non-finite batches in a row "
                                     f"(train.max_skipped_batches = {tc.max_skipped_batches}); stopping")
        st.skipped_batches += 1
        log.warning("skipped a batch: %s", message)
        return None

    def _end_epoch(self) -> None:
        """Validate, log the epoch's row, write best.pt (if improved) and last.pt."""
        st = self.state
        sums = ddp.all_reduce_sum([st.loss_sum, float(st.loss_graphs),
                                   float(getattr(self, "_epoch_graphs", 0)), getattr(self, "_epoch_seconds", 0.0)],
                                  self.env)
        train_loss = sums[0] / sums[1] if sums[1] else float("nan")
        epoch_seconds = sums[3] / self.env.world_size
        graphs_per_s = sums[2] / epoch_seconds if epoch_seconds > 0 else float("nan")
        t_eval = time.perf_counter()
        val = self.evaluate("val")
        eval_seconds = time.perf_counter() - t_eval
        st.epoch += 1
        st.batch_in_epoch = 0
        completed = st.epoch
        value = val.get(self.metric, float("nan"))
        improved = is_better(self.metric, value, st.best_value) and params_finite(self.model)
        if improved:
            st.best_value, st.best_epoch, st.best_val = value, completed, dict(val)
            st.bad_epochs = 0
            self._best_state = {k: v.detach().to("cpu", copy=True) for k, v in self._model_state().items()}
        else:
            st.bad_epochs += 1
        row = {"epoch": completed, "step": st.step, "lr": self.scheduler.get_last_lr()[0],
               "train_loss": train_loss, **{f"val_{k}": v for k, v in val.items()},
               f"best_val_{self.metric}": st.best_value, "epoch_seconds": epoch_seconds,
               "eval_seconds": eval_seconds, "graphs_per_second": graphs_per_s}
        if self.tc.on_nonfinite == "skip":
            row["skipped_batches"] = st.skipped_batches
        st.loss_sum, st.loss_graphs, st.skipped_batches = 0.0, 0, 0
        if self.run_dir is not None:
            self.run_dir.append_metrics(row)
        log.info("epoch %d  step %d  train loss %.4f  val %s%s  (%.1f s, %.0f graphs/s)", completed, st.step,
                 train_loss, _short(val), "  *best*" if improved else "", epoch_seconds, graphs_per_s)
        if improved and self.run_dir is not None:
            save_checkpoint(self.checkpoint_payload("best"), self.run_dir.best)
        self._save_last()

    # ------------------------------------------------------------------ evaluation
    def predict(self, dataset: Any) -> tuple[np.ndarray, np.ndarray]:
        """``(targets, predictions)`` ``[N, T]`` in original units (probabilities for binary)."""
        return predict_dataset(
            ddp.unwrap(self.model), dataset, task=self.task, scaler=self.scaler, collate=self.collate,
            batch_size=self.tc.eval_batch_size or 2 * self.tc.batch_size, device=self.device, env=self.env,
            bf16=self.use_bf16, num_workers=self.tc.num_workers,
        )

    def evaluate(self, split: str | Any = "val") -> dict[str, float]:
        """Metrics of the current weights on a split name (``"val"``, ``"test"``, ``"train"``) or a data set."""
        dataset = self.splits[split] if isinstance(split, str) else split
        y_true, y_pred = self.predict(dataset)
        return compute_metrics(self.task, y_true, y_pred, self.splits.target_names, dataset=self.splits.name)

    # ------------------------------------------------------------------ checkpoints
    def _model_state(self) -> dict[str, Tensor]:
        return ddp.unwrap(self.model).state_dict()

    def checkpoint_payload(self, kind: str, state_dict: Optional[dict[str, Tensor]] = None,
                           metrics: Optional[dict[str, Any]] = None) -> dict[str, Any]:
        """The self-describing checkpoint dict (see :mod:`~molsepnorm.train.checkpoint`)."""
        from molsepnorm.chem import FEATURIZER_VERSION
        from molsepnorm.encodings import ENCODING_VERSION

        st, s = self.state, self.splits
        state_dict = state_dict if state_dict is not None else self._model_state()
        return {
            "kind": kind,
            "model": {"config": self.model_config.to_dict(),
                      "state_dict": {k: v.detach().cpu() for k, v in state_dict.items()}},
            "featurizer": {"vocab": s.vocab, "featurizer_version": int(FEATURIZER_VERSION),
                           "encoding_version": int(ENCODING_VERSION),
                           "multi_hop_max_dist": int(self.model_config.multi_hop_max_dist)},
            "task": {"type": self.task, "target_names": list(s.target_names), "metric": self.metric,
                     "higher_is_better": HIGHER_IS_BETTER[self.metric]},
            "target_scaling": self.scaler.to_dict() if self.scaler is not None else None,
            "data": {"dataset": str(self.config.data.dataset), "name": str(s.name),
                     "options": dict(self.config.data.options), "source": str(s.source),
                     "sizes": {k: int(v) for k, v in s.sizes.items()}},
            "config": self.config.to_dict(),
            "metrics": metrics if metrics is not None else {"val": dict(st.best_val)},
            "epoch": st.best_epoch if kind == "best" else st.epoch,
            "step": st.step,
        }

    def _training_state(self, rng_per_rank: list[Any]) -> dict[str, Any]:
        return {
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "rng": rng_per_rank,
            "world_size": self.env.world_size,
            "progress": self.state.to_dict(),
            # the best weights so far: last.pt alone restores everything, even if best.pt is
            # newer (a kill between writing best.pt and last.pt)
            "best_model": self._best_state,
        }

    def _save_last(self) -> None:
        # every rank's RNG state, so that a resumed DDP run also draws the same dropout masks
        rng = ddp.all_gather_objects(capture_rng_state(), self.env)
        if self.run_dir is None:
            return
        payload = self.checkpoint_payload("last", metrics={"val": dict(self.state.best_val)})
        payload["training_state"] = self._training_state(rng)
        save_checkpoint(payload, self.run_dir.last)

    def load_training_state(self, checkpoint: dict[str, Any]) -> None:
        """Restore model, optimizer, scheduler, progress and RNG from a ``last.pt`` dict."""
        ts = checkpoint.get("training_state")
        if ts is None:
            raise MolsepnormError("this checkpoint has no training state (a best.pt?): resume from last.pt")
        ddp.unwrap(self.model).load_state_dict(checkpoint["model"]["state_dict"])
        self.optimizer.load_state_dict(ts["optimizer"])
        self.scheduler.load_state_dict(ts["scheduler"])
        self.state = _State(**ts["progress"])
        self._best_state = ts.get("best_model")
        rngs = ts["rng"]
        if len(rngs) == self.env.world_size:
            restore_rng_state(rngs[self.env.rank])
        else:
            log.warning("checkpoint written by %d processes, resumed on %d: RNG streams are re-seeded, the run "
                        "continues but will not match an uninterrupted one exactly", len(rngs), self.env.world_size)
            seed_everything(self.tc.seed + 7919 * (self.state.step + 1) + self.env.rank)

    # ------------------------------------------------------------------ the end
    def _finish(self, stopped: str, seconds: float) -> FitResult:
        st = self.state
        best_state = self._best_state
        if best_state is not None:
            ddp.unwrap(self.model).load_state_dict(best_state)
        else:
            log.warning("no epoch gave a finite validation %s: no best.pt; reporting the last weights", self.metric)
        test = self.evaluate("test")
        val = dict(st.best_val) if best_state is not None else self.evaluate("val")
        history = self.run_dir.read_metrics() if self.run_dir is not None else []
        if self.run_dir is not None:
            if best_state is not None:
                payload = self.checkpoint_payload("best", state_dict=best_state, metrics={"val": val, "test": test})
                save_checkpoint(payload, self.run_dir.best)
            self.run_dir.write_results({
                "dataset": self.splits.name, "task": self.task, "metric": self.metric,
                "norm": self.model_config.norm, "seed": self.tc.seed, "best_epoch": st.best_epoch,
                "epochs": st.epoch, "steps": st.step, "stopped": stopped, "val": val, "test": test,
            })
            table = summary_table({"val": val, "test": test})
            # the CLI prints the table itself; on the terminal the log would repeat it
            log.info("best epoch %s (%s on validation)\n%s", st.best_epoch, self.metric, table,
                     extra={"file_only": True})
        ddp.barrier(self.env)
        return FitResult(run_dir=self.run_dir.path if self.run_dir else None, best_epoch=st.best_epoch, val=val,
                         test=test, steps=st.step, epochs=st.epoch, stopped=stopped, history=history,
                         seconds=seconds)


# ---------------------------------------------------------------------- helpers


@torch.no_grad()
def predict_dataset(
    model: nn.Module,
    dataset: Any,
    task: str,
    scaler: Optional[TargetScaler],
    collate: GraphCollator,
    batch_size: int = 128,
    device: torch.device | str = "cpu",
    env: Optional[ddp.DistEnv] = None,
    bf16: bool = False,
    num_workers: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """``(targets, predictions)`` ``[N, T]`` of ``model`` on ``dataset``, in original units.

    Regression outputs are un-standardized with ``scaler``; binary logits become
    probabilities.  Batches are sorted by size (less padding; in eval mode BatchNorm uses its
    running statistics, so a prediction does not depend on its batch-mates).  Under DDP
    every rank predicts a share of the batches and all ranks receive all predictions.
    """
    env = env or ddp.DistEnv(device=torch.device(device))
    was_training = model.training
    model.eval()
    batches = EvalBatches(_sizes(dataset), batch_size, env.world_size, env.rank)
    generator = torch.Generator()
    generator.manual_seed(0)
    loader = DataLoader(dataset, batch_sampler=batches, collate_fn=collate, num_workers=num_workers,
                        generator=generator)
    autocast = torch.autocast(device_type="cuda", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
    parts: list[tuple[list[int], np.ndarray, np.ndarray]] = []
    for idx, batch in zip(batches.batches, loader):
        batch = batch.to(device, non_blocking=True)
        with autocast:
            out = model(batch).float()
        if task == "binary":
            out = torch.sigmoid(out)
        elif scaler is not None:
            out = scaler.inverse_transform(out)
        y = batch.y.float().cpu().numpy() if batch.y is not None else np.full(tuple(out.shape), np.nan)
        parts.append((idx, y, out.cpu().numpy()))
    model.train(was_training)
    gathered = [p for rank_parts in ddp.all_gather_objects(parts, env) for p in rank_parts]
    num_tasks = gathered[0][2].shape[1] if gathered else 1
    y_true = np.full((len(dataset), num_tasks), np.nan)
    y_pred = np.full((len(dataset), num_tasks), np.nan)
    for idx, y, p in gathered:
        y_true[idx], y_pred[idx] = y, p
    return y_true, y_pred


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch (all devices)."""
    import random

    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def unwrap_params(model: nn.Module) -> list[nn.Parameter]:
    return list(ddp.unwrap(model).parameters())


def params_finite(model: nn.Module) -> bool:
    """True when no parameter holds NaN or inf (such a model is never written as best)."""
    return all(bool(torch.isfinite(p).all()) for p in ddp.unwrap(model).parameters())


def _short(metrics: dict[str, float]) -> str:
    return " ".join(f"{k} {v:.4f}" for k, v in metrics.items() if "/" not in k)


def _sizes(dataset: Any) -> np.ndarray:
    """Atoms per molecule of a data set (fast path for PyG in-memory data sets)."""
    fast = _in_memory_column(dataset, "x")
    if fast is not None:
        return fast
    return np.asarray([int(d.num_nodes) for d in dataset], dtype=np.int64)


def _in_memory_column(dataset: Any, key: str) -> Optional[np.ndarray]:
    slices = getattr(dataset, "slices", None)
    if not isinstance(slices, dict) or key not in slices or not hasattr(dataset, "indices"):
        return None
    s = slices[key]
    counts = (s[1:] - s[:-1]).numpy()
    return counts[np.asarray(dataset.indices(), dtype=np.int64)].astype(np.int64)


def _targets(dataset: Any) -> np.ndarray:
    """``[N, T]`` targets of a data set, NaN where missing."""
    data = getattr(dataset, "_data", None)
    if data is not None and hasattr(dataset, "indices") and isinstance(getattr(dataset, "slices", None), dict):
        y = getattr(data, "y", None)
        if y is not None and "y" in dataset.slices:
            ys = y.reshape(len(dataset.slices["y"]) - 1, -1) if y.dim() == 1 else y
            if ys.size(0) == len(dataset.slices["y"]) - 1:
                return ys[torch.as_tensor(dataset.indices())].float().numpy()
    return torch.cat([torch.as_tensor(d.y).reshape(1, -1).float() for d in dataset], 0).numpy()

