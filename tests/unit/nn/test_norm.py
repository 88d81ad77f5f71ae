"""SepNorm, ShareNorm and the token norms checked against hand-written formulas."""
from __future__ import annotations

import copy
import itertools
import warnings

import pytest
import torch
from torch import nn

from molsepnorm.nn.norm import (
    NORM_KINDS,
    MaskedBatchNorm,
    MaskedIdentity,
    MaskedLayerNorm,
    MaskedRMSNorm,
    SepNorm,
    ShareNorm,
    create_norm,
)

EPS = 1e-5
MOM = 0.1
D = 6
ATOL = 1e-5



# ----------------------------------------------------------------- hand-written formulas
def ref_layer(x, w, b, eps=EPS):
    m = x.mean(-1, keepdim=True)
    v = ((x - m) ** 2).mean(-1, keepdim=True)
    return (x - m) / torch.sqrt(v + eps) * w + b


def ref_rms(x, w, eps=EPS):
    return x / torch.sqrt((x**2).mean(-1, keepdim=True) + eps) * w


class RefBatch:
    """BatchNorm1d by hand on (N, D): biased variance to normalize, unbiased for running_var.

    With ``renorm=(r_max, d_max, warmup)``: Batch Renormalization (Ioffe 2017) after
    ``warmup`` training batches, r and d from the running statistics before the update."""

    def __init__(self, w, b, dim=D, renorm=None):
        self.w, self.b, self.renorm = w, b, renorm
        self.rm, self.rv, self.steps = torch.zeros(dim), torch.ones(dim), 0

    def __call__(self, x, training):
        if not training:
            return (x - self.rm) / torch.sqrt(self.rv + EPS) * self.w + self.b
        n = x.shape[0]
        m = x.sum(0) / n
        v_biased = ((x - m) ** 2).sum(0) / n
        v_unbiased = ((x - m) ** 2).sum(0) / (n - 1)
        y = (x - m) / torch.sqrt(v_biased + EPS)
        if self.renorm is not None and self.steps >= self.renorm[2]:
            r_max, d_max, _ = self.renorm
            r = (torch.sqrt(v_biased + EPS) / torch.sqrt(self.rv + EPS)).clamp(1 / r_max, r_max)
            d = ((m - self.rm) / torch.sqrt(self.rv + EPS)).clamp(-d_max, d_max)
            y = y * r + d
        self.rm = (1 - MOM) * self.rm + MOM * m
        self.rv = (1 - MOM) * self.rv + MOM * v_unbiased
        self.steps += 1
        return y * self.w + self.b


def randomize(module: nn.Module, seed: int = 0) -> None:
    """Non-trivial affine parameters, so that the formulas check them too."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            p.copy_((1.5 if name.endswith("weight") else 0.0) + 0.5 * torch.randn(p.shape, generator=g))


def ref_for(norm):
    """A callable (x (N, D), training) -> y computing ``norm``'s formula by hand."""
    inner = norm.inner
    w = None if inner is None or inner.weight is None else inner.weight.detach().clone()
    b = None if inner is None or getattr(inner, "bias", None) is None else inner.bias.detach().clone()
    if norm.kind == "batch":
        return RefBatch(w, b)
    if norm.kind == "batchrenorm":
        return RefBatch(w, b, renorm=(norm.r_max, norm.d_max, norm.warmup))
    if norm.kind == "layer":
        return lambda x, training: ref_layer(x, w, b)
    if norm.kind == "rms":
        return lambda x, training: ref_rms(x, w)
    return lambda x, training: x


def ref_sepnorm(ref_cls, ref_tok, x, mask, training):
    """SepNorm by hand on (B, L, D), [CLS] at 0: every real token set, then scattered."""
    B, L, _ = x.shape
    mask = torch.ones(B, L, dtype=torch.bool) if mask is None else mask
    out = torch.zeros_like(x)
    out[:, 0][mask[:, 0]] = ref_cls(x[:, 0][mask[:, 0]], training)
    tok_out = torch.zeros_like(x[:, 1:])
    tok_out[mask[:, 1:]] = ref_tok(x[:, 1:][mask[:, 1:]], training)
    out[:, 1:] = tok_out
    return out


