"""The bundled models and encoders: present, small, documented, made by this project, and accurate."""
from __future__ import annotations

import hashlib
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from rdkit import Chem
from rdkit.Chem import rdMolDescriptors

from molsepnorm.checkpoint import Checkpoint, CheckpointError
from molsepnorm.checkpoint.bundled import BUNDLED, CLASSIFICATION_ENCODERS, DEFAULT_ENCODERS, DEFAULT_MODEL, \
    UnknownModelError, bundled_models, default_encoder, ensemble_metrics_path, \
    model_listing, resolve_model, resolve_models

REPO = Path(__file__).resolve().parents[3]
MODELS = [m for m in BUNDLED.values() if m.kind == "model"]
ENCODERS = [m for m in BUNDLED.values() if m.kind == "encoder"]
ENSEMBLES = [m for m in MODELS if m.is_ensemble]
#: every shipped checkpoint file: (model, file)
FILES = [(m, path) for m in BUNDLED.values() for path in m.paths]
FILE_IDS = [path.name for _, path in FILES]
#: every checkpoint that predicts: (model, file), an ensemble's members each
MODEL_FILES = [(m, path) for m, path in FILES if m.kind == "model"]


@pytest.mark.parametrize("model, path", FILES, ids=FILE_IDS)
def test_bundled_files_are_there_and_small(model, path):
    assert path.is_file() and model.card_path.is_file() and model.preset_path.is_file()
    assert path.stat().st_size < 2 * 1024 * 1024
    assert path.parent.name == "models" and path.parent.parent.name == "molsepnorm"


@pytest.mark.parametrize("model, path", MODEL_FILES, ids=[p.name for _, p in MODEL_FILES])
def test_checkpoint_is_a_best_pt_of_molsepnorm_train(model, path):
    ckpt = Checkpoint.load(path)
    assert ckpt.kind == "best" and ckpt.training_state is None
    assert set(ckpt.metrics) - {"companion", "averaged_epochs"} == {"val", "test"}
    if "companion" in ckpt.metrics:  # fitted by molsepnorm.train.add_companion (the card says how)
        assert all(ckpt.metrics["companion"]["fitted"].values()) and ckpt.model_config["companion_bits"] > 0
    # the preset beside the card is the one the checkpoint was trained with
    preset = yaml.safe_load(model.preset_path.read_text())
    assert ckpt.data.dataset == preset["data"]["dataset"]
    if model.is_ensemble:  # the members differ by seed alone, which the card gives (--seed S)
        assert "seed" not in preset["train"]
    for key, value in preset["model"].items():
        assert ckpt.model_config[key] == value, key
    for key, value in preset["train"].items():
        if key not in ckpt.config["train"]:  # an option newer than the model: checked below
            assert key in BEFORE_THE_OPTION, key
            continue
        if key == "init" and value in BUNDLED:  # fine-tuned from a bundled encoder, by name
            assert ckpt.config["train"]["init"] == value and BUNDLED[value].kind == "encoder"
            continue
        if key == "init":  # fine-tuned: the encoder's run directory, committed under docs/ with the same name
            used = Path(ckpt.config["train"]["init"])
            assert (used.parent.name, used.name) == (Path(value).parent.name, Path(value).name)
            assert (REPO / value).is_file(), value
            continue
        assert ckpt.config["train"][key] == value, key
    # an option newer than the model must be pinned in the preset, or training would take today's default
    for key, value in BEFORE_THE_OPTION.items():
        if key not in ckpt.config["train"]:
            if key == "companion" and "companion" in ckpt.metrics:  # fitted onto the model afterwards
                value = "fingerprint"
            assert preset["train"].get(key, "unpinned") == value, key
    if ckpt.config["train"].get("init", "none") == "none":  # from scratch: the preset alone builds the model
        from molsepnorm.nn.graphormer import GraphormerConfig

        today = GraphormerConfig().to_dict()
        moved = {key for key, value in ckpt.model_config.items() if key in today and value != today[key]
                 and key not in FROM_THE_DATA and not key.startswith("companion")}  # fitted, not chosen
        assert moved <= set(preset["model"]), f"unpinned settings whose default has moved: {moved - set(preset['model'])}"


