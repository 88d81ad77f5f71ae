"""``molsepnorm train --init``: fine-tuning from a pretrained encoder or a trained model."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from molsepnorm.checkpoint import Checkpoint, checkpoint_data
from molsepnorm.errors import MolsepnormError
from molsepnorm.pretrain import load_pretrain_config, pretrain
from molsepnorm.train.api import train
from molsepnorm.train.config import load_experiment_config

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "configs" / "tiny.yaml"


def pretrained(out: Path, vocab: str = "ogb", **model) -> Path:
    """A 20-step pretraining run of the tiny model on NCI molecules."""
    overrides = {"corpus.corpus": "nci", "corpus.limit": 400, "corpus.chunk_size": 200, "corpus.vocab": vocab,
                 "pretrain.max_steps": 20, "pretrain.threads": 1, "pretrain.progress": False,
                 **{f"model.{k}": v for k, v in model.items()}}
    pretrain(load_pretrain_config(TINY, overrides), out=out, console=False)
    return out


@pytest.fixture(scope="module")
def pre(tmp_path_factory) -> Path:
    return pretrained(tmp_path_factory.mktemp("pre") / "run")


@pytest.fixture(scope="module")
def tpsa(tmp_path_factory, write_tpsa_csv) -> Path:
    return write_tpsa_csv(tmp_path_factory.mktemp("data") / "tpsa200.csv", n=200)


def tiny(dataset, **train):
    overrides = {"data.dataset": str(dataset), "train.progress": False, "train.threads": 1, "train.epochs": 1,
                 **{f"train.{k}": v for k, v in train.items()}}
    return load_experiment_config(TINY, overrides)


def encoder_items(state: dict) -> dict:
    return {k: v for k, v in state.items() if not k.startswith("head.")}


def test_the_trainer_starts_from_the_encoder_weights_and_a_new_head(pre, tpsa):
    from molsepnorm.data.registry import load_dataset
    from molsepnorm.train.loop import Trainer

    init = Checkpoint.load(pre / "last.pt")
    splits = load_dataset(str(tpsa), progress=False)
    trainer = Trainer(tiny(tpsa, init=str(pre / "last.pt"), seed=5), splits)  # pretrained with seed 0
    state = trainer.model.state_dict()
    for key, value in encoder_items(init.state_dict).items():  # before the first step
        assert torch.equal(state[key], value), key
    assert not torch.equal(state["head.weight"], init.state_dict["head.weight"])  # a new head, from seed 5
    assert trainer.config.model["hidden_dim"] == init.model_config["hidden_dim"]


def test_cli_fine_tunes_from_a_pretraining_run(pre, tpsa, tmp_path):
    from molsepnorm.cli.main import cli

    run = tmp_path / "ft"
    result = CliRunner().invoke(cli, ["train", "--config", str(TINY), "--dataset", str(tpsa), "--epochs", "2",
                                      "--init", str(pre / "last.pt"), "--threads", "1", "--no-progress",
                                      "--train-fraction", "0.5", "--out", str(run)])
    assert result.exit_code == 0, result.output
    split = json.loads((run / "split.json").read_text())  # half of the 160 training molecules; val, test whole
    assert split["sizes"] == {"train": 80, "val": 20, "test": 20}
    assert split["info"]["train_fraction"] == {"fraction": 0.5, "seed": 0, "kept": 80, "of": 160}
    log = (run / "train.log").read_text()
    assert "init: encoder from" in log and "a new head for regression (tpsa)" in log
    best = Checkpoint.load(run / "best.pt")
    assert best.config["train"]["init"] == str(pre / "last.pt")
    assert best.task.type == "regression" and json.loads((run / "results.json").read_text())["test"]["mae"] > 0
    # evaluate, analyze and add_companion read the molecules it was trained on, not the whole training split
    graphs, splits = checkpoint_data(best, split="train")
    assert len(graphs) == 80 and splits.split_indices["train"].tolist() == split["indices"]["train"]
    assert len(checkpoint_data(best, split="all")[0]) == 120
    assert len(checkpoint_data(best, split="train", options=best.data.options)[0]) == 160  # options of one's own


def test_freeze_encoder_trains_the_head_only(pre, tpsa, tmp_path):
    init = Checkpoint.load(pre / "encoder.pt")
    train(tiny(tpsa, epochs=2), out=tmp_path / "probe", console=False, init=pre / "encoder.pt", freeze_encoder=True)
    last = Checkpoint.load(tmp_path / "probe" / "last.pt")
    assert last.training_state["progress"]["step"] > 0
    for key, value in encoder_items(init.state_dict).items():  # weights and norm statistics
        assert torch.equal(last.state_dict[key], value), key
    assert not torch.equal(last.state_dict["head.weight"], init.state_dict["head.weight"])
    log = (tmp_path / "probe" / "train.log").read_text()
    assert "encoder frozen" in log and "randomly initialized" not in log
    # a frozen encoder from scratch (init auto falls back to it for tiny.yaml's model): said, not silent
    train(tiny(tpsa, epochs=1), out=tmp_path / "random", console=False, freeze_encoder=True)
    assert "the frozen encoder is randomly initialized" in (tmp_path / "random" / "train.log").read_text()


def test_continuing_a_fine_tuned_model_keeps_its_head_when_the_targets_match(tpsa, tmp_path, write_tpsa_csv):
    from molsepnorm.data.registry import load_dataset
    from molsepnorm.train.loop import Trainer

    train(tiny(tpsa), out=tmp_path / "first", console=False)
    first = Checkpoint.load(tmp_path / "first" / "best.pt")
    trainer = Trainer(tiny(tpsa, init=str(tmp_path / "first" / "best.pt")), load_dataset(str(tpsa), progress=False))
    assert torch.equal(trainer.model.state_dict()["head.weight"], first.state_dict["head.weight"])
    assert trainer.scaler.to_dict() == first.target_scaling.to_dict()

    binary = write_tpsa_csv(tmp_path / "polar.csv", n=200, binary=True)  # another task: a new head, with a note
    train(tiny(binary), out=tmp_path / "other", console=False, init=tmp_path / "first" / "best.pt")
    assert "a new head for binary (polar)" in (tmp_path / "other" / "train.log").read_text()


def test_the_encoder_architecture_overrides_the_config_with_a_warning(tpsa, tmp_path, caplog):
    pre16 = pretrained(tmp_path / "pre16", hidden_dim=16, ffn_dim=16)
    result = train(tiny(tpsa), out=tmp_path / "ft", console=False, init=pre16 / "encoder.pt")
    best = Checkpoint.load(tmp_path / "ft" / "best.pt")
    assert best.model_config["hidden_dim"] == 16 and result.steps > 0
    assert "model.hidden_dim is 32 in the configuration but 16 in the init checkpoint" in \
        (tmp_path / "ft" / "train.log").read_text()


def test_vocabulary_mismatch_and_missing_init_are_clear_errors(tpsa, tmp_path):
    pre_zinc = pretrained(tmp_path / "zinc", vocab="zinc")
    with pytest.raises(MolsepnormError, match=r"reads the 'zinc' atom vocabulary but nci-tpsa is featurized "
                                              r"with 'ogb'"):
        train(tiny("nci-tpsa", max_steps=1), out=tmp_path / "a", console=False, init=pre_zinc / "encoder.pt")
    # a CSV is featurized in the encoder's vocabulary ...
    import pandas as pd

    from molsepnorm.chem import featurize_graph

    table = pd.read_csv(tpsa)
    zinc = tmp_path / "zinc.csv"
    table[[_in_zinc(featurize_graph, s) for s in table["smiles"]]].to_csv(zinc, index=False)
    train(tiny(zinc, max_steps=2), out=tmp_path / "b", console=False, init=pre_zinc / "encoder.pt")
    assert Checkpoint.load(tmp_path / "b" / "best.pt").featurizer.vocab == "zinc"
    # ... unless --vocab asks for another one
    config = load_experiment_config(TINY, {"data.dataset": str(zinc), "data.vocab": "ogb", "train.max_steps": 1,
                                           "train.progress": False, "train.init": str(pre_zinc / "encoder.pt")})
    with pytest.raises(MolsepnormError, match="--vocab zinc"):
        train(config, out=tmp_path / "c", console=False)

    from molsepnorm.cli.main import cli

    result = CliRunner().invoke(cli, ["train", "--dataset", str(tpsa), "--init", str(tmp_path / "none.pt"),
                                      "--epochs", "1", "--out", str(tmp_path / "d")])
    assert result.exit_code == 1 and f"--init {tmp_path / 'none.pt'}: checkpoint not found" in result.output
    result = CliRunner().invoke(cli, ["train", "--dataset", str(tpsa), "--init", "no-such-model",
                                      "--epochs", "1", "--out", str(tmp_path / "e")])
    assert result.exit_code == 1 and "--init no-such-model" in result.output and "bundled" in result.output


def _in_zinc(featurize_graph, smiles: str) -> bool:
    try:
        featurize_graph(smiles, "zinc")
    except Exception:  # noqa: BLE001 - out of the ZINC vocabulary
        return False
    return True


def test_the_bundled_zinc_encoder_fine_tunes_on_zinc_subset_by_name(tmp_path, data_root):
    config = load_experiment_config(None, {"data.dataset": "zinc-subset", "data.train_fraction": 0.02,
                                           "train.max_steps": 3, "train.progress": False, "train.threads": 1})
    train(config, out=tmp_path / "z", console=False, init="moses-encoder-zinc")
    best = Checkpoint.load(tmp_path / "z" / "best.pt")
    encoder = Checkpoint.load("moses-encoder-zinc")
    assert best.featurizer.vocab == "zinc" and best.model_config["hidden_dim"] == encoder.model_config["hidden_dim"]
    assert "init: encoder from moses-encoder-zinc" in (tmp_path / "z" / "train.log").read_text()
    assert json.loads((tmp_path / "z" / "split.json").read_text())["sizes"]["train"] == 200


def test_the_bundled_ogb_encoder_fine_tunes_a_user_csv_by_name(tmp_path, tpsa):
    """``--init molhiv-encoder`` on a CSV: featurized in its OGB vocabulary, the default
    architecture, the encoder's weights to start with (a new head), and a run that learns."""
    from molsepnorm.data.registry import load_dataset
    from molsepnorm.train.loop import Trainer

    encoder = Checkpoint.load("molhiv-encoder")
    assert encoder.task.type == "pretrained" and encoder.featurizer.vocab == "ogb" and encoder.step == 2500
    config = load_experiment_config(None, {"data.dataset": str(tpsa), "train.progress": False, "train.threads": 1,
                                           "train.init": "molhiv-encoder"})
    splits = load_dataset(str(tpsa), progress=False)
    trainer = Trainer(config, splits)
    state = trainer.model.state_dict()
    for key, value in encoder_items(encoder.state_dict).items():
        assert torch.equal(state[key], value), key
    result = train(load_experiment_config(None, {"data.dataset": str(tpsa), "train.progress": False,
                                                 "train.threads": 1, "train.epochs": 3}),
                   out=tmp_path / "ft", console=False, init="molhiv-encoder")
    history = [json.loads(line) for line in (tmp_path / "ft" / "metrics.jsonl").read_text().splitlines()]
    assert history[-1]["train_loss"] < history[0]["train_loss"]
    assert "init: encoder from molhiv-encoder" in (tmp_path / "ft" / "train.log").read_text()
    train_y = torch.cat([g.y.view(-1) for g in splits.train])
    test_y = torch.cat([g.y.view(-1) for g in splits.test])
    constant = float((test_y - train_y.mean()).abs().mean())  # the best guess that ignores the molecule
    alone = result.companion["scores"]["graphormer"]["test"]["mae"]  # the Graphormer's own, not the blend's
    assert alone < 0.8 * constant, (result.companion["scores"], constant)


