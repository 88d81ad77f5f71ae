"""The one path from padded batches to outputs: predictions in the data set's units, or
graph-token embeddings.

:class:`Runner` is a model plus the last step of its output: a binary task's logits become
probabilities, a standardized regression output is mapped back with the checkpoint's
:class:`~molsepnorm.checkpoint.TargetScaler`.  :func:`run` applies one or more runners to
a sequence of graphs (a data set split, or featurized molecules) in size-sorted batches
(:func:`molsepnorm.data.sampler.size_batches`), in eval mode under
:func:`torch.inference_mode`, and returns one row per graph in input order.

An ensemble's members can run each batch at the same time, one thread each
(``member_threads``; PyTorch's kernels release the GIL): with torch on one intra-op thread,
as ``predict`` runs it, the three members of the default model then share the CPUs
instead of taking turns on one (figures in docs/benchmarks.md, "The members of an ensemble
in threads").  Each member computes exactly what it computes alone, in the same order, so
the outputs are the same to the bit.

Validation during training, ``evaluate``, ``predict``, ``embed`` and ``analyze`` all go
through here.  In eval mode BatchNorm (the graph token's norm in SepNorm) uses its running
statistics, so a molecule's output does not depend on its batch-mates or on the batching.
"""
from __future__ import annotations

import contextlib
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence, Union

import numpy as np
import torch
from torch import Tensor, nn

from molsepnorm.checkpoint.checkpoint import PRETRAINED
from molsepnorm.checkpoint.scaling import TargetScaler
from molsepnorm.errors import MolsepnormError

if TYPE_CHECKING:
    from molsepnorm.checkpoint.checkpoint import Checkpoint
    from molsepnorm.data.collate import GraphBatch

__all__ = ["Runner", "RunOutput", "check_predicts", "run", "TOKENS_PER_MOLECULE"]

# A batch also stops growing at batch_size * TOKENS_PER_MOLECULE padded tokens (and that
# many tokens times TOKENS_PER_MOLECULE token pairs), so a batch of 150-atom molecules
# costs about what a batch of 40-atom ones does.
TOKENS_PER_MOLECULE = 40


def check_predicts(task: str, source: Optional[str] = None) -> None:
    """Raise :class:`MolsepnormError` when a model of ``task`` cannot predict: a pretrained
    encoder (task :data:`~molsepnorm.checkpoint.checkpoint.PRETRAINED`) has no trained head.
    ``source`` (the checkpoint) starts the message when given."""
    if task == PRETRAINED:
        raise MolsepnormError(f"{source + ': ' if source else ''}a pretrained encoder has no trained head, so it "
                              "predicts nothing: fine-tune it with `molsepnorm train --init CKPT` (embeddings work "
                              "as they are)")


class Runner:
    """A Graphormer and the mapping of its head's output to predictions.

    Args:
        model: a :class:`~molsepnorm.nn.graphormer.Graphormer` (not DDP-wrapped).
        task: ``"regression"``, ``"binary"``, or ``"pretrained"`` (an encoder without a
            trained head: embeddings only).
        scaler: the target standardization the model was trained with (regression), or None.
        bf16: run under bfloat16 autocast (CUDA only).
    """

    def __init__(self, model: nn.Module, task: str, scaler: Optional[TargetScaler] = None, bf16: bool = False) -> None:
        if task not in ("regression", "binary", PRETRAINED):
            raise ValueError(f"task must be 'regression', 'binary' or {PRETRAINED!r}, got {task!r}")
        self.model = model
        self.task = task
        self.scaler = scaler
        self.bf16 = bf16

    @classmethod
    def from_checkpoint(cls, checkpoint: "Checkpoint", device: Union[str, torch.device] = "cpu") -> "Runner":
        """The checkpoint's model on ``device``, in float32 on every device, so that
        ``evaluate`` scores exactly what ``predict`` writes (training's validation runs in
        the training precision instead)."""
        model = checkpoint.build_model().to(torch.device(device))
        return cls(model, checkpoint.task.type, checkpoint.target_scaling)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def multi_hop_max_dist(self) -> int:
        return int(self.model.config.multi_hop_max_dist)

    def predictions(self, out: Tensor) -> Tensor:
        """Head outputs (B, T) -> predictions: probabilities (binary) or original units."""
        check_predicts(self.task)
        out = out.float()
        if self.task == "binary":
            return torch.sigmoid(out)
        return self.scaler.inverse_transform(out) if self.scaler is not None else out

    def __call__(self, batch: "GraphBatch", embed: bool = False) -> Tensor:
        """Predictions (B, T), or graph-token embeddings (B, D) with ``embed``, of one batch
        already on :attr:`device`, in the model's current mode."""
        autocast = torch.autocast("cuda", dtype=torch.bfloat16) if self.bf16 else contextlib.nullcontext()
        with autocast:
            if embed:
                return self.model.embed(batch).float()
            return self.predictions(self.model(batch))


@dataclass
class RunOutput:
    """What :func:`run` returns.

    Attributes:
        values: ``(R, M, W)`` float64: per runner, per graph (input order), the W
            predictions or embedding dimensions.
        targets: ``(M, T)`` float64 targets of the graphs (NaN where missing or unlabelled).
    """

    values: np.ndarray
    targets: np.ndarray

    def mean(self) -> np.ndarray:
        """``(M, W)``: the runners' mean per graph, the prediction of an ensemble (of one
        runner: its own values)."""
        return self.values.mean(axis=0)

    def std(self) -> np.ndarray:
        """``(M, W)``: the runners' (population) standard deviation per graph, the spread an
        ensemble reports beside its mean."""
        return self.values.std(axis=0)