def padded_batch(B=5, L=7, seed=0, garbage=3.0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, L, D, generator=g) * 2 + 1
    lengths = torch.tensor([L, 3, L - 1, 2, 4][:B])
    mask = torch.arange(L)[None, :] < lengths[:, None]
    x[~mask] = garbage  # padding content must not matter
    return x, mask


KIND_PAIRS = [("batch", "layer"), ("batch", "batch"), ("batch", "rms"), ("layer", "batch"),
              ("rms", "none"), ("none", "layer"), ("batch", "none"), ("layer", "rms")]


# ------------------------------------------------------------------------ create_norm
def test_create_norm_kinds_wrap_torch_modules():
    expected = {"batch": nn.BatchNorm1d, "batchrenorm": nn.BatchNorm1d, "layer": nn.LayerNorm, "rms": nn.RMSNorm}
    for kind in NORM_KINDS:
        norm = create_norm(kind, D)
        assert norm.kind == kind
        if kind == "none":
            assert isinstance(norm, MaskedIdentity) and list(norm.parameters()) == []
        else:
            assert type(norm.inner) is expected[kind]
    assert isinstance(create_norm("batch", D), MaskedBatchNorm)
    assert isinstance(create_norm("layer", D), MaskedLayerNorm)
    assert isinstance(create_norm("rms", D), MaskedRMSNorm)
    with pytest.raises(ValueError, match="unknown norm kind 'group'.*batch"):
        create_norm("group", D)
    with pytest.raises(TypeError):
        create_norm("layer", D, momentum=0.1)  # momentum is for the batch kind only


@pytest.mark.parametrize("kind", NORM_KINDS)
def test_token_norm_matches_formula(kind):
    norm = create_norm(kind, D)
    randomize(norm)
    ref = ref_for(norm)
    x, mask = padded_batch()
    for step in range(2):  # two training steps: running statistics accumulate
        norm.train()
        xs = x + step
        y = norm(xs, mask)
        assert torch.allclose(y[mask], ref(xs[mask], True), atol=ATOL)
        assert torch.all(y[~mask] == 0)
    flat = x[mask]
    y2d = norm(flat)  # (N, D) input, no mask
    assert torch.allclose(y2d, ref(flat, True), atol=ATOL)
    norm.eval()
    assert torch.allclose(norm(x, mask)[mask], ref(x[mask], False), atol=ATOL)
    assert torch.allclose(norm(x).reshape(-1, D), ref(x.reshape(-1, D), False), atol=ATOL)
    if kind in ("batch", "batchrenorm"):
        assert torch.allclose(norm.bn.running_mean, ref.rm, atol=ATOL)
        assert torch.allclose(norm.bn.running_var, ref.rv, atol=ATOL)
        assert int(norm.bn.num_batches_tracked) == ref.steps == 3


def test_masked_batch_norm_equals_norm_on_unpadded_tokens():
    x, mask = padded_batch(garbage=1e3)
    masked = create_norm("batch", D)
    randomize(masked)
    plain = copy.deepcopy(masked.bn)
    y = masked(x, mask)
    assert torch.allclose(y[mask], plain(x[mask]), atol=ATOL)
    assert torch.all(y[~mask] == 0)
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        assert torch.equal(getattr(masked.bn, name), getattr(plain, name)), name


# ---------------------------------------------------------------- SepNorm / ShareNorm
@pytest.mark.parametrize("cls_kind,token_kind", KIND_PAIRS)
@pytest.mark.parametrize("use_mask", [False, True])
def test_sepnorm_matches_formula(cls_kind, token_kind, use_mask):
    sep = SepNorm(D, cls_norm=cls_kind, token_norm=token_kind)
    randomize(sep)
    ref_cls, ref_tok = ref_for(sep.cls_norm), ref_for(sep.token_norm)
    x, mask = padded_batch()
    mask = mask if use_mask else None
    sep.train()
    for step in range(2):
        xs = x * (1 + step)
        assert torch.allclose(sep(xs, mask), ref_sepnorm(ref_cls, ref_tok, xs, mask, True), atol=ATOL)
    sep.eval()
    assert torch.allclose(sep(x, mask), ref_sepnorm(ref_cls, ref_tok, x, mask, False), atol=ATOL)
    for norm, ref in ((sep.cls_norm, ref_cls), (sep.token_norm, ref_tok)):
        if norm.kind == "batch":
            assert torch.allclose(norm.bn.running_mean, ref.rm, atol=ATOL)
            assert torch.allclose(norm.bn.running_var, ref.rv, atol=ATOL)