#: train options a bundled model may predate, with the setting that reproduces training before them
BEFORE_THE_OPTION = {"init": "none", "companion": "none", "average_best": 1}
#: model settings the data set decides, not the preset
FROM_THE_DATA = ("atom_dims", "bond_dims", "num_tasks")


@pytest.mark.parametrize("model, path", FILES, ids=FILE_IDS)
def test_card_states_the_shipped_file_size_and_sha256(model, path):
    card = " ".join(model.card_path.read_text(encoding="utf-8").split())  # lines joined
    found = re.search(rf"`molsepnorm/models/{re.escape(path.name)}`, ([\d,]+) bytes, sha256 `([0-9a-f]{{64}})`", card)
    assert found, "the card's 'ships inside the package' line"
    assert int(found.group(1).replace(",", "")) == path.stat().st_size
    assert found.group(2) == hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("model, path", MODEL_FILES, ids=[p.name for _, p in MODEL_FILES])
def test_card_records_command_seed_and_the_checkpoint_metrics(model, path):
    card = model.card_path.read_text(encoding="utf-8")
    ckpt = Checkpoint.load(path)
    assert f"`{model.name}`" in card
    assert f"molsepnorm train --config molsepnorm/models/{model.name}.yaml" in card
    assert re.search(rf"seed {ckpt.config['train']['seed']}\b", card)
    for split in ("val", "test"):
        if ckpt.task.type == "binary":
            assert f"{ckpt.metrics[split]['rocauc']:.4f}" in card, split
        else:
            assert f"{ckpt.metrics[split]['mae']:.3f}" in card, split
            assert f"{ckpt.metrics[split]['r2']:.4f}" in card, split


@pytest.mark.parametrize("encoder", ENCODERS, ids=[m.name for m in ENCODERS])
def test_bundled_encoder_is_a_pretrain_encoder_pt_with_its_preset_and_card(encoder):
    ckpt = Checkpoint.load(resolve_model(encoder.name))
    assert ckpt.kind == "encoder" and ckpt.task.type == "pretrained" and ckpt.training_state is None
    preset = yaml.safe_load(encoder.preset_path.read_text())
    from molsepnorm.pretrain.api import saved_config

    saved = saved_config(ckpt.config, str(resolve_model(encoder.name)))  # as a resume reads it (no motif_weight: off)
    for key, value in preset["pretrain"].items():
        assert getattr(saved.pretrain, key) == value, key
    for key, value in preset["corpus"].items():
        assert ckpt.config["corpus"][key] == value, key
    assert ckpt.featurizer.vocab == preset["corpus"]["vocab"]
    card = encoder.card_path.read_text(encoding="utf-8")
    assert f"`{encoder.name}`" in card and f"molsepnorm train --init {encoder.name}" in card
    assert f"molsepnorm pretrain --config molsepnorm/models/{encoder.name}.yaml" in card
    assert f"{ckpt.step:,} steps" in card and f"{ckpt.metrics['pretrain']['molecules']:,} molecules" in card
    listing = model_listing(encoder)
    assert listing["kind"] == "encoder" and listing["task"] == "pretrained" and listing["steps"] == ckpt.step


@pytest.mark.parametrize("vocab, task", [(vocab, task) for vocab in sorted(DEFAULT_ENCODERS)
                                         for task in ("regression", "binary")])
def test_the_default_start_of_training_is_a_bundled_encoder_of_its_vocabulary_and_the_default_model(vocab, task):
    from molsepnorm.nn.graphormer import GraphormerConfig
    from molsepnorm.train.init import DATA_KEYS, OWN_KEYS

    name = default_encoder(vocab, task)
    assert name == (CLASSIFICATION_ENCODERS.get(vocab, DEFAULT_ENCODERS[vocab]) if task == "binary"
                    else DEFAULT_ENCODERS[vocab])
    encoder = BUNDLED[name]
    ckpt = Checkpoint.load(name)
    assert encoder.kind == "encoder" and ckpt.featurizer.vocab == vocab
    default = GraphormerConfig().to_dict()  # what train.init auto needs to pick it for a default run
    architecture = {k: v for k, v in ckpt.model_config.items() if k not in OWN_KEYS + DATA_KEYS}
    assert architecture == {k: default[k] for k in architecture}
    assert "by default" in encoder.card_path.read_text(encoding="utf-8")


