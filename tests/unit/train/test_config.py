"""TrainConfig / ExperimentConfig: presets, overrides, validation, round trip."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from molsepnorm.errors import ConfigError
from molsepnorm.train.config import (
    ExperimentConfig,
    TrainConfig,
    apply_overrides,
    load_experiment_config,
)

REPO = Path(__file__).resolve().parents[3]
PRESETS = sorted((REPO / "configs").glob("*.yaml"))


def test_defaults_follow_the_graphormer_recipe_with_the_cpu_choices():
    tc = TrainConfig()
    tc.validate()
    assert (tc.end_lr, tc.weight_decay, tc.clip_norm) == (1e-9, 0.01, 5.0)
    assert tc.adam_betas == (0.9, 0.999)
    # chosen by ablation (docs/accuracy.md)
    assert (tc.lr, tc.warmup_fraction, tc.batch_size, tc.batching, tc.epochs, tc.patience) == \
        ("auto", 0.05, "auto", "bucket", "auto", "auto")


@pytest.mark.parametrize("steps_per_epoch, epochs", [(1, 100), (3, 100), (6, 84), (10, 50), (63, 50), (515, 50)])
def test_auto_epochs_from_the_data_size(steps_per_epoch, epochs):
    from molsepnorm.train.config import auto_epochs

    assert auto_epochs(steps_per_epoch) == epochs


@pytest.mark.parametrize("patience, epochs, stop_after", [
    ("auto", 50, 15), ("auto", 100, 30), ("auto", 5, 10), (7, 50, 7), ("off", 50, None), (None, 50, None),
])
def test_patience_of_a_run(patience, epochs, stop_after):
    from molsepnorm.train.config import resolve_patience

    TrainConfig(patience=patience).validate()
    assert resolve_patience(patience, epochs) == stop_after


@pytest.mark.parametrize("patience, epochs, first", [("auto", 50, 40), ("auto", 100, 80), ("auto", 5, 12), (7, 50, 0)])
def test_auto_patience_counts_from_the_midpoint_at_the_earliest(patience, epochs, first):
    from molsepnorm.train.config import earliest_stop

    assert earliest_stop(patience, epochs) == first


def test_overrides_win_over_the_file_and_none_means_not_given(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"model": {"norm": "sep", "num_layers": 2},
                                    "train": {"lr": 1e-3, "epochs": 5}, "data": {"dataset": "nci-tpsa"}}))
    config = load_experiment_config(path, {"train.lr": 5e-4, "train.epochs": None, "model.norm": "share",
                                           "data.smiles_column": "smi"})
    assert config.train.lr == 5e-4
    assert config.train.epochs == 5  # None did not override
    assert config.model == {"norm": "share", "num_layers": 2}
    assert config.data.dataset == "nci-tpsa"
    assert config.data.options == {"smiles_column": "smi"}  # a load_dataset option


def test_round_trip_through_yaml(tmp_path):
    config = load_experiment_config(None, {"data.dataset": "x.csv", "train.adam_betas": [0.8, 0.9],
                                           "data.target_columns": ["a", "b"]})
    config.save_yaml(tmp_path / "config.yaml")
    again = ExperimentConfig.from_dict(yaml.safe_load((tmp_path / "config.yaml").read_text()))
    assert again == config
    assert again.train.adam_betas == (0.8, 0.9)


@pytest.mark.parametrize("raw, fragment", [
    ({"train": {"learning_rate": 1}}, "learning_rate"),
    ({"optim": {}}, "optim"),
    ({"train": {"epochs": 0}, "data": {"dataset": "d"}}, "train.epochs"),
    ({"train": {"epochs": "many"}, "data": {"dataset": "d"}}, "train.epochs must be a positive integer or 'auto'"),
    ({"train": {"epochs": None, "max_steps": None}, "data": {"dataset": "d"}}, "epochs or max_steps"),
    ({"train": {"loss": "huber"}, "data": {"dataset": "d"}}, "train.loss"),
    ({"train": {"device": "tpu"}, "data": {"dataset": "d"}}, "train.device"),
    ({"train": {"end_lr": 1.0}, "data": {"dataset": "d"}}, "train.end_lr"),
    ({"train": {"cpu_malloc": "jemalloc"}, "data": {"dataset": "d"}}, "train.cpu_malloc"),
    ({"train": {"patience": "soon"}, "data": {"dataset": "d"}}, "train.patience must be a positive integer, 'auto'"),
    ({"train": {"patience": 0}, "data": {"dataset": "d"}}, "train.patience"),
    ({"train": {"checkpoint_every_seconds": -1}, "data": {"dataset": "d"}}, "train.checkpoint_every_seconds"),
    ({"train": {"monitor": "accuracy"}, "data": {"dataset": "d"}}, "train.monitor"),
    ({"train": {"average_best": 0}, "data": {"dataset": "d"}}, "train.average_best must be a positive integer or 'auto'"),
    ({"train": {"checkpoint_every_seconds": "often"}, "data": {"dataset": "d"}}, "train.checkpoint_every_seconds"),
    ({"train": {"lr": "fast"}, "data": {"dataset": "d"}}, "train.lr must be a number > 0 or 'auto', got 'fast'"),
    ({"train": {"lr": 0}, "data": {"dataset": "d"}}, "train.lr must be a number > 0"),
    ({"train": {"lr": True}, "data": {"dataset": "d"}}, "train.lr must be a number > 0"),
    ({"train": {"batch_size": "big"}, "data": {"dataset": "d"}}, "train.batch_size must be a positive integer or 'auto'"),
    ({"train": {"batch_size": 0}, "data": {"dataset": "d"}}, "train.batch_size must be a positive integer or 'auto'"),
    ({"train": {"weight_decay": True}, "data": {"dataset": "d"}}, "train.weight_decay must be a number"),
    ({"train": {"progress": "no"}, "data": {"dataset": "d"}}, "train.progress must be true or false"),
    ({}, "data.dataset"),
    ({"data": {"dataset": "d", "train_fraction": 0}}, "data.train_fraction must be in"),
    ({"data": {"dataset": "d", "train_fraction": 1.5}}, "data.train_fraction must be in"),
    ({"data": {"dataset": "d", "train_fraction_seed": -1}}, "data.train_fraction_seed must be an integer >= 0"),
    ({"data": {"dataset": "d", "train_fraction_seed": True}}, "data.train_fraction_seed must be an integer >= 0"),
    ({"data": {"dataset": "d", "train_fraction_seed": 1.5}}, "data.train_fraction_seed must be an integer >= 0"),
    ({"data": {"dataset": "d", "train_fraction_seed": 2}}, "data.train_fraction_seed is 2 but data.train_fraction is 1"),
])
def test_invalid_configs_are_named(raw, fragment):
    with pytest.raises(ConfigError, match=fragment.replace(".", r"\.")):
        config = ExperimentConfig.from_dict(raw)
        config.validate()


def test_numbers_written_with_an_exponent_are_numbers(tmp_path):
    # YAML 1.1 (PyYAML) reads 1e-3 as a string; a config file means the number
    path = tmp_path / "lr.yaml"
    path.write_text("train:\n  lr: 1e-3\n  end_lr: 1E-9\n  weight_decay: 0\n  clip_norm: null\ndata:\n  dataset: d\n")
    config = load_experiment_config(path)
    assert config.train.lr == 1e-3 and isinstance(config.train.lr, float)
    assert config.train.end_lr == 1e-9
    assert config.train.weight_decay == 0 and config.train.clip_norm is None


def test_bad_override_key():
    with pytest.raises(ConfigError, match="optim.lr"):
        apply_overrides(ExperimentConfig(), {"optim.lr": 1.0})


def test_values_from_a_notebook_that_a_run_cannot_use_are_refused_before_any_data_is_read(tmp_path):
    """A DataFrame as the data set, a numpy array or pandas Index of target columns: each an error
    at the configuration, not a crash after loading (config.yaml could not hold the array)."""
    import numpy as np
    import pandas as pd

    from molsepnorm.data import load_dataset
    from molsepnorm.pretrain.config import load_pretrain_config

    frame = pd.DataFrame({"smiles": ["CCO", "CCN"], "y": [1.0, 2.0]})
    with pytest.raises(ConfigError, match=r"got a DataFrame: write the DataFrame to a CSV first"):
        load_experiment_config(None, {"data.dataset": frame})
    with pytest.raises(TypeError, match=r"load_dataset: .* got a DataFrame: write the DataFrame to a CSV first"):
        load_dataset(frame)
    for columns in (np.array(["y"]), pd.Index(["y"])):
        package = type(columns).__module__.split(".")[0]
        with pytest.raises(ConfigError, match=rf"data.options.target_columns is a {package}\.{type(columns).__name__}"):
            load_experiment_config(None, {"data.dataset": "y.csv", "data.target_columns": columns})
    with pytest.raises(ConfigError, match=r"data.options.target_columns\[0\] is a numpy.str_"):  # inside a list
        load_experiment_config(None, {"data.dataset": "y.csv", "data.target_columns": [np.str_("y")]})
    with pytest.raises(ConfigError, match=r"corpus.corpus must be a corpus name or a file path, got a DataFrame"):
        load_pretrain_config(None, {"corpus.corpus": frame, "pretrain.max_steps": 1})
    config = load_experiment_config(None, {"data.dataset": tmp_path / "y.csv", "data.target_columns": ["y"]})
    config.save_yaml(tmp_path / "config.yaml")  # a Path and a list: written as str and list
    assert yaml.safe_load((tmp_path / "config.yaml").read_text())["data"]["dataset"] == str(tmp_path / "y.csv")


def test_missing_and_malformed_files_name_the_file(tmp_path):
    with pytest.raises(ConfigError, match="nope.yaml"):
        load_experiment_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("train: [1, 2\n")
    with pytest.raises(ConfigError, match="bad.yaml"):
        load_experiment_config(bad)


@pytest.mark.parametrize("path", PRESETS, ids=[p.name for p in PRESETS])
def test_every_preset_builds_a_model_config(path):
    from molsepnorm.nn.graphormer import GraphormerConfig

    config = load_experiment_config(path)
    assert config.data.dataset
    model = GraphormerConfig.from_dict(config.model)
    assert model.norm in ("sep", "share")


def test_presets_exist():
    names = {p.name for p in PRESETS}
    assert "tiny.yaml" in names


def test_classification_gets_dropout_and_a_companion_unless_the_config_says_otherwise():
    from molsepnorm.train.config import CLASSIFICATION_DROPOUT, with_task_defaults

    companion = {"companion_bits": 2048, "companion_radius": 2, "companion_blend": "probability",
                 "companion_counts": "log"}
    group = {"companion_bits": 16384, "companion_radius": 1, "companion_blend": "value", "companion_counts": "raw"}
    config = load_experiment_config(None, {"data.dataset": "my.csv"})
    assert with_task_defaults(config, "regression", 5000).model == group
    binary = with_task_defaults(config, "binary", 5000)
    assert binary.model == {**CLASSIFICATION_DROPOUT, **companion} and config.model == {}  # a copy
    assert all(rate == 0.1 for rate in CLASSIFICATION_DROPOUT.values())
    given = load_experiment_config(None, {"data.dataset": "my.csv", "model.activation_dropout": 0.0})
    assert with_task_defaults(given, "binary", 5000).model == {"activation_dropout": 0.0, **companion}
    off = load_experiment_config(None, {"data.dataset": "my.csv", "train.companion": "none"})
    assert with_task_defaults(off, "binary", 5000).model == {**CLASSIFICATION_DROPOUT, "companion_bits": 0}
    forced = load_experiment_config(None, {"data.dataset": "my.csv", "train.companion": "fingerprint",
                                           "model.companion_bits": 512})
    assert with_task_defaults(forced, "regression", 5000).model == {**group, "companion_bits": 512}


@pytest.mark.parametrize("task, num_train, batch_size, lr", [
    ("regression", 1, 32, 1e-3), ("regression", 499, 32, 1e-3), ("regression", 500, 64, 1e-3),
    ("regression", 514, 64, 1e-3), ("regression", 1999, 64, 1e-3),
    ("regression", 2000, 32, 1e-3), ("regression", 32_898, 32, 1e-3), ("binary", 514, 32, 5e-4),
    ("binary", 32_898, 32, 5e-4),
])
def test_auto_batch_size_and_lr_follow_the_task_and_training_set_size(task, num_train, batch_size, lr):
    from molsepnorm.train.config import with_task_defaults

    config = load_experiment_config(None, {"data.dataset": "my.csv"})
    resolved = with_task_defaults(config, task, num_train)
    assert (resolved.train.batch_size, resolved.train.lr) == (batch_size, pytest.approx(lr))
    assert (config.train.batch_size, config.train.lr) == ("auto", "auto")  # a copy


def test_a_given_batch_size_or_lr_is_kept_and_the_other_still_resolved():
    from molsepnorm.train.config import with_task_defaults

    given_batch = load_experiment_config(None, {"data.dataset": "my.csv", "train.batch_size": 128})
    resolved = with_task_defaults(given_batch, "regression", 1000).train
    assert (resolved.batch_size, resolved.lr) == (128, 1e-3)  # the rate does not follow the batch
    given_lr = load_experiment_config(None, {"data.dataset": "my.csv", "train.lr": 3e-4})
    resolved = with_task_defaults(given_lr, "regression", 1000).train
    assert (resolved.batch_size, resolved.lr) == (64, 3e-4)


def test_companion_settings_are_checked():
    for key, value, message in (("train.companion", "forest", "train.companion must be one of"),
                                ("train.companion_weight", 0, "train.companion_weight must be a number in"),
                                ("train.companion_weight", 1.5, "train.companion_weight must be a number in"),
                                ("train.companion_weight", "best", r"in \(0, 1\] or 'auto', got 'best'"),
                                ("train.companion_weight", True, "train.companion_weight must be a number in")):
        with pytest.raises(ConfigError, match=message):
            load_experiment_config(None, {"data.dataset": "my.csv", key: value}).validate()
    for weight in ("auto", 0.25, 1):
        load_experiment_config(None, {"data.dataset": "my.csv", "train.companion_weight": weight}).validate()


def test_the_monitored_metric_is_the_data_sets_unless_given():
    from molsepnorm.train.config import resolve_monitor

    assert resolve_monitor("auto", "regression", "mae") == "mae"
    assert resolve_monitor("auto", "binary", "rocauc") == "rocauc"
    assert resolve_monitor("logloss", "binary", "rocauc") == "logloss"
    assert resolve_monitor("rmse", "regression", "mae") == "rmse"
    with pytest.raises(ConfigError, match="train.monitor 'rocauc' is not a regression metric: use auto or one of mae"):
        resolve_monitor("rocauc", "regression", "mae")


def test_classification_averages_its_best_epochs_unless_told():
    from molsepnorm.train.config import CLASSIFICATION_AVERAGE_BEST, resolve_average_best

    assert ExperimentConfig().train.average_best == "auto"
    assert resolve_average_best("auto", "binary") == CLASSIFICATION_AVERAGE_BEST == 5
    assert resolve_average_best("auto", "regression") == 1
    assert resolve_average_best(1, "binary") == 1 and resolve_average_best(3, "regression") == 3


def test_a_misspelt_key_is_named_with_the_key_meant():
    with pytest.raises(ConfigError, match=r"train: unknown key\(s\) \['epoch'\] \('epoch': did you mean 'epochs'\?\); "
                                          r"known: \["):
        ExperimentConfig.from_dict({"train": {"epoch": 3}, "data": {"dataset": "d"}})
    with pytest.raises(ConfigError, match=r"unknown key\(s\) \['zzz'\]; known"):  # nothing close: no guess
        ExperimentConfig.from_dict({"train": {"zzz": 3}, "data": {"dataset": "d"}})


def test_a_path_given_in_python_is_stored_as_text(tmp_path):
    """A notebook's pathlib.Path in a config (an override, an option) saves to YAML as a string."""
    from pathlib import Path

    from molsepnorm.pretrain.config import load_pretrain_config

    config = apply_overrides(ExperimentConfig(), {"data.dataset": Path("data/x.csv"), "data.data_root": tmp_path,
                                                   "data.smiles_column": "smiles"})
    config.save_yaml(tmp_path / "config.yaml")
    saved = load_experiment_config(tmp_path / "config.yaml")
    assert saved.data.dataset == "data/x.csv" and saved.data.data_root == str(tmp_path)
    pretraining = load_pretrain_config(None, {"corpus.corpus": Path("data/corpus.smi"), "pretrain.max_steps": 5})
    assert pretraining.to_dict()["corpus"]["corpus"] == "data/corpus.smi"


def test_default_run_directories_are_named_after_the_data_without_its_suffixes():
    import re

    from molsepnorm.pretrain.api import default_run_dir as pretrain_run_dir
    from molsepnorm.pretrain.config import load_pretrain_config
    from molsepnorm.train.api import default_run_dir

    for dataset, stem in (("data/my.data.csv.gz", "my.data"), ("Mols.SDF", "Mols"), ("zinc-subset", "zinc-subset")):
        name = default_run_dir(load_experiment_config(None, {"data.dataset": dataset})).name
        assert re.fullmatch(rf"{re.escape(stem)}-sep-seed0-\d{{8}}-\d{{6}}", name), name
    config = load_pretrain_config(None, {"corpus.corpus": "x/v1.2.smi", "pretrain.max_steps": 1})
    assert re.fullmatch(r"pretrain-v1\.2-masked-seed0-\d{8}-\d{6}", pretrain_run_dir(config).name)
