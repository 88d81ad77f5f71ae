"""Batches of molecules of similar size: one greedy cut for training, evaluation and prediction.

A padded Graphormer batch costs ``B * (N_max + 1)`` token slots and ``B * (N_max + 1)**2``
attention entries, whatever the real sizes are, so a batch that mixes a 10-atom and a
100-atom molecule wastes most of its work on padding.  :class:`SizeBucketBatchSampler`
cuts batches by a *token budget* (padded slots, graph token included) from windows of
molecules sorted by size, then shuffles the order of the batches; every molecule appears
exactly once per epoch.  :func:`size_batches` is the deterministic counterpart used to
evaluate, predict and embed: all molecules sorted by size, cut by the same rule
(:func:`cut_sorted`).  :func:`padding_fraction` measures what a list of batches wastes.
"""
from __future__ import annotations

import math
from typing import Iterator, Optional, Sequence

import numpy as np
from torch.utils.data import Sampler


def padding_fraction(sizes: Sequence[int], batches: Sequence[Sequence[int]], graph_token: bool = True) -> float:
    """Fraction of padded token slots over ``batches``: ``1 - sum(real) / sum(B * N_max)``.

    Args:
        sizes: number of atoms of every molecule of the data set, indexed by molecule.
        batches: lists of molecule indices.
        graph_token: count the virtual graph token as one extra real slot per molecule.
    """
    sizes = np.asarray(sizes)
    extra = 1 if graph_token else 0
    real = padded = 0
    for batch in batches:
        n = sizes[np.asarray(batch, dtype=np.int64)] + extra
        real += int(n.sum())
        padded += int(n.max()) * len(n)
    return 0.0 if padded == 0 else 1.0 - real / padded


def cut_sorted(order: Sequence[int], sizes: Sequence[int], max_batch_size: Optional[int] = None,
               max_tokens: Optional[int] = None, max_pairs: Optional[int] = None) -> list[list[int]]:
    """Greedy cut of molecules taken in ``order`` (ascending size) into batches.

    A batch of ``B`` molecules padded to ``N`` atoms holds at most ``max_batch_size``
    molecules, ``B * (N + 1) <= max_tokens`` token slots and ``B * (N + 1)**2 <=
    max_pairs`` token pairs (the attention bias and edge paths grow with the pairs); None
    lifts a cap.  A molecule over a budget on its own gets a batch of its own: nothing is
    ever dropped.
    """
    batches: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for i in (order.tolist() if isinstance(order, np.ndarray) else order):
        length = max(longest, int(sizes[i]) + 1)  # + the graph token
        count = len(current) + 1
        if current and ((max_batch_size is not None and count > max_batch_size)
                        or (max_tokens is not None and count * length > max_tokens)
                        or (max_pairs is not None and count * length * length > max_pairs)):
            batches.append(current)
            current, length = [], int(sizes[i]) + 1
        current.append(int(i))
        longest = length
    if current:
        batches.append(current)
    return batches


