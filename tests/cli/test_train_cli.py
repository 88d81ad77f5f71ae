"""``molsepnorm train`` / ``molsepnorm evaluate`` on the command line."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from molsepnorm.cli.evaluate import evaluate
from molsepnorm.cli.train import train

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "configs" / "tiny.yaml"


def write_tpsa_csv(path: Path, n: int = 300) -> Path:
    """The first ``n`` molecules of RDKit's ``NCI/first_5k.tpsa.csv`` as ``smiles,tpsa``."""
    from molsepnorm.data.nci import read_tpsa_file, tpsa_file

    table, _ = read_tpsa_file(tpsa_file())
    table.iloc[:n].to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One short CLI training run shared by the tests of this module."""
    tmp = tmp_path_factory.mktemp("cli")
    csv = write_tpsa_csv(tmp / "tpsa300.csv")
    run = tmp / "run"
    result = CliRunner().invoke(train, ["--config", str(TINY), "--dataset", str(csv), "--norm", "share",
                                        "--epochs", "2", "--batch-size", "48", "--lr", "0.002", "--seed", "5",
                                        "--threads", "1", "--patience", "off", "--monitor", "rmse", "--average-best", "2",
                                        "--companion", "fingerprint", "--companion-weight", "0.25", "--no-progress", "--out", str(run)])
    assert result.exit_code == 0, result.output
    return run, result


def test_train_prints_a_summary_table_and_applies_flags(trained):
    run, result = trained
    lines = result.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:4] == ["split", "mae", "rmse", "r2"])
    assert lines[header + 1].split()[0] == "val" and lines[header + 2].split()[0] == "test"
    assert f"run directory {run}" in result.stdout
    config = json.loads(json.dumps(__import__("yaml").safe_load((run / "config.yaml").read_text())))
    assert config["model"]["norm"] == "share"
    assert (config["train"]["epochs"], config["train"]["batch_size"], config["train"]["lr"],
            config["train"]["seed"], config["train"]["patience"]) == (2, 48, 0.002, 5, "off")
    assert (config["train"]["monitor"], config["train"]["average_best"]) == ("rmse", 2)
    assert (config["train"]["companion"], config["train"]["companion_weight"]) == ("fingerprint", 0.25)
    assert config["model"]["companion_blend"] == "value"  # a regression companion averages values
    assert "best.pt blends the Graphormer with a group-contribution model on radius 1 (weight 0.25); validation rmse: " \
        "Graphormer" in result.stdout  # a weight given keeps the model's features; --monitor rmse is the figure
    assert "best_val_rmse" in json.loads((run / "metrics.jsonl").read_text().splitlines()[0])
    assert "(best.pt averages epochs 1, 2)" in result.stdout
    assert f"each test molecule's prediction: {run / 'test_predictions.csv'}" in result.stdout
    assert f"molsepnorm evaluate -m {run / 'best.pt'} --plot test.png" in result.stdout
    assert "no early stopping" in result.stderr
    assert "epoch 1" in result.stderr  # the log goes to the terminal too


def test_evaluate_prints_test_mae_and_writes_json(trained, tmp_path):
    run, _ = trained
    out = tmp_path / "test.json"
    result = CliRunner().invoke(evaluate, ["--model", str(run / "best.pt"), "--split", "test", "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "mae" in result.stdout and "test" in result.stdout
    report = json.loads(out.read_text())
    expected = json.loads((run / "results.json").read_text())["test"]
    assert report["metrics"]["mae"] == pytest.approx(expected["mae"])
    assert f"{expected['mae']:.4f}" in result.stdout
    only_json = CliRunner().invoke(evaluate, ["--model", str(run / "best.pt"), "--split", "val", "--json", "-"])
    assert json.loads(only_json.stdout)["split"] == "val"
    import torch

    before = torch.get_num_threads()
    try:  # --threads, as train, predict and analyze take it; the same figures
        one = CliRunner().invoke(evaluate, ["--model", str(run / "best.pt"), "--split", "test", "--threads", "1",
                                            "--json", "-"])
        assert one.exit_code == 0, one.output
        assert json.loads(one.stdout)["metrics"]["mae"] == pytest.approx(expected["mae"])
    finally:
        torch.set_num_threads(before)


def test_evaluate_scores_an_ensemble_on_the_mean_prediction_as_predict_makes_it(trained):
    from sklearn.metrics import mean_absolute_error

    from molsepnorm.checkpoint import Checkpoint, checkpoint_data
    from molsepnorm.predict import Predictor

    run, _ = trained
    members = [str(run / "best.pt"), str(run / "last.pt")]  # two different weights of one run's data
    result = CliRunner().invoke(evaluate, ["-m", members[0], "-m", members[1], "--split", "test", "--json", "-"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["members"] == members and report["checkpoint"] == ", ".join(members)
    _, splits = checkpoint_data(Checkpoint.load(members[0]), None, "test")
    test = splits.split_indices["test"]
    smiles = [splits.smiles[int(i)] for i in test]
    frame = Predictor.load(members).predict(smiles)
    truth = torch.cat([g.y for g in splits.test]).view(-1).numpy()
    assert frame["tpsa_std"].min() > 0  # the two members differ
    assert report["metrics"]["mae"] == pytest.approx(mean_absolute_error(truth, frame["tpsa"]), rel=1e-5)
    single = json.loads(CliRunner().invoke(evaluate, ["-m", members[0], "--split", "test", "--json", "-"]).stdout)
    assert single["metrics"]["mae"] != pytest.approx(report["metrics"]["mae"], rel=1e-6)
    # each member's own figures come along, in order; the printed table shows them under the mean
    assert single["member_metrics"] == [single["metrics"]]
    assert report["member_metrics"][0]["mae"] == pytest.approx(single["metrics"]["mae"], rel=1e-9)
    assert report["member_metrics"][1]["mae"] != pytest.approx(single["metrics"]["mae"], rel=1e-6)
    printed = CliRunner().invoke(evaluate, ["-m", members[0], "-m", members[1], "--split", "test"])
    assert printed.exit_code == 0, printed.output
    assert "test (ensemble)" in printed.stdout and f"member 2: {members[1]}" in printed.stdout
    assert f"{report['member_metrics'][1]['mae']:.4f}" in printed.stdout


def test_training_writes_each_test_molecules_prediction(trained):
    import pandas as pd

    from molsepnorm.checkpoint import Checkpoint, checkpoint_data
    from molsepnorm.predict import Predictor

    run, _ = trained
    table = pd.read_csv(run / "test_predictions.csv")
    _, splits = checkpoint_data(Checkpoint.load(run / "best.pt"), None, "test")
    test = [int(i) for i in splits.split_indices["test"]]
    assert list(table.columns) == ["index", "smiles", "tpsa_true", "tpsa_pred", "tpsa_error", "warning"]
    assert table["index"].tolist() == test and table["smiles"].tolist() == [splits.smiles[i] for i in test]
    warned = Predictor.load(run / "best.pt").applicability(table["smiles"].tolist())
    assert [None if pd.isna(w) else w for w in table["warning"]] == warned  # as predict warns (an empty cell: none)
    truth = [float(g.y) for g in splits.test]
    assert table["tpsa_true"].to_numpy() == pytest.approx(truth, rel=1e-6)
    assert table["tpsa_error"].to_numpy() == pytest.approx(table["tpsa_pred"] - table["tpsa_true"], abs=1e-4)
    expected = json.loads((run / "results.json").read_text())["test"]["mae"]
    assert table["tpsa_error"].abs().mean() == pytest.approx(expected, rel=1e-5)


def test_evaluate_writes_each_molecules_prediction_and_a_picture(trained, tmp_path, monkeypatch):
    import pandas as pd

    from molsepnorm.analysis import plots
    from molsepnorm.predict import Predictor

    drawn = []  # what the picture was given: the real function draws it
    real = plots.plot_evaluation
    monkeypatch.setattr(plots, "plot_evaluation", lambda *a, **k: drawn.append(k) or real(*a, **k))
    run, _ = trained
    members = [str(run / "best.pt"), str(run / "last.pt")]
    csv, png = tmp_path / "val.csv", tmp_path / "val.png"
    result = CliRunner().invoke(evaluate, ["-m", members[0], "-m", members[1], "--split", "val",
                                           "--predictions", str(csv), "--plot", str(png), "--json", str(tmp_path / "m.json")])
    assert result.exit_code == 0, result.output
    assert f"wrote {csv}" in result.stdout and f"wrote {png}" in result.stdout
    report = json.loads((tmp_path / "m.json").read_text())
    assert "predictions" not in report  # the table goes to its own file, not into the JSON
    table = pd.read_csv(csv)
    assert list(table.columns) == ["index", "smiles", "tpsa_true", "tpsa_pred", "tpsa_std", "tpsa_error", "warning"]
    assert len(table) == report["num_molecules"]
    assert table["tpsa_error"].abs().mean() == pytest.approx(report["metrics"]["mae"], rel=1e-5)
    frame = Predictor.load(members).predict(table["smiles"].tolist())  # what predict says of the same molecules
    assert table["tpsa_pred"].to_numpy() == pytest.approx(frame["tpsa"].to_numpy(), rel=1e-5)
    assert table["tpsa_std"].to_numpy() == pytest.approx(frame["tpsa_std"].to_numpy(), rel=1e-4, abs=1e-5)
    assert table["warning"].fillna("").tolist() == frame["warning"].fillna("").tolist()
    # the molecules with a warning and those without are scored apart, in the JSON and on the terminal
    warned = table["warning"].notna().to_numpy()
    assert report["num_flagged"] == warned.sum() > 0
    by = report["metrics_by_warning"]
    assert by["warning"]["mae"] == pytest.approx(table["tpsa_error"].abs()[warned].mean(), rel=1e-5)
    assert by["no warning"]["mae"] == pytest.approx(table["tpsa_error"].abs()[~warned].mean(), rel=1e-5)
    assert f"with an applicability warning ({warned.sum()})" in result.stdout
    # the picture marks the same molecules (pandas reads a missing warning as NaN, true as a bool)
    assert drawn[0]["flagged"].tolist() == warned.tolist()
    assert drawn[0]["title"] == f"an ensemble of 2 models on {report['dataset']} val"
    assert f"{by['warning']['mae']:.4f}" in result.stdout
    # a regression ensemble: does its members' spread rank its errors?
    from scipy.stats import spearmanr

    expected = spearmanr(table["tpsa_std"], table["tpsa_error"].abs()).statistic
    assert report["spread"]["spearman"] == pytest.approx(expected, abs=1e-3)
    assert "the members' spread against the error (Spearman; 1: a larger <target>_std" in result.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    one = CliRunner().invoke(evaluate, ["-m", members[0], "--split", "val", "--plot", str(tmp_path / "one.png")])
    assert one.exit_code == 0, one.output
    assert drawn[-1]["title"] == f"{members[0]} on {report['dataset']} val"  # one model: its name
    everything = tmp_path / "all.csv"
    result = CliRunner().invoke(evaluate, ["-m", members[0], "--split", "all", "--predictions", str(everything)])
    assert result.exit_code == 0, result.output
    table = pd.read_csv(everything)
    split = json.loads((run / "split.json").read_text())["indices"]
    assert table["split"].tolist() == ["train"] * len(split["train"]) + ["val"] * len(split["val"]) + \
        ["test"] * len(split["test"])
    assert table["index"].tolist() == split["train"] + split["val"] + split["test"]
    source = pd.read_csv(run.parent / "tpsa300.csv")  # each row's SMILES and label are its file row's
    assert table["smiles"].tolist() == source["smiles"].iloc[table["index"]].tolist()
    assert table["tpsa_true"].to_numpy() == pytest.approx(source["tpsa"].iloc[table["index"]].to_numpy(), rel=1e-6)
    assert "tpsa_std" not in table.columns
    unchecked = CliRunner().invoke(evaluate, ["-m", members[0], "--split", "val", "--no-applicability", "--json", "-",
                                              "--predictions", str(everything)])
    assert unchecked.exit_code == 0, unchecked.output
    assert "num_flagged" not in json.loads(unchecked.stdout) and "warning" not in pd.read_csv(everything).columns


def test_evaluate_refuses_a_figure_format_before_scoring(trained, tmp_path, monkeypatch):
    from molsepnorm.inference import evaluate as library

    run, _ = trained
    monkeypatch.setattr(library, "evaluate_checkpoint", lambda *a, **k: pytest.fail("scored before the check"))
    result = CliRunner().invoke(evaluate, ["-m", str(run / "best.pt"), "--plot", str(tmp_path / "parity.txt")])
    assert result.exit_code == 2 and "cannot write a .txt figure" in result.output
    assert not list(tmp_path.iterdir())


def test_evaluate_on_a_table_naming_the_target_otherwise(trained, tmp_path):
    """A model scored on a CSV whose label column has another name: the files use the model's name."""
    import pandas as pd

    run, _ = trained
    table = pd.read_csv(run.parent / "tpsa300.csv").rename(columns={"tpsa": "y"}).iloc[:40]
    table.to_csv(tmp_path / "other.csv", index=False)
    out, png = tmp_path / "pred.csv", tmp_path / "parity.png"
    result = CliRunner().invoke(evaluate, ["-m", str(run / "best.pt"), "--dataset", str(tmp_path / "other.csv"),
                                           "--target-columns", "y", "--split", "all", "--predictions", str(out),
                                           "--plot", str(png)])
    assert result.exit_code == 0, result.output
    written = pd.read_csv(out)
    assert {"tpsa_true", "tpsa_pred"} <= set(written.columns) and len(written) == 40
    assert sorted(written["tpsa_true"]) == pytest.approx(sorted(table["y"]), rel=1e-6)
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_evaluate_warns_when_an_ensembles_members_were_trained_on_different_data(trained, tmp_path):
    import dataclasses
    import warnings

    from molsepnorm.checkpoint import Checkpoint
    from molsepnorm.inference import evaluate_checkpoint

    run, _ = trained
    other = Checkpoint.load(run / "last.pt")
    other.data = dataclasses.replace(  # another split of the same file
        other.data, options={**other.data.options, "seed": int(other.data.options.get("seed", 0)) + 1})
    other.save(tmp_path / "other-split.pt")
    with pytest.warns(UserWarning, match="trained on different data"):
        evaluate_checkpoint([run / "best.pt", tmp_path / "other-split.pt"], split="test")
    # a file is the same data by where training read it, not by the name training was given
    assert Path(other.data.source).is_absolute()
    renamed = Checkpoint.load(run / "last.pt")  # trained on the same file, named from its folder
    renamed.data = dataclasses.replace(renamed.data, dataset=Path(renamed.data.dataset).name)
    renamed.save(tmp_path / "renamed.pt")
    moved = Checkpoint.load(run / "last.pt")  # the same name, another file (trained in another folder)
    moved.data = dataclasses.replace(moved.data, source=str(tmp_path / Path(moved.data.dataset).name))
    moved.save(tmp_path / "moved.pt")
    with pytest.warns(UserWarning, match="trained on different data"):
        evaluate_checkpoint([run / "best.pt", tmp_path / "moved.pt"], split="test")
    older = Checkpoint.load(run / "last.pt")  # an older checkpoint recorded a relative source: compared by name
    older.data = dataclasses.replace(older.data, source=Path(older.data.source).name)
    older.save(tmp_path / "older.pt")
    with warnings.catch_warnings():  # the same data: no warning
        warnings.simplefilter("error", UserWarning)
        evaluate_checkpoint([run / "best.pt", run / "last.pt"], split="test")
        evaluate_checkpoint([run / "best.pt", tmp_path / "renamed.pt"], split="test")
        evaluate_checkpoint([run / "best.pt", tmp_path / "older.pt"], split="test")


