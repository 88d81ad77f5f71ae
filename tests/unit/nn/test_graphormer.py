"""Graphormer with SepNorm / ShareNorm on real molecules: gradients, batch independence,
permutation invariance, checkpoints, presets and the pieces of the attention bias."""
from __future__ import annotations

import io
from pathlib import Path

import pytest
import torch

from molsepnorm.chem import featurize
from molsepnorm.data.collate import collate_graphs
from molsepnorm.encodings import GraphormerEncoding
from molsepnorm.nn.encoders import EdgePathEncoder, SpatialEncoder
from molsepnorm.nn.graphormer import Graphormer, GraphormerConfig
from molsepnorm.nn.norm import MaskedLayerNorm

REPO = Path(__file__).resolve().parents[3]
ENCODE = GraphormerEncoding()
K = 5
ATOL = 1e-5
PUBLISHED_SLIM = 489_321  # Graphormer-slim on ZINC, Ying et al. (2021), Table 1

SALT = {"zinc": "C[NH3+].CC(=O)[O-]", "ogb": "CC(=O)[O-].[Na+]"}  # two components each
DRUG = "CC(=O)Oc1ccccc1C(=O)O"  # aspirin
LARGE = "N" + "C(=O)c1ccc(cc1)N" * 17  # 154 atoms, rings, diameter > K
ACYCLIC = ["CCCC(CCC)C(=O)O", "CC(C)(C)NCC(O)CO", "C[NH3+].CC(=O)[O-]", "CCN(CC)CC(=O)NC"]  # unique shortest paths



def graph(smiles: str, vocab: str):
    return ENCODE(featurize(smiles, vocab=vocab))


def small_config(vocab: str = "zinc", norm: str = "sep", **kw) -> GraphormerConfig:
    # the paper's SepNorm (BatchNorm graph token), whose batch semantics these tests check
    base = dict(vocab=vocab, norm=norm, num_layers=2, hidden_dim=32, ffn_dim=48, num_heads=4,
                multi_hop_max_dist=K, num_tasks=3, cls_norm="batch", readout="cls")
    return GraphormerConfig(**{**base, **kw})


def model_for(cfg: GraphormerConfig, seed: int = 0) -> Graphormer:
    torch.manual_seed(seed)
    return Graphormer(cfg)


def warm_up(model: Graphormer, batch) -> Graphormer:
    """A few training-mode forwards so BatchNorm running statistics are not the defaults."""
    model.train()
    with torch.no_grad():
        for _ in range(3):
            model(batch)
    return model.eval()


def mixed(vocab: str) -> list:
    return [graph(s, vocab) for s in ("C", SALT[vocab], DRUG, LARGE)]


# --------------------------------------------------------------------------- gradients
@pytest.mark.parametrize("vocab", ["zinc", "ogb"])
@pytest.mark.parametrize("norm", ["sep", "share"])
def test_every_parameter_gets_a_finite_gradient_no_nan(vocab, norm):
    data = mixed(vocab)
    assert data[0].num_nodes == 1 and data[3].num_nodes >= 150
    batch = collate_graphs(data, K)
    model = model_for(small_config(vocab, norm)).train()
    out = model(batch)
    assert out.shape == (4, 3) and torch.isfinite(out).all()
    tokens = model.encode(batch)  # (B, N+1, D); the atom states too, so every slot matters
    assert tokens.shape == (4, 1 + batch.x.size(1), 32) and torch.isfinite(tokens).all()
    (out.square().mean() + tokens.square().mean()).backward()
    for name, p in model.named_parameters():
        assert p.grad is not None, f"{name} got no gradient"
        assert torch.isfinite(p.grad).all(), f"{name} has a non-finite gradient"
        assert p.grad.abs().sum() > 0, f"{name} has an all-zero gradient: not wired in?"


