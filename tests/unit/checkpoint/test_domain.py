"""``ApplicabilityDomain``: each reason on real molecules, the checkpoint entry, pickling."""
from __future__ import annotations

import pickle

import numpy as np
import pytest
from rdkit import Chem, DataStructs
from rdkit.Chem import rdFingerprintGenerator

from molsepnorm.checkpoint import ApplicabilityDomain, Checkpoint, check_domains
from molsepnorm.chem.featurize import featurize, featurize_graph

# a small training set: alcohols, acids, amines, aromatics (C, N, O, Cl; no stereo)
TRAIN = ["CCO", "CCCO", "CC(C)O", "CCCCO", "OCCO", "CC(=O)O", "CCC(=O)O", "NCCO", "CCN", "CCCN",
         "c1ccccc1", "c1ccccc1O", "c1ccccc1N", "Cc1ccccc1", "c1ccc(Cl)cc1", "ClCCCl", "OC(=O)c1ccccc1"]


@pytest.fixture(scope="module")
def domain() -> ApplicabilityDomain:
    return ApplicabilityDomain.from_smiles(TRAIN, "ogb")


def test_training_molecules_are_inside(domain):
    assert domain.num_molecules == len(TRAIN) and len(domain.fingerprints) == len(TRAIN)
    assert domain.max_atoms == max(Chem.MolFromSmiles(s).GetNumAtoms() for s in TRAIN)
    assert all(domain.check(s) == "" for s in TRAIN)


def test_an_element_never_seen_is_named(domain):
    reasons = domain.reasons("CCS")
    assert reasons[0] == "not seen in training: element S"


def test_an_element_in_a_handful_of_training_molecules_is_rare():
    # 3 of 1,000 training molecules hold bromine: under 10 and under 0.5 %
    train = ["CCO", "CCN", "c1ccccc1O", "CC(=O)O"] * 249 + ["CCBr", "BrCCO", "c1ccccc1Br", "CCCl"]
    domain = ApplicabilityDomain.from_smiles(train, "ogb", max_fingerprints=50)
    assert domain.element_molecules[35] == 3 and domain.element_molecules[17] == 1
    assert domain.reasons("CCCBr") == ["rare in training: element Br in 3 of 1,000 molecules"]
    assert domain.reasons("CCCCCO") == []
    # in a set of 17 molecules, 2 with chlorine are not rare: that is the data set's size
    small = ApplicabilityDomain.from_smiles(TRAIN, "ogb")
    assert small.element_molecules[17] == 2 and small.reasons("ClCCCO") == []
    # domains written before the counts were recorded skip the check
    old = ApplicabilityDomain.from_payload({**domain.to_payload(), "element_molecules": None})
    assert old.element_molecules is None and old.reasons("CCCBr") == []


def test_a_formal_charge_never_seen_is_named(domain):
    assert "not seen in training: formal charge +1" in domain.check("CC[NH3+]")


def test_ogb_misc_buckets_are_flagged_even_when_seen_in_training():
    """``*`` and a +30 charge land in OGB's misc buckets of atomic number and formal charge."""
    inside = ApplicabilityDomain.from_smiles(["*CC", "CC*"], "ogb")
    assert inside.check("*CC").startswith("outside OGB's feature lists (its 'misc' bucket): atomic number")
    charged = inside.check("[C+30]")
    assert "formal charge" in charged.split("misc' bucket): ")[1]


def test_a_bond_between_elements_never_bonded_is_named(domain):
    # O and N both occur in training, never bonded to each other
    assert domain.check("CCON") == "bond between elements never bonded in training: N-O"


def test_stereo_tags_are_not_compared_with_the_training_data(domain):
    assert domain.check("C[C@H](O)CC") == domain.check("CC(O)CC") == ""
    assert domain.check("C/C=C/CO") == ""


def test_a_molecule_larger_than_any_training_molecule(domain):
    big = "C" * (domain.max_atoms + 1) + "O"
    assert f"larger than any training molecule: {domain.max_atoms + 2} heavy atoms > {domain.max_atoms}" in \
        domain.check(big)


def test_nearest_neighbour_similarity_against_rdkit(domain):
    """The similarity is RDKit's Tanimoto of Morgan fingerprints (radius 2, 2,048 bits) to the
    nearest training molecule; below the threshold it is a reason, with both numbers."""
    generator = rdFingerprintGenerator.GetMorganGenerator(radius=2, fpSize=2048)
    reference = [generator.GetFingerprint(Chem.MolFromSmiles(s)) for s in TRAIN]
    query = Chem.MolFromSmiles("CCCCC(C)(C)C")
    expected = max(DataStructs.BulkTanimotoSimilarity(generator.GetFingerprint(query), reference))
    assert domain.fingerprints.nearest(query) == pytest.approx(expected)
    strict = ApplicabilityDomain.from_smiles(TRAIN, "ogb", tanimoto_threshold=expected + 0.01)
    assert strict.check(query) == f"nearest training molecule Tanimoto {expected:.2f} < {expected + 0.01:.2f}"
    assert domain.check(query) == ""  # the default threshold is lower


