"""``train`` / ``evaluate`` / ``prepare`` on a labelled SD file: RDKit's NCI/first_200.props.sdf."""
from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from rdkit import RDConfig

from molsepnorm.cli.main import cli

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "configs" / "tiny.yaml"
FIRST_200 = Path(RDConfig.RDDataDir) / "NCI" / "first_200.props.sdf"


def run(*args: str):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """One epoch of the tiny model on the molecular weight (AMW field) of the 200 records."""
    out = tmp_path_factory.mktemp("sdf") / "run"
    result = run("train", "--dataset", FIRST_200, "--target-columns", "AMW", "--config", TINY, "--epochs", "1",
                 "--threads", "1", "--no-progress", "--out", out)
    assert result.exit_code == 0, result.output
    return out


def test_train_on_an_sdf_then_evaluate(trained: Path) -> None:
    config = yaml.safe_load((trained / "config.yaml").read_text())
    assert config["data"]["dataset"] == str(FIRST_200) and config["data"]["options"] == {"target_columns": ["AMW"]}
    split = json.loads((trained / "split.json").read_text())
    assert split["sizes"] == {"train": 160, "val": 20, "test": 20} and split["info"]["format"] == "sdf"
    result = run("evaluate", "--model", trained / "best.pt", "--split", "test", "--json", "-")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    expected = json.loads((trained / "results.json").read_text())["test"]
    assert report["dataset"] == "first_200.props.sdf" and report["num_molecules"] == 20
    assert report["target_names"] == ["AMW"] and report["metrics"]["mae"] == pytest.approx(expected["mae"])
    # the run's per-molecule table names each test record as predict does: its SD title, here
    # empty in every record, so its record number
    import pandas as pd
    from rdkit import Chem

    records = list(Chem.SDMolSupplier(str(FIRST_200)))
    assert {m.GetProp("_Name") for m in records} == {""}
    table = pd.read_csv(trained / "test_predictions.csv")
    assert list(table.columns[:3]) == ["index", "id", "smiles"] and len(table) == 20
    assert table["id"].tolist() == [i + 1 for i in split["indices"]["test"]]
    assert table["AMW_true"].tolist() == pytest.approx([records[i].GetDoubleProp("AMW")
                                                        for i in split["indices"]["test"]], rel=1e-6)


def test_evaluate_on_a_gzipped_sdf_given_by_flags(trained: Path, tmp_path: Path) -> None:
    copy = tmp_path / "nci.sdf.gz"
    with open(FIRST_200, "rb") as src, gzip.open(copy, "wb") as dst:
        shutil.copyfileobj(src, dst)
    result = run("evaluate", "--model", trained / "best.pt", "--dataset", copy, "--target-columns", "AMW",
                 "--split", "all", "--json", "-")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["num_molecules"] == 200


def test_prepare_splits_an_sdf_by_a_scaffold() -> None:
    result = run("prepare", "--dataset", FIRST_200, "--target-columns", "CLOGP,AMW", "--split-by", "scaffold")
    assert result.exit_code == 0, result.output
    assert "targets CLOGP, AMW" in result.stdout and f"source: {FIRST_200}" in result.stdout


def test_a_missing_or_unknown_target_field_is_one_line_listing_the_fields(tmp_path: Path) -> None:
    unknown = run("train", "--dataset", FIRST_200, "--target-columns", "LOGS", "--config", TINY, "--out",
                  tmp_path / "a")
    assert unknown.exit_code == 1 and "Traceback" not in unknown.output
    assert "no record has the target field 'LOGS'" in unknown.output and "'CLOGP'" in unknown.output
    missing = run("prepare", "--dataset", FIRST_200)
    assert missing.exit_code == 1 and "name the target field(s)" in missing.output and "'AMW'" in missing.output
