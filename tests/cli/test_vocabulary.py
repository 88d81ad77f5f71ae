"""One flag vocabulary across verbs: --model takes a bundled name everywhere, --split-by is
the split method, --split the part of a data set; old spellings still work, with a note;
choices come from the library; configuration errors are one clean line."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from molsepnorm.cli.main import cli

REPO = Path(__file__).resolve().parents[2]
MODEL = "tpsa-nci-small"


def run(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_evaluate_takes_a_bundled_model_name():
    result = run("evaluate", "--model", MODEL, "--split", "test", "--json", "-")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["dataset"] == "nci-tpsa" and report["num_molecules"] == 499  # its own split, by default
    assert report["metrics"]["r2"] > 0.99


def test_analyze_takes_a_bundled_model_name(tmp_path):
    result = run("analyze", "--model", MODEL, "--split", "val", "--out", str(tmp_path / "a"))
    assert result.exit_code == 0, result.output
    payload = json.loads((tmp_path / "a" / "analysis.json").read_text())
    (model,) = payload["models"].values()
    assert model["num_embeddings"] == 499 and model["checkpoint"] == MODEL


def test_analyze_takes_a_bundled_ensemble_member_by_member_on_a_smi_file(tmp_path):
    """The default model is an ensemble: each member is analyzed as a model of its own, on
    the user's own unlabelled molecules, with the --label given to the ensemble."""
    smi = tmp_path / "mine.smi"
    smi.write_text("CCO ethanol\nc1ccccc1O phenol\nCC(=O)Oc1ccccc1C(=O)O aspirin\nCN1CCC[C@H]1c1cccnc1 nicotine\n"
                   "C1CC broken\n")
    result = run("analyze", "-m", "hiv-activity", "-m", MODEL, "--label", "HIV", "--label", "TPSA", "--dataset",
                 str(smi), "--split", "all", "--on-invalid", "skip", "--out", str(tmp_path / "a"))
    assert result.exit_code == 0, result.output
    payload = json.loads((tmp_path / "a" / "analysis.json").read_text())
    assert list(payload["models"]) == [f"HIV (hiv-activity-seed{i})" for i in range(3)] + ["TPSA"]
    assert [m["num_embeddings"] for m in payload["models"].values()] == [4, 4, 4, 4]  # the broken line left out
    assert payload["models"]["TPSA"]["checkpoint"] == MODEL and payload["dataset"] == "mine.smi"
    assert "row 5 (id 'broken')" in result.output


def test_predict_and_embed_take_a_bundled_model_name(tmp_path):
    smi = tmp_path / "m.smi"
    smi.write_text("CCO ethanol\nc1ccccc1O phenol\n")
    result = run("predict", str(smi), "--model", MODEL, "--out", str(tmp_path / "p.csv"))
    assert result.exit_code == 0, result.output
    result = run("embed", str(smi), "-m", MODEL, "--out", str(tmp_path / "e.npz"))
    assert result.exit_code == 0, result.output
    assert np.load(tmp_path / "e.npz")["embeddings"].shape == (2, 64)


def test_a_missing_checkpoint_file_is_named(tmp_path):
    result = run("evaluate", "--model", str(tmp_path / "runs" / "best.pt"))
    assert result.exit_code == 1 and "checkpoint not found" in result.output and "Traceback" not in result.output


def test_split_by_is_the_split_method_and_the_old_spelling_still_works(tmp_path):
    from molsepnorm.data.nci import read_tpsa_file, tpsa_file

    csv = tmp_path / "t.csv"
    read_tpsa_file(tpsa_file())[0].iloc[:200].to_csv(csv, index=False)
    new = run("prepare", "--dataset", str(csv), "--split-by", "scaffold")
    old = run("prepare", "--dataset", str(csv), "--split", "scaffold")
    assert new.exit_code == 0 and old.exit_code == 0, new.output + old.output
    assert "now spelled --split-by" in old.stderr and "now spelled" not in new.stderr
    assert new.stdout.splitlines()[0] == old.stdout.splitlines()[0]
    for flag in ("--split-by", "--split"):  # the method reaches the loader under either name
        missing = run("prepare", "--dataset", str(csv), flag, "column:fold")
        assert missing.exit_code == 1 and "fold" in missing.output, missing.output
    clash = run("prepare", "--dataset", str(csv), "--split-by", "random", "--split", "scaffold")
    assert clash.exit_code == 2 and "disagree" in clash.output


def test_choices_are_the_library_constants():
    from molsepnorm.chem import VOCABS
    from molsepnorm.data.registry import PARTS
    from molsepnorm.inference.device import DEVICES
    from molsepnorm.nn.graphormer import NORMS
    from molsepnorm.config import BATCHINGS

    params = {p.name: p for p in cli.commands["train"].params}
    assert tuple(params["norm"].type.choices) == NORMS
    assert tuple(params["vocab"].type.choices) == VOCABS
    assert tuple(params["device"].type.choices) == DEVICES
    assert tuple(params["batching"].type.choices) == BATCHINGS
    for verb in ("evaluate", "analyze"):
        split = next(p for p in cli.commands[verb].params if p.name == "split")
        assert tuple(split.type.choices) == PARTS
    result = run("train", "--dataset", "nci-tpsa", "--norm", "both")
    assert result.exit_code == 2 and "'sep'" in result.output and "'share'" in result.output


def test_the_help_names_every_data_set_corpus_and_file_suffix_the_library_reads():
    """The help texts are written out (the CLI imports no data module to build them): this
    keeps them in step with the registry, the named corpora and the file formats."""
    from molsepnorm.data.registry import _CANONICAL, available_datasets
    from molsepnorm.formats import SUFFIXES
    from molsepnorm.pretrain.corpus import CORPORA

    available_datasets()  # registers the built-in ones
    helps = {verb: " ".join(" ".join((p.help or "").split()) for p in cli.commands[verb].params
                            if p.name in ("dataset", "corpus")) for verb in ("train", "evaluate", "pretrain")}
    for name in set(_CANONICAL.values()):
        assert name in helps["train"] and name in helps["evaluate"], name
    for name in CORPORA:
        assert name in helps["pretrain"], name
    for suffix in SUFFIXES:
        assert re.search(rf"{re.escape(suffix)}\b", helps["train"]), suffix  # .sd itself, not inside .sdf


@pytest.mark.parametrize("model,words", [
    ("num_layer: 3", ["num_layer", "num_layers"]),  # a mistyped key: named, with the known keys
    ("norm: batch", ["norm must be one of", "sep", "share"]),  # a bad value: the allowed ones
    ("num_layers: many", ["model.num_layers must be int", "many"]),  # a wrong type
])
def test_a_bad_model_section_fails_before_any_data_loads(tmp_path, model, words):
    preset = tmp_path / "bad.yaml"
    preset.write_text(f"model:\n  {model}\n")
    # full ZINC is not available offline: reaching the data would fail with another message
    result = run("train", "--config", str(preset), "--dataset", "zinc", "--data-root", str(tmp_path / "none"),
                 "--out", str(tmp_path / "r"))
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and isinstance(result.exception, SystemExit)
    assert "model" in result.output and all(w in result.output for w in words), result.output
    assert "ZINC" not in result.output and not (tmp_path / "r").exists()
