"""Training state: RNG states survive a trip through a checkpoint file; progress round trips."""
from __future__ import annotations

import random

import numpy as np
import torch

from molsepnorm.checkpoint import Checkpoint, save_checkpoint
from molsepnorm.train.state import Progress, capture_rng_state, restore_rng_state


def _payload() -> dict:
    from molsepnorm.nn.graphormer import Graphormer, GraphormerConfig

    config = GraphormerConfig(vocab="ogb", num_layers=1, hidden_dim=16, ffn_dim=16, num_heads=2)
    return {
        "kind": "last",
        "model": {"config": config.to_dict(), "state_dict": Graphormer(config).state_dict()},
        "featurizer": {"vocab": "ogb", "featurizer_version": 1, "encoding_version": 1, "multi_hop_max_dist": 5},
        "task": {"type": "regression", "target_names": ["a"], "metric": "mae", "higher_is_better": False},
        "target_scaling": None,
    }


def test_rng_states_round_trip_through_a_file(tmp_path):
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    np.random.normal()  # leaves a cached gaussian in numpy's legacy state
    path = save_checkpoint({**_payload(), "training_state": {"rng": [capture_rng_state()]}}, tmp_path / "r.pt")
    expected = (random.random(), np.random.normal(), np.random.rand(), torch.rand(3))
    random.seed(9), np.random.seed(9), torch.manual_seed(9)
    restore_rng_state(Checkpoint.load(path).training_state["rng"][0])
    got = (random.random(), np.random.normal(), np.random.rand(), torch.rand(3))
    assert got[:3] == expected[:3]
    assert torch.equal(got[3], expected[3])


def test_progress_round_trips_and_reads_older_records():
    progress = Progress(step=7, epoch=1, batch_in_epoch=3, best_value=0.5, best_epoch=1, best_val={"mae": 0.5})
    assert Progress.from_dict(progress.to_dict()) == progress
    older = {k: v for k, v in progress.to_dict().items() if k not in ("epoch_graphs", "epoch_seconds")}
    assert Progress.from_dict(older).step == 7 and Progress.from_dict(older).epoch_seconds == 0.0
    assert progress.started and not Progress().started
