"""Figures of molsepnorm.analysis.plots: training curves (which panels, where the best epoch is
marked) and a model's predictions against its labels (parity plots, ROC and precision-recall curves)."""
from __future__ import annotations

import numpy as np
import pytest
from matplotlib.collections import PolyCollection
from sklearn.metrics import average_precision_score, roc_auc_score

from molsepnorm.analysis.plots import PARITY_BIN_ABOVE, check_figure_path, plot_curves, plot_evaluation, save_figure


def _rows(own, blend=None):
    """metrics.jsonl rows of a regression run; with ``blend``, monitored on the blend (train.monitor_blend)."""
    rows = []
    for epoch, mae in enumerate(own, start=1):
        row = {"epoch": epoch, "train_loss": 1.0 / epoch, "lr": 1e-3, "val_mae": mae}
        if blend is not None:
            row["val_blend_mae"] = blend[epoch - 1]
        monitored = [r.get("val_blend_mae", r["val_mae"]) for r in rows] + [row.get("val_blend_mae", mae)]
        row["best_val_mae"] = min(monitored)
        rows.append(row)
    return rows


def _stars(ax):
    """(x, y) of the best-epoch markers drawn on a panel."""
    return [(float(line.get_xdata()[0]), float(line.get_ydata()[0])) for line in ax.get_lines()
            if line.get_marker() == "*"]


def test_a_run_monitored_on_its_blend_marks_the_blend_and_also_shows_the_graphormer_alone():
    # the Graphormer alone is best at epoch 4, the blend (which picked best.pt) at epoch 2
    fig = plot_curves({"run": _rows([0.9, 0.7, 0.6, 0.5], blend=[0.4, 0.3, 0.35, 0.32])})
    panels = {ax.get_title(): ax for ax in fig.axes if ax.get_title()}
    assert {"validation MAE, blend", "validation MAE", "training loss", "learning rate"} <= set(panels)
    assert _stars(panels["validation MAE, blend"]) == [(2.0, 0.3)]
    assert _stars(panels["validation MAE"]) == []  # not what picked the epoch


def test_a_run_monitored_on_the_graphormer_marks_its_own_best_epoch():
    fig = plot_curves({"run": _rows([0.9, 0.7, 0.6, 0.5])})
    panels = {ax.get_title(): ax for ax in fig.axes if ax.get_title()}
    assert "validation MAE, blend" not in panels
    assert _stars(panels["validation MAE"]) == [(4.0, 0.5)]


# --- predictions against labels (plot_evaluation) -------------------------------------------

def _texts(ax):
    return " ".join(t.get_text() for t in ax.texts)


def test_a_parity_plot_per_target_states_the_metrics_of_its_labelled_molecules():
    rng = np.random.default_rng(0)
    y = rng.normal(50, 20, size=(300, 2))
    p = y + rng.normal(0, [1.0, 5.0], size=(300, 2))
    y[:100, 1] = np.nan  # the second target is labelled on 200 molecules only
    fig = plot_evaluation(y, p, "regression", ["tpsa", "logp"])
    panels = {ax.get_title(): ax for ax in fig.axes if ax.get_visible()}
    assert set(panels) == {"tpsa", "logp"}
    assert panels["logp"].get_xlabel() == "true logp" and panels["logp"].get_ylabel() == "predicted logp"
    mae = np.abs(p[100:, 1] - y[100:, 1]).mean()
    assert f"MAE {mae:.4g}" in _texts(panels["logp"]) and "n = 200" in _texts(panels["logp"])
    assert "n = 300" in _texts(panels["tpsa"])
    dots = panels["logp"].collections[0].get_offsets()
    assert len(dots) == 200  # unlabelled molecules are not drawn
    low, high = panels["tpsa"].get_xlim()
    assert panels["tpsa"].get_ylim() == (low, high) and low < min(y[:, 0].min(), p[:, 0].min())


def test_a_large_parity_plot_bins_its_points():
    rng = np.random.default_rng(1)
    y = rng.normal(size=PARITY_BIN_ABOVE + 1)
    fig = plot_evaluation(y, y + rng.normal(0, 0.1, size=y.size), "regression")
    ax = fig.axes[0]
    assert isinstance(ax.collections[0], PolyCollection)  # hexagons, with a colour bar beside them
    assert ax.collections[0].get_array().sum() == y.size
    assert any(a.get_label() == "<colorbar>" for a in fig.axes)


