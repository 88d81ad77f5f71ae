"""Batch samplers for training, sharded across ranks (evaluation batches come from
:func:`molsepnorm.data.sampler.size_batches`).

``--batch-size N`` always means *graphs per batch* (per device under DDP):

* ``batching: random`` (the reference recipe): each epoch the molecules are
  shuffled with ``seed + epoch`` and cut into ``ceil(n / N)`` batches of near-equal size
  (never more than N, and no straggler batch of one molecule, which would starve the
  graph token's BatchNorm);
* ``batching: bucket`` (default): :class:`~molsepnorm.data.sampler.SizeBucketBatchSampler` batches
  of similar-size molecules, at most N graphs and ``max_tokens`` padded token slots
  (default ``N * (mean atoms + 1)``); less padding, but batches are less random.

Both depend only on ``(seed, epoch)``, which makes a resumed run see the same batches.
Under DDP every rank takes every ``num_replicas``-th batch; the batch list is padded by
repeating its first batches so that all ranks take the same number of steps.
"""
from __future__ import annotations

import math
from typing import Any, Iterator, Optional, Sequence

import numpy as np
from torch.utils.data import Sampler

from molsepnorm.data.sampler import SizeBucketBatchSampler


class RandomBatchSampler(Sampler[list[int]]):
    """Shuffled batches of at most ``batch_size`` molecules, near-equal in size.

    Args:
        num_items: molecules in the data set.
        batch_size: most molecules per batch.
        shuffle: shuffle each epoch (False: consecutive indices, for evaluation).
        seed: base seed; :meth:`set_epoch` adds the epoch.
        num_replicas, rank: DDP sharding (every rank gets the same number of batches).
    """

    def __init__(
        self,
        num_items: int,
        batch_size: int,
        shuffle: bool = True,
        seed: int = 0,
        num_replicas: int = 1,
        rank: int = 0,
    ) -> None:
        if batch_size <= 0:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        if not 0 <= rank < num_replicas:
            raise ValueError(f"rank {rank} outside [0, {num_replicas})")
        self.num_items = int(num_items)
        self.batch_size = int(batch_size)
        self.shuffle = shuffle
        self.seed = seed
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration's shuffle depend on ``epoch``."""
        self.epoch = epoch

    def _all_batches(self) -> list[list[int]]:
        n = self.num_items
        if n == 0:
            return []
        order = np.random.default_rng(self.seed + self.epoch).permutation(n) if self.shuffle else np.arange(n)
        num_batches = math.ceil(n / self.batch_size)
        return [chunk.tolist() for chunk in np.array_split(order, num_batches)]

    def __iter__(self) -> Iterator[list[int]]:
        yield from _shard(self._all_batches(), self.num_replicas, self.rank)

    def __len__(self) -> int:
        n = math.ceil(self.num_items / self.batch_size)
        return math.ceil(n / self.num_replicas)


def bucketed_batch_norm(model_config: Any, batching: str) -> Optional[str]:
    """The warning for a batch norm kind (``cls_norm`` / ``token_norm``) of ``model_config``
    with size-bucketed batches, or None: each batch holds molecules of one size, so
    training normalizes size away and evaluation (running statistics) does not."""
    kinds = {model_config.cls_norm, model_config.token_norm} if model_config.norm == "sep" \
        else {model_config.token_norm}
    if batching != "bucket" or "batch" not in kinds:
        return None
    which = "cls_norm" if model_config.cls_norm == "batch" and model_config.norm == "sep" else "token_norm"
    return (f"a batch norm (model {which}) with size-bucketed batches: each batch holds molecules of one size, so "
            "training normalizes size away and evaluation (running statistics: analyze, a frozen encoder) does "
            "not")


def _shard(batches: list[list[int]], num_replicas: int, rank: int) -> list[list[int]]:
    if num_replicas == 1 or not batches:
        return batches
    per_rank = math.ceil(len(batches) / num_replicas)
    total = per_rank * num_replicas
    padded = batches + batches[: total - len(batches)]
    return padded[rank:total:num_replicas]


def make_train_sampler(
    sizes: Sequence[int],
    batch_size: int,
    batching: str = "bucket",
    max_tokens: Optional[int] = None,
    seed: int = 0,
    num_replicas: int = 1,
    rank: int = 0,
) -> Sampler[list[int]]:
    """The training batch sampler named by ``batching`` (see the module docstring)."""
    if batching == "random":
        return RandomBatchSampler(len(sizes), batch_size, shuffle=True, seed=seed, num_replicas=num_replicas, rank=rank)
    if batching == "bucket":
        if max_tokens is None:
            mean = float(np.mean(sizes)) if len(sizes) else 1.0
            max_tokens = max(1, int(round(batch_size * (mean + 1))))
        return SizeBucketBatchSampler(
            sizes, max_tokens=max_tokens, max_batch_size=batch_size, shuffle=True, seed=seed,
            num_replicas=num_replicas, rank=rank,
        )
    raise ValueError(f"unknown batching {batching!r}; expected 'random' or 'bucket'")