@pytest.mark.parametrize("kind", NORM_KINDS)
def test_sharenorm_matches_formula(kind):
    share = ShareNorm(D, norm=kind)
    randomize(share)
    ref = ref_for(share.norm)
    x, mask = padded_batch()
    share.train()
    y = share(x, mask)
    assert torch.allclose(y[mask], ref(x[mask], True), atol=ATOL)
    assert torch.all(y[~mask] == 0)
    share.eval()
    assert torch.allclose(share(x), ref(x.reshape(-1, D), False).reshape(x.shape), atol=ATOL)


def test_sepnorm_layer_layer_with_shared_weights_is_sharenorm():
    sep, share = SepNorm(D, cls_norm="layer", token_norm="layer"), ShareNorm(D, norm="layer")
    randomize(share)
    sep.cls_norm.ln.load_state_dict(share.norm.ln.state_dict())
    sep.token_norm.ln.load_state_dict(share.norm.ln.state_dict())
    x, mask = padded_batch()
    assert torch.allclose(sep(x, mask), share(x, mask), atol=ATOL)


def test_token_batch_norm_with_padding_equals_unpadded_tokens():
    x, mask = padded_batch(garbage=-50.0)
    sep = SepNorm(D, cls_norm="batch", token_norm="batch")
    randomize(sep)
    tok_bn, cls_bn = copy.deepcopy(sep.token_norm.bn), copy.deepcopy(sep.cls_norm.bn)
    y = sep(x, mask)
    real_tokens = x[:, 1:][mask[:, 1:]]
    assert torch.allclose(y[:, 1:][mask[:, 1:]], tok_bn(real_tokens), atol=ATOL)
    assert torch.allclose(y[:, 0], cls_bn(x[:, 0]), atol=ATOL)
    assert torch.all(y[~mask] == 0)
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        for ours, theirs in ((sep.token_norm.bn, tok_bn), (sep.cls_norm.bn, cls_bn)):
            assert torch.allclose(getattr(ours, name).double(), getattr(theirs, name).double(), atol=1e-6), name


@pytest.mark.parametrize("token_kind", ["layer", "batch"])
def test_cls_batch_norm_independent_of_padding_amount(token_kind):
    x, mask = padded_batch(L=7)
    extra = torch.randn(x.shape[0], 6, D) * 10  # 6 more padded positions of garbage
    x_long = torch.cat([x, extra], 1)
    mask_long = torch.cat([mask, torch.zeros(x.shape[0], 6, dtype=torch.bool)], 1)
    short, long = SepNorm(D, token_norm=token_kind), SepNorm(D, token_norm=token_kind)
    randomize(short)
    long.load_state_dict(short.state_dict())
    for mode in ("train", "eval"):
        short.train(mode == "train"), long.train(mode == "train")
        y_short, y_long = short(x, mask), long(x_long, mask_long)
        assert torch.allclose(y_long[:, :7], y_short, atol=ATOL)
        assert torch.all(y_long[:, 7:] == 0)
    assert all(torch.equal(a, b) for a, b in zip(short.state_dict().values(), long.state_dict().values()))


def test_fully_padded_row_is_left_out_of_cls_statistics():
    x, mask = padded_batch()
    mask[2] = False  # a whole row of padding, [CLS] included
    sep = SepNorm(D)
    randomize(sep)
    cls_bn = copy.deepcopy(sep.cls_norm.bn)
    y = sep(x, mask)
    rows = torch.tensor([0, 1, 3, 4])
    assert torch.allclose(y[rows, 0], cls_bn(x[rows, 0]), atol=ATOL)
    assert torch.all(y[2] == 0)
    assert torch.allclose(sep.cls_norm.bn.running_var, cls_bn.running_var, atol=1e-6)


