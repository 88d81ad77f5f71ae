"""``batch_memo``: what an ensemble's members share of a batch, computed once, also from threads."""
from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import torch

import molsepnorm.nn.graphormer as graphormer
from molsepnorm.chem import featurize
from molsepnorm.data.collate import GraphCollator
from molsepnorm.nn.graphormer import Graphormer, GraphormerConfig
from molsepnorm.nn.memo import batch_memo

SMILES = ["CCO", "c1ccccc1C(=O)O", "CC(C)Cc1ccc(cc1)C(C)C(=O)O", "[Na+].[Cl-]"]


def _batch(hops: int = 3):
    return GraphCollator(hops)([featurize(s, encodings=True) for s in SMILES])


def test_computed_once_per_object_and_key_and_a_copy_starts_afresh():
    calls = []
    batch = _batch()

    def compute(tag):
        return lambda: calls.append(tag) or torch.tensor([len(calls)])

    first = batch_memo(batch, "a", compute("a"))
    assert batch_memo(batch, "a", compute("a")) is first and calls == ["a"]
    batch_memo(batch, "b", compute("b"))  # another key: computed on its own
    assert calls == ["a", "b"]
    batch_memo(batch.to("cpu"), "a", compute("a"))  # a new batch object: nothing carried over
    assert calls == ["a", "b", "a"]
    bare = object()  # no __dict__: computed every time
    batch_memo(bare, "a", compute("x"))
    batch_memo(bare, "a", compute("x"))
    assert calls[-2:] == ["x", "x"]


def test_threads_asking_at_once_wait_for_the_first_ones_value():
    batch, calls, start = SimpleNamespace(), [], threading.Barrier(4)

    def slow():
        calls.append(1)
        time.sleep(0.05)
        return object()

    got = [None] * 4

    def ask(i):
        start.wait()
        got[i] = batch_memo(batch, "k", slow)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and all(g is got[0] for g in got)


def test_members_find_a_batchs_hop_entries_once_and_predict_as_without_it(monkeypatch):
    calls = []
    real = graphormer.hop_entries
    monkeypatch.setattr(graphormer, "hop_entries", lambda *a: calls.append(a[0].shape) or real(*a))
    models = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        models.append(Graphormer(GraphormerConfig(vocab="ogb", num_layers=2, hidden_dim=16, ffn_dim=16, num_heads=4,
                                                  num_spatial=16, multi_hop_max_dist=3, num_tasks=1)).eval())
    batch = _batch()
    with torch.no_grad():
        shared = [m(batch) for m in models]
        assert len(calls) == 1 and calls[0][-1] == 3
        alone = [m(_batch()) for m in models]  # each on a batch of its own
    assert len(calls) == 3
    for a, b in zip(shared, alone):
        assert torch.equal(a, b)
    assert not torch.equal(shared[0], shared[1])