def size_batches(sizes: Sequence[int], batch_size: int, max_tokens: Optional[int] = None,
                 max_pairs: Optional[int] = None) -> list[list[int]]:
    """Indices of all molecules, sorted by size (stable) and cut by :func:`cut_sorted`.

    Deterministic: the batches of evaluation, prediction and embedding.  In eval mode the
    model's BatchNorm uses running statistics, so how molecules are grouped changes
    nothing but the padding.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    sizes = np.asarray(sizes, dtype=np.int64)
    return cut_sorted(np.argsort(sizes, kind="stable"), sizes, batch_size, max_tokens, max_pairs)


class SizeBucketBatchSampler(Sampler[list[int]]):
    """Batches of similar-size molecules under a token budget.

    Each epoch the molecules are shuffled, split into windows of ``window`` molecules,
    each window sorted by size and cut greedily into batches whose padded size
    ``B * (N_max + 1)`` stays within ``max_tokens`` (and ``B <= max_batch_size``);
    the batches are then shuffled.  A molecule larger than the budget gets a batch of its
    own: nothing is ever dropped.

    Args:
        sizes: atoms per molecule (``[len(dataset)]``).
        max_tokens: token budget per batch, graph token included.
        max_batch_size: optional cap on molecules per batch.
        shuffle: shuffle molecules and batches each epoch (False: sorted, deterministic).
        seed: base seed; the epoch set by :meth:`set_epoch` is added to it.
        window: molecules sorted together; larger means tighter buckets, less randomness.
        num_replicas, rank: for distributed training, each rank yields every
            ``num_replicas``-th batch; the batch list is padded by repeating its first
            batches so every rank takes the same number of steps.
    """

    def __init__(
        self,
        sizes: Sequence[int],
        max_tokens: int,
        max_batch_size: Optional[int] = None,
        shuffle: bool = True,
        seed: int = 0,
        window: int = 4096,
        num_replicas: int = 1,
        rank: int = 0,
    ) -> None:
        if max_tokens <= 0:
            raise ValueError(f"max_tokens must be positive, got {max_tokens}")
        if max_batch_size is not None and max_batch_size <= 0:
            raise ValueError(f"max_batch_size must be positive, got {max_batch_size}")
        if not 0 <= rank < num_replicas:
            raise ValueError(f"rank {rank} outside [0, {num_replicas})")
        self.sizes = np.asarray(sizes, dtype=np.int64)
        self.max_tokens = int(max_tokens)
        self.max_batch_size = max_batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.window = max(1, int(window))
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self._cached: Optional[tuple[int, list[list[int]]]] = None

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration's shuffle depend on ``epoch`` (as DistributedSampler does)."""
        self.epoch = epoch

    def _all_batches(self) -> list[list[int]]:
        if self._cached is not None and self._cached[0] == self.epoch:
            return self._cached[1]
        batches = self._make_batches()
        self._cached = (self.epoch, batches)
        return batches

    def _make_batches(self) -> list[list[int]]:
        rng = np.random.default_rng(self.seed + self.epoch)
        order = rng.permutation(len(self.sizes)) if self.shuffle else np.arange(len(self.sizes))
        batches: list[list[int]] = []
        for start in range(0, len(order), self.window):
            chunk = order[start : start + self.window]
            # stable sort keeps the shuffled order among equal sizes
            chunk = chunk[np.argsort(self.sizes[chunk], kind="stable")]
            batches.extend(cut_sorted(chunk, self.sizes, self.max_batch_size, self.max_tokens))
        if self.shuffle:
            perm = rng.permutation(len(batches))
            batches = [batches[i] for i in perm]
        return batches

    def __iter__(self) -> Iterator[list[int]]:
        batches = self._all_batches()
        if self.num_replicas > 1 and batches:
            per_rank = math.ceil(len(batches) / self.num_replicas)
            total = per_rank * self.num_replicas
            batches = batches + batches[: total - len(batches)]
            batches = batches[self.rank : total : self.num_replicas]
        yield from batches

    def __len__(self) -> int:
        n = len(self._all_batches())
        return math.ceil(n / self.num_replicas) if self.num_replicas > 1 else n


def padding_report(sizes: Sequence[int], batch_size: int = 256, seed: int = 0) -> dict[str, float]:
    """Padding of plain shuffled batches vs size-bucketed batches of the same mean size.

    The bucketed budget is ``batch_size * (mean atoms + 1)`` tokens, so both samplers
    handle about the same number of molecules per step.  Returns the two padding
    fractions and the mean number of molecules per bucketed batch.
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(sizes))
    plain = [perm[i : i + batch_size] for i in range(0, len(perm), batch_size)]
    budget = int(round(batch_size * (float(sizes.mean()) + 1.0)))
    bucketed = list(SizeBucketBatchSampler(sizes, max_tokens=budget, seed=seed))
    return {
        "plain_padding": padding_fraction(sizes, plain),
        "bucketed_padding": padding_fraction(sizes, bucketed),
        "bucketed_mean_batch": len(sizes) / max(1, len(bucketed)),
        "max_tokens": float(budget),
    }
