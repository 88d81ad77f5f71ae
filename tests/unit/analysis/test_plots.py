"""Training curves (molsepnorm.analysis.plots.plot_curves): which panels, and where the best epoch is marked."""
from __future__ import annotations

from molsepnorm.analysis.plots import plot_curves


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
