"""``molsepnorm analyze`` / ``molsepnorm plot`` on two tiny trained models (SepNorm, ShareNorm)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from molsepnorm.cli.analyze import analyze, plot

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "configs" / "tiny.yaml"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """Two short runs of configs/tiny.yaml on 300 NCI molecules (TPSA): norm=sep and norm=share."""
    from molsepnorm.data.nci import read_tpsa_file, tpsa_file
    from molsepnorm.train.api import train
    from molsepnorm.train.config import load_experiment_config

    tmp = tmp_path_factory.mktemp("analyze")
    table, _ = read_tpsa_file(tpsa_file())
    csv = tmp / "tpsa300.csv"
    table.iloc[:300].to_csv(csv, index=False)
    out = {}
    for norm in ("sep", "share"):
        config = load_experiment_config(TINY, {"data.dataset": str(csv), "model.norm": norm, "train.epochs": 2,
                                               "train.batch_size": 48, "train.lr": 0.002, "train.progress": False,
                                               "train.threads": 1})
        train(config, out=tmp / f"{norm}-seed0", console=False)
        out[norm] = tmp / f"{norm}-seed0"
    return out


def test_analyze_writes_json_and_pngs(runs, tmp_path):
    out = tmp_path / "analysis"
    result = CliRunner().invoke(analyze, ["--model", str(runs["sep"] / "best.pt"), "--model",
                                          str(runs["share"] / "best.pt"), "--split", "test", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "SepNorm (sep-seed0)" in result.stdout and "ShareNorm (share-seed0)" in result.stdout
    assert "uniformity" in result.stdout
    for name in ("spectrum.png", "summary.png"):
        data = (out / name).read_bytes()
        assert data.startswith(PNG_MAGIC) and 10_000 < len(data) < 500_000, name
    payload = json.loads((out / "analysis.json").read_text())
    assert payload["split"] == "test" and payload["dataset"] == "tpsa300.csv"
    assert list(payload["models"]) == ["SepNorm (sep-seed0)", "ShareNorm (share-seed0)"]
    for label, m in payload["models"].items():
        assert m["norm"] in ("sep", "share") and m["checkpoint"].endswith("best.pt")
        assert m["num_embeddings"] == 30 and m["embedding_dim"] == 32  # 10 % of 300, tiny.yaml's width
        for key in ("effective_rank", "effective_rank_raw", "uniformity", "explained_variance_top1",
                    "explained_variance_top5"):
            assert isinstance(m[key], float) and math.isfinite(m[key]), (label, key)
        assert 1.0 <= m["effective_rank"] <= 30 and m["uniformity"] <= 0
        assert len(m["singular_values"]) == 30 and all(math.isfinite(s) for s in m["singular_values"])
        assert m["singular_values"] == sorted(m["singular_values"], reverse=True)
        run = runs[m["norm"]]  # the Graphormer's own validation figures beside the blend's
        companion = json.loads((run / "results.json").read_text())["companion"]
        assert m["graphormer_val_metrics"] == pytest.approx(companion["scores"]["graphormer"]["val"])
        assert m["val_metrics"]["mae"] != m["graphormer_val_metrics"]["mae"]  # the blend, not the Graphormer


def test_analyze_labels_and_errors(runs, tmp_path):
    ok = CliRunner().invoke(analyze, ["-m", str(runs["sep"] / "best.pt"), "--label", "mine", "--split", "val",
                                      "-o", str(tmp_path / "a")])
    assert ok.exit_code == 0, ok.output
    assert list(json.loads((tmp_path / "a" / "analysis.json").read_text())["models"]) == ["mine"]
    bad = CliRunner().invoke(analyze, ["-m", str(runs["sep"] / "best.pt"), "--label", "a", "--label", "b",
                                       "-o", str(tmp_path / "b")])
    assert bad.exit_code == 2 and "--label" in bad.output
    missing = CliRunner().invoke(analyze, ["-m", str(tmp_path / "nope.pt"), "-o", str(tmp_path / "c")])
    assert missing.exit_code == 1 and "nope.pt" in missing.output


def test_plot_writes_a_png_of_both_runs(runs, tmp_path):
    out = tmp_path / "curves.png"
    result = CliRunner().invoke(plot, [str(runs["sep"]), str(runs["share"]), "--out", str(out)])
    assert result.exit_code == 0, result.output
    data = out.read_bytes()
    assert data.startswith(PNG_MAGIC) and 10_000 < len(data) < 500_000
    result = CliRunner().invoke(plot, [str(runs["sep"]), "--metric", "val_rmse", "--x", "step", "--logy",
                                       "--out", str(tmp_path / "rmse.png")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "rmse.png").read_bytes().startswith(PNG_MAGIC)
    result = CliRunner().invoke(plot, [str(tmp_path), "--out", str(tmp_path / "x.png")])
    assert result.exit_code == 1 and "not a run directory" in result.output


def test_verbs_are_registered():
    from molsepnorm.cli.main import cli

    assert {"analyze", "plot"} <= set(cli.commands)