@pytest.mark.parametrize("dataset, encoder, dropout", [("csv", "molhiv-encoder", 0.0),
                                                      ("binary csv", "moses-encoder-long", 0.1),
                                                      ("zinc-subset", "moses-encoder-zinc", 0.0)])
def test_by_default_training_starts_from_the_bundled_encoder_of_the_vocabulary_and_task(
        dataset, encoder, dropout, tpsa, data_root, tmp_path, write_tpsa_csv):
    """``train.init: auto`` (the default): the default architecture starts from the bundled
    encoder of the data's vocabulary and task, classification with dropout 0.1, and the
    run's resolved config names both."""
    from molsepnorm.data.registry import load_dataset
    from molsepnorm.train.loop import Trainer

    name = {"csv": str(tpsa), "binary csv": str(write_tpsa_csv(tmp_path / "polar.csv", binary=True))}.get(dataset, dataset)
    config = load_experiment_config(None, {"data.dataset": name, "train.progress": False, "train.threads": 1})
    assert config.train.init == "auto"
    splits = load_dataset(name, progress=False)
    trainer = Trainer(config, splits)
    assert trainer.config.train.init == encoder and config.train.init == "auto"  # the caller's config unchanged
    assert "dropout" not in config.model
    for key in ("dropout", "attention_dropout", "activation_dropout"):
        assert trainer.config.model[key] == dropout, key
    state = trainer.model.state_dict()
    for key, value in encoder_items(Checkpoint.load(encoder).state_dict).items():
        assert torch.equal(state[key], value), key