def test_close_values_are_shown_apart():
    domain = ApplicabilityDomain.from_smiles(["CCO"], "ogb", tanimoto_threshold=0.2)
    query = Chem.MolFromSmiles("CCC")
    value = domain.fingerprints.nearest(query)
    shown = ApplicabilityDomain.from_smiles(["CCO"], "ogb", tanimoto_threshold=value + 0.001).check(query)
    left, right = shown.rsplit(" ", 3)[-3], shown.rsplit(" ", 3)[-1]
    assert left != right  # "0.143 < 0.144", never "0.14 < 0.14"


def test_several_reasons_are_joined(domain):
    reasons = domain.reasons("[U]")
    assert reasons[0] == "not seen in training: element U, degree 0"
    assert reasons[1] == "outside OGB's feature lists (its 'misc' bucket): hybridization"
    assert reasons[2].startswith("nearest training molecule Tanimoto ")
    assert domain.check("[U]") == "; ".join(reasons)


def test_a_graph_is_checked_like_its_smiles(domain):
    for smiles in ("[U]", "CCON", "CCO"):
        assert domain.check(featurize_graph(smiles)) == domain.check(smiles)
        assert domain.check(featurize(smiles)) == domain.check(smiles)  # a PyG Data too


def test_a_graph_without_a_molecule_is_not_compared_by_similarity(domain):
    graph = featurize_graph("[U]")._replace(smiles="<RDKit Mol with 1 atoms>")
    assert "Tanimoto" not in domain.check(graph)
    assert "Tanimoto" in domain.check(graph, mol=Chem.MolFromSmiles("[U]"))


def test_zinc_vocabulary_domain_rebuilds_molecules_from_graphs():
    """ZINC graphs carry no SMILES in the data set: the fingerprints come from the graph."""
    graphs = [featurize(s, "zinc") for s in TRAIN]
    for g in graphs:
        del g.smiles
    domain = ApplicabilityDomain.from_graphs(graphs, "zinc")
    assert len(domain.fingerprints) == len(TRAIN)
    assert domain.check("CCO") == ""
    assert domain.check("CCS") == ("not seen in training: atom type S; "
                                   "bond between elements never bonded in training: C-S")
    assert domain.fingerprints.nearest(Chem.MolFromSmiles("c1ccccc1O")) == pytest.approx(1.0)


def test_fingerprint_sample_is_capped_and_leaves_the_global_random_state():
    np.random.seed(123)
    before = np.random.random()
    np.random.seed(123)
    domain = ApplicabilityDomain.from_smiles(TRAIN, "ogb", max_fingerprints=5, seed=1)
    assert np.random.random() == before
    assert len(domain.fingerprints) == 5
    again = ApplicabilityDomain.from_smiles(TRAIN, "ogb", max_fingerprints=5, seed=1)
    assert again == domain  # same seed, same sample


def test_payload_round_trip_and_checkpoint_file(domain, tmp_path):
    assert ApplicabilityDomain.from_payload(domain.to_payload()) == domain
    checkpoint = Checkpoint.load("tpsa-nci-small")
    checkpoint.applicability = domain
    checkpoint.save(tmp_path / "with.pt")
    loaded = Checkpoint.load(tmp_path / "with.pt")
    assert loaded.applicability == domain and loaded.applicability.digest() == domain.digest()
    assert loaded.applicability.check("[U]") == domain.check("[U]")
    checkpoint.applicability = None
    checkpoint.save(tmp_path / "without.pt")
    assert Checkpoint.load(tmp_path / "without.pt").applicability is None


def test_an_unreadable_entry_costs_the_warnings_not_the_model(domain, tmp_path):
    checkpoint = Checkpoint.load("tpsa-nci-small")
    payload = checkpoint.to_payload()
    payload["applicability"] = {**domain.to_payload(), "version": 99}
    with pytest.warns(UserWarning, match="applicability data not read"):
        loaded = Checkpoint.from_payload(payload, where="future.pt")
    assert loaded.applicability is None and loaded.state_dict


def test_pickles_for_worker_processes(domain):
    domain.check("[U]")  # fills the caches, which do not travel
    copy = pickle.loads(pickle.dumps(domain))
    assert copy == domain and copy._tables is None and copy.fingerprints._reference is None
    assert copy.check("[U]") == domain.check("[U]")


def test_check_domains_joins_each_reason_once(domain):
    other = ApplicabilityDomain.from_smiles(["CCS", "CCSC"], "ogb")
    joined = check_domains([domain, domain, other], "CCSO")
    assert joined.count("not seen in training") == 2  # one per domain, different values
    assert check_domains([domain, domain], "[U]") == domain.check("[U]")
