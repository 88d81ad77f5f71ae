"""The fingerprint companion's substructure hash and blend (molsepnorm.nn.fingerprint)."""
from __future__ import annotations

import pytest
import torch
from rdkit import Chem

from molsepnorm.chem import featurize
from molsepnorm.data.collate import GraphCollator
from molsepnorm.nn.fingerprint import FingerprintCompanion, substructure_counts

BITS = 4096


def batch_of(*smiles: str, hops: int = 1):
    return GraphCollator(hops)([featurize(s, encodings=True) for s in smiles])


def counts(*smiles: str, radius: int = 2, hops: int = 1) -> torch.Tensor:
    return substructure_counts(batch_of(*smiles, hops=hops), BITS, radius)


def test_every_atom_counts_once_per_radius():
    out = counts("CCO", "c1ccccc1C(=O)O", "[Na+].[Cl-]", radius=2)
    assert out.sum(1).tolist() == [3 * 3, 9 * 3, 2 * 3]


def test_a_molecule_counts_the_same_alone_and_beside_larger_ones():
    alone = counts("CC(=O)Nc1ccc(O)cc1")
    batched = counts("CCCCCCCCCCCCCCCCCCCC", "CC(=O)Nc1ccc(O)cc1", hops=5)  # padding and longer edge paths
    assert torch.equal(alone[0], batched[1])


def test_atom_order_does_not_change_the_counts():
    mol = Chem.MolFromSmiles("OC(=O)c1ccccc1N")
    shuffled = Chem.RenumberAtoms(mol, list(reversed(range(mol.GetNumAtoms()))))
    a = counts(Chem.MolToSmiles(mol, canonical=False), Chem.MolToSmiles(shuffled, canonical=False))
    assert torch.equal(a[0], a[1])


def test_isomers_share_their_atoms_but_not_their_environments():
    r0 = counts("CC(O)CN", "CC(N)CO", radius=0)
    assert torch.equal(r0[0], r0[1])  # the same atoms (elements, degrees, hydrogens)
    r1 = counts("CC(O)CN", "CC(N)CO", radius=1)
    assert not torch.equal(r1[0], r1[1])  # the OH on the CH against the OH on the CH2
    bonds = counts("C=CC", "CC=C", radius=1)  # the same molecule written twice ...
    assert torch.equal(bonds[0], bonds[1])
    single = counts("CCC", "C=CC", radius=1)  # ... and one with another bond order
    assert not torch.equal(single[0], single[1])


def test_equal_environments_fall_in_one_bucket():
    out = counts("C1CCCCC1", radius=2)  # six identical CH2 environments at every radius
    assert sorted(out[0][out[0] > 0].tolist()) == [6.0, 6.0, 6.0]


def test_atom_properties_count_each_feature_value_and_share_them_with_an_unseen_atom_type():
    batch = batch_of("CCO", "C[O-]")
    plain, props = substructure_counts(batch, BITS, 0), substructure_counts(batch, BITS, 0, properties=True)
    assert (props.sum(1) - plain.sum(1)).tolist() == [3 * 9, 2 * 9]  # each atom's nine OGB feature columns
    assert ((plain[1] > 0) & (plain[0] == 0)).any()  # the charged oxygen's type is not ethanol's
    # ... but with its properties counted one by one it shares the oxygen's element and more
    assert ((props[1] > 0) & (props[0] > 0)).sum() > ((plain[1] > 0) & (plain[0] > 0)).sum() + 3
    assert torch.equal(substructure_counts(batch, BITS, 1, properties=True)[0] - props[0],
                       substructure_counts(batch, BITS, 1)[0] - plain[0])  # radius 1 adds the same buckets


def test_the_groups_of_identifiers_add_up_to_the_counts():
    from molsepnorm.nn.fingerprint import substructure_count_groups

    batch = batch_of("CC(=O)Nc1ccc(O)cc1", "C[O-]", "[Na+].[Cl-]")
    groups = substructure_count_groups(batch, BITS, 2, properties=True)
    assert list(groups) == ["radius 0", "radius 1", "radius 2", "properties"]
    assert torch.equal(sum(groups.values()), substructure_counts(batch, BITS, 2, properties=True))
    assert torch.equal(groups["radius 0"] + groups["radius 1"], substructure_counts(batch, BITS, 1))