def test_classification_draws_roc_and_precision_recall_curves_with_their_areas():
    rng = np.random.default_rng(2)
    y = (rng.random((400, 2)) < 0.2).astype(float)
    s = np.clip(0.3 * y + rng.random((400, 2)) * 0.7, 0, 1)
    y[:, 1] = 0.0  # one class only: no curve
    fig = plot_evaluation(y, s, "binary", ["active", "toxic"])
    panels = {ax.get_title(): ax for ax in fig.axes}
    assert set(panels) == {f"{t}: {kind}" for t in ("active", "toxic") for kind in ("ROC", "precision-recall",
                                                                                     "calibration")}
    roc_labels = [line.get_label() for line in panels["active: ROC"].get_lines()]
    assert f"ROC-AUC {roc_auc_score(y[:, 0], s[:, 0]):.3f}" in roc_labels
    pr_labels = [line.get_label() for line in panels["active: precision-recall"].get_lines()]
    assert f"PR-AUC {average_precision_score(y[:, 0], s[:, 0]):.3f}" in pr_labels
    assert f"chance ({y[:, 0].mean():.3f})" in pr_labels
    assert "one class only" in _texts(panels["toxic: ROC"]) and not panels["toxic: ROC"].get_lines()
    # calibration: the fraction of positives against the mean probability, in bins of equal counts
    from sklearn.calibration import calibration_curve

    fraction, predicted = calibration_curve(y[:, 0], s[:, 0], n_bins=10, strategy="quantile")
    curve = panels["active: calibration"].get_lines()[0]
    assert curve.get_xdata() == pytest.approx(predicted) and curve.get_ydata() == pytest.approx(fraction)
    assert "Brier" in curve.get_label()
    scores = plot_evaluation(y[:, :1], 4 * s[:, :1] - 2, "binary", ["active"])  # logits, not probabilities
    calibration = next(ax for ax in scores.axes if ax.get_title() == "active: calibration")
    assert "no calibration" in _texts(calibration) and not calibration.get_lines()


def test_plot_evaluation_refuses_mismatched_input():
    with pytest.raises(ValueError, match="differ in shape"):
        plot_evaluation(np.zeros((3, 1)), np.zeros((4, 1)), "regression")
    with pytest.raises(ValueError, match="2 target names for 1"):
        plot_evaluation(np.zeros(3), np.zeros(3), "regression", ["a", "b"])
    with pytest.raises(ValueError, match="unknown task"):
        plot_evaluation(np.zeros(3), np.zeros(3), "multiclass")


def test_figure_paths_are_checked_before_the_work_and_written_whole(tmp_path):
    with pytest.raises(ValueError, match=r"cannot write a \.txt figure.*\.png"):
        check_figure_path(tmp_path / "parity.txt")
    assert check_figure_path(tmp_path / "parity.svg") == tmp_path / "parity.svg"
    fig = plot_evaluation(np.arange(5.0), np.arange(5.0), "regression")
    path = save_figure(fig, tmp_path / "sub" / "parity.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in path.parent.iterdir()) == ["parity.png"]  # no temporary file left


def test_molecules_without_a_prediction_are_left_out_of_the_picture():
    y = np.arange(10.0)
    p = y + 0.5
    p[3] = np.nan  # a model that diverged on one molecule
    fig = plot_evaluation(y, p, "regression", ["tpsa"], flagged=np.arange(10) % 4 == 0)
    ax = fig.axes[0]
    assert "n = 9" in _texts(ax) and "MAE 0.5" in _texts(ax)
    drawn = {c.get_label(): len(c.get_offsets()) for c in ax.collections}
    assert drawn == {"no warning (6)": 6, "applicability warning (3)": 3}  # 0, 4 and 8 warned; 3 not drawn
    with pytest.raises(ValueError, match="flagged has 3 values for 10 molecules"):
        plot_evaluation(y, p, "regression", flagged=[True, False, True])


def test_an_ensembles_spread_is_drawn_as_a_bar_on_each_molecule():
    from matplotlib.collections import LineCollection

    y = np.arange(6.0)
    spread = np.array([0.1, 0.2, 0.3, 0.4, 0.5, np.nan])
    p = y.copy()
    p[5] = np.nan  # not predicted: no dot and no bar
    fig = plot_evaluation(y, p, "regression", ["logS"], spread=spread)
    bars = [c for c in fig.axes[0].collections if isinstance(c, LineCollection)]
    assert len(bars) == 1 and len(bars[0].get_segments()) == 5
    heights = sorted(float(seg[1, 1] - seg[0, 1]) for seg in bars[0].get_segments())
    assert heights == pytest.approx([0.2, 0.4, 0.6, 0.8, 1.0])  # one spread up and one down
    with pytest.raises(ValueError, match="spread has shape"):
        plot_evaluation(y, p, "regression", spread=np.zeros(5))


def test_a_spectrum_leaves_out_round_off_below_the_rank():
    """20 molecules in 32 dimensions: the centered matrix has rank 19, and its last singular
    values are round-off (~1e-16 of the first), not drawn; the others are, normalized."""
    from molsepnorm.analysis.plots import plot_spectra
    from molsepnorm.analysis.spectrum import singular_values

    z = np.random.default_rng(0).normal(size=(20, 32)).astype(np.float32)
    s = singular_values(z).numpy()
    assert s.size == 20 and s[-1] / s[0] < 1e-6 < s[-2] / s[0]
    (line,) = plot_spectra({"model": s}).axes[0].get_lines()
    y = line.get_ydata()
    assert np.isnan(y[-1]) and np.isfinite(y[:-1]).all() and y[0] == 1.0
    assert np.allclose(y[:-1], s[:-1] / s[0])