def test_bundled_model_predicts_tpsa_of_known_drugs(bundled_predictor):
    lines = [line.split() for line in (REPO / "data" / "examples" / "molecules.smi").read_text().splitlines()]
    drugs = [parts[0] for parts in lines if parts and Chem.MolFromSmiles(parts[0]) is not None]
    assert len(drugs) >= 15
    predicted = bundled_predictor.predict(drugs)["tpsa"].to_numpy()
    reference = np.array([rdMolDescriptors.CalcTPSA(Chem.MolFromSmiles(s)) for s in drugs])
    assert np.abs(predicted - reference).mean() < 3.0  # measured 0.6 Å²; TPSA's std is 42 Å²


def test_registry_and_resolution(tmp_path: Path):
    assert bundled_models()[0].name == DEFAULT_MODEL
    members = resolve_models(DEFAULT_MODEL)  # the default is an ensemble: every member file, in seed order
    assert [p.name for p in members] == [f"{DEFAULT_MODEL}-seed{i}.pt" for i in range(3)]
    assert all(p.is_file() and p.parent == Path(bundled_models()[0].card_path).parent for p in members)
    assert resolve_model("tpsa-nci-small") == BUNDLED["tpsa-nci-small"].paths[0]
    local = tmp_path / DEFAULT_MODEL  # a file of that name wins over the bundled model
    local.write_bytes(b"x")
    assert resolve_model(local) == local and resolve_models(local) == [local]
    both = resolve_models(["tpsa-nci-small", local, DEFAULT_MODEL])  # several specs: all their files, in order
    assert both == [BUNDLED["tpsa-nci-small"].paths[0], local, *members]
    with pytest.raises(UnknownModelError, match="bundled: tpsa-nci-small, hiv-activity"):
        resolve_model("nope")
    with pytest.raises(UnknownModelError, match=r"model 'hiv-activty': .* did you mean 'hiv-activity'\?"):
        resolve_model("hiv-activty")  # a typo, in words a notebook's Predictor.load reads too (no --model)
    assert resolve_model(f"{DEFAULT_MODEL}-seed1") == members[1]  # a member alone, by the name of its file
    run = tmp_path / "run"  # a run directory: its best.pt, or a pretraining run's encoder.pt
    run.mkdir()
    (run / "last.pt").write_bytes(b"x")
    with pytest.raises(CheckpointError, match=r"run is a folder holding no best\.pt or encoder\.pt \(its last\.pt"):
        resolve_model(run)
    (run / "encoder.pt").write_bytes(b"x")
    assert resolve_model(run) == run / "encoder.pt"
    (run / "best.pt").write_bytes(b"x")
    assert resolve_models(str(run)) == [run / "best.pt"]
    with pytest.raises(CheckpointError, match=r"checkpoint not found: .*nope\.pt.*bundled model"):
        resolve_model(tmp_path / "nope.pt")  # meant as a file: named as a missing file
    listing = model_listing(BUNDLED[DEFAULT_MODEL])  # the default: HIV activity, a probability
    assert listing["name"] == "hiv-activity" and listing["default"]
    assert listing["task"] == "binary" and listing["targets"] == ["HIV_active"]
    assert listing["metrics"]["test"]["rocauc"] > 0.7
    listing = model_listing(BUNDLED["tpsa-nci-small"])
    assert listing["task"] == "regression" and listing["targets"] == ["tpsa"] and not listing["default"]
    assert listing["metrics"]["test"]["mae"] < 2