def test_sepnorm_lbd_layout_and_negative_cls_index():
    x, mask = padded_batch()
    bld = SepNorm(D, token_norm="batch")
    lbd = SepNorm(D, token_norm="batch", layout="LBD")
    randomize(bld)
    lbd.load_state_dict(bld.state_dict())
    y_lbd = lbd(x.transpose(0, 1).contiguous(), mask)  # mask stays (B, L)
    assert torch.allclose(y_lbd.transpose(0, 1), bld(x, mask), atol=ATOL)

    last = SepNorm(D, cls_index=-1)
    randomize(last)
    first = SepNorm(D)
    first.load_state_dict(last.state_dict())
    xr = torch.randn(4, 5, D)
    assert torch.allclose(last(xr).flip(1), first(xr.flip(1)), atol=ATOL)


@pytest.mark.parametrize("cls_kind,token_kind", KIND_PAIRS)
def test_gradients_reach_every_parameter_without_nan(cls_kind, token_kind):
    x, mask = padded_batch(B=2, L=5)
    x.requires_grad_(True)
    sep = SepNorm(D, cls_norm=cls_kind, token_norm=token_kind)
    randomize(sep)
    y = sep(x, mask)
    assert torch.isfinite(y).all()
    (y * torch.randn_like(y)).sum().backward()
    assert torch.isfinite(x.grad).all()
    for name, p in sep.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0, name
    assert torch.all(x.grad[~mask] == 0)  # padding gets no gradient


# ------------------------------------------------------------------ batches of one
def test_batch_of_one_in_eval_uses_running_stats():
    sep = SepNorm(D)
    randomize(sep)
    sep.train()
    sep(torch.randn(8, 4, D))
    sep.eval()
    x = torch.randn(1, 4, D)
    ref = ref_for(sep.cls_norm)
    ref.rm, ref.rv = sep.cls_norm.bn.running_mean.clone(), sep.cls_norm.bn.running_var.clone()
    assert torch.allclose(sep(x)[:, 0], ref(x[:, 0], False), atol=ATOL)
    batch = torch.randn(6, 4, D)
    alone = torch.cat([sep(batch[i : i + 1]) for i in range(6)])
    assert torch.allclose(sep(batch), alone, atol=ATOL)  # no dependence on batch-mates


def test_batch_of_one_in_training_falls_back_to_running_stats():
    sep = SepNorm(D)
    randomize(sep)
    sep.train()
    sep(torch.randn(8, 4, D))
    before = {k: v.clone() for k, v in sep.state_dict().items()}
    x = torch.randn(1, 4, D, requires_grad=True)
    with pytest.warns(UserWarning, match="drop_last"):
        y = sep(x)
    sep.eval()
    assert torch.allclose(y, sep(x), atol=ATOL)  # same as eval mode
    assert all(torch.equal(before[k], v) for k, v in sep.state_dict().items())  # stats untouched
    y.sum().backward()
    assert sep.cls_norm.bn.weight.grad is not None and x.grad[:, 0].abs().sum() > 0


def test_batch_of_one_in_training_can_raise():
    sep = SepNorm(D, single_sample="raise").train()
    with pytest.raises(ValueError, match="more than 1 sample.*drop_last"):
        sep(torch.randn(1, 4, D))
    bn = create_norm("batch", D, track_running_stats=False).train()
    with pytest.raises(ValueError, match="more than 1 sample"):
        bn(torch.randn(1, D))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sep(torch.randn(2, 4, D))  # two samples: no warning


def test_all_padding_gives_zeros():
    norm = create_norm("batch", D).train()
    x = torch.randn(2, 3, D)
    y = norm(x, torch.zeros(2, 3, dtype=torch.bool))
    assert torch.all(y == 0)
    assert int(norm.bn.num_batches_tracked) == 0


# ------------------------------------------------------------------- input checks
def test_sepnorm_rejects_bad_inputs_with_clear_errors():
    sep = SepNorm(D)
    sep.module_name = "head.norm"
    with pytest.raises(ValueError, match=r"'head.norm'.*\(4, 6\).*exclude=\['head.norm'\]"):
        sep(torch.randn(4, D))
    mine = SepNorm(D)  # built by hand, not by a conversion: no advice about one
    for shape in ((4, D), (2, 3, 4, D)):
        with pytest.raises(ValueError, match=r"expects a token sequence of shape \(B, L, D\)") as raised:
            mine(torch.randn(*shape))
        assert "convert_to_sepnorm" not in str(raised.value)
    x, mask = padded_batch()
    with pytest.raises(ValueError, match="key_padding_mask"):
        sep(x, ~mask)  # PyTorch's convention (True = padding) by mistake
    with pytest.raises(ValueError, match="boolean"):
        sep(x, mask.float())
    with pytest.raises(ValueError, match=r"\(B, L\)"):
        sep(x, mask[:, :3])
    with pytest.raises(TypeError, match="boolean"):
        create_norm("layer", D)(x, mask.long())
    with pytest.raises(IndexError, match="cls_index 9"):
        SepNorm(D, cls_index=9)(x)


