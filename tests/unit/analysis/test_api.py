"""analyze_embeddings / plot_runs: numbers, readable figures (labelled axes, legend), files."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from matplotlib.figure import Figure

from molsepnorm.analysis.api import analyze_embeddings, plot_runs, read_run

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def assert_readable(fig: Figure, legend: bool = True) -> None:
    """Every visible axis has both labels and a title or the figure has one; a legend somewhere."""
    assert isinstance(fig, Figure)
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert axes
    for ax in axes:
        assert ax.get_xlabel().strip() and ax.get_ylabel().strip()
    assert any(ax.get_title() for ax in axes) or fig.get_suptitle()
    if legend:
        legends = [ax.get_legend() for ax in axes if ax.get_legend() is not None] + list(fig.legends)
        assert legends and all(len(lg.get_texts()) >= 1 for lg in legends)


@pytest.fixture(scope="module")
def result():
    g = torch.Generator().manual_seed(0)
    spread = torch.randn(300, 12, generator=g)
    collapsed = torch.randn(300, 12, generator=g) * torch.logspace(0, -3, 12)
    return analyze_embeddings({"spread": spread, "collapsed": collapsed}, title="toy")


def test_metrics_tell_spread_from_collapsed(result):
    spread, collapsed = result.metrics["spread"], result.metrics["collapsed"]
    assert set(spread) >= {"effective_rank", "effective_rank_raw", "uniformity", "explained_variance_top1",
                           "explained_variance_top5", "components_90", "num_embeddings", "embedding_dim"}
    assert spread["effective_rank"] > 10 > collapsed["effective_rank"]
    assert spread["uniformity"] < collapsed["uniformity"] < 0
    assert spread["explained_variance_top1"] < collapsed["explained_variance_top1"]
    assert result.spectra["spread"].shape == (12,)
    assert "spread" in result.table() and "uniformity" in result.table()


def test_figures_are_readable(result):
    assert set(result.figures) == {"spectrum", "summary"}
    spectrum = result.figures["spectrum"]
    assert_readable(spectrum)
    ax = spectrum.axes[0]
    assert ax.get_yscale() == "log"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["spread", "collapsed"]
    top = [line.get_ydata()[0] for line in ax.get_lines()]
    assert top == pytest.approx([1.0, 1.0])  # normalized by the top singular value
    assert_readable(result.figures["summary"])


def test_save_writes_json_and_pngs(result, tmp_path):
    written = result.save(tmp_path / "out")
    assert set(written) == {"json", "spectrum", "summary"}
    for name in ("spectrum", "summary"):
        data = written[name].read_bytes()
        assert data.startswith(PNG_MAGIC) and 10_000 < len(data) < 500_000
    payload = json.loads(written["json"].read_text())
    assert set(payload["models"]) == {"spread", "collapsed"}
    assert "Roy & Vetterli" in payload["definitions"]["effective_rank"]
    assert "Wang & Isola" in payload["definitions"]["uniformity"]
    m = payload["models"]["spread"]
    assert len(m["singular_values"]) == 12 and math.isfinite(m["uniformity"])
    assert payload["files"]["spectrum"] == "spectrum.png"


def write_run(path: Path, maes: list[float], metric: str = "mae", torn: bool = False) -> Path:
    path.mkdir(parents=True)
    rows = []
    best = math.inf
    for epoch, mae in enumerate(maes, start=1):
        best = min(best, mae)
        rows.append({"epoch": epoch, "step": 10 * epoch, "lr": 1e-3 / epoch, "train_loss": 2.0 / epoch,
                     f"val_{metric}": mae, f"best_val_{metric}": best, "val_rmse": mae * 1.3})
    text = "".join(json.dumps(r) + "\n" for r in rows)
    (path / "metrics.jsonl").write_text(text + ('{"epoch": 9, "tra' if torn else ""))
    return path


def test_plot_runs_overlays_runs_and_marks_the_best_epoch(tmp_path):
    a = write_run(tmp_path / "a" / "seed0", [1.0, 0.5, 0.6])
    b = write_run(tmp_path / "b" / "seed0", [1.2, 0.9, 0.7, 0.65], torn=True)  # a run still writing
    fig = plot_runs([a, b])
    assert_readable(fig)
    titles = [ax.get_title() for ax in fig.axes if ax.get_visible()]
    assert titles == ["training loss", "validation MAE", "learning rate"]
    val = fig.axes[1]
    legend = [t.get_text() for t in val.get_legend().get_texts()]
    assert legend == ["a/seed0", "b/seed0"]  # same directory names: the parent is added
    lines = val.get_lines()
    assert list(lines[0].get_ydata()) == [1.0, 0.5, 0.6]
    assert list(lines[1].get_xdata()) == [2]  # the star on the best epoch of run a
    assert len(read_run(b)) == 4


def test_plot_runs_options_and_errors(tmp_path):
    a = write_run(tmp_path / "sep", [0.4, 0.3])
    fig = plot_runs([a], metrics=["val_rmse"], labels=["SepNorm"], x="step", logy=True, title="t")
    assert_readable(fig)
    assert fig.axes[0].get_xlabel() == "step" and fig.axes[0].get_yscale() == "log"
    assert fig.get_suptitle() == "t"
    with pytest.raises(ValueError, match="label"):
        plot_runs([a], labels=["x", "y"])
    with pytest.raises(ValueError, match="no metric"):
        plot_runs([a], metrics=["nope"])
    with pytest.raises(FileNotFoundError, match="not a run directory"):
        plot_runs([tmp_path])
    csv_only = tmp_path / "csv"
    csv_only.mkdir()
    (csv_only / "metrics.csv").write_text("epoch,step,train_loss,val_mae,best_val_mae\n1,5,1.5,0.9,0.9\n2,10,1.0,0.8,0.8\n")
    rows = read_run(csv_only)
    assert rows[1] == {"epoch": 2, "step": 10, "train_loss": 1.0, "val_mae": 0.8, "best_val_mae": 0.8}
    assert_readable(plot_runs([csv_only]))


def test_default_labels_name_the_run_of_a_best_last_or_encoder_checkpoint():
    from molsepnorm.analysis.api import default_labels

    paths = [Path("runs/pre-sep/encoder.pt"), Path("runs/pre-share/encoder.pt"), Path("runs/ft/best.pt"),
             Path("models/mine.pt")]
    assert default_labels(paths, ["sep", "share", "sep", "sep"]) == [
        "SepNorm (pre-sep)", "ShareNorm (pre-share)", "SepNorm (ft)", "SepNorm (mine)"]
