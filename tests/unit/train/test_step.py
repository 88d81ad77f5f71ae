"""molsepnorm.train.step.TrainStep: one optimizer step, with clip_grad_norm_'s clipping."""
from __future__ import annotations

import copy

import pytest
import torch

from molsepnorm.chem import featurize
from molsepnorm.data.collate import collate_graphs
from molsepnorm.encodings import GraphormerEncoding
from molsepnorm.nn.graphormer import Graphormer, GraphormerConfig
from molsepnorm.train.step import TrainStep

SMILES = ["CC(=O)Oc1ccccc1C(=O)O", "CCO", "c1ccncc1", "CC(=O)[O-].[Na+]", "CCN(CC)CC(=O)NC"]


def batch():
    encode = GraphormerEncoding()
    graphs = [encode(featurize(s, vocab="ogb")) for s in SMILES]
    for i, g in enumerate(graphs):
        g.y = torch.tensor([[10.0 * i]])  # far from a fresh model's outputs: large gradients
    return collate_graphs(graphs, 5)


def sgd_step(clip_norm, max_norm_for_reference):
    """Parameters after one TrainStep with plain SGD (lr 1), and after the same step written
    with clip_grad_norm_, from the same initial model."""
    torch.manual_seed(0)
    model = Graphormer(GraphormerConfig(vocab="ogb", num_layers=2, num_tasks=1)).train()
    reference = copy.deepcopy(model)
    b = batch()

    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    result = TrainStep(model, optimizer, scheduler, "l1", clip_norm=clip_norm)(b)
    assert result.applied, result.problem

    opt_ref = torch.optim.SGD(reference.parameters(), lr=1.0)
    loss = torch.nn.functional.l1_loss(reference(b), b.y)
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(reference.parameters(), max_norm_for_reference)
    opt_ref.step()
    return model, reference, float(norm)


@pytest.mark.parametrize("clip_norm", [1e-3, 1e6, None])
def test_the_update_is_clip_grad_norm_then_the_optimizer(clip_norm) -> None:
    model, reference, norm = sgd_step(clip_norm, clip_norm if clip_norm is not None else float("inf"))
    if clip_norm == 1e-3:
        assert norm > 1e-3, "the clipped case must clip"
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        assert torch.equal(p, q), name


def test_a_step_changes_the_parameters_by_at_most_the_clip_norm() -> None:
    torch.manual_seed(0)
    model = Graphormer(GraphormerConfig(vocab="ogb", num_layers=2, num_tasks=1)).train()
    before = [p.detach().clone() for p in model.parameters()]
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    TrainStep(model, optimizer, scheduler, "l1", clip_norm=0.01)(batch())
    moved = torch.linalg.vector_norm(torch.cat([(p.detach() - b).reshape(-1) for p, b in zip(model.parameters(), before)]))
    assert 0.009 < float(moved) <= 0.01 + 1e-6
