"""The size-bucketed batch sampler: every molecule once, budget kept, padding reduced."""
from __future__ import annotations

import numpy as np
import pytest

from molsepnorm.data.sampler import SizeBucketBatchSampler, padding_fraction, size_batches


@pytest.fixture
def sizes() -> np.ndarray:
    # heavy-tailed like real molecule sizes, plus one molecule bigger than any budget
    rng = np.random.default_rng(0)
    s = np.clip(rng.lognormal(3.1, 0.45, size=3000).astype(int), 1, 250)
    s[17] = 700
    return s


def test_every_molecule_exactly_once_and_budget_kept(sizes):
    sampler = SizeBucketBatchSampler(sizes, max_tokens=2000, max_batch_size=128, seed=3)
    batches = list(sampler)
    flat = np.concatenate(batches)
    assert sorted(flat.tolist()) == list(range(len(sizes)))
    for b in batches:
        assert len(b) <= 128
        cost = (sizes[b].max() + 1) * len(b)
        assert cost <= 2000 or len(b) == 1  # an oversized molecule rides alone, never dropped
    assert [17] in [list(b) for b in batches]
    assert len(sampler) == len(batches)


def test_seeded_and_epoch_dependent(sizes):
    a = list(SizeBucketBatchSampler(sizes, max_tokens=2000, seed=1))
    b = list(SizeBucketBatchSampler(sizes, max_tokens=2000, seed=1))
    assert a == b
    s = SizeBucketBatchSampler(sizes, max_tokens=2000, seed=1)
    s.set_epoch(1)
    assert list(s) != a


def test_padding_lower_than_plain_shuffle(sizes):
    rng = np.random.default_rng(0)
    perm = rng.permutation(len(sizes))
    plain = [perm[i : i + 64] for i in range(0, len(perm), 64)]
    bucketed = list(SizeBucketBatchSampler(sizes, max_tokens=64 * 30, seed=0))
    assert padding_fraction(sizes, bucketed) < 0.5 * padding_fraction(sizes, plain)


def test_padding_fraction_by_hand():
    sizes = np.array([1, 3, 3])
    # batch [0, 1]: slots 2 * 4 = 8, real 2 + 4 = 6 ; batch [2]: 4 slots, 4 real
    assert padding_fraction(sizes, [[0, 1], [2]]) == pytest.approx(1 - 10 / 12)
    assert padding_fraction(sizes, [[0, 1]], graph_token=False) == pytest.approx(1 - 4 / 6)


def test_distributed_ranks_partition_with_equal_steps(sizes):
    ranks = [SizeBucketBatchSampler(sizes, max_tokens=3000, seed=5, num_replicas=3, rank=r) for r in range(3)]
    per_rank = [list(s) for s in ranks]
    assert len({len(p) for p in per_rank}) == 1
    seen = set(np.concatenate([np.concatenate(p) for p in per_rank]).tolist())
    assert seen == set(range(len(sizes)))


def test_bad_arguments():
    with pytest.raises(ValueError, match="max_tokens"):
        SizeBucketBatchSampler([3, 4], max_tokens=0)
    with pytest.raises(ValueError, match="rank"):
        SizeBucketBatchSampler([3, 4], max_tokens=10, num_replicas=2, rank=2)


def test_size_batches_respect_every_limit():
    sizes = [5, 200, 6, 7, 30, 31, 5, 60, 61, 62, 59]
    batches = size_batches(sizes, batch_size=3, max_tokens=200, max_pairs=8000)
    assert sorted(i for b in batches for i in b) == list(range(len(sizes)))
    for b in batches:
        longest = max(sizes[i] + 1 for i in b)
        assert len(b) <= 3
        assert len(b) == 1 or (longest * len(b) <= 200 and longest ** 2 * len(b) <= 8000)
        assert max(sizes[i] for i in b) - min(sizes[i] for i in b) <= 30  # similar sizes together
    assert [1] in batches  # the big one alone
    # the pair cap binds for 60-atom molecules: 3 * 61 tokens fit, 3 * 61**2 pairs do not
    assert max(len(b) for b in batches if min(sizes[i] for i in b) >= 59) == 2


def test_columns_read_atoms_and_targets_in_data_set_order(data_root, tmp_path):
    """The fast paths (whole data set, indexed subset) agree with reading every graph."""
    from molsepnorm.data import load_dataset
    from molsepnorm.data.columns import num_atoms, targets

    splits = load_dataset("zinc-subset", root=data_root)
    for dataset in (splits.val, splits.val[np.arange(999, -1, -7)]):  # whole, and a reversed subset
        graphs = [dataset[i] for i in range(len(dataset))]
        assert num_atoms(dataset).tolist() == [int(g.num_nodes) for g in graphs]
        np.testing.assert_array_equal(targets(dataset), np.stack([g.y.reshape(-1).numpy() for g in graphs]))
    assert num_atoms(graphs).tolist() == [int(g.num_nodes) for g in graphs]  # a plain list