def test_post_ln_and_sdpa_variants_train():
    batch = collate_graphs(mixed("zinc"), K)
    for cfg in (small_config(pre_ln=False), small_config(attention="sdpa")):
        model = model_for(cfg).train()
        out = model(batch)
        out.sum().backward()
        assert torch.isfinite(out).all()
        assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
    post = model_for(small_config(pre_ln=False))
    assert post.final_norm is None and post.input_norm is not None


def test_sdpa_matches_math():
    batch = collate_graphs(mixed("ogb"), K)
    ref = warm_up(model_for(small_config("ogb")), batch)
    alt = Graphormer(small_config("ogb", attention="sdpa"))
    alt.load_state_dict(ref.state_dict())
    alt.eval()
    with torch.no_grad():
        torch.testing.assert_close(alt(batch), ref(batch), atol=ATOL, rtol=0)


# ------------------------------------------------------------- independence of the batch
@pytest.mark.parametrize("norm", ["sep", "share"])
def test_eval_output_independent_of_batch_mates_and_padding(norm):
    vocab = "zinc"
    drug, salt = graph(DRUG, vocab), graph(SALT[vocab], vocab)
    big = graph(LARGE, vocab)
    model = warm_up(model_for(small_config(vocab, norm)), collate_graphs(mixed(vocab), K))
    if norm == "sep":  # the [CLS] BatchNorm really is in eval mode with learned statistics
        bn = model.layers[0].ffn_norm.cls_norm.bn
        assert bn.num_batches_tracked == 3 and not torch.allclose(bn.running_mean, torch.zeros_like(bn.running_mean))
    run = lambda mols: torch.cat([model(collate_graphs(mols, K)),  # noqa: E731
                                  model.embed(collate_graphs(mols, K))], 1)  # (B, tasks + D)
    with torch.no_grad():
        alone = run([drug])[0]
        crowd = run([salt, big, drug, graph("C", vocab)])  # the drug padded from 13 to 154 atoms
        other_order = run([drug, big])
        salt_alone = run([salt])[0]
    torch.testing.assert_close(crowd[2], alone, atol=ATOL, rtol=0)
    torch.testing.assert_close(other_order[0], alone, atol=ATOL, rtol=0)
    torch.testing.assert_close(crowd[0], salt_alone, atol=ATOL, rtol=0)
    assert not torch.allclose(crowd[0], alone, atol=1e-2), "different molecules must differ"


def test_train_mode_sepnorm_does_depend_on_batch_mates():
    """The counterpart of the test above: BatchNorm statistics are batch statistics in training."""
    cfg = small_config(dropout=0.0, attention_dropout=0.0, activation_dropout=0.0)
    model = model_for(cfg).train()
    a = model(collate_graphs([graph(DRUG, "zinc"), graph("CCO", "zinc")], K))[0]
    b = model(collate_graphs([graph(DRUG, "zinc"), graph(LARGE, "zinc")], K))[0]
    assert not torch.allclose(a, b, atol=1e-4)


# ------------------------------------------------------------------ permutation invariance
def permuted(data, generator):
    """The same molecule with its atoms renumbered; encodings recomputed from scratch."""
    n = data.num_nodes
    perm = torch.randperm(n, generator=generator)  # new atom k is old atom perm[k]
    inverse = torch.argsort(perm)
    new = data.clone()
    new.x = data.x[perm]
    new.edge_index = inverse[data.edge_index]
    for key in ("degree", "spd", "path_next"):
        del new[key]
    return ENCODE(new)


@pytest.mark.parametrize("norm", ["sep", "share"])
@pytest.mark.parametrize("vocab", ["zinc", "ogb"])
def test_permutation_invariance_acyclic(norm, vocab):
    """Acyclic molecules (and salts of them) have exactly one shortest path per pair, so
    every encoding, the multi-hop edge encoding included, must be invariant exactly."""
    g = torch.Generator().manual_seed(0)
    data = [graph(s, vocab) for s in ACYCLIC]
    model = warm_up(model_for(small_config(vocab, norm)), collate_graphs(data, K))
    with torch.no_grad():
        ref = model.encode(collate_graphs(data, K))[:, 0]  # graph token after the final norm
        for _ in range(3):
            perm = [permuted(d, g) for d in data]
            assert any(not torch.equal(p.x, d.x) for p, d in zip(perm, data))
            torch.testing.assert_close(model.encode(collate_graphs(perm, K))[:, 0], ref, atol=ATOL, rtol=0)