# ------------------------------------------------------ state dicts, resets, SyncBatchNorm
def test_state_dict_keys_and_round_trip():
    sep = SepNorm(D, token_norm="batch")
    randomize(sep)
    sep.train()
    for i in range(3):
        sep(torch.randn(5, 4, D) + i)
    assert {"cls_norm.bn.running_var", "token_norm.bn.weight"} <= set(sep.state_dict())
    assert set(SepNorm(D).state_dict()) >= {"cls_norm.bn.running_mean", "token_norm.ln.weight", "token_norm.ln.bias"}
    fresh = SepNorm(D, token_norm="batch")
    fresh.load_state_dict(sep.state_dict())
    x, mask = padded_batch()
    sep.eval(), fresh.eval()
    assert torch.equal(sep(x, mask), fresh(x, mask))
    share, share2 = ShareNorm(D, norm="batch"), ShareNorm(D, norm="batch")
    share(torch.randn(9, D))
    share2.load_state_dict(share.state_dict())
    share.eval(), share2.eval()
    assert torch.equal(share(x, mask), share2(x, mask))


def test_reset_parameters():
    sep = SepNorm(D, token_norm="rms")
    randomize(sep)
    sep(torch.randn(5, 4, D) + 3)
    sep.reset_parameters()
    bn = sep.cls_norm.bn
    assert torch.all(bn.weight == 1) and torch.all(bn.bias == 0)
    assert torch.all(bn.running_mean == 0) and torch.all(bn.running_var == 1)
    assert torch.all(sep.token_norm.rms.weight == 1)


def test_sync_batchnorm_conversion_finds_the_batch_norms():
    model = nn.ModuleDict({
        "sep": SepNorm(D, token_norm="batch"),
        "plain": SepNorm(D),
        "share": ShareNorm(D, norm="batch"),
    })
    converted = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    assert type(converted["sep"].cls_norm.bn) is nn.SyncBatchNorm
    assert type(converted["sep"].token_norm.bn) is nn.SyncBatchNorm
    assert type(converted["plain"].cls_norm.bn) is nn.SyncBatchNorm
    assert type(converted["plain"].token_norm.ln) is nn.LayerNorm
    assert type(converted["share"].norm.bn) is nn.SyncBatchNorm


def test_every_kind_pair_constructs():
    for cls_kind, token_kind in itertools.product(NORM_KINDS, NORM_KINDS):
        y = SepNorm(D, cls_norm=cls_kind, token_norm=token_kind)(*padded_batch())
        assert y.shape == (5, 7, D) and torch.isfinite(y).all()


# ------------------------------------------------------------------ batch renormalization
def test_batch_renorm_matches_formula_after_warmup():
    norm = create_norm("batchrenorm", D, momentum=MOM, r_max=1.5, d_max=0.5, warmup=2)
    randomize(norm)
    ref = ref_for(norm)
    x, mask = padded_batch()
    norm.train()
    for step in range(6):  # 2 plain batch-norm steps, then renormalized ones (the clips are hit)
        xs = x * (1 + step) + 3 * step
        y = norm(xs, mask)
        torch.testing.assert_close(y[mask], ref(xs[mask], True), atol=ATOL, rtol=0)
        assert torch.all(y[~mask] == 0)
    assert int(norm.bn.num_batches_tracked) == 6
    torch.testing.assert_close(norm.bn.running_mean, ref.rm, atol=ATOL, rtol=0)
    torch.testing.assert_close(norm.bn.running_var, ref.rv, atol=ATOL, rtol=0)


