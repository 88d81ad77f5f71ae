"""Batch samplers: every molecule once per epoch, reproducible per (seed, epoch), sharded."""
from __future__ import annotations

import numpy as np
import pytest

from molsepnorm.train.batching import RandomBatchSampler, make_train_sampler


def _flat(batches):
    return sorted(i for b in batches for i in b)


def test_random_batches_cover_every_molecule_once_with_no_straggler():
    s = RandomBatchSampler(101, batch_size=10, seed=3)
    batches = list(s)
    assert _flat(batches) == list(range(101))
    assert len(batches) == len(s) == 11
    assert max(map(len, batches)) <= 10 and min(map(len, batches)) >= 9  # no batch of one


def test_random_batches_depend_only_on_seed_and_epoch():
    a, b = RandomBatchSampler(50, 8, seed=1), RandomBatchSampler(50, 8, seed=1)
    a.set_epoch(2), b.set_epoch(2)
    assert list(a) == list(b)
    b.set_epoch(3)
    assert list(a) != list(b)


@pytest.mark.parametrize("batching", ["random", "bucket"])
def test_ranks_get_disjoint_shards_of_equal_length(batching):
    sizes = np.random.default_rng(0).integers(5, 40, size=203)
    samplers = [make_train_sampler(sizes, 16, batching, seed=5, num_replicas=2, rank=r) for r in range(2)]
    for s in samplers:
        s.set_epoch(1)
    shards = [list(s) for s in samplers]
    assert len(shards[0]) == len(shards[1]) == len(samplers[0])
    covered = set(i for shard in shards for b in shard for i in b)
    assert covered == set(range(203))  # padding repeats batches, never drops one
    assert all(len(b) <= 16 for shard in shards for b in shard)


def test_bucket_batches_respect_the_token_budget():
    sizes = np.random.default_rng(1).integers(5, 40, size=300)
    s = make_train_sampler(sizes, 32, "bucket", max_tokens=400, seed=0)
    for b in s:
        assert len(b) <= 32
        assert len(b) == 1 or len(b) * (sizes[b].max() + 1) <= 400


def test_unknown_batching():
    with pytest.raises(ValueError, match="batching"):
        make_train_sampler([3, 4], 2, "sorted")