def test_a_dropout_rate_given_for_classification_is_kept(tmp_path, write_tpsa_csv):
    from molsepnorm.data.registry import load_dataset
    from molsepnorm.train.loop import Trainer

    csv = str(write_tpsa_csv(tmp_path / "polar.csv", binary=True))
    splits = load_dataset(csv, progress=False)
    trainer = Trainer(load_experiment_config(None, {"data.dataset": csv, "train.progress": False,
                                                    "model.attention_dropout": 0.0}), splits)
    assert (trainer.config.model["dropout"], trainer.config.model["attention_dropout"]) == (0.0, 0.0)
    assert trainer.config.train.init == "moses-encoder-long"


def test_another_architecture_or_init_none_trains_from_scratch(tpsa, caplog):
    from molsepnorm.data.registry import load_dataset
    from molsepnorm.train.loop import Trainer

    splits = load_dataset(str(tpsa), progress=False)
    encoder = encoder_items(Checkpoint.load("molhiv-encoder").state_dict)
    base = {"data.dataset": str(tpsa), "train.progress": False, "train.threads": 1}
    with caplog.at_level("INFO", logger="molsepnorm"):
        share = Trainer(load_experiment_config(None, {**base, "model.norm": "share"}), splits)
    assert share.config.train.init is None and share.init is None
    assert "init: from scratch (train.init auto): model.norm is not the bundled encoder molhiv-encoder's" in caplog.text
    dropout = Trainer(load_experiment_config(None, {**base, "model.dropout": 0.1}), splits)  # not architecture
    assert dropout.config.train.init == "molhiv-encoder"
    scratch = Trainer(load_experiment_config(None, {**base, "train.init": "none"}), splits)
    assert scratch.config.train.init is None
    state = scratch.model.state_dict()
    assert not any(torch.equal(state[k], v) for k, v in encoder.items() if v.numel() > 1)