def test_batch_renorm_trains_on_shifted_batches_as_it_evaluates():
    """Batches that are not i.i.d. (each shifted by its own offset, as size-bucketed
    graph tokens are): batch norm removes the offset in training but not in eval; batch
    renorm normalizes a batch in training much as eval mode will."""
    g = torch.Generator().manual_seed(0)
    offsets = [-2.0, -1.0, 0.0, 1.0, 2.0]
    gaps = {}
    for kind in ("batch", "batchrenorm"):
        norm = create_norm(kind, D, momentum=0.05) if kind == "batch" else \
            create_norm(kind, D, momentum=0.05, warmup=20)
        norm.train()
        for step in range(400):
            norm(torch.randn(32, D, generator=g) + offsets[step % 5])
        batch = torch.randn(32, D, generator=g) + 2.0
        train_out = norm(batch)
        norm.eval()
        gaps[kind] = (train_out - norm(batch)).abs().mean().item()
    assert gaps["batch"] > 1.0, gaps  # the offset (in running-std units, ~1.4) is lost in training
    assert gaps["batchrenorm"] < 0.25 * gaps["batch"], gaps


def test_batch_renorm_gradients_and_eval():
    norm = create_norm("batchrenorm", D, warmup=1)
    x, mask = padded_batch()
    norm.train()
    norm(x, mask)
    x2 = (x * 3 + 1).requires_grad_(True)
    y = norm(x2, mask)
    (y[mask] ** 3).sum().backward()
    assert torch.isfinite(x2.grad).all() and x2.grad[mask].abs().sum() > 0
    assert torch.all(x2.grad[~mask] == 0)
    assert norm.bn.weight.grad is not None and norm.bn.bias.grad is not None
    norm.eval()
    ref = nn.BatchNorm1d(D)
    ref.load_state_dict(norm.bn.state_dict())
    ref.eval()
    torch.testing.assert_close(norm(x, mask)[mask], ref(x[mask]), atol=ATOL, rtol=0)


# ------------------------------------------------- checkpointing, special tokens, masks
@pytest.mark.parametrize("kind, warmup", [("batch", 0), ("batchrenorm", 0), ("batchrenorm", 2)])
@pytest.mark.parametrize("reentrant", [True, False])
def test_checkpointed_forward_updates_running_statistics_once(kind, warmup, reentrant):
    """torch.utils.checkpoint re-runs the forward in backward: the statistics move once,
    to where an unchecked step moves them, and the gradients are the same."""
    from torch.utils.checkpoint import checkpoint

    torch.manual_seed(0)
    plain = nn.Sequential(nn.Linear(D, D), SepNorm(D, cls_norm=kind, token_norm="layer"))
    if kind == "batchrenorm":
        plain[1].cls_norm.warmup = warmup  # 2: the third step is the first renormalized one
    ckpt = copy.deepcopy(plain)
    for step in range(3):
        x = torch.randn(5, 4, D, requires_grad=True) + step
        for model in (plain, ckpt):
            model.zero_grad()
        plain(x).pow(2).sum().backward()
        checkpoint(ckpt, x, use_reentrant=reentrant).pow(2).sum().backward()
        a, b = plain[1].cls_norm.bn, ckpt[1].cls_norm.bn
        assert int(b.num_batches_tracked) == step + 1
        assert torch.allclose(a.running_mean, b.running_mean) and torch.allclose(a.running_var, b.running_var)
        for p, q in zip(plain.parameters(), ckpt.parameters()):
            assert torch.allclose(p.grad, q.grad, atol=1e-5), step


def test_special_tokens_each_get_their_own_norm():
    torch.manual_seed(0)
    sep = SepNorm(D, cls_norm="batch", token_norm="layer", special_tokens=3)
    x = torch.randn(4, 7, D)
    y = sep.train()(x)
    for k, norm in enumerate(sep.separate_norms()):
        w, b = norm.bn.weight, norm.bn.bias
        assert torch.allclose(y[:, k], RefBatch(w.detach(), b.detach())(x[:, k], training=True), atol=ATOL)
    assert torch.allclose(y[:, 3:], ref_layer(x[:, 3:], sep.token_norm.ln.weight, sep.token_norm.ln.bias),
                          atol=ATOL)
    assert set(sep.state_dict()) >= {"special_norms.0.bn.running_mean", "special_norms.1.bn.running_var"}