def test_an_unfitted_companion_returns_the_head_unchanged_and_a_fitted_one_blends():
    batch = batch_of("CCO", "c1ccccc1")
    comp = FingerprintCompanion(BITS, 2, num_tasks=1, blend="probability")
    logits = torch.tensor([[2.0], [-1.0]])
    assert torch.equal(comp(logits, batch), logits)
    comp.coef.normal_()
    comp.intercept.fill_(0.3)
    comp.weight.fill_(0.25)
    own = comp.predict(batch)
    blended = comp(logits, batch)
    expected = 0.75 * torch.sigmoid(logits) + 0.25 * torch.sigmoid(own)
    assert torch.allclose(torch.sigmoid(blended), expected, atol=1e-6)
    values = FingerprintCompanion(BITS, 2, num_tasks=1, blend="value")
    values.load_state_dict(comp.state_dict())
    assert torch.allclose(values(logits, batch), 0.75 * logits + 0.25 * own)


def test_a_molecule_with_a_novel_substructure_takes_the_novel_weight():
    """Buckets seen only in ethanol: ethanol is covered and takes ``weight`` (the companion
    alone), benzene has buckets no training molecule had and takes ``weight_novel`` (the
    Graphormer alone)."""
    batch = batch_of("CCO", "c1ccccc1")
    comp = FingerprintCompanion(BITS, 1, num_tasks=1, blend="value", counts="raw")
    found = substructure_counts(batch, BITS, 1)
    comp.seen.copy_((found[0] > 0).float())
    assert comp.covered(found).tolist() == [True, False]
    comp.coef.normal_()
    comp.weight.fill_(1.0)  # fitted, though weight_novel is 0
    assert comp.fitted
    outputs = torch.tensor([[2.0], [-1.0]])
    blended = comp(outputs, batch)
    assert torch.allclose(blended[0], comp.predict(batch)[0]) and torch.equal(blended[1], outputs[1])
    comp.weight.zero_()
    comp.weight_novel.fill_(0.5)  # the other way round: only benzene blends
    blended = comp(outputs, batch)
    assert torch.equal(blended[0], outputs[0])
    assert torch.allclose(blended[1], 0.5 * outputs[1] + 0.5 * comp.predict(batch)[1])


def test_a_companion_written_before_coverage_loads_with_one_weight_for_every_molecule():
    comp = FingerprintCompanion(BITS, 1, num_tasks=2, blend="value", counts="raw")
    old = {"coef": torch.randn(BITS, 2), "intercept": torch.zeros(2), "weight": torch.tensor([0.5, 0.0])}
    comp.load_state_dict(old)
    assert comp.seen.min() == 1 and comp.weight_novel.tolist() == [0.5, 0.0]
    batch = batch_of("CCO", "c1ccccc1")
    assert comp.covered(substructure_counts(batch, BITS, 1)).all()


def test_blend_must_be_known():
    with pytest.raises(ValueError, match="blend must be one of"):
        FingerprintCompanion(BITS, 2, 1, blend="mean")


def test_weights_written_without_a_companion_load_as_an_unfitted_one():
    from molsepnorm.nn.graphormer import Graphormer, GraphormerConfig

    small = dict(vocab="ogb", num_layers=1, hidden_dim=16, ffn_dim=16, num_heads=2)
    plain = Graphormer(GraphormerConfig(**small))
    with_companion = Graphormer(GraphormerConfig(**small, companion_bits=BITS))
    with_companion.companion.weight.fill_(0.5)
    with_companion.load_state_dict(plain.state_dict())  # strict: the companion's buffers may be absent
    assert not with_companion.companion.fitted
    batch = batch_of("CCO", "c1ccccc1O", hops=5)
    assert torch.equal(with_companion.eval()(batch), plain.eval()(batch))
    partial = {**plain.state_dict(), "companion.coef": torch.zeros(BITS, 1)}
    with pytest.raises(RuntimeError, match="companion.intercept"):
        with_companion.load_state_dict(partial)


def test_a_batch_is_hashed_once_per_kind_of_count_and_a_copy_starts_afresh(monkeypatch):
    """An ensemble's members share each batch: the second member reads the first one's counts."""
    import molsepnorm.nn.fingerprint as fingerprint

    calls = []
    real = fingerprint._identifiers
    monkeypatch.setattr(fingerprint, "_identifiers", lambda *a, **k: calls.append(a[1:]) or real(*a, **k))
    batch = batch_of("CCO", "c1ccccc1C(=O)O", hops=2)
    first = substructure_counts(batch, BITS, 2)
    assert substructure_counts(batch, BITS, 2) is first and len(calls) == 1
    other = substructure_counts(batch, BITS, 1, properties=True)  # another kind: hashed on its own
    assert len(calls) == 2 and not torch.equal(other, first)
    copy = batch.to("cpu")  # a new batch object: nothing carried over
    assert torch.equal(substructure_counts(copy, BITS, 2), first) and len(calls) == 3


