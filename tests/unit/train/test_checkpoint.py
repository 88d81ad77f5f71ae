"""Checkpoints: atomic writes, weights-only loads, clear errors, RNG state round trips."""
from __future__ import annotations

import os
import pickle
import random

import numpy as np
import pytest
import torch

from molsepnorm.train import checkpoint as ckpt_mod
from molsepnorm.train.checkpoint import (
    FORMAT_VERSION,
    CheckpointError,
    capture_rng_state,
    load_checkpoint,
    model_from_checkpoint,
    restore_rng_state,
    save_checkpoint,
)


def _payload() -> dict:
    from molsepnorm.nn.graphormer import Graphormer, GraphormerConfig

    config = GraphormerConfig(vocab="ogb", num_layers=1, hidden_dim=16, ffn_dim=16, num_heads=2, num_tasks=2)
    model = Graphormer(config)
    return {
        "kind": "best",
        "model": {"config": config.to_dict(), "state_dict": model.state_dict()},
        "featurizer": {"vocab": "ogb", "featurizer_version": 1, "encoding_version": 1, "multi_hop_max_dist": 5},
        "task": {"type": "regression", "target_names": ["a", "b"], "metric": "mae", "higher_is_better": False},
        "target_scaling": {"mean": [1.0, 2.0], "std": [3.0, 4.0]},
        "rng": capture_rng_state(),
    }


def test_round_trip_rebuilds_the_same_model(tmp_path):
    payload = _payload()
    path = save_checkpoint(payload, tmp_path / "best.pt")
    assert not (tmp_path / "best.pt.tmp").exists()
    loaded = load_checkpoint(path)
    assert loaded["format_version"] == FORMAT_VERSION and loaded["package_version"]
    model = model_from_checkpoint(path)
    assert not model.training
    for k, v in payload["model"]["state_dict"].items():
        assert torch.equal(model.state_dict()[k], v), k


def test_files_load_with_plain_weights_only_torch_load(tmp_path):
    path = save_checkpoint(_payload(), tmp_path / "x.pt")
    data = torch.load(path, map_location="cpu", weights_only=True)  # no error: plain data only
    assert data["task"]["target_names"] == ["a", "b"]


def test_interrupted_write_leaves_the_previous_file_intact(tmp_path, monkeypatch):
    path = save_checkpoint({**_payload(), "kind": "old"}, tmp_path / "last.pt")
    before = path.read_bytes()
    real_save = torch.save

    def dying_save(obj, fh, *args, **kwargs):
        real_save(obj, fh, *args, **kwargs)
        fh.truncate(100)  # half-written
        raise KeyboardInterrupt("killed while writing")

    monkeypatch.setattr(ckpt_mod.torch, "save", dying_save)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint({**_payload(), "kind": "new"}, path)
    monkeypatch.setattr(ckpt_mod.torch, "save", real_save)
    assert path.read_bytes() == before
    assert load_checkpoint(path)["kind"] == "old"


def test_truncated_file_is_a_clear_error(tmp_path):
    path = save_checkpoint(_payload(), tmp_path / "best.pt")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=r"best\.pt.*(truncated|corrupt)"):
        load_checkpoint(path)


def test_missing_file(tmp_path):
    with pytest.raises(CheckpointError, match="not found"):
        load_checkpoint(tmp_path / "nope.pt")


class _Hostile:
    """Unpickling this would create a file: a checkpoint must never run code."""

    def __init__(self, target: str):
        self.target = target

    def __reduce__(self):
        return (open, (self.target, "w"))


def test_hostile_pickle_is_refused_without_running_code(tmp_path):
    victim = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    torch.save({"format": "molsepnorm-checkpoint", "format_version": FORMAT_VERSION, "x": _Hostile(str(victim))}, path)
    with pytest.raises(CheckpointError, match=r"evil\.pt.*refused"):
        load_checkpoint(path)
    assert not victim.exists()


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_plain_pickle_file_is_not_a_checkpoint(tmp_path):
    path = tmp_path / "other.pt"
    with open(path, "wb") as fh:
        pickle.dump({"a": 1}, fh)
    with pytest.raises(CheckpointError, match="other.pt"):
        load_checkpoint(path)


def test_text_file_is_named_as_not_a_checkpoint(tmp_path):
    path = tmp_path / "notes.pt"
    path.write_text("# not a model\n")
    with pytest.raises(CheckpointError, match=r"notes\.pt: not a checkpoint.*neither a zip archive nor a pickle"):
        load_checkpoint(path)


def test_wrong_format_and_version(tmp_path):
    path = tmp_path / "a.pt"
    torch.save({"weights": torch.zeros(2)}, path)
    with pytest.raises(CheckpointError, match="not a molsepnorm checkpoint"):
        load_checkpoint(path)
    torch.save({"format": "molsepnorm-checkpoint", "format_version": FORMAT_VERSION + 1, "package_version": "9.9"}, path)
    with pytest.raises(CheckpointError, match=r"a\.pt.*format version"):
        load_checkpoint(path)


def test_rng_states_round_trip_through_a_file(tmp_path):
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    np.random.normal()  # leaves a cached gaussian in numpy's legacy state
    path = save_checkpoint({**_payload(), "rng": capture_rng_state()}, tmp_path / "r.pt")
    expected = (random.random(), np.random.normal(), np.random.rand(), torch.rand(3))
    random.seed(9), np.random.seed(9), torch.manual_seed(9)
    restore_rng_state(load_checkpoint(path)["rng"])
    got = (random.random(), np.random.normal(), np.random.rand(), torch.rand(3))
    assert got[:3] == expected[:3]
    assert torch.equal(got[3], expected[3])


def test_no_temporary_file_left_on_success(tmp_path):
    save_checkpoint(_payload(), tmp_path / "a.pt")
    save_checkpoint(_payload(), tmp_path / "a.pt")
    assert sorted(os.listdir(tmp_path)) == ["a.pt"]