@pytest.mark.parametrize("norm", ["sep", "share"])
@pytest.mark.parametrize("vocab", ["zinc", "ogb"])
def test_permutation_invariance_rings_without_edge_path_features(norm, vocab):
    """With rings a pair may have several shortest paths; the encoding stores one (the
    lowest-numbered next hop), so after renumbering another path may be read.  In a
    Kekulé benzene (zinc vocabulary) the two para paths carry single-double-single vs
    double-single-double bonds, so the multi-hop edge term -- as in the reference
    Graphormer -- legitimately depends on atom order there (measured: ~1e-4 on this tiny
    model with large edge weights).  It is exactly invariant only on unique paths (test
    above).  With its hop weights zeroed, everything else (atoms, degrees, distances,
    virtual token, attention, norms) must be invariant on ring molecules too."""
    g = torch.Generator().manual_seed(1)
    data = [graph(s, vocab) for s in (DRUG, "CC(C)CCCC(C)C1CCC2C1(CCC3C2CC=C4C3(CCC(C4)O)C)C", SALT[vocab])]
    model = warm_up(model_for(small_config(vocab, norm)), collate_graphs(data, K))
    with torch.no_grad():
        model.attn_bias.edges.hop_weight.zero_()
        ref = model.embed(collate_graphs(data, K))
        perm = [permuted(d, g) for d in data]
        torch.testing.assert_close(model.embed(collate_graphs(perm, K)), ref, atol=ATOL, rtol=0)


# --------------------------------------------------------------------------- checkpoints
def test_state_dict_round_trip_gives_identical_outputs():
    batch = collate_graphs(mixed("ogb"), K)
    cfg = small_config("ogb")
    model = warm_up(model_for(cfg, seed=0), batch)
    buf = io.BytesIO()
    torch.save({"config": cfg.to_dict(), "state_dict": model.state_dict()}, buf)
    buf.seek(0)
    ckpt = torch.load(buf, weights_only=True)
    fresh = model_for(GraphormerConfig.from_dict(ckpt["config"]), seed=123).eval()
    with torch.no_grad():
        assert not torch.allclose(fresh(batch), model(batch))
        fresh.load_state_dict(ckpt["state_dict"])
        assert torch.equal(fresh(batch), model(batch))
        assert torch.equal(fresh.embed(batch), model.embed(batch))


def test_config_round_trips(tmp_path):
    cfg = small_config("ogb", norm="share", token_norm="rms", pre_ln=False)
    d = cfg.to_dict()
    assert d["atom_dims"] == [119, 5, 12, 12, 10, 6, 6, 2, 2] and d["bond_dims"] == [5, 6, 2]
    assert GraphormerConfig.from_dict(d) == cfg
    path = tmp_path / "exp.yaml"
    import yaml

    path.write_text(yaml.safe_dump({"model": d, "train": {"lr": 2e-4}, "data": {"dataset": "x"}}))
    assert GraphormerConfig.from_yaml(path) == cfg
    with pytest.raises(ValueError, match="unknown Graphormer config keys"):
        GraphormerConfig.from_dict({**d, "hiden_dim": 3})
    with pytest.raises(ValueError, match="norm"):
        GraphormerConfig(norm="batch")


def test_model_refuses_fewer_hops_than_configured():
    model = model_for(small_config())
    with pytest.raises(ValueError, match="multi_hop_max_dist"):
        model(collate_graphs([graph(DRUG, "zinc")], K - 1))


# ----------------------------------------------------------------------------- presets
def count(cfg: GraphormerConfig) -> int:
    return sum(p.numel() for p in Graphormer(cfg).parameters())


