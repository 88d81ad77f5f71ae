"""The pretext objectives on real molecules: masking, views, InfoNCE, gradients."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from molsepnorm.chem import featurize_graph
from molsepnorm.data.collate import collate_graphs
from molsepnorm.nn.graphormer import Graphormer, GraphormerConfig
from molsepnorm.pretrain.config import PretrainOptions
from molsepnorm.pretrain.objectives import PretextModel, choose_atoms, info_nce, stack_views

SMILES = ["CCO", "c1ccccc1O", "CC(=O)Nc1ccc(O)cc1", "CN1C=NC2=C1C(=O)N(C(=O)N2C)C", "[Na+].[Cl-]",
          "OC(=O)C1=CC=CC=C1OC(C)=O", "C", "FC(F)(F)c1ccccc1"]
K = 3


def batch(vocab: str = "ogb"):
    """The molecules as the corpus stream batches them: with their motif counts as y."""
    return with_motifs(collate_graphs([featurize_graph(s, vocab) for s in SMILES], K))


def with_motifs(b):
    """The batch with each molecule's motif counts as y, as the corpus stream gives it."""
    from molsepnorm.chem.motifs import motif_counts

    b.y = torch.stack([torch.from_numpy(motif_counts(s)) for s in b.smiles])
    return b


def encoder(vocab: str = "ogb", dropout: float = 0.0) -> Graphormer:
    torch.manual_seed(0)
    return Graphormer(GraphormerConfig(vocab=vocab, num_layers=2, hidden_dim=16, ffn_dim=16, num_heads=4,
                                       multi_hop_max_dist=K, num_spatial=16, dropout=dropout))


def test_choose_atoms_takes_the_rate_at_least_one_and_only_real_atoms():
    b = batch()
    torch.manual_seed(1)
    real = b.node_mask
    chosen = choose_atoms(real, 0.15, at_least=1, keep=0)
    n = real.sum(1)
    expected = torch.clamp(torch.round(n.float() * 0.15).long(), min=1)
    assert torch.equal(chosen.sum(1), expected)
    assert not (chosen & ~real).any()
    dropped = choose_atoms(real, 0.5, at_least=0, keep=1)
    assert ((real & ~dropped).sum(1) >= 1).all()  # a molecule never loses all its atoms ("C" keeps its one)
    assert dropped[SMILES.index("C")].sum() == 0


