"""convert_to_sepnorm on torch's TransformerEncoder and on a small ViT written here."""
from __future__ import annotations

import contextlib
import copy
import logging
import math

import pytest
import torch
from torch import nn

from molsepnorm.nn.convert import convert_to_sepnorm, find_convertible_norms
from molsepnorm.nn.norm import SepNorm

D, HEADS = 16, 2



# -------------------------------------------------------------------------- models
class Block(nn.Module):
    """Pre-LN ViT block."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.norm1 = nn.LayerNorm(d, eps=1e-6)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(d, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(self, x):  # (B, L, D)
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class TinyViT(nn.Module):
    """8x8 images -> 4 patches of 4x4, a [CLS] token, pre-LN blocks, a final norm, a head."""

    def __init__(self, d: int = D, depth: int = 2, classes: int = 3, head_norm: bool = False):
        super().__init__()
        self.patch = nn.Conv2d(3, d, kernel_size=4, stride=4)
        self.cls_token = nn.Parameter(0.02 * torch.randn(1, 1, d))
        self.pos = nn.Parameter(0.02 * torch.randn(1, 5, d))
        self.blocks = nn.Sequential(*[Block(d, HEADS) for _ in range(depth)])
        self.norm = nn.LayerNorm(d, eps=1e-6)
        self.head_norm = nn.LayerNorm(d) if head_norm else None  # on pooled (B, D) features
        self.head = nn.Linear(d, classes)

    def features(self, img):  # (B, 3, 8, 8) -> (B, 5, D)
        x = self.patch(img).flatten(2).transpose(1, 2)  # (B, 4, D)
        x = torch.cat([self.cls_token.expand(len(x), -1, -1), x], 1) + self.pos
        return self.norm(self.blocks(x))

    def forward(self, img):
        pooled = self.features(img)[:, 0]
        if self.head_norm is not None:
            pooled = self.head_norm(pooled)
        return self.head(pooled)


def encoder(batch_first: bool, norm_first: bool = False, layers: int = 2) -> nn.TransformerEncoder:
    layer = nn.TransformerEncoderLayer(D, HEADS, 2 * D, dropout=0.0, batch_first=batch_first, norm_first=norm_first)
    nested = batch_first and not norm_first  # torch warns otherwise
    return nn.TransformerEncoder(layer, layers, norm=nn.LayerNorm(D), enable_nested_tensor=nested)


def randomize_layer_norms(model: nn.Module) -> None:
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.LayerNorm):
                m.weight.copy_(1 + 0.3 * torch.randn(m.weight.shape, generator=g))
                m.bias.copy_(0.3 * torch.randn(m.bias.shape, generator=g))


# ------------------------------------------------------------ hand-written reference
class HandSepNormFreshEval(nn.Module):
    """What a converted norm computes in eval mode while its BatchNorm is fresh.

    Tokens: the LayerNorm formula. [CLS]: running mean 0 and variance 1, affine copied
    from the LayerNorm, so y = x / sqrt(1 + eps) * w + b.
    """

    def __init__(self, ln: nn.LayerNorm, seq_dim: int):
        super().__init__()
        self.w, self.b, self.eps, self.seq_dim = ln.weight.detach().clone(), ln.bias.detach().clone(), ln.eps, seq_dim

    def forward(self, x):
        m = x.mean(-1, keepdim=True)
        v = ((x - m) ** 2).mean(-1, keepdim=True)
        y = (x - m) / torch.sqrt(v + self.eps) * self.w + self.b
        cls = x.select(self.seq_dim, 0) / math.sqrt(1 + self.eps) * self.w + self.b
        return torch.cat([cls.unsqueeze(self.seq_dim), y.narrow(self.seq_dim, 1, y.shape[self.seq_dim] - 1)],
                         self.seq_dim)


def hand_reference(model: nn.Module, seq_dim: int) -> nn.Module:
    ref = copy.deepcopy(model)
    for name, m in list(ref.named_modules()):
        if isinstance(m, nn.LayerNorm):
            parent, _, child = name.rpartition(".")
            setattr(ref.get_submodule(parent), child, HandSepNormFreshEval(m, seq_dim))
    return ref


@contextlib.contextmanager
def torch_fastpath(enabled: bool):
    before = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(enabled)
    try:
        yield
    finally:
        torch.backends.mha.set_fastpath_enabled(before)


def layer_norms(model: nn.Module) -> dict[str, tuple[nn.LayerNorm, torch.Tensor, torch.Tensor, float]]:
    return {n: (m, m.weight.detach().clone(), m.bias.detach().clone(), m.eps)
            for n, m in model.named_modules() if isinstance(m, nn.LayerNorm)}


def assert_fully_converted(model: nn.Module, before: dict, names: list[str]) -> None:
    assert sorted(names) == sorted(before)
    for name, (ln, w, b, eps) in before.items():
        sep = model.get_submodule(name)
        assert isinstance(sep, SepNorm) and sep.module_name == name
        assert sep.token_norm.ln is ln  # the very same module ...
        assert torch.equal(ln.weight, w) and torch.equal(ln.bias, b) and ln.eps == eps  # ... unchanged
        assert type(sep.cls_norm.bn) is nn.BatchNorm1d and sep.cls_norm.bn.eps == max(eps, 1e-5)
    leftover = [n for n, m in model.named_modules() if type(m) is nn.LayerNorm and ".token_norm." not in f".{n}."]
    assert leftover == []


# ------------------------------------------------------------- TransformerEncoder
@pytest.mark.parametrize("batch_first", [True, False])
def test_transformer_encoder_every_layer_norm_replaced_with_detected_layout(batch_first):
    torch.manual_seed(0)
    model = encoder(batch_first)
    randomize_layer_norms(model)
    before = layer_norms(model)
    assert len(before) == 5  # 2 layers x (norm1, norm2) + final norm
    dry_run = find_convertible_norms(model)
    model, names = convert_to_sepnorm(model, return_names=True)
    assert_fully_converted(model, before, names)
    assert names == dry_run and find_convertible_norms(model) == []
    layout = "BLD" if batch_first else "LBD"
    assert all(model.get_submodule(n).layout == layout for n in names)
    assert model.use_nested_tensor is False


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("grad", [True, False])
def test_transformer_encoder_eval_equals_hand_reference(batch_first, grad):
    """Eval mode, fresh BatchNorms: only the [CLS] path changes, as computed by hand.

    Without grad and with a padding mask, torch would take its fused / nested-tensor fast
    paths, which would bypass the SepNorms; the conversion must prevent that.
    """
    torch.manual_seed(0)
    model = encoder(batch_first)
    randomize_layer_norms(model)
    seq_dim = 1 if batch_first else 0
    reference = hand_reference(model, seq_dim).eval()
    convert_to_sepnorm(model, verbose=False).eval()
    B, L = 4, 6
    x = torch.randn(B, L, D) if batch_first else torch.randn(L, B, D)
    pad = torch.zeros(B, L, dtype=torch.bool)
    pad[1, 4:] = pad[3, 2:] = True  # PyTorch convention: True = padding
    real = ~pad if batch_first else (~pad).t()
    with torch_fastpath(False), torch.no_grad():
        expected = reference(x, src_key_padding_mask=pad)
        expected_nopad = reference(x)
    with torch.set_grad_enabled(grad):
        got = model(x, src_key_padding_mask=pad)
        got_nopad = model(x)
    assert torch.allclose(got[real], expected[real], atol=1e-5)
    assert torch.allclose(got_nopad, expected_nopad, atol=1e-5)


@pytest.mark.parametrize("batch_first", [True, False])
def test_post_ln_layer_changes_only_the_cls_position(batch_first):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(D, HEADS, 2 * D, dropout=0.0, batch_first=batch_first)
    original = copy.deepcopy(layer)
    convert_to_sepnorm(layer, verbose=False)
    x = torch.randn(5, 7, D) if batch_first else torch.randn(7, 5, D)
    for train in (True, False):
        layer.train(train), original.train(train)
        new, old = layer(x), original(x)
        cls_new, cls_old = new.select(1 if batch_first else 0, 0), old.select(1 if batch_first else 0, 0)
        rest = (slice(None), slice(1, None)) if batch_first else (slice(1, None),)
        assert torch.allclose(new[rest], old[rest], atol=1e-6)
        assert not torch.allclose(cls_new, cls_old, atol=1e-3)


@pytest.mark.parametrize("batch_first", [True, False])
def test_layer_kind_cls_norm_reproduces_the_original_model(batch_first):
    """With a LayerNorm for the [CLS] too (affine copied), the converted model is the original."""
    torch.manual_seed(0)
    model = encoder(batch_first)
    randomize_layer_norms(model)
    original = copy.deepcopy(model)
    convert_to_sepnorm(model, cls_norm="layer", verbose=False)
    x = torch.randn(3, 5, D) if batch_first else torch.randn(5, 3, D)
    assert torch.allclose(model(x), original(x), atol=1e-6)
    model.eval(), original.eval()
    with torch.no_grad():
        assert torch.allclose(model(x), original(x), atol=1e-5)


# ------------------------------------------------------------------------- TinyViT
def test_vit_converted_matches_hand_reference_and_trains():
    torch.manual_seed(0)
    model = TinyViT()
    randomize_layer_norms(model)
    before = layer_norms(model)
    reference = hand_reference(model, seq_dim=1).eval()
    model, names = convert_to_sepnorm(model, return_names=True, verbose=False)
    assert_fully_converted(model, before, names)
    assert names == ["blocks.0.norm1", "blocks.0.norm2", "blocks.1.norm1", "blocks.1.norm2", "norm"]

    img = torch.randn(8, 3, 8, 8)
    model.eval()
    with torch.no_grad():
        assert torch.allclose(model.features(img), reference.features(img), atol=1e-5)

    model.train()
    labels = torch.arange(8) % 3
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for step in range(5):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(img), labels)
        loss.backward()
        for name, p in model.named_parameters():
            assert p.grad is not None and torch.isfinite(p.grad).all(), name
        opt.step()
        losses.append(loss.item())
    assert all(math.isfinite(v) for v in losses) and losses[-1] < losses[0]
    assert all(int(model.get_submodule(n).cls_norm.bn.num_batches_tracked) == 5 for n in names)


def test_state_dict_round_trip_of_a_converted_model():
    torch.manual_seed(0)
    model = convert_to_sepnorm(TinyViT(), verbose=False)
    model.train()
    model(torch.randn(6, 3, 8, 8))  # move the running statistics
    fresh = convert_to_sepnorm(TinyViT(), verbose=False)
    fresh.load_state_dict(model.state_dict())
    model.eval(), fresh.eval()
    img = torch.randn(4, 3, 8, 8)
    assert torch.equal(model(img), fresh(img))
    assert "norm.cls_norm.bn.running_var" in model.state_dict()
    assert "norm.token_norm.ln.weight" in model.state_dict()


def test_sync_batchnorm_conversion_finds_every_cls_norm():
    model, names = convert_to_sepnorm(TinyViT(), return_names=True, verbose=False)
    nn.SyncBatchNorm.convert_sync_batchnorm(model)
    for name in names:
        assert type(model.get_submodule(name).cls_norm.bn) is nn.SyncBatchNorm
        assert type(model.get_submodule(name).token_norm.ln) is nn.LayerNorm


# ------------------------------------------------------------ exclusions and reports
def test_pooled_head_norm_raises_naming_it_unless_excluded():
    torch.manual_seed(0)
    img = torch.randn(4, 3, 8, 8)
    wrong = convert_to_sepnorm(TinyViT(head_norm=True), verbose=False)
    with pytest.raises(ValueError, match=r"'head_norm'.*\(4, 16\).*exclude=\['head_norm'\]"):
        wrong(img)

    model, names = convert_to_sepnorm(TinyViT(head_norm=True), exclude=["head_norm"], verbose=False,
                                      return_names=True)
    assert "head_norm" not in names and type(model.head_norm) is nn.LayerNorm
    assert model(img).shape == (4, 3)
    assert find_convertible_norms(TinyViT(head_norm=True), exclude=["head_*"]) == names

    with pytest.warns(UserWarning, match="'nope' matched no LayerNorm"):
        convert_to_sepnorm(TinyViT(), exclude=["nope"], verbose=False)


def test_conversion_logs_names_and_is_idempotent(caplog):
    model = TinyViT()
    with caplog.at_level(logging.INFO, logger="molsepnorm.nn.convert"):
        convert_to_sepnorm(model)
    assert "blocks.1.norm2" in caplog.text and "replaced 5 LayerNorm" in caplog.text
    caplog.clear()
    state = copy.deepcopy(model.state_dict())
    with caplog.at_level(logging.INFO, logger="molsepnorm.nn.convert"), \
            pytest.warns(UserWarning, match="no nn.LayerNorm was replaced"):
        _, names = convert_to_sepnorm(model, verbose=False, return_names=True)
    assert names == [] and caplog.text == ""
    assert state.keys() == model.state_dict().keys()


def test_a_layer_norm_registered_twice_becomes_one_sepnorm():
    shared = nn.LayerNorm(D)
    model = nn.ModuleDict({"a": shared, "b": nn.Sequential(shared)})
    model, names = convert_to_sepnorm(model, return_names=True, verbose=False)
    assert sorted(names) == ["a", "b.0"]
    assert model["a"] is model["b"][0] and isinstance(model["a"], SepNorm)


def test_root_layer_norm_is_returned_converted():
    sep = convert_to_sepnorm(nn.LayerNorm(D), verbose=False)
    assert isinstance(sep, SepNorm) and sep(torch.randn(2, 3, D)).shape == (2, 3, D)


# ------------------------------------------------------ checkpoints of other LayerNorms
def _encoder(**layer_kw) -> nn.TransformerEncoder:
    torch.manual_seed(0)
    return nn.TransformerEncoder(nn.TransformerEncoderLayer(D, HEADS, 2 * D, batch_first=True, norm_first=True,
                                                            **layer_kw), 2, enable_nested_tensor=False)


class _NoAffine(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(D, D)
        self.ln = nn.LayerNorm(D, elementwise_affine=False)

    def forward(self, x):
        return self.ln(self.lin(x))


@pytest.mark.parametrize("build", [lambda: _encoder(bias=False), _NoAffine], ids=["bias=False", "no affine"])
def test_a_checkpoint_of_layer_norms_without_bias_or_affine_loads_strictly(build):
    """The LayerNorm saved a weight and no bias (or nothing at all): the converted model's
    [CLS] norms keep what they have for the rest, and the fresh statistics are named."""
    original = build()
    state = original.state_dict()
    x = torch.randn(4, 6, D)
    model = convert_to_sepnorm(build(), verbose=False, example_input=x)
    with pytest.warns(UserWarning, match="recalibrate_cls_norms") as caught:
        model.load_state_dict(state, strict=True)
    assert all(w.filename == __file__ for w in caught)  # attributed to the caller's line
    for name, sep in model.named_modules():
        if isinstance(sep, SepNorm):
            ln = original.get_submodule(name)
            for pname in ("weight", "bias"):
                mine, theirs = getattr(sep.token_norm.ln, pname), getattr(ln, pname)
                assert (mine is None) == (theirs is None) and (mine is None or torch.equal(mine, theirs))
            assert torch.equal(sep.cls_norm.bn.running_var, torch.ones(D))  # fresh


def test_a_plan_refuses_an_example_whose_sequence_length_is_its_batch_size():
    class SequenceFirst(nn.Module):  # (L, B, D), as fairseq
        def __init__(self):
            super().__init__()
            self.attn, self.ln = nn.MultiheadAttention(D, HEADS), nn.LayerNorm(D)

        def forward(self, x):
            return self.ln(x + self.attn(x, x, x)[0])

    from molsepnorm.nn.convert import plan_sepnorm

    plan = plan_sepnorm(SequenceFirst(), example_input=torch.randn(6, 4, D), batch_size=4)
    assert plan.slots["ln"]["layout"] == "LBD"
    with pytest.raises(ValueError, match=r"'?ln'? sees \(4, 4, 16\).*cannot be told apart"):
        plan_sepnorm(SequenceFirst(), example_input=torch.randn(4, 4, D), batch_size=4)