@pytest.mark.parametrize("model", ENSEMBLES, ids=[m.name for m in ENSEMBLES])
def test_a_bundled_ensemble_is_its_members_everywhere_and_one_model_nowhere(model):
    """predict takes every member; whatever reads one model refuses the name, naming the files;
    the listing's metrics are the ensemble's own, recorded for exactly the shipped files."""
    import json

    from molsepnorm.predict import Predictor

    with pytest.raises(UnknownModelError, match=rf"ensemble of {len(model.paths)} models.*{model.paths[0].name}"):
        Checkpoint.load(model.name)
    predictor = Predictor.load(model.name)
    assert predictor.is_ensemble and len(predictor.members) == len(model.paths)
    assert [m.source for m in predictor.members] == [f"{model.name} (member {i + 1}: {p.name})"
                                                      for i, p in enumerate(model.paths)]
    frame = predictor.predict(["CCO", "c1ccccc1O"])
    for target in predictor.target_names:
        assert (frame[f"{target}_std"] > 0).all()  # different seeds, different predictions
    record = json.loads(ensemble_metrics_path(model).read_text(encoding="utf-8"))
    assert [(m["file"], m["sha256"]) for m in record["members"]] == \
        [(p.name, hashlib.sha256(p.read_bytes()).hexdigest()) for p in model.paths]
    for member in record["members"]:  # scored beside the mean as its training run scored it
        for split in ("val", "test"):
            for name, value in member["scored"][split].items():
                assert value == pytest.approx(member["metrics"][split][name], rel=1e-6), (member["file"], split, name)
    seeds = [Checkpoint.load(p).config["train"]["seed"] for p in model.paths]
    assert [m["seed"] for m in record["members"]] == seeds and len(set(seeds)) == len(seeds)
    listing = model_listing(model)
    # the listing reports the ensemble's own figures, not those its first member's file carries
    assert listing["metrics"] == record["metrics"]
    first = Checkpoint.load(model.paths[0]).metrics
    key = "rocauc" if predictor.task == "binary" else "mae"
    assert all(listing["metrics"][split][key] != first[split][key] for split in ("val", "test"))
    assert listing["checkpoints"] == [str(p) for p in model.paths]
    assert listing["size_bytes"] == sum(p.stat().st_size for p in model.paths)
    card = " ".join(model.card_path.read_text(encoding="utf-8").split())
    for split in ("val", "test"):  # the card states the ensemble's metrics as recorded
        key = "rocauc" if predictor.task == "binary" else "mae"
        assert f"{record['metrics'][split][key]:.4f}" in card, split
    for seed in seeds:
        assert f"molsepnorm train --config molsepnorm/models/{model.name}.yaml --seed {seed}" in card



def test_bundled_hiv_model_ranks_the_molhiv_test_split_as_its_card_says(data_root):
    """Predicting from the SMILES of molhiv's scaffold test split reproduces the ROC-AUC
    recorded for the ensemble (``evaluate``: OGB's Evaluator on OGB's graphs): same
    featurization, the same mean of the members, no leak."""
    import json

    import torch
    from sklearn.metrics import roc_auc_score

    from molsepnorm.data import load_dataset
    from molsepnorm.predict import Predictor

    splits = load_dataset("molhiv", root=data_root, progress=False)
    smiles = [splits.smiles[int(i)] for i in splits.split_indices["test"]]
    active = torch.cat([g.y for g in splits.test]).view(-1).numpy()
    frame = Predictor.load("hiv-activity").predict(smiles)
    probability = frame["HIV_active"].to_numpy()
    # two test SMILES (hypervalent Al, B) no longer parse with today's RDKit: kept, with a reason
    failed = frame["error"].notna().to_numpy()
    assert len(frame) == len(smiles) == 4_113 and failed.sum() == 2
    assert frame["error"][failed].str.contains("valence").all() and np.isnan(probability[failed]).all()
    assert ((probability[~failed] > 0) & (probability[~failed] < 1)).all()
    record = json.loads(ensemble_metrics_path(BUNDLED["hiv-activity"]).read_text(encoding="utf-8"))
    recorded = record["metrics"]["test"]["rocauc"]  # on OGB's graphs, all 4,113
    assert roc_auc_score(active[~failed], probability[~failed]) == pytest.approx(recorded, abs=2e-3)
    assert recorded > 0.7
