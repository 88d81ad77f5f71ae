"""The runner: one row per graph in input order, any batching, shards that cover the data once."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from molsepnorm.chem import featurize_graph
from molsepnorm.checkpoint import TargetScaler
from molsepnorm.inference.runner import Runner, run
from molsepnorm.nn.graphormer import Graphormer, GraphormerConfig

SMILES = ["CCO", "c1ccccc1O", "CC(=O)Nc1ccc(O)cc1", "OC(=O)CC(O)(CC(O)=O)C(O)=O", "C", "CCCCCCCCCCCCCCCC",
          "c1ccc2ccccc2c1", "O=C=O", "CN1C=NC2=C1C(=O)N(C(=O)N2C)C", "N#N", "CC(C)Cc1ccc(cc1)C(C)C(=O)O"]


@pytest.fixture(scope="module")
def graphs():
    return [featurize_graph(s, "ogb") for s in SMILES]


def _model(num_tasks: int = 2) -> Graphormer:
    torch.manual_seed(0)
    model = Graphormer(GraphormerConfig(vocab="ogb", num_layers=2, hidden_dim=16, ffn_dim=16, num_heads=4,
                                        num_spatial=16, multi_hop_max_dist=3, num_tasks=num_tasks))
    with torch.no_grad():  # non-trivial running statistics, as after training
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm1d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
    return model


def test_rows_follow_the_input_order_whatever_the_batching(graphs):
    runner = Runner(_model(), "regression", TargetScaler((1.0, -2.0), (10.0, 0.5)))
    one = run([runner], graphs, batch_size=1).values[0]
    many = run([runner], graphs, batch_size=4, max_tokens=60).values[0]
    np.testing.assert_allclose(many, one, atol=1e-5)
    from molsepnorm.data.collate import collate_graphs

    with torch.no_grad():
        raw = runner.model.eval()(collate_graphs(graphs[3:4], 3))[0].numpy()
    np.testing.assert_allclose(one[3], raw * np.array([10.0, 0.5]) + np.array([1.0, -2.0]), atol=1e-4)


def test_binary_outputs_are_probabilities_and_embeddings_have_the_hidden_width(graphs):
    runner = Runner(_model(), "binary")
    p = run([runner], graphs).values[0]
    assert p.shape == (len(graphs), 2) and ((p > 0) & (p < 1)).all()
    z = run([runner], graphs, embed=True).values[0]
    assert z.shape == (len(graphs), 16) and np.isfinite(z).all()


def test_shards_cover_every_graph_exactly_once_and_gather_restores_the_order(graphs):
    runner = Runner(_model(), "regression")
    full = run([runner], graphs, batch_size=2).values[0]
    shards = [run([runner], graphs, batch_size=2, shard=(r, 3)).values[0] for r in range(3)]
    done = np.stack([~np.isnan(s[:, 0]) for s in shards])
    assert (done.sum(axis=0) == 1).all() and all(d.any() for d in done)
    parts = {}

    def gather(mine):  # what an all-gather returns: every rank's parts, rank order
        parts[len(parts)] = mine
        return [run_parts(r) for r in range(3)]

    def run_parts(rank):
        captured = {}
        run([runner], graphs, batch_size=2, shard=(rank, 3), gather=lambda p: captured.setdefault("p", [p]))
        return captured["p"][0]

    np.testing.assert_allclose(run([runner], graphs, batch_size=2, shard=(0, 3), gather=gather).values[0], full)


def test_the_model_mode_is_restored(graphs):
    model = _model().train()
    run([Runner(model, "regression")], graphs)
    assert model.training


def _companion_model(seed: int) -> Graphormer:
    """A model with a fitted fingerprint companion, so its forward reads the batch's shared counts."""
    torch.manual_seed(seed)
    model = Graphormer(GraphormerConfig(vocab="ogb", num_layers=2, hidden_dim=16, ffn_dim=16, num_heads=4,
                                        num_spatial=16, multi_hop_max_dist=3, num_tasks=1, companion_bits=64,
                                        companion_blend="value"))
    with torch.no_grad():
        model.companion.coef.normal_()
        model.companion.set_weights(0.5)
    return model


def test_members_in_threads_give_the_sequential_outputs_to_the_bit(graphs):
    import threading

    runners = [Runner(_companion_model(seed), "regression") for seed in range(3)]
    ran_in: list[str] = []
    for r in runners:
        r.model.register_forward_pre_hook(lambda *_: ran_in.append(threading.current_thread().name))
    alone = run(runners, graphs, batch_size=3, member_threads=1)
    assert set(ran_in) == {threading.current_thread().name}
    ran_in.clear()
    together = run(runners, graphs, batch_size=3, member_threads=3)
    assert len(ran_in) == 3 * 4 and all(name.startswith("molsepnorm-member") for name in ran_in)  # 4 batches
    assert len(set(ran_in)) > 1
    np.testing.assert_array_equal(together.values, alone.values)
    np.testing.assert_array_equal(together.targets, alone.targets)
    assert len({tuple(v.ravel()) for v in together.values}) == 3  # three different members, not one thrice


def test_a_member_that_fails_in_its_thread_raises_here_and_modes_are_restored(graphs):
    runners = [Runner(_model().train(), "regression"), Runner(_model(), "regression")]

    def fail(*_):
        raise RuntimeError("member 2 broke")

    runners[1].model.register_forward_pre_hook(fail)
    with pytest.raises(RuntimeError, match="member 2 broke"):
        run(runners, graphs, batch_size=2, member_threads=2)
    assert runners[0].model.training and runners[1].model.training


def test_a_progress_bar_counts_this_shards_molecules(graphs, capsys):
    runner = Runner(_model(), "regression")
    quiet = run([runner], graphs, batch_size=3)
    assert capsys.readouterr().err == ""  # off by default: training's validation says nothing
    shown = run([runner], graphs[:7], batch_size=3, shard=(0, 2), progress=True, description="scoring test")
    err = capsys.readouterr().err
    mine = int((~np.isnan(shown.values[0][:, 0])).sum())
    assert "scoring test" in err and f"/{mine} " in err and mine < 7  # the total: this shard's molecules
    np.testing.assert_array_equal(run([runner], graphs, batch_size=3, progress=True).values, quiet.values)