def test_evaluate_refuses_missing_and_hostile_checkpoints(tmp_path):
    result = CliRunner().invoke(evaluate, ["--model", str(tmp_path / "nope.pt")])
    assert result.exit_code == 1 and "nope.pt" in result.output

    class Boom:
        def __reduce__(self):
            return (print, ("owned",))

    evil = tmp_path / "evil.pt"
    torch.save({"format": "molsepnorm-checkpoint", "format_version": 1, "x": Boom()}, evil)
    result = CliRunner().invoke(evaluate, ["--model", str(evil)])
    assert result.exit_code == 1 and "refused" in result.output and "owned" not in result.output


def test_train_errors_are_one_clear_line(tmp_path):
    runner = CliRunner()
    result = runner.invoke(train, ["--dataset", "zinc-subsett", "--out", str(tmp_path / "r")])
    assert result.exit_code == 1 and "zinc-subset" in result.output and "Traceback" not in result.output
    result = runner.invoke(train, ["--out", str(tmp_path / "r2")])
    assert result.exit_code == 1 and "--dataset" in result.output
    result = runner.invoke(train, ["--config", str(tmp_path / "missing.yaml"), "--dataset", "nci-tpsa"])
    assert result.exit_code == 1 and "missing.yaml" in result.output
    result = runner.invoke(train, ["--dataset", "nci-tpsa", "--patience", "soon", "--out", str(tmp_path / "r3")])
    assert result.exit_code == 2 and "'soon' is not a positive integer, 'auto' or 'off'" in result.output
    result = runner.invoke(train, ["--dataset", "nci-tpsa", "--monitor", "rocauc", "--out", str(tmp_path / "r4")])
    assert result.exit_code == 1 and "train.monitor 'rocauc' is not a regression metric" in result.output
    molecules = tmp_path / "molecules.smi"  # unlabelled: analyze reads it, training cannot
    molecules.write_text("CCO ethanol\nc1ccccc1O phenol\nCCN ethylamine\nC1CC broken\n")  # said before its bad row
    result = runner.invoke(train, ["--dataset", str(molecules), "--out", str(tmp_path / "r5")])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "molecules.smi is a SMILES file, without targets, and training fits targets" in result.output
    assert "a .smi file holds SMILES and names only: give the targets in a CSV or SD file" in result.output
    silicon = tmp_path / "silicon.csv"  # Si is not a ZINC atom type: the ZINC-vocabulary encoder cannot read it
    silicon.write_text("smiles,y\n" + "".join(f"{s},{i}\n" for i, s in enumerate(["CCO", "C[Si](C)(C)C"] * 6)))
    result = runner.invoke(train, ["--config", str(TINY), "--dataset", str(silicon), "--init", "moses-encoder-zinc",
                                   "--no-progress", "--out", str(tmp_path / "r7")])
    assert result.exit_code == 1 and "row 3: 'C[Si](C)(C)C': atom 1 (Si) is not in the zinc vocabulary" in result.output
    assert "The zinc vocabulary is that of --init moses-encoder-zinc" in result.output
    assert "--init molhiv-encoder" in result.output
    five = write_tpsa_csv(tmp_path / "five.csv", n=5)  # 80 / 10 / 10 % of 5 molecules: no validation molecule
    result = runner.invoke(train, ["--config", str(TINY), "--dataset", str(five), "--init", "none", "--no-progress",
                                   "--out", str(tmp_path / "r6")])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert f"{five}: the val split is empty (train 5, val 0, test 0 of 5 molecules" in result.output
    assert "--split-by column:NAME" in result.output and not (tmp_path / "r6" / "last.pt").exists()


