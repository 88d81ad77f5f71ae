"""A freshly trained model carries the applicability domain of its training split."""
from __future__ import annotations

from molsepnorm.checkpoint import ApplicabilityDomain, Checkpoint
from molsepnorm.train.loop import Trainer


def test_trained_checkpoints_carry_the_training_domain(tpsa_csv, tiny_config, tmp_path):
    from molsepnorm.data import load_dataset

    config = tiny_config(tpsa_csv, epochs=1)
    splits = load_dataset(config.data.dataset, **config.data.options)
    Trainer(config, splits, run_dir=tmp_path / "run").fit()

    best, last = Checkpoint.load(tmp_path / "run" / "best.pt"), Checkpoint.load(tmp_path / "run" / "last.pt")
    expected = ApplicabilityDomain.from_splits(splits)  # the training split, not validation or test
    assert best.applicability == expected and last.applicability == expected
    assert best.applicability.num_molecules == len(splits.train) == len(best.applicability.fingerprints)
    train_smiles = [splits.smiles[int(i)] for i in splits.split_indices["train"]]
    for smiles in train_smiles[:100]:  # never unseen, larger or dissimilar (a misc bucket may be flagged)
        assert all(r.startswith("outside OGB's feature lists") for r in best.applicability.reasons(smiles)), smiles
    assert best.applicability.check("[U]").startswith("not seen in training: element U")
