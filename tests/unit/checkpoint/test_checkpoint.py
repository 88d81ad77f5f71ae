"""Checkpoints: typed round trips, atomic writes, weights-only loads, clear errors."""
from __future__ import annotations

import os
import pickle

import pytest
import torch

from molsepnorm.checkpoint import checkpoint as ckpt_mod
from molsepnorm.checkpoint.checkpoint import FORMAT_VERSION, Checkpoint, CheckpointError, save_checkpoint


def load_checkpoint(path):
    return Checkpoint.load(path)


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
    }


def test_round_trip_rebuilds_the_same_model(tmp_path):
    payload = _payload()
    path = save_checkpoint(payload, tmp_path / "best.pt")
    assert not (tmp_path / "best.pt.tmp").exists()
    loaded = load_checkpoint(path)
    assert loaded.package_version and loaded.created and loaded.source == str(path)
    assert loaded.task.target_names == ("a", "b") and loaded.featurizer.multi_hop_max_dist == 5
    assert loaded.target_scaling.mean == (1.0, 2.0) and loaded.target_scaling.std == (3.0, 4.0)
    model = loaded.build_model()
    assert not model.training
    for k, v in payload["model"]["state_dict"].items():
        assert torch.equal(model.state_dict()[k], v), k


def test_typed_save_and_load_are_inverse(tmp_path):
    first = Checkpoint.from_payload(_payload())
    first.metrics = {"val": {"mae": 0.5}}
    first.training_state = {"progress": {"step": 3}}
    again = Checkpoint.load(first.save(tmp_path / "c.pt"))
    assert again.to_payload().keys() == first.to_payload().keys()
    for name in ("model_config", "featurizer", "task", "target_scaling", "data", "metrics", "training_state", "kind"):
        assert getattr(again, name) == getattr(first, name), name
    assert all(torch.equal(again.state_dict[k], v) for k, v in first.state_dict.items())


def test_a_checkpoint_missing_an_entry_names_the_file(tmp_path):
    payload = _payload()
    del payload["task"]["metric"]
    path = save_checkpoint(payload, tmp_path / "odd.pt")
    with pytest.raises(CheckpointError, match=r"odd\.pt.*malformed entry.*metric"):
        Checkpoint.load(path)


def test_an_older_featurizer_is_warned_about_once_on_load(tmp_path):
    payload = _payload()
    payload["featurizer"]["featurizer_version"] = 0
    path = save_checkpoint(payload, tmp_path / "old.pt")
    with pytest.warns(UserWarning, match=r"old\.pt: trained with featurizer v0") as record:
        Checkpoint.load(path)
    assert len([w for w in record if "featurizer" in str(w.message)]) == 1


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
    assert load_checkpoint(path).kind == "old"


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
    torch.save({"format": "molsepnorm-checkpoint", "format_version": FORMAT_VERSION + 1, "package_version": "9.9"},
               path)
    with pytest.raises(CheckpointError, match=r"a\.pt.*format version"):
        load_checkpoint(path)


def test_no_temporary_file_left_on_success(tmp_path):
    save_checkpoint(_payload(), tmp_path / "a.pt")
    save_checkpoint(_payload(), tmp_path / "a.pt")
    assert sorted(os.listdir(tmp_path)) == ["a.pt"]


def test_version_1_file_rebuilds_its_model_as_version_1_did(tmp_path):
    """Version 1 had neither ``first_cls_norm`` nor ``readout``: its layer 0 graph-token norm
    was a BatchNorm and its head read the graph token. Such a file loads into that model."""
    from molsepnorm.nn.graphormer import Graphormer, GraphormerConfig

    config = GraphormerConfig(vocab="ogb", num_layers=2, hidden_dim=16, ffn_dim=16, num_heads=2,
                              cls_norm="batch", first_cls_norm=None, readout="cls")  # version 1's defaults
    model = Graphormer(config)
    old = config.to_dict()
    del old["first_cls_norm"], old["readout"]
    payload = {**_payload(), "model": {"config": old, "state_dict": model.state_dict()},
               "config": {"model": dict(old), "train": {}, "data": {}},
               "format": "molsepnorm-checkpoint", "format_version": 1, "package_version": "0.1.0"}
    payload["task"] = {**payload["task"], "target_names": ["a"]}
    path = tmp_path / "v1.pt"
    torch.save(payload, path)
    loaded = Checkpoint.load(path)
    assert loaded.model_config["first_cls_norm"] is None and loaded.model_config["readout"] == "cls"
    assert loaded.config["model"]["first_cls_norm"] is None
    rebuilt = loaded.build_model()
    assert "layers.0.attn_norm.cls_norm.bn.running_var" in rebuilt.state_dict()
    assert all(torch.equal(rebuilt.state_dict()[k], v) for k, v in model.state_dict().items())
    assert "layers.0.attn_norm.cls_norm.bn.running_var" not in Graphormer(
        GraphormerConfig(**{**old, "num_tasks": 1})).state_dict(), "today's default differs, so the test means it"