def test_nproc_runs_torchrun_with_the_same_flags(monkeypatch):
    import molsepnorm.cli.runs as mod  # train's and pretrain's --nproc

    seen = {}
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.setattr(mod.subprocess, "call", lambda cmd: seen.setdefault("cmd", cmd) and 0)
    result = CliRunner().invoke(train, ["--nproc", "2", "--dataset", "nci-tpsa", "--norm", "share",
                                        "--lr", "0.001", "--no-progress"])
    assert result.exit_code == 0, result.output
    cmd = seen["cmd"]
    assert cmd[1:5] == ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    assert cmd[5:7] == ["-m", "molsepnorm.cli.train"]
    rest = cmd[7:]
    assert "--nproc" not in rest and "--no-progress" in rest
    assert rest[rest.index("--dataset") + 1] == "nci-tpsa" and rest[rest.index("--lr") + 1] == "0.001"
    assert rest[rest.index("--norm") + 1] == "share"


def test_resume_refuses_flags_that_would_change_the_run(tmp_path):
    from molsepnorm.cli.pretrain import pretrain

    result = CliRunner().invoke(train, ["--resume", str(tmp_path), "--lr", "0.1", "--split", "scaffold",
                                        "--device", "cpu"])
    assert result.exit_code == 2
    assert "--lr, --split cannot be changed (only --device, --data-root, --dataset (the run's file, moved) and " \
           "--progress may be given)" in result.output
    result = CliRunner().invoke(pretrain, ["--resume", str(tmp_path), "--config", "x.yaml", "--no-progress"])
    assert result.exit_code == 2 and "--config cannot be changed" in result.output