def test_stacked_views_encode_like_each_copy_alone():
    b = batch()
    model = encoder().eval()
    with torch.no_grad():
        alone = model.encode(b)
        both = model.encode(stack_views(b, 2))
    B = b.num_graphs
    torch.testing.assert_close(both[:B], alone, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(both[B:], alone, rtol=1e-5, atol=1e-6)


def test_info_nce_is_low_for_matching_views_and_log_b_for_constant_ones():
    torch.manual_seed(0)
    z = torch.randn(16, 8)
    loss, accuracy = info_nce(z, z + 0.01 * torch.randn(16, 8), temperature=0.1)
    assert accuracy == 1.0 and loss < 0.5
    loss, _ = info_nce(torch.ones(16, 8), torch.ones(16, 8), temperature=0.1)
    assert math.isclose(float(loss), math.log(16), rel_tol=1e-5)


@pytest.mark.parametrize("objective,augment", [("masked", ["mask"]), ("contrastive", ["mask", "drop_nodes"]),
                                               ("contrastive", ["dropout"]), ("both", ["mask"])])
def test_every_trainable_parameter_gets_a_gradient_and_the_task_head_none(objective, augment):
    options = PretrainOptions(objective=objective, augment=augment, max_steps=1, mask_targets="all")
    model = PretextModel(encoder(dropout=0.1 if augment == ["dropout"] else 0.0), options).train()
    torch.manual_seed(3)
    loss, parts = model(batch())
    loss.backward()
    assert torch.isfinite(loss)
    for name, p in model.named_parameters():
        if name.startswith("encoder.head."):
            assert not p.requires_grad and p.grad is None
        else:
            assert p.grad is not None, name
    assert ("masked_loss" in parts) == (objective != "contrastive")
    assert ("contrastive_acc" in parts) == (objective != "masked")
    assert "motif_loss" in parts
    assert (model.mask_token is None) == (augment == ["dropout"] and objective == "contrastive")


def test_masked_atoms_predict_the_masked_atoms_own_type():
    """The masked-atom targets are the atoms' first feature column (OGB: atomic number - 1)."""
    options = PretrainOptions(objective="masked", max_steps=1)
    model = PretextModel(encoder(), options)
    b = batch()
    torch.manual_seed(5)
    masked = choose_atoms(b.node_mask, 0.15, at_least=1, keep=0)
    with torch.no_grad():
        model.atom_head.weight.zero_()
        model.atom_head.bias.zero_()
        model.atom_head.bias[5] = 50.0  # always says carbon (atomic number 6)
        h = model.encoder.encode(b)
        _, accuracy = model._masked_atoms(h, model._atom_targets(b), masked)
    carbons = (b.x[masked][:, 0] == 5).float().mean()
    assert float(accuracy) == pytest.approx(float(carbons))
    assert 0 < float(carbons) < 1



def test_atom_loss_all_scores_the_visible_atoms_too():
    """``atom_loss="all"`` adds the visible atoms' reconstruction loss; ``masked`` does not
    compute it, and the masked part is the same draw either way."""
    b = batch()
    losses = {}
    for atom_loss in ("masked", "all"):
        model = PretextModel(encoder(), PretrainOptions(objective="masked", max_steps=1, atom_loss=atom_loss))
        torch.manual_seed(7)
        loss, parts = model(b)
        losses[atom_loss] = (float(loss), parts)
    masked_only, with_visible = losses["masked"], losses["all"]
    assert "visible_loss" not in masked_only[1]
    assert with_visible[1]["masked_loss"] == pytest.approx(float(masked_only[1]["masked_loss"]))
    assert with_visible[0] == pytest.approx(masked_only[0] + float(with_visible[1]["visible_loss"]), rel=1e-5)
    assert float(with_visible[1]["visible_loss"]) > 0


def test_mlp_atom_head_is_a_decoder_that_trains():
    model = PretextModel(encoder(), PretrainOptions(objective="masked", max_steps=1, atom_head="mlp"))
    assert isinstance(model.atom_head, torch.nn.Sequential) and len(model.atom_head) == 3
    torch.manual_seed(3)
    loss, parts = model(batch())
    loss.backward()
    assert torch.isfinite(loss) and all(p.grad is not None for p in model.atom_head.parameters())
    assert set(model.heads_state_dict()) >= {"atom_head.0.weight", "atom_head.2.bias"}  # resumable


def test_context_classes_name_each_atom_environment_whatever_the_atom_order():
    from molsepnorm.pretrain.objectives import CONTEXT_CLASSES, CONTEXT_TOKENS, context_classes

    codes = torch.randint(0, 2**31 - 1, (CONTEXT_TOKENS,), generator=torch.Generator().manual_seed(1)).long()
    b = collate_graphs([featurize_graph(s, "ogb") for s in ["OCC", "CCO", "CC(=O)Nc1ccc(O)cc1", "CC=O"]], K)
    classes = context_classes(b, codes)
    assert classes.shape == b.node_mask.shape and int(classes.max()) < CONTEXT_CLASSES
    assert classes[0, 0] == classes[1, 2] and classes[0, 2] == classes[1, 0]  # the same atoms, written in reverse
    assert classes[0, 1] == classes[1, 1]  # CH2 bonded to a C and an O
    assert classes[2, 0] == classes[0, 2]  # a methyl on a single-bonded carbon: acetyl's as ethanol's
    assert classes[3, 2] != classes[0, 0]  # aldehyde O (double bond, no H) is not an alcohol O
    assert classes[3, 1] != classes[0, 1]  # and the carbons bonded to them differ too


def test_context_target_adds_one_softmax_over_the_environment_classes():
    from molsepnorm.pretrain.objectives import CONTEXT_CLASSES

    model = PretextModel(encoder(), PretrainOptions(objective="masked", max_steps=1, mask_targets="context"))
    assert model.target_dims[-1] == CONTEXT_CLASSES and len(model.target_dims) == 10  # 9 OGB columns + context
    assert "context_codes" not in model.state_dict()  # fixed by its seed, not saved
    torch.manual_seed(3)
    loss, _ = model(batch())
    loss.backward()
    assert torch.isfinite(loss) and model.atom_head.weight.grad is not None


@pytest.mark.parametrize("objective", ["masked", "both"])
def test_motif_loss_reads_the_readout_and_is_the_squared_error_of_log_counts(objective):
    b = batch()
    b.y[SMILES.index("C")] = float("nan")  # an unreadable molecule is left out, not taught zeros
    options = PretrainOptions(objective=objective, max_steps=1, motif_weight=2.0)
    model = PretextModel(encoder(), options).train()
    torch.manual_seed(3)
    loss, parts = model(b)
    loss.backward()
    assert torch.isfinite(loss) and "motif_loss" in parts
    assert model.motif_head.weight.grad is not None and model.motif_head.weight.grad.abs().sum() > 0
    # the head is zero-initialized in its bias and small in its weights: at the start the loss is
    # close to the mean of log(1 + count)^2 over the readable molecules
    known = torch.log1p(torch.cat([b.y[:SMILES.index("C")], b.y[SMILES.index("C") + 1:]]))
    assert abs(float(parts["motif_loss"]) - float((known ** 2).mean())) < 0.05
    without = PretextModel(encoder(), PretrainOptions(objective=objective, max_steps=1, motif_weight=0.0))
    assert without.motif_head is None
    with pytest.raises(ValueError, match="motif counts"):
        model(collate_graphs([featurize_graph(s, "ogb") for s in SMILES], K))


def test_motif_environments_widen_the_motif_head_to_the_environment_counts():
    from molsepnorm.chem.motifs import motif_names
    from molsepnorm.errors import ConfigError
    from molsepnorm.pretrain.objectives import graph_targets

    graphs = [featurize_graph(s, "ogb") for s in SMILES]
    b = collate_graphs(graphs, K)
    options = PretrainOptions(max_steps=1, motif_environments=32)
    b.y = torch.stack([torch.from_numpy(graph_targets(g, options)) for g in graphs])
    assert b.y.shape == (len(SMILES), len(motif_names()) + 32)
    model = PretextModel(encoder(), options).train()
    assert model.motif_head.out_features == len(motif_names()) + 32
    loss, parts = model(b)
    loss.backward()
    assert torch.isfinite(parts["motif_loss"]) and model.motif_head.weight.grad[-32:].abs().sum() > 0
    with pytest.raises(ConfigError, match="motif_environments"):
        PretrainOptions(max_steps=1, motif_environments=-1).validate()


def test_motif_scale_linear_predicts_the_counts_themselves():
    from molsepnorm.errors import ConfigError

    b = batch()
    losses = {}
    for scale in ("log", "linear"):
        model = PretextModel(encoder(), PretrainOptions(max_steps=1, motif_scale=scale)).train()
        torch.manual_seed(3)
        losses[scale] = float(model(b)[1]["motif_loss"])
    # a near-zero head at the start: the loss is about the mean square of the targets
    assert abs(losses["linear"] - float((b.y ** 2).mean())) < 0.05
    assert abs(losses["log"] - float((torch.log1p(b.y) ** 2).mean())) < 0.05
    with pytest.raises(ConfigError, match="motif_scale"):
        PretrainOptions(max_steps=1, motif_scale="sqrt").validate()


def test_descriptor_loss_is_the_squared_error_of_standardized_descriptors_after_the_motifs():
    from molsepnorm.chem.descriptors import descriptor_names, descriptor_values
    from molsepnorm.chem.motifs import motif_counts
    from molsepnorm.pretrain.objectives import DESCRIPTOR_MIN_SCALE, graph_targets

    options = PretrainOptions(max_steps=1, descriptor_weight=0.5)
    graphs = [featurize_graph(s, "ogb") for s in SMILES]
    b = collate_graphs(graphs, K)
    b.y = torch.stack([torch.from_numpy(graph_targets(g, options)) for g in graphs])
    M, D = 85, len(descriptor_names())
    assert b.y.shape == (len(SMILES), M + D)
    torch.testing.assert_close(b.y[:, :M], torch.stack([torch.from_numpy(motif_counts(s)) for s in SMILES]))
    torch.testing.assert_close(b.y[:, M:], torch.stack([torch.from_numpy(descriptor_values(s)) for s in SMILES]),
                               equal_nan=True)

    model = PretextModel(encoder(), options).train()
    with pytest.raises(ValueError, match="scale"):
        model(b)  # no scale yet: refused, not trained on NaN
    reference = b.y[:, M:].numpy()
    model.set_descriptor_scale(reference)
    spread = np.nanstd(reference, 0)
    assert torch.allclose(model.descriptor_scale, torch.as_tensor(np.maximum(spread, DESCRIPTOR_MIN_SCALE)).float())
    loss, parts = model(b)
    loss.backward()
    assert model.descriptor_head.weight.grad.abs().sum() > 0 and model.motif_head.weight.grad.abs().sum() > 0
    # a near-zero head at the start: the loss is about the mean square of the standardized targets
    standardized = (b.y[:, M:] - model.descriptor_center) / model.descriptor_scale
    known = standardized[~torch.isnan(standardized)]
    assert abs(float(parts["descriptor_loss"]) - float((known ** 2).mean())) < 0.05
    assert abs(float(loss) - float(parts["masked_loss"] + parts["visible_loss"] + parts["motif_loss"]
                                   + 0.5 * parts["descriptor_loss"])) < 1e-4
    # the scale is saved with the heads, so that a resume standardizes as the run began
    assert {"descriptor_center", "descriptor_scale"} <= set(model.heads_state_dict())
    # descriptors alone: the targets are the descriptors only
    alone = PretrainOptions(max_steps=1, motif_weight=0.0, descriptor_weight=1.0)
    assert graph_targets(graphs[0], alone).shape == (D,)
    assert PretextModel(encoder(), alone).motif_head is None


@pytest.mark.parametrize("motifs", [dict(motif_weight=0.0), dict(motif_environments=16)])
def test_descriptor_targets_are_read_after_whatever_motif_targets_precede_them(motifs):
    from molsepnorm.chem.descriptors import descriptor_names
    from molsepnorm.pretrain.objectives import graph_targets

    options = PretrainOptions(max_steps=1, descriptor_weight=1.0, **motifs)
    graphs = [featurize_graph(s, "ogb") for s in SMILES]
    b = collate_graphs(graphs, K)
    b.y = torch.stack([torch.from_numpy(graph_targets(g, options)) for g in graphs])
    model = PretextModel(encoder(), options).train()
    D = len(descriptor_names())
    first = b.y.size(1) - D
    assert first == (0 if options.motif_weight == 0 else 85 + 16)
    model.set_descriptor_scale(b.y[:, first:].numpy())
    loss, parts = model(b)
    loss.backward()
    assert model.descriptor_head.weight.grad.abs().sum() > 0
    standardized = (b.y[:, first:] - model.descriptor_center) / model.descriptor_scale
    known = standardized[~torch.isnan(standardized)]
    assert abs(float(parts["descriptor_loss"]) - float((known ** 2).mean())) < 0.05
    b.y = b.y[:, 1:]  # a batch built for another objective: refused with the reason
    with pytest.raises(ValueError, match="columns"):
        model(b)