def test_atom_contributions_add_up_to_the_linear_model_and_flag_unseen_environments():
    """Raw counts: the model is a sum over atoms of their identifiers' coefficients."""
    batch = batch_of("CCO", "c1ccccc1N", "CC(=O)O")
    comp = FingerprintCompanion(BITS, 1, num_tasks=2, blend="value", counts="raw", properties=True)
    torch.manual_seed(0)
    comp.coef.normal_()
    comp.intercept.copy_(torch.tensor([0.5, -1.0]))
    seen = substructure_counts(batch_of("CCO", "CC(=O)O"), BITS, 1, properties=True).sum(0) > 0
    comp.seen.copy_(seen.float())
    contributions, novel = comp.atom_contributions(batch)
    assert torch.allclose(contributions.sum(1) + comp.intercept, comp.predict(batch), atol=1e-5)
    # aniline's aromatic carbons and its nitrogen are environments ethanol and acetic acid lack
    assert novel[0].sum() == 0 and novel[2].sum() == 0 and novel[1].sum() == 7


def test_an_unseen_atom_takes_the_mean_contribution_of_its_nearest_training_environments():
    batch = batch_of("CCO", "CCN")
    comp = FingerprintCompanion(BITS, 0, num_tasks=1, blend="value", counts="raw")
    torch.manual_seed(1)
    comp.coef.normal_()
    comp.seen.copy_((substructure_counts(batch_of("CCO"), BITS, 0)[0] > 0).float())  # the N of CCN is unseen
    comp.set_weights(1.0)
    contributions, novel = comp.atom_contributions(batch)
    assert novel.tolist() == [[False] * 3, [False, False, True]]
    pool = torch.nn.functional.normalize(torch.tensor([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0]]), dim=-1)  # (U, D)
    values = torch.tensor([[10.0], [20.0], [30.0]])
    atoms = torch.zeros(2, 3, 2)
    atoms[1, 2] = torch.tensor([0.9, 0.3])  # its two nearest: rows 0 and 1 (cosine 0.95 each), not 2 (0.32)
    outputs = torch.zeros(2, 1)
    plain = comp(outputs, batch)
    known = substructure_counts(batch_of("CCO"), BITS, 0)[0] > 0  # the radius-0 buckets the pool stands for
    comp.set_novel_pricing(2, 2, pool, values, known)
    assert comp.atom_contributions(batch)[1].tolist() == novel.tolist()
    priced = comp(outputs, batch, lambda: atoms)
    sims = torch.nn.functional.normalize(atoms[1, 2], dim=0) @ pool.T
    two = values[sims.topk(2).indices].mean()
    assert two == 15.0
    assert torch.equal(priced[0], plain[0])  # every environment of ethanol is seen: unchanged
    assert torch.allclose(priced[1], plain[1] - contributions[1, 2] + two)
    assert torch.equal(comp(outputs, batch), plain)  # no atom embeddings given: as before
    fresh = FingerprintCompanion(BITS, 0, num_tasks=1, blend="value", counts="raw")
    fresh.load_state_dict(comp.state_dict())  # the pool's own size, and the rule, come back
    assert (fresh.novel_space, fresh.novel_k) == (2, 2) and torch.equal(fresh(outputs, batch, lambda: atoms), priced)
    old = {k: v for k, v in comp.state_dict().items() if not k.startswith("novel_")}
    fresh.load_state_dict(old)  # written before unseen atoms were priced: off
    assert fresh.novel_space == 0 and torch.equal(fresh(outputs, batch, lambda: atoms), plain)
    comp.set_novel_pricing(0, 0)  # off: the pool goes too, not kept in the state dict
    assert comp.novel_pool.shape == (0, 0) and comp.novel_values.shape == (0, 1) and comp.novel_known.numel() == 0
    with pytest.raises(ValueError, match="raw counts"):
        FingerprintCompanion(BITS, 0, num_tasks=1, blend="value", counts="log").set_novel_pricing(1, 1, pool, values,
                                                                                                  known)