def run(
    runners: Sequence[Runner],
    graphs: Sequence[Any],
    embed: bool = False,
    batch_size: int = 128,
    max_tokens: Optional[int] = None,
    sizes: Optional[Sequence[int]] = None,
    num_workers: int = 0,
    shard: tuple[int, int] = (0, 1),
    gather: Optional[Callable[[list[Any]], list[list[Any]]]] = None,
    member_threads: Union[int, str] = "auto",
    progress: Optional[bool] = False,
    description: str = "",
) -> RunOutput:
    """Outputs of every runner on every graph, batched by size.

    Args:
        runners: one model, or an ensemble (each batch is collated once for all).
        graphs: PyG ``Data`` or :class:`~molsepnorm.chem.MolGraph` with Graphormer encodings.
        embed: graph-token embeddings instead of predictions.
        batch_size: molecules per batch at most.
        max_tokens: padded tokens per batch at most (default ``batch_size *``
            :data:`TOKENS_PER_MOLECULE`); pairs are capped at ``max_tokens *``
            :data:`TOKENS_PER_MOLECULE`.
        sizes: atoms per graph, if known (else read from ``graphs``).
        num_workers: DataLoader worker processes.
        shard: ``(rank, world_size)``: this process runs batches ``rank, rank + world_size, ...``
            (distributed evaluation); ``gather`` must then collect every rank's rows.
        gather: ``parts -> [parts of rank 0, parts of rank 1, ...]`` (e.g. an all-gather).
        member_threads: runners that run a batch at the same time, each in a thread of its
            own, or ``"auto"``
            (:func:`~molsepnorm.inference.device.resolve_member_threads`: one per usable
            CPU when torch runs one thread, else one); one runner alone always runs in
            this thread.  Pass 1 when several threads or processes already share the CPUs.
        progress: a bar of the molecules done on stderr (None: only on a terminal).
        description: the bar's label.

    Returns:
        A :class:`RunOutput`; a graph nobody ran (impossible when the shards cover all
        batches) would stay NaN.
    """
    from torch.utils.data import DataLoader

    from molsepnorm.data.collate import GraphCollator
    from molsepnorm.data.columns import num_atoms
    from molsepnorm.data.sampler import size_batches
    from tqdm.auto import tqdm

    from molsepnorm.inference.device import resolve_member_threads

    if not runners:
        raise ValueError("run needs at least one runner")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    M = len(graphs)
    config = runners[0].model.config
    width = int(config.hidden_dim if embed else config.num_tasks)
    tokens = max_tokens if max_tokens is not None else batch_size * TOKENS_PER_MOLECULE
    sizes = num_atoms(graphs) if sizes is None else sizes
    rank, world = shard
    batches = size_batches(sizes, batch_size, tokens, tokens * TOKENS_PER_MOLECULE)[rank::world]
    generator = torch.Generator()  # creating the loader must not draw from the global RNG
    generator.manual_seed(0)
    collate = GraphCollator(max(r.multi_hop_max_dist for r in runners))
    loader = DataLoader(graphs, batch_sampler=batches, collate_fn=collate,
                        num_workers=num_workers, generator=generator)
    device = runners[0].device
    threads = resolve_member_threads(member_threads, len(runners), device)
    pool = ThreadPoolExecutor(threads, thread_name_prefix="molsepnorm-member") if threads > 1 else None
    modes = [r.model.training for r in runners]
    bar = tqdm(total=sum(len(b) for b in batches), desc=description or None, unit="mol", leave=False,
               disable=None if progress is None else not progress)
    parts: list[tuple[list[int], np.ndarray, Optional[np.ndarray]]] = []
    # with a pool, the members of the next batch start while this batch's last ones finish
    in_flight: deque[tuple[list[int], list[Future], Optional[np.ndarray]]] = deque()
    try:
        for r in runners:
            r.model.eval()
        with torch.inference_mode():
            for idx, batch in zip(batches, loader):
                batch = batch.to(device, non_blocking=True)
                y = batch.y.double().cpu().numpy() if batch.y is not None else None
                bar.update(len(idx))
                if pool is None:
                    parts.append((idx, np.stack([_outputs(r, batch, embed) for r in runners]), y))  # (R, B, W)
                    continue
                in_flight.append((idx, [pool.submit(_outputs, r, batch, embed) for r in runners], y))
                if len(in_flight) > 1:
                    parts.append(_collect(in_flight.popleft()))
            while in_flight:
                parts.append(_collect(in_flight.popleft()))
    finally:
        bar.close()
        try:
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
        finally:
            for r, mode in zip(runners, modes):
                r.model.train(mode)
    if gather is not None:
        parts = [p for rank_parts in gather(parts) for p in rank_parts]
    num_targets = next((y.shape[1] for _, _, y in parts if y is not None), int(config.num_tasks))
    values = np.full((len(runners), M, width), np.nan)
    targets = np.full((M, num_targets), np.nan)
    for idx, out, y in parts:
        values[:, idx] = out
        if y is not None:
            targets[idx] = y
    return RunOutput(values=values, targets=targets)


def _outputs(runner: Runner, batch: "GraphBatch", embed: bool) -> np.ndarray:
    """One runner's (B, W) outputs as float64, in whichever thread runs it (inference mode
    is per thread, so it is entered here)."""
    with torch.inference_mode():
        return runner(batch, embed=embed).double().cpu().numpy()


def _collect(part: tuple[list[int], list[Future], Optional[np.ndarray]]) -> tuple[list[int], np.ndarray,
                                                                                    Optional[np.ndarray]]:
    """A batch's rows once every member has run it: (R, B, W)."""
    idx, futures, y = part
    return idx, np.stack([f.result() for f in futures]), y