def test_cli_modules_do_not_import_torch():
    # cli.main imports every verb; chem.sdf (read by predict) once pulled torch in through chem/__init__
    code = "import sys, molsepnorm.cli.main; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_an_invalid_row_stops_training_or_is_left_out_and_recorded_with_on_invalid_skip(tmp_path, monkeypatch):
    """The file is named relative to the folder training ran in; evaluate, run from another
    folder, still finds it (through the checkpoint's absolute source) with the same split."""
    csv = write_tpsa_csv(tmp_path / "bad.csv", n=120)
    lines = csv.read_text().splitlines()
    lines[9] = "C1CC," + lines[9].split(",", 1)[1]  # row 10 of the file (the header is row 1)
    csv.write_text("\n".join(lines) + "\n")
    monkeypatch.chdir(tmp_path)
    args = ["--config", str(TINY), "--dataset", "bad.csv", "--epochs", "1", "--threads", "1", "--no-progress"]
    result = CliRunner().invoke(train, [*args, "--out", str(tmp_path / "stopped")])
    assert result.exit_code != 0
    assert "row 10: 'C1CC'" in result.output and "--on-invalid skip" in result.output
    result = CliRunner().invoke(train, [*args, "--on-invalid", "skip", "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    split = json.loads((tmp_path / "run" / "split.json").read_text())
    assert sum(split["sizes"].values()) == 119 and split["info"]["on_invalid"] == "skip"
    assert len(split["info"]["skipped"]) == 1 and split["info"]["skipped"][0].startswith("row 10: 'C1CC': ")
    assert "1 row(s) left out of the data set" in (tmp_path / "run" / "train.log").read_text()  # the run's record
    used = {i for part in split["indices"].values() for i in part}
    assert 8 not in used and used == set(range(120)) - {8}  # 0-based data row 8 is file row 10

    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    write_tpsa_csv(tmp_path / "elsewhere" / "bad.csv", n=30)  # a namesake, not its data
    model = ["-m", str(tmp_path / "run" / "best.pt"), "--json", "-"]
    test_mae = json.loads((tmp_path / "run" / "results.json").read_text())["test"]["mae"]

    def score(*extra: str) -> dict:
        scored = CliRunner().invoke(evaluate, [*model, *extra])
        assert scored.exit_code == 0, scored.output
        return json.loads(scored.stdout)

    for report in (score(), score("--dataset", str(csv))):  # its own file: by default, or named by its path
        assert report["num_molecules"] == split["sizes"]["test"] and report["dataset"] == "bad.csv"
        assert report["metrics"]["mae"] == pytest.approx(test_mae)
    assert score("--dataset", "bad.csv")["num_molecules"] == 30  # the namesake, named: the user's file, all of it
    assert score("--dataset", "bad.csv", "--split", "test")["num_molecules"] == 3  # its test split when asked
    assert score("--dataset", "bad.csv", "--split-by", "random")["num_molecules"] == 3  # or when split
    # a split option given: the file is still read as training read it (its bad row skipped)
    assert score("--split-by", "random")["metrics"]["mae"] == pytest.approx(test_mae)
    rows = csv.read_text().splitlines()  # a column added since training is not a target of the model
    csv.write_text("\n".join([rows[0] + ",logp", *(row + ",1.5" for row in rows[1:])]) + "\n")
    with pytest.warns(UserWarning, match=r"bad\.csv is not the data it was trained on: its content has changed since "
                                         r"training \(sha256 .*rows were added, removed or moved"):
        assert score()["metrics"]["mae"] == pytest.approx(test_mae)  # but its rows and targets are training's
    added = csv.read_text().splitlines()  # rows added at the top: the seeded split is another one
    csv.write_text("\n".join([added[0], *added[20:40], *added[1:]]) + "\n")
    sizes = " / ".join(str(split["sizes"][part]) for part in ("train", "val", "test"))
    with pytest.warns(UserWarning, match=rf"its split differs from training's \(train / val / test {sizes} then, .*"
                                         r"may include molecules the model was trained on"):
        assert score()["num_molecules"] != split["sizes"]["test"]
    csv.rename(tmp_path / "moved.csv")
    with pytest.warns(UserWarning, match=r"the file it was trained on, .*bad\.csv, no longer exists; reading "):
        assert score()["num_molecules"] == 3


@pytest.mark.parametrize("counts, weights, monitor, expected", [
    ("raw", {"y": 0.0}, "mae", "best.pt is the Graphormer alone: a group-contribution model did not lower validation "
                               "mae by 2% (Graphormer 0.5000, group-contribution model 0.7000)"),
    ("raw", {"y": 0.75}, "mae", "best.pt blends the Graphormer with a group-contribution model (weight 0.75); "
                                "validation mae: Graphormer 0.5000, group-contribution model 0.7000, blend 0.4000"),
    ("log", {"y": 0.5}, "mae", "best.pt blends the Graphormer with a fingerprint model (weight 0.5)"),
    ("raw", {"y": 1.0}, "mae", "best.pt blends the Graphormer with a group-contribution model on radius 0 + atom "
                               "properties (weight 1)"),
    # --monitor rmse chose the weights: the summary gives rmse, not the data set's metric
    ("raw", {"y": 0.75}, "rmse", "validation rmse: Graphormer 0.6000, group-contribution model 0.9000, blend 0.5000"),
])
def test_the_summary_names_the_companion_and_says_when_it_was_left_out(capsys, counts, weights, monitor, expected):
    from types import SimpleNamespace

    from molsepnorm.cli.train import _print_summary
    from molsepnorm.train.companion import companion_kind

    scores = {"graphormer": {"val": {"mae": 0.5, "rmse": 0.6}}, "fingerprint": {"val": {"mae": 0.7, "rmse": 0.9}}}
    result = SimpleNamespace(val={"mae": 0.4, "rmse": 0.5}, test={"mae": 0.45}, best_epoch=3, averaged_epochs=[],
                             epochs=5, steps=50, stopped="epochs", seconds=2.0, run_dir=None, monitor=monitor,
                             companion={"counts": counts, "kind": companion_kind(counts), "weights": weights,
                                        "scores": scores,
                                        **({"radius": 0, "properties": True} if weights == {"y": 1.0} else {})})
    _print_summary(result)
    assert expected in capsys.readouterr().out


def test_a_validation_split_of_one_class_is_named_before_training_and_no_best_pt_is_claimed(tmp_path):
    """ROC-AUC needs both classes: a binary run whose validation molecules are all negative
    says so when it starts, and its summary does not speak of a best.pt it could not write."""
    smiles = [line.split(",")[0] for line in write_tpsa_csv(tmp_path / "t.csv", n=24).read_text().splitlines()[1:]]
    parts = ["train"] * 16 + ["val"] * 4 + ["test"] * 4
    labels = [i % 2 for i in range(16)] + [0, 0, 0, 0] + [0, 1, 0, 1]
    csv = tmp_path / "active.csv"
    csv.write_text("smiles,active,split\n" + "".join(f"{s},{y},{p}\n" for s, y, p in zip(smiles, labels, parts)))
    run = tmp_path / "run"
    result = CliRunner().invoke(train, ["--config", str(TINY), "--dataset", str(csv), "--split-by", "column:split",
                                        "--init", "none", "--epochs", "2", "--threads", "1", "--no-progress",
                                        "--out", str(run)])
    assert result.exit_code == 0, result.output
    log = (run / "train.log").read_text()
    first_epoch = log.index("epoch 1 ")
    warned = log.index("the validation split holds one class of active (4 molecules, all 0)")
    assert warned < first_epoch and "the run would end without best.pt" in log
    assert not (run / "best.pt").exists()
    assert "no best.pt: no epoch gave a finite validation score" in result.output
    assert "best.pt blends" not in result.output and "best.pt blends" not in log
    assert "the last weights (no best.pt) blend them" in log


def test_a_training_file_moved_since_is_found_by_its_content(tmp_path):
    """The file training read is gone from where it was: evaluate names it and the fix; the
    same file given from its new place is the model's own (its content), split as training did."""
    csv = write_tpsa_csv(tmp_path / "tpsa.csv", n=60)
    run = tmp_path / "run"
    result = CliRunner().invoke(train, ["--config", str(TINY), "--dataset", str(csv), "--init", "none", "--epochs",
                                        "1", "--threads", "1", "--no-progress", "--out", str(run)])
    assert result.exit_code == 0, result.output
    (tmp_path / "moved").mkdir()
    csv.rename(tmp_path / "moved" / "renamed.csv")
    gone = CliRunner().invoke(evaluate, ["-m", str(run / "best.pt"), "--json", "-"])
    assert gone.exit_code == 1
    assert f"the file it was trained on, {csv}, where training read it, is gone" in gone.output
    assert "--dataset PATH" in gone.output and "a file of the same content is read and split as training did" \
        in gone.output
    found = CliRunner().invoke(evaluate, ["-m", str(run / "best.pt"), "--dataset",
                                          str(tmp_path / "moved" / "renamed.csv"), "--json", "-"])
    assert found.exit_code == 0, found.output
    report, results = json.loads(found.stdout), json.loads((run / "results.json").read_text())
    assert report["split"] == "test" and report["num_molecules"] == 6
    assert report["metrics"]["mae"] == pytest.approx(results["test"]["mae"])


def test_train_fraction_seed_draws_another_subset_which_the_checkpoint_reads_again(tmp_path):
    """--train-fraction-seed chooses the labelled molecules, independently of --seed; split.json
    records them and the checkpoint's own training split (evaluate, add_companion) is them."""
    from molsepnorm.checkpoint import Checkpoint, checkpoint_data
    from molsepnorm.data.registry import load_dataset

    csv = write_tpsa_csv(tmp_path / "tpsa.csv", n=100)
    run = tmp_path / "run"
    result = CliRunner().invoke(train, ["--config", str(TINY), "--dataset", str(csv), "--init", "none", "--epochs",
                                        "1", "--threads", "1", "--no-progress", "--train-fraction", "0.5",
                                        "--train-fraction-seed", "3", "--out", str(run)])
    assert result.exit_code == 0, result.output
    full = load_dataset(str(csv))
    drawn = full.with_train_fraction(0.5, seed=3).split_indices["train"].tolist()
    assert drawn != full.with_train_fraction(0.5).split_indices["train"].tolist()  # not seed 0's
    split = json.loads((run / "split.json").read_text())
    assert split["info"]["train_fraction"] == {"fraction": 0.5, "seed": 3, "kept": 40, "of": 80}
    assert split["indices"]["train"] == drawn
    best = Checkpoint.load(run / "best.pt")
    assert best.config["data"]["train_fraction_seed"] == 3
    assert checkpoint_data(best, split="train")[1].split_indices["train"].tolist() == drawn
    del best.config["data"]["train_fraction_seed"]  # a checkpoint written before the seed could be chosen: seed 0
    assert checkpoint_data(best, split="train")[1].split_indices["train"].tolist() == \
        full.with_train_fraction(0.5).split_indices["train"].tolist()
