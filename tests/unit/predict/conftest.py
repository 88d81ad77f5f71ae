"""Fixtures of the predict tests: the bundled model and small hand-built checkpoints."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import pytest
import torch


def make_checkpoint(path: Path, vocab: str = "ogb", task: str = "regression", targets: tuple[str, ...] = ("tpsa",),
                    seed: int = 0, multi_hop_max_dist: int = 3, scaling: Optional[dict] = None) -> Path:
    """A real (untrained, seeded) Graphormer saved as a molsepnorm checkpoint."""
    from molsepnorm.chem import FEATURIZER_VERSION
    from molsepnorm.encodings import ENCODING_VERSION
    from molsepnorm.nn.graphormer import Graphormer, GraphormerConfig
    from molsepnorm.checkpoint import save_checkpoint

    torch.manual_seed(seed)
    config = GraphormerConfig(vocab=vocab, num_layers=2, hidden_dim=16, ffn_dim=16, num_heads=4,
                              num_spatial=16, multi_hop_max_dist=multi_hop_max_dist, num_tasks=len(targets))
    model = Graphormer(config)
    with torch.no_grad():  # non-trivial BatchNorm running statistics, as after training
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm1d):
                module.running_mean.uniform_(-0.5, 0.5)
                module.running_var.uniform_(0.5, 2.0)
    payload = {
        "kind": "best",
        "model": {"config": config.to_dict(), "state_dict": model.state_dict()},
        "featurizer": {"vocab": vocab, "featurizer_version": FEATURIZER_VERSION, "encoding_version": ENCODING_VERSION,
                       "multi_hop_max_dist": multi_hop_max_dist},
        "task": {"type": task, "target_names": list(targets), "metric": "mae" if task == "regression" else "rocauc",
                 "higher_is_better": task != "regression"},
        "target_scaling": scaling,
        "data": {"dataset": "hand-made"},
        "metrics": {},
    }
    return save_checkpoint(payload, path)


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory) -> dict[str, Path]:
    """Hand-built checkpoints: a second TPSA model, a zinc-vocabulary model, a binary model."""
    tmp = tmp_path_factory.mktemp("ckpts")
    return {
        "tpsa-b": make_checkpoint(tmp / "tpsa-b.pt", seed=1, multi_hop_max_dist=5,
                                  scaling={"mean": [50.0], "std": [30.0]}),
        "zinc": make_checkpoint(tmp / "zinc.pt", vocab="zinc", targets=("penalized_logp",), seed=2,
                                scaling={"mean": [0.0], "std": [2.0]}),
        "binary": make_checkpoint(tmp / "binary.pt", task="binary", targets=("active", "toxic"), seed=3),
        "other-target": make_checkpoint(tmp / "other.pt", targets=("logp",), seed=4),
    }
