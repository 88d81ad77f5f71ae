"""One optimisation step: the function ``molsepnorm train`` runs on every batch.

forward -> loss on the labelled entries (regression targets standardized) -> backward ->
gradient clipping -> AdamW step -> learning-rate schedule step.  A NaN or infinite loss,
or a finite loss whose gradient norm is not finite, never reaches the weights: the step
reports it and leaves the policy (stop, or skip the batch) to the epoch loop.
``scripts/benchmark.py`` times this very step.
"""
from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from molsepnorm.checkpoint.scaling import TargetScaler
from molsepnorm.errors import MolsepnormError
from molsepnorm.train import distributed as ddp
from molsepnorm.train.logs import LOGGER_NAME

if TYPE_CHECKING:
    from molsepnorm.data.collate import GraphBatch


class NonFiniteLossError(MolsepnormError, FloatingPointError):
    """The training loss or its gradient became NaN or infinite; the message names the step and batch."""


def skip_or_stop(message: str, advice: str, policy: str, in_a_row: int, max_in_a_row: int, section: str) -> int:
    """The non-finite policy of ``train`` and ``pretrain`` for a batch nothing was applied from.

    ``policy`` "stop" raises :class:`NonFiniteLossError` with ``message`` and ``advice``;
    "skip" logs the skip and returns the new count of skips in a row (``in_a_row + 1``),
    raising once it exceeds ``max_in_a_row`` (``<section>.max_skipped_batches``).
    """
    if policy != "skip":
        raise NonFiniteLossError(f"{message}. {advice}")
    in_a_row += 1
    if in_a_row > max_in_a_row:
        raise NonFiniteLossError(f"{message}: {in_a_row} non-finite batches in a row "
                                 f"({section}.max_skipped_batches = {max_in_a_row}); stopping")
    logging.getLogger(LOGGER_NAME).warning("skipped a batch: %s", message)
    return in_a_row


def batch_loss(kind: str, out: Tensor, target: Tensor) -> Tensor:
    """Mean loss over the labelled entries of ``target`` (NaN = missing); out, target (B, T).

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


@dataclass
class StepResult:
    """The outcome of one step: the loss and the graphs of the batch, or why nothing was applied."""

    loss: float
    graphs: int
    problem: Optional[str] = None  # "training loss is nan", ...: the weights were not changed

    @property
    def applied(self) -> bool:
        return self.problem is None


class TrainStep:
    """The optimisation step, callable on a padded batch.

    Args:
        model: the Graphormer (possibly DDP-wrapped), in train mode.
        optimizer: AdamW over its parameters.
        scheduler: the learning-rate schedule, stepped after every applied step.
        loss: ``"l1"``, ``"mse"`` or ``"bce"`` (see :func:`resolve_loss`).
        scaler: regression target standardization, or None.
        clip_norm: the largest gradient norm, or None (no clipping; the norm is still
            checked for being finite).
        device: where batches go.
        bf16: bfloat16 autocast of the forward pass (CUDA).
        env: the distributed environment: every rank decides on a non-finite batch together.
    """

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any, loss: str,
                 scaler: Optional[TargetScaler] = None, clip_norm: Optional[float] = None,
                 device: torch.device | str = "cpu", bf16: bool = False,
                 env: Optional[ddp.DistEnv] = None) -> None:
        self.model = model
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.loss = loss
        self.scaler = scaler
        self.clip_norm = clip_norm
        self.device = torch.device(device)
        self.bf16 = bf16
        self.env = env or ddp.DistEnv(device=self.device)
        self.params = list(model.parameters())  # walked once, not at every step

    def autocast(self) -> Any:
        """bfloat16 autocast of a forward pass when ``bf16``, else a no-op context."""
        return torch.autocast("cuda", dtype=torch.bfloat16) if self.bf16 else contextlib.nullcontext()

    def compute_loss(self, batch: "GraphBatch") -> Tensor:
        """The scalar loss of a batch already on the device: forward pass and loss.

        Everything else of the step (finite checks, backward, clipping, optimizer and
        schedule) is the same for any objective: self-supervised pretraining
        (:mod:`molsepnorm.pretrain`) overrides only this.
        """
        target = batch.y.float()
        if self.scaler is not None:
            target = self.scaler.transform(target)
        with self.autocast():
            out = self.model(batch)  # (B, T)
        return batch_loss(self.loss, out.float(), target)

    def __call__(self, batch: "GraphBatch") -> StepResult:
        batch = batch.to(self.device, non_blocking=True)
        loss = self.compute_loss(batch)
        finite = bool(torch.isfinite(loss))
        if ddp.any_rank(not finite, self.env):  # every rank decides together, none hangs in backward
            what = (f"training loss is {float(loss.detach())}" if not finite
                    else "training loss is not finite on another rank")
            return StepResult(float("nan"), batch.num_graphs, what)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        # gradients are already all-reduced under DDP, so every rank sees the same norm
        grad_norm = nn.utils.get_total_norm([p.grad for p in self.params if p.grad is not None])
        if not bool(torch.isfinite(grad_norm)):
            self.optimizer.zero_grad(set_to_none=True)
            return StepResult(float("nan"), batch.num_graphs,
                              f"gradient norm is {float(grad_norm)} (loss {float(loss.detach()):.4g})")
        if self.clip_norm is not None and float(grad_norm) + 1e-6 > self.clip_norm:
            # clip_grad_norm_ is get_total_norm, then this scaling by min(1, clip / (norm + 1e-6));
            # skipped where the factor is 1, which clip_grad_norm_ multiplies by at every step
            nn.utils.clip_grads_with_norm_(self.params, self.clip_norm, grad_norm)
        self.optimizer.step()
        self.scheduler.step()
        return StepResult(float(loss.detach()), batch.num_graphs)
