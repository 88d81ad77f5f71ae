"""molsepnorm.train.optimizer: the cached fused AdamW step is PyTorch's, bit for bit."""
from __future__ import annotations

import copy
import io

import pytest
import torch

from molsepnorm.nn.graphormer import Graphormer, GraphormerConfig
from molsepnorm.train.optimizer import CachedFusedAdamW, make_adamw

KW = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)


def pair(**kw):
    torch.manual_seed(0)
    model = Graphormer(GraphormerConfig(vocab="ogb", num_layers=2, num_tasks=1))
    ours_model, theirs_model = model, copy.deepcopy(model)
    ours = CachedFusedAdamW(ours_model.parameters(), **{**KW, **kw})
    theirs = torch.optim.AdamW(theirs_model.parameters(), fused=True, **{**KW, **kw})
    return ours_model, ours, theirs_model, theirs


def give_grads(models, seed: int, skip: frozenset = frozenset()) -> None:
    g = torch.Generator().manual_seed(seed)
    grads = [torch.randn(p.shape, generator=g) for p in models[0].parameters()]
    for model in models:
        for i, (p, grad) in enumerate(zip(model.parameters(), grads)):
            p.grad = None if i in skip else grad.clone()


def assert_same(a_model, a_opt, b_model, b_opt) -> None:
    for (name, p), q in zip(a_model.named_parameters(), b_model.parameters()):
        assert torch.equal(p, q), name
        sa, sb = a_opt.state.get(p, {}), b_opt.state.get(q, {})
        assert sa.keys() == sb.keys(), name
        for key in sa:
            assert torch.equal(sa[key], sb[key]), (name, key)


def test_steps_match_pytorchs_fused_adamw_bit_for_bit() -> None:
    ours_model, ours, theirs_model, theirs = pair()
    for step in range(6):
        skip = frozenset({3, 5}) if step == 3 else frozenset()  # parameters without a gradient this step
        give_grads([ours_model, theirs_model], step, skip)
        for opt in (ours, theirs):
            opt.param_groups[0]["lr"] = 1e-3 * (step + 1)  # as the schedule sets it
            opt.step()
        assert_same(ours_model, ours, theirs_model, theirs)
    assert ours._cache is not None, "the cached path ran"
    assert len(ours._cache["params"]) == len(list(ours_model.parameters()))


def test_state_dict_moves_between_the_two() -> None:
    ours_model, ours, theirs_model, theirs = pair()
    for step in range(3):
        give_grads([ours_model, theirs_model], step)
        ours.step(), theirs.step()
    buffer = io.BytesIO()
    torch.save(ours.state_dict(), buffer)  # as last.pt holds it
    buffer.seek(0)
    stock = torch.optim.AdamW(ours_model.parameters(), fused=True, **KW)
    stock.load_state_dict(torch.load(buffer))
    resumed = CachedFusedAdamW(theirs_model.parameters(), **KW)
    resumed.load_state_dict(theirs.state_dict())  # a checkpoint written by PyTorch's AdamW
    for step in range(3, 6):
        give_grads([ours_model, theirs_model], step)
        stock.step(), resumed.step()
    assert_same(ours_model, stock, theirs_model, resumed)
    assert all(float(s["step"]) == 6 for s in stock.state.values())


def test_options_outside_the_cache_take_pytorchs_step() -> None:
    ours_model, ours, theirs_model, theirs = pair(amsgrad=True)
    for step in range(3):
        give_grads([ours_model, theirs_model], step)
        ours.step(), theirs.step()
    assert ours._cache is None
    assert_same(ours_model, ours, theirs_model, theirs)


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_make_adamw(device: str) -> None:
    params = [torch.nn.Parameter(torch.zeros(3, device=device))]
    opt = make_adamw(params, torch.device(device), **KW)
    assert isinstance(opt, CachedFusedAdamW) == (device == "cpu")
    assert opt.param_groups[0]["weight_decay"] == 0.01