@pytest.mark.parametrize("layout", ["BLD", "LBD"])
def test_cls_from_mask_takes_each_rows_first_real_token(layout):
    """Left padding: the [CLS] of a short row is not at position 0."""
    torch.manual_seed(0)
    sep = SepNorm(D, cls_from_mask=True, layout=layout).train()
    fixed = copy.deepcopy(sep)
    fixed.cls_from_mask = False
    lengths = [6, 3, 5, 2]
    B, L = len(lengths), max(lengths)
    rows = [torch.randn(n, D) for n in lengths]
    left = torch.zeros(B, L, D)
    right = torch.zeros(B, L, D)
    mask_l = torch.zeros(B, L, dtype=torch.bool)
    mask_r = torch.zeros(B, L, dtype=torch.bool)
    for b, r in enumerate(rows):
        left[b, L - len(r):], mask_l[b, L - len(r):] = r, True
        right[b, :len(r)], mask_r[b, :len(r)] = r, True
    t = (lambda v: v) if layout == "BLD" else (lambda v: v.transpose(0, 1))
    y_left = t(sep(t(left), mask_l))
    y_right = t(fixed(t(right), mask_r))
    assert torch.allclose(y_left[mask_l], y_right[mask_r], atol=ATOL)
    assert torch.equal(y_left[~mask_l], torch.zeros_like(y_left[~mask_l]))
    assert torch.allclose(sep.cls_norm.bn.running_mean, fixed.cls_norm.bn.running_mean)


def test_context_mask_applies_when_no_mask_is_passed():
    sep = SepNorm(D).train()
    x = torch.randn(3, 5, D)
    mask = torch.ones(3, 5, dtype=torch.bool)
    mask[1, 3:] = False
    expected = sep(x, mask)
    sep.context_mask = mask
    assert torch.equal(sep(x), expected)
    sep.context_mask = torch.ones(3, 4, dtype=torch.bool)  # another shape: ignored
    unmasked = sep(x)
    sep.context_mask = None
    assert torch.equal(unmasked, sep(x)) and not torch.equal(unmasked, expected)


def test_layer_norm_state_dict_loads_into_sepnorm():
    ln = nn.LayerNorm(D)
    with torch.no_grad():
        ln.weight.uniform_(0.5, 1.5)
        ln.bias.uniform_(-1, 1)
    sep = SepNorm(D, special_tokens=2)
    with pytest.warns(UserWarning, match="fresh"):
        sep.load_state_dict(ln.state_dict(), strict=True)
    for norm in (sep.token_norm.ln, sep.cls_norm.bn, sep.special_norms[0].bn):
        assert torch.equal(norm.weight, ln.weight) and torch.equal(norm.bias, ln.bias)
    assert torch.equal(sep.cls_norm.bn.running_var, torch.ones(D))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # its own state dict: no warning
        sep.load_state_dict(copy.deepcopy(sep.state_dict()), strict=True)


def test_cls_from_mask_with_a_row_shorter_than_the_special_tokens():
    sep = SepNorm(D, cls_from_mask=True, special_tokens=3).train()
    x = torch.randn(3, 5, D)
    mask = torch.ones(3, 5, dtype=torch.bool)
    mask[1, :4] = False  # one real token, at the end: only the [CLS]
    y = sep(x, mask)
    assert torch.isfinite(y).all() and torch.equal(y[1, :4], torch.zeros(4, D))
    # that row's lone token is its [CLS]: batch-normalized with the other rows' [CLS], not overwritten
    # by a later special norm at the clamped position
    bn = sep.cls_norm.bn
    cls_rows = torch.stack([x[0, 0], x[1, 4], x[2, 0]])
    expected = torch.nn.functional.batch_norm(cls_rows, None, None, bn.weight, bn.bias, True, 0.0, bn.eps)
    assert torch.allclose(y[1, 4], expected[1], atol=ATOL)
    second = sep.special_norms[0].bn  # position first + 1: real in rows 0 and 2 only
    rows = torch.stack([x[0, 1], x[2, 1]])
    expected = torch.nn.functional.batch_norm(rows, None, None, second.weight, second.bias, True, 0.0, second.eps)
    assert torch.allclose(torch.stack([y[0, 1], y[2, 1]]), expected, atol=ATOL)