def test_slim_preset_parameter_count_close_to_published():
    cfg = GraphormerConfig.from_yaml(REPO / "configs" / "zinc-slim.yaml")
    assert (cfg.num_layers, cfg.hidden_dim, cfg.ffn_dim, cfg.num_heads) == (12, 80, 80, 8)
    assert cfg.vocab == "zinc" and cfg.norm == "sep" and cfg.multi_hop_max_dist == 20
    for norm in ("sep", "share"):
        n = count(GraphormerConfig.from_dict({**cfg.to_dict(), "norm": norm}))
        assert abs(n - PUBLISHED_SLIM) / PUBLISHED_SLIM < 0.05, (norm, n)


def test_molhiv_preset_builds_and_runs():
    cfg = GraphormerConfig.from_yaml(REPO / "configs" / "molhiv.yaml")
    assert cfg.vocab == "ogb" and cfg.num_tasks == 1 and cfg.multi_hop_max_dist == 5
    model = Graphormer(cfg).eval()
    with torch.no_grad():
        out = model(collate_graphs(mixed("ogb"), cfg.multi_hop_max_dist))
    assert out.shape == (4, 1) and torch.isfinite(out).all()


# ---------------------------------------------------------------- pieces of the bias
def test_attention_bias_masks_only_padded_keys():
    data = mixed("zinc")
    batch = collate_graphs(data, K)
    model = model_for(small_config())
    bias = model.attn_bias(batch.spd, batch.edge_attr, batch.edge_path, batch.node_mask)
    B, N = batch.node_mask.shape
    assert bias.shape == (B, 4, N + 1, N + 1) and bias.dtype == torch.float32
    key_real = torch.cat([torch.ones(B, 1, dtype=torch.bool), batch.node_mask], 1)
    assert torch.isneginf(bias).equal(~key_real.view(B, 1, 1, N + 1).expand_as(bias))
    assert torch.isfinite(bias[:, :, :, 0]).all(), "the graph-token key is never masked"
    t = model.attn_bias.virtual_distance.view(1, 4, 1)
    assert torch.equal(bias[:, :, 0, :1], t.expand(B, 4, 1)) and torch.equal(bias[:, :, 1:, 0], t.expand(B, 4, N))


def test_bf16_autocast_is_finite_and_close():
    batch = collate_graphs(mixed("ogb"), K)
    for attention in ("math", "sdpa"):
        model = warm_up(model_for(small_config("ogb", attention=attention)), batch)
        with torch.no_grad():
            ref = model(batch)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                low = model(batch)
        assert torch.isfinite(low).all()
        torch.testing.assert_close(low.float(), ref, atol=0.05, rtol=0.05)


def test_under_bf16_autocast_the_output_and_a_fitted_companion_stay_float32():
    """A regression companion that takes the whole prediction (weight 1) gives the same values
    under bf16 autocast as in float32: bf16 would keep 8 bits of each (an error of 0.4 % of
    the value, larger than a group-contribution model's own error on an additive property)."""
    batch = collate_graphs(mixed("ogb"), K)
    model = warm_up(model_for(small_config("ogb", num_tasks=1, companion_bits=512, companion_radius=1,
                                           companion_blend="value", companion_counts="raw")), batch)
    torch.manual_seed(1)
    model.companion.coef.normal_()
    model.companion.intercept.fill_(37.25)
    model.companion.seen.fill_(1)
    model.companion.set_weights(1.0)
    with torch.no_grad():
        ref = model(batch)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            low = model(batch)
    assert low.dtype == torch.float32
    torch.testing.assert_close(low, ref, atol=1e-5, rtol=1e-6)


def test_spatial_buckets_clip_and_unreachable():
    enc = SpatialEncoder(num_spatial=6, num_heads=2)
    spd = torch.tensor([[[0, 1, 4, 9, -1]]])  # (1, 1, 5)
    out = enc(spd)  # (1, 2, 1, 5)
    w = enc.embedding.weight  # (6, 2)
    expected = w[torch.tensor([0, 1, 4, 4, 5])].t()  # 9 -> clip to 4, -1 -> bucket 5
    assert torch.equal(out[0, :, 0], expected)


