"""``molsepnorm predict`` / ``embed`` / ``models`` on the command line: outputs and exit codes."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from molsepnorm.cli.predict import embed, models, predict

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "data" / "examples" / "molecules.smi"
MIXED = "CCO ethanol\n\nC1CC ring_open\n  \nc1ccccc1O phenol\nCN(C)(C)(C)C too_many_bonds\n\nCC(=O)O\n"


def invoke(command, args, **kwargs):
    return CliRunner().invoke(command, [*args, "--threads", "1", "--no-progress"], **kwargs)


@pytest.fixture
def mixed(tmp_path: Path) -> Path:
    path = tmp_path / "mixed.smi"
    path.write_text(MIXED)
    return path


def test_example_file_with_the_bundled_model(tmp_path: Path):
    src = tmp_path / "molecules.smi"
    src.write_bytes(EXAMPLE.read_bytes())
    result = invoke(predict, [str(src)])
    assert result.exit_code == 0, result.output
    out = tmp_path / "molecules.predictions.csv"
    frame = pd.read_csv(out)
    records = [line for line in EXAMPLE.read_text().splitlines() if line.strip()]
    assert len(frame) == len(records)
    assert frame["id"].tolist() == [line.split()[1] for line in records]
    assert frame["error"].notna().sum() >= 3  # the deliberately invalid lines
    assert "aspirin" in result.output and "HIV_active" in result.output  # the predictions are printed
    probabilities = frame["HIV_active"].dropna()  # the default model: a probability of activity
    assert len(probabilities) == len(records) - frame["error"].notna().sum()
    assert ((probabilities > 0) & (probabilities < 0.1)).all()  # none is an HIV drug (the README says so)
    assert "ok " in result.output and "molecules/s" in result.output  # the summary line


def test_one_row_per_record_with_reasons(mixed: Path, tmp_path: Path):
    out = tmp_path / "res.csv"
    result = invoke(predict, [str(mixed), "--out", str(out), "--preview", "0"])
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out)
    assert frame["id"].astype(str).tolist() == ["ethanol", "ring_open", "phenol", "too_many_bonds", "5"]
    assert frame["smiles"].tolist() == ["CCO", "C1CC", "c1ccccc1O", "CN(C)(C)(C)C", "CC(=O)O"]
    assert frame["error"].isna().tolist() == [True, False, True, False, True]
    assert "unclosed ring" in frame["error"][1]
    assert "valence" in frame["error"][3].lower()
    assert "ok 3 / failed 2" in result.output


@pytest.mark.parametrize("text, message, rows", [("C1CC\nxyz\n", "no record could be predicted", 2),
                                                 ("\n", "no record in the input", 0)], ids=["all-bad", "empty"])
def test_exit_1_naming_the_input_when_nothing_is_predicted(tmp_path: Path, text: str, message: str, rows: int):
    source = tmp_path / "in.smi"
    source.write_text(text)
    result = invoke(predict, [str(source)])
    assert result.exit_code == 1
    assert f"{source}: {message}" in result.output
    assert len(pd.read_csv(tmp_path / "in.predictions.csv")) == rows  # every reason is still written


def test_strict_stops_and_writes_nothing(mixed: Path, tmp_path: Path):
    out = tmp_path / "strict.csv"
    result = invoke(predict, [str(mixed), "--strict", "--out", str(out)])
    assert result.exit_code == 1
    assert "mixed.smi, row 3" in result.output and "unclosed ring" in result.output
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["mixed.smi"]


@pytest.mark.parametrize("args, message", [
    (["--out", "{src}"], "input file itself"),
    (["--model", "no-such-model"], "no bundled model"),
    (["--smiles-column", "x"], "no columns"),
])
def test_unusable_arguments_exit_2(mixed: Path, args, message):
    result = invoke(predict, [str(mixed), *[a.format(src=mixed) for a in args]])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert mixed.read_text() == MIXED


def test_missing_input_and_missing_csv_column_exit_2(tmp_path: Path):
    assert invoke(predict, [str(tmp_path / "none.smi")]).exit_code == 2
    table = tmp_path / "t.csv"
    table.write_text("mol,name\nCCO,e\n")
    result = invoke(predict, [str(table)])
    assert result.exit_code == 2 and "--smiles-column" in result.output
    assert invoke(predict, [str(table), "--smiles-column", "mol", "--out", str(tmp_path / "o.csv")]).exit_code == 0
    assert pd.read_csv(tmp_path / "o.csv")["id"].tolist() == ["e"]


def test_a_large_file_is_featurized_beside_the_model_by_default_with_the_same_output(tmp_path: Path, monkeypatch):
    """``--workers auto`` (the default) starts one featurization process for a file of 64 KiB
    or more when two CPUs are usable; the output is byte for byte that of ``--workers 0``."""
    from rdkit import RDConfig

    from molsepnorm.predict import featurizing, predictor

    lines, size = [], 0  # real SMILES, RDKit's NCI file, up to the size auto reacts to
    for line in (Path(RDConfig.RDDataDir) / "NCI" / "first_5K.smi").read_text().splitlines():
        lines.append(line)
        size += len(line) + 1
        if size >= featurizing.AUTO_WORKERS_MIN_BYTES:
            break
    src = tmp_path / "large.smi"
    src.write_text("\n".join(lines) + "\n")
    assert src.stat().st_size >= featurizing.AUTO_WORKERS_MIN_BYTES
    started = []
    real = predictor.featurized_chunks

    def spy(records, vocab, chunk_size, workers=0, *args, **kwargs):
        started.append(workers)
        return real(records, vocab, chunk_size, workers, *args, **kwargs)

    monkeypatch.setattr(featurizing, "usable_cpus", lambda: 2)
    monkeypatch.setattr(predictor, "featurized_chunks", spy)
    default = invoke(predict, [str(src), "-m", "tpsa-nci-small", "--out", str(tmp_path / "auto.csv")])
    inline = invoke(predict, [str(src), "-m", "tpsa-nci-small", "--workers", "0", "--out", str(tmp_path / "inline.csv")])
    assert default.exit_code == 0 and inline.exit_code == 0, default.output + inline.output
    assert started == [1, 0]
    assert (tmp_path / "auto.csv").read_bytes() == (tmp_path / "inline.csv").read_bytes()
    assert len(pd.read_csv(tmp_path / "auto.csv")) == len(lines)
    refused = invoke(predict, [str(src), "--workers", "some"])
    assert refused.exit_code == 2 and "is not a number >= 0 or 'auto'" in refused.output


def test_stdin_to_stdout():
    result = CliRunner().invoke(predict, ["-", "--out", "-", "--threads", "1", "--no-progress"],
                                input="CCO a\nC1CC b\n")
    assert result.exit_code == 0, result.output
    lines = result.stdout.strip().splitlines()
    assert lines[0] == "id,smiles,HIV_active,HIV_active_std,error,warning" and len(lines) == 3  # an ensemble
    assert lines[1].startswith("a,CCO,") and lines[2].startswith("b,C1CC,,")


def test_ensemble_adds_std_columns(mixed: Path, tmp_path: Path):
    out = tmp_path / "ens.csv"
    result = invoke(predict, [str(mixed), "-m", "tpsa-nci-small", "-m", "tpsa-nci-small", "-o", str(out)])
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out)
    assert list(frame.columns) == ["id", "smiles", "tpsa", "tpsa_std", "error", "warning"]
    assert frame["tpsa_std"].dropna().abs().max() < 1e-5  # the same model twice


def test_sdf_input_gives_rdkit_smiles(tmp_path: Path):
    from rdkit import Chem

    sdf = tmp_path / "m.sdf"
    with Chem.SDWriter(str(sdf)) as writer:
        for smiles, name in [("OC(=O)c1ccccc1", "benzoic"), ("CCO", "ethanol")]:
            mol = Chem.MolFromSmiles(smiles)
            mol.SetProp("_Name", name)
            writer.write(mol)
    result = invoke(predict, [str(sdf)])
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(tmp_path / "m.predictions.csv")
    assert frame["id"].tolist() == ["benzoic", "ethanol"]
    assert frame["smiles"].tolist() == ["O=C(O)c1ccccc1", "CCO"]


def test_embed_writes_npz(mixed: Path, tmp_path: Path):
    out = tmp_path / "emb.npz"
    result = invoke(embed, [str(mixed), "--model", "tpsa-nci-small", "--out", str(out)])
    assert result.exit_code == 0, result.output
    with np.load(out) as npz:
        assert npz["embeddings"].shape[0] == 5
        assert npz["ids"].tolist()[:3] == ["ethanol", "ring_open", "phenol"]
        assert npz["ok"].tolist() == [True, False, True, False, True]
        assert "unclosed ring" in npz["errors"][1]
    bad = tmp_path / "bad.smi"
    bad.write_text("C1CC\n")
    result = invoke(embed, [str(bad), "--out", str(tmp_path / "b.npz")])
    assert result.exit_code == 1 and f"{bad}: no record could be predicted" in result.output


def test_embed_takes_one_model_and_says_so_for_an_ensemble(mixed: Path, tmp_path: Path):
    from molsepnorm.checkpoint.bundled import BUNDLED, DEFAULT_MODEL

    default = BUNDLED[DEFAULT_MODEL]
    if not default.is_ensemble:
        pytest.skip("the default model is one checkpoint")
    out = tmp_path / "default.npz"
    result = invoke(embed, [str(mixed), "--out", str(out)])  # no --model: the default's first member
    assert result.exit_code == 0, result.output
    with np.load(out) as npz:
        assert str(npz["model"]) == str(default.paths[0]) and npz["embeddings"].shape[0] == 5
    result = invoke(embed, [str(mixed), "--model", DEFAULT_MODEL, "--out", str(tmp_path / "all.npz")])
    assert result.exit_code == 1 and "embeddings come from one model" in result.output
    assert all(path.name in result.output for path in default.paths)  # what to give instead
    assert not (tmp_path / "all.npz").exists()
    two = [str(default.paths[0]), str(default.paths[1])]  # --model twice: refused, not the last one kept
    result = invoke(embed, [str(mixed), "-m", two[0], "-m", two[1], "--out", str(tmp_path / "two.npz")])
    assert result.exit_code == 2 and "given 2 times" in result.output
    assert "this command reads one model" in result.output
    assert not (tmp_path / "two.npz").exists()


def test_warning_column_and_npz_array(tmp_path: Path):
    src = tmp_path / "odd.smi"
    src.write_text("CCO ethanol\n[U] uranium\nB1B2B1B2 boron_cage\nc1ccccc1O phenol\nC1CC ring_open\n")
    out = tmp_path / "odd.csv"
    result = invoke(predict, [str(src), "--out", str(out)])
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out)
    assert frame["warning"].notna().tolist() == [False, True, True, False, False]
    assert frame["warning"][1].startswith("not seen in training: element U")
    assert "nearest training molecule" in frame["warning"][2]  # a boron cage is unlike molhiv's molecules
    assert "(5 records), 2 with a warning, in" in result.output and "uranium" in result.output
    result = invoke(embed, [str(src), "--out", str(tmp_path / "odd.npz")])
    assert result.exit_code == 0, result.output
    with np.load(tmp_path / "odd.npz") as npz:
        assert npz["warnings"].tolist() == [w if isinstance(w, str) else "" for w in frame["warning"]]
    result = invoke(predict, [str(src), "--out", str(out), "--no-applicability"])
    assert result.exit_code == 0, result.output
    assert pd.read_csv(out)["warning"].isna().all() and "with a warning" not in result.output


def test_models_lists_the_bundled_model():
    result = CliRunner().invoke(models, [])
    assert result.exit_code == 0, result.output
    assert "hiv-activity  (default)" in result.output
    assert "targets HIV_active" in result.output and "test: rocauc" in result.output
    assert "targets tpsa" in result.output and "test: mae" in result.output  # the small demonstration
    listing = json.loads(CliRunner().invoke(models, ["--json"]).output)
    assert listing[0]["name"] == "hiv-activity" and listing[0]["task"] == "binary"


def test_cli_module_imports_no_torch():
    code = "import sys, molsepnorm.cli.predict; print('torch' in sys.modules, 'rdkit' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_predict_never_imports_torch_geometric(tmp_path):
    # PyG's import alone takes seconds, more than predicting a few molecules: the predict path
    # (featurize, collate, the model) reads the graphs' fields without it
    code = ("import sys\n"
            "from molsepnorm.cli.main import main\n"
            f"sys.argv = ['molsepnorm', 'predict', {str(EXAMPLE)!r}, '-o', {str(tmp_path / 'out.csv')!r}]\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('torch_geometric' in sys.modules, 'torch' in sys.modules)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split()[-2:] == ["False", "True"], result.stderr
    assert len((tmp_path / "out.csv").read_text().splitlines()) == 1 + 19  # it did predict every record