def test_edge_path_encoder_matches_explicit_formula():
    """The sparse gather over tabulated hops == the formula with an explicit (B, N, N, K, H) gather."""
    data = mixed("ogb")
    batch = collate_graphs(data, K)
    torch.manual_seed(0)
    enc = EdgePathEncoder([5, 6, 2], num_heads=3, max_hops=K)
    got = enc(batch.edge_attr, batch.edge_path, batch.spd)  # (B, H, N, N)
    x = enc.embedding(batch.edge_attr + enc.offsets).mean(1)  # (E, H)
    x = torch.cat([x, torch.zeros(1, 3)])  # row -1 -> zeros
    hops = x[batch.edge_path]  # (B, N, N, K, H)
    summed = torch.einsum("bijkh,khg->bijg", hops, enc.hop_weight)
    expected = summed / batch.spd.clamp(1, K).unsqueeze(-1)
    torch.testing.assert_close(got, expected.permute(0, 3, 1, 2), atol=1e-6, rtol=1e-5)
    assert got.abs().sum() > 0
    # the gradients too: on CPU the sum's backward is a CSR product of its own (molsepnorm.nn.segment)
    grad = torch.randn_like(got)
    params = [enc.embedding.weight, enc.hop_weight]
    ours = torch.autograd.grad(got, params, grad)
    reference = torch.autograd.grad(expected.permute(0, 3, 1, 2), params, grad)
    for a, b in zip(ours, reference):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)
        assert a.abs().sum() > 0


# ----------------------------------------------------- first graph-token norm, readouts
@pytest.mark.parametrize("pre_ln", [True, False])
def test_first_graph_token_slot_is_not_a_batch_norm_by_default(pre_ln):
    """The graph token enters its first norm as the same vector for every molecule: a
    BatchNorm there has only dropout's noise to normalise (DESIGN 8); it gets a LayerNorm."""
    model = model_for(small_config(pre_ln=pre_ln))
    first = model.layers[0].attn_norm if pre_ln else model.input_norm
    assert isinstance(first.cls_norm, MaskedLayerNorm)
    others = [layer.ffn_norm for layer in model.layers] + [layer.attn_norm for layer in model.layers[1:]]
    assert all(hasattr(norm.cls_norm, "bn") for norm in others)
    legacy = model_for(small_config(pre_ln=pre_ln, first_cls_norm=None))
    first = legacy.layers[0].attn_norm if pre_ln else legacy.input_norm
    assert hasattr(first.cls_norm, "bn")


def test_first_graph_token_slot_train_and_eval_agree_without_dropout():
    """With the LayerNorm first slot the graph token enters layer 0 the same way in train and
    eval; with a BatchNorm there (legacy) and dropout on, the eval output is far from any
    train-mode output because that BatchNorm's running variance is dropout noise."""
    batch = collate_graphs(mixed("zinc"), K)
    no_drop = dict(dropout=0.0, attention_dropout=0.0, activation_dropout=0.0)
    model = model_for(small_config(**no_drop))
    model.train()
    with torch.no_grad():
        train_tokens = model.layers[0].attn_norm(model_input(model, batch), token_mask(batch))
        model.eval()
        eval_tokens = model.layers[0].attn_norm(model_input(model, batch), token_mask(batch))
    torch.testing.assert_close(train_tokens[:, 0], eval_tokens[:, 0], atol=ATOL, rtol=0)
    first = train_tokens[:, 0]
    torch.testing.assert_close(first, first[:1].expand_as(first), atol=ATOL, rtol=0)  # batch-constant


def model_input(model: Graphormer, batch):
    """The (B, N+1, D) tokens before layer 0 (no dropout), as Graphormer.encode builds them."""
    atoms = model.atom_encoder(batch.x) + model.degree_encoder(batch.degree)
    atoms = atoms * batch.node_mask.unsqueeze(-1)
    B = atoms.size(0)
    return torch.cat([model.graph_token.view(1, 1, -1).expand(B, 1, -1), atoms], 1)


def token_mask(batch):
    B = batch.node_mask.size(0)
    return torch.cat([batch.node_mask.new_ones(B, 1), batch.node_mask], 1)


@pytest.mark.parametrize("readout", ["cls+sum", "cls+mean"])
def test_pooled_readouts_ignore_padding_and_batch_mates(readout):
    drug, big = graph(DRUG, "zinc"), graph(LARGE, "zinc")
    model = warm_up(model_for(small_config(readout=readout)), collate_graphs(mixed("zinc"), K))
    assert model.head.in_features == 2 * 32
    with torch.no_grad():
        alone = model(collate_graphs([drug], K))[0]
        padded = model(collate_graphs([big, drug], K))[1]  # the drug padded from 13 to 154 atoms
    torch.testing.assert_close(padded, alone, atol=ATOL, rtol=0)


def test_sum_readout_reads_the_sum_of_atom_states():
    """The head's input is [graph token, sum of atom states x SUM_READOUT_SCALE]: checked
    against the token states encode() returns."""
    from molsepnorm.nn.graphormer import SUM_READOUT_SCALE

    batch = collate_graphs(mixed("zinc"), K)
    model = warm_up(model_for(small_config(readout="cls+sum")), batch)
    with torch.no_grad():
        h = model.encode(batch)
        expected = torch.stack([
            torch.cat([h[b, 0], h[b, 1:1 + int(batch.node_mask[b].sum())].sum(0) * SUM_READOUT_SCALE])
            for b in range(h.size(0))])
        torch.testing.assert_close(model.readout(h, batch), expected, atol=ATOL, rtol=0)
        torch.testing.assert_close(model(batch), model.head(expected), atol=ATOL, rtol=0)
        torch.testing.assert_close(model.embed(batch), h[:, 0], atol=ATOL, rtol=0)


def test_defaults_are_the_cpu_model():
    """The defaults of docs/accuracy.md: 4 x 80, no dropout, SepNorm with LayerNorm graph token,
    graph token + atom sum readout."""
    model = Graphormer(GraphormerConfig(vocab="ogb"))
    cfg = model.config
    assert (cfg.num_layers, cfg.hidden_dim, cfg.ffn_dim, cfg.num_heads) == (4, 80, 80, 8)
    assert cfg.dropout == cfg.attention_dropout == cfg.activation_dropout == 0.0
    assert cfg.norm == "sep" and all(isinstance(layer.attn_norm.cls_norm, MaskedLayerNorm) for layer in model.layers)
    assert model.head.in_features == 2 * 80 and cfg.readout == "cls+sum"


def test_new_keys_are_validated():
    with pytest.raises(ValueError, match="readout"):
        small_config(readout="sum")
    with pytest.raises(ValueError, match="first_cls_norm"):
        small_config(first_cls_norm="group")


@pytest.mark.parametrize("length", [1, 3, 9, 15, 16, 17, 40])
def test_softmax_last_equals_torch_softmax_values_and_gradients(length):
    """Short rows are padded with -inf for speed on CPU: values and gradients stay torch's."""
    from molsepnorm.nn.attention import softmax_last

    torch.manual_seed(length)
    scores = torch.randn(3, 2, length, length)
    if length > 2:
        scores[..., -2:] = float("-inf")  # padded keys, as in a batch
    a = scores.clone().requires_grad_(True)
    b = scores.clone().requires_grad_(True)
    out = softmax_last(a)
    ref = torch.softmax(b, dim=-1)
    assert out.shape == ref.shape
    torch.testing.assert_close(out, ref, atol=1e-6, rtol=0)
    g = torch.randn_like(ref)
    out.backward(g)
    ref.backward(g)
    torch.testing.assert_close(a.grad, b.grad, atol=1e-6, rtol=0)
