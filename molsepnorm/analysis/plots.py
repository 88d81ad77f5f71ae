"""Matplotlib figures of embedding spectra, embedding figures, training curves and a
model's predictions against the labels (parity plots; ROC and precision-recall curves).

Every function returns a :class:`matplotlib.figure.Figure` built with the object-oriented
API (no pyplot state, rendered by the Agg backend, so it works headless and in threads);
:func:`save_figure` writes it.  Every axis is labelled and every figure with more than one
series has a legend.  In a notebook, display the returned figure (``display(fig)``) or
its ``savefig``.
"""
from __future__ import annotations

import math
import os
import textwrap
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence, Union

import numpy as np
from matplotlib.figure import Figure

from molsepnorm._atomic import atomic_write
from molsepnorm.inference.metrics import compute_metrics
from molsepnorm.metric_names import HIGHER_IS_BETTER

PathLike = Union[str, os.PathLike]

__all__ = ["plot_spectra", "plot_summary", "plot_curves", "plot_evaluation", "check_figure_path", "save_figure",
           "METRIC_LABELS"]

#: bins of a calibration panel, of equal counts (a small split gets fewer, of about 20 molecules, at least 2)
CALIBRATION_BINS = 10
#: above this many labelled molecules a parity plot bins its points (hexagons coloured by
#: count, log scale) instead of drawing each: 40,000 overlapping dots say less than their density
PARITY_BIN_ABOVE = 5000

# how a metrics.jsonl key reads on an axis
METRIC_LABELS = {
    "train_loss": "training loss",
    "lr": "learning rate",
    "val_mae": "validation MAE",
    "val_rmse": "validation RMSE",
    "val_r2": "validation R²",
    "val_rocauc": "validation ROC-AUC",
    "val_prauc": "validation PR-AUC",
    "val_logloss": "validation log loss",
    "val_loss": "validation loss",
    "val_blend_mae": "validation MAE, blend",
    "val_blend_rmse": "validation RMSE, blend",
    "val_blend_r2": "validation R², blend",
    "graphs_per_second": "training graphs / s",
    "epoch_seconds": "seconds per epoch",
}


def _as_array(values: Any) -> np.ndarray:
    if hasattr(values, "detach"):
        values = values.detach().cpu().numpy()
    return np.asarray(values, dtype=np.float64).ravel()


def plot_spectra(
    spectra: Mapping[str, Any],
    normalize: bool = True,
    title: Optional[str] = None,
    centered: bool = True,
    figsize: tuple[float, float] = (6.4, 4.4),
) -> Figure:
    """The sorted singular values of each model's embedding matrix, overlaid, log scale.

    Args:
        spectra: ``{label: singular values (K,), largest first}``.
        normalize: divide each spectrum by its top singular value (so models of different
            scale compare; a slower decay = less dimensional collapse).
        title: figure title (a default names what is plotted).
        centered: whether the spectra are of centered matrices (for the axis label only).

    Values at the level of float32 round-off (below ``K * eps`` of the largest) are not
    drawn: the rank of a centered matrix of N molecules is at most N - 1.
    """
    fig = Figure(figsize=figsize, layout="constrained")
    ax = fig.add_subplot()
    for label, values in spectra.items():
        s = _as_array(values)
        # zeros cannot be drawn on a log axis, nor round-off: with fewer molecules than
        # dimensions the centered matrix has rank < K, and its last values are ~1e-16 of the
        # first, which would stretch the axis over noise (numpy's matrix_rank tolerance, in
        # float32, the embeddings' precision)
        floor = s[0] * s.size * np.finfo(np.float32).eps if s.size else 0.0
        shown = np.where(s > floor, s, np.nan)
        if normalize and s.size and s[0] > 0:
            shown = shown / s[0]
        ax.plot(np.arange(1, s.size + 1), shown, marker="o", markersize=2.5, linewidth=1.4, label=label)
    ax.set_yscale("log")
    ax.set_xlabel("singular value index (largest first)")
    what = "singular value" + (" / largest" if normalize else "")
    ax.set_ylabel(f"{what} (log scale)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(title="model")
    if title is None:
        matrix = "centered " if centered else ""
        title = f"Spectrum of the {matrix}graph-token embeddings"
    ax.set_title(title)
    return fig


def plot_summary(
    metrics: Mapping[str, Mapping[str, float]],
    title: Optional[str] = None,
    figsize: tuple[float, float] = (9.6, 4.0),
) -> Figure:
    """Side-by-side bars of effective rank, uniformity and top-1 variance share per model.

    Args:
        metrics: ``{label: {"effective_rank", "uniformity", "explained_variance_top1",
            "embedding_dim" (optional)}}`` as :func:`~molsepnorm.analysis.spectrum.spectrum_stats` gives.
    """
    labels = list(metrics)
    panels = [
        ("effective_rank", "effective rank\n(higher: less collapse)"),
        ("uniformity", "uniformity\n(lower: more uniform)"),
        ("explained_variance_top1", "share of variance\nin the top direction"),
    ]
    fig = Figure(figsize=figsize, layout="constrained")
    axes = fig.subplots(1, len(panels))
    colors = [f"C{i % 10}" for i in range(len(labels))]
    x = np.arange(len(labels))
    for ax, (key, ylabel) in zip(axes, panels):
        values = [float(metrics[label].get(key, float("nan"))) for label in labels]
        bars = ax.bar(x, values, color=colors, label=labels)
        ax.bar_label(bars, fmt="%.3g", fontsize=8, padding=2)
        ax.set_xticks(x, [textwrap.fill(label, 14, break_on_hyphens=False) for label in labels], fontsize=8)
        ax.set_xlabel("model")
        if key == "effective_rank":
            dims = {int(metrics[label]["embedding_dim"]) for label in labels if "embedding_dim" in metrics[label]}
            if len(dims) == 1:  # the ceiling, named rather than drawn: bars far below it stay readable
                ylabel = f"effective rank, of D = {dims.pop()}\n(higher: less collapse)"
        ax.set_ylabel(ylabel)
        ax.margins(y=0.15)
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="outside lower center", ncol=min(len(names), 4), fontsize=8, title="model")
    fig.suptitle(title or "Graph-token embedding figures")
    return fig


def _main_metrics(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The validation metric(s) a run selected its best checkpoint on (``best_val_<m>`` keys):
    ``val_blend_<m>`` where the rows have it (train.monitor_blend), else ``val_<m>``."""
    found: list[str] = []
    for row in rows:
        for key in row:
            if not key.startswith("best_val_"):
                continue
            name = key[len("best_val_"):]
            selected = f"val_blend_{name}" if any(f"val_blend_{name}" in r for r in rows) else f"val_{name}"
            if selected not in found:
                found.append(selected)
    return found


def _metric_name(key: str) -> str:
    """``"mae"`` of ``"val_mae"`` or ``"val_blend_mae"``."""
    return key.removeprefix("val_").removeprefix("blend_")


def plot_curves(
    histories: Mapping[str, Sequence[Mapping[str, Any]]],
    metrics: Optional[Sequence[str]] = None,
    x: str = "epoch",
    logy: bool = False,
    title: Optional[str] = None,
    panel_size: tuple[float, float] = (4.2, 3.4),
) -> Figure:
    """Training and validation curves of several runs, one panel per metric, runs overlaid.

    Args:
        histories: ``{label: rows of metrics.jsonl}`` (one dict per epoch).
        metrics: keys to plot; default: ``train_loss``, the validation metric each run
            selects its best checkpoint on (``val_mae``, ``val_logloss``, ...), the
            validation ROC-AUC of a classification run, and ``lr``.  The best epoch of
            each run is marked on its own selection metric.
        x: ``epoch`` or ``step``.
        logy: log scale on the loss and metric panels (not on lr).
        title: figure title.
    """
    all_rows = [row for rows in histories.values() for row in rows]
    if metrics is None:
        selected = _main_metrics(all_rows)
        own = [f"val_{_metric_name(m)}" for m in selected if m.startswith("val_blend_")]  # the Graphormer alone
        metrics = ["train_loss", *selected, *own, *(["val_rocauc"] if "val_rocauc" not in selected else []), "lr"]
    metrics = [m for m in metrics if any(_finite(row.get(m)) for row in all_rows)]
    if not metrics:
        raise ValueError("no metric to plot: the runs have no finite values of the requested keys")
    selection = {label: _main_metrics(rows) for label, rows in histories.items()}  # each run's own
    n = len(metrics)
    cols = min(n, 3)
    rows_n = math.ceil(n / cols)
    fig = Figure(figsize=(panel_size[0] * cols, panel_size[1] * rows_n + 0.5), layout="constrained")
    axes = np.atleast_1d(fig.subplots(rows_n, cols, squeeze=False)).ravel()
    for ax, key in zip(axes, metrics):
        for i, (label, rows) in enumerate(histories.items()):
            points = [(row.get(x), row.get(key)) for row in rows if _finite(row.get(x)) and _finite(row.get(key))]
            if not points:
                continue
            xs, ys = map(np.asarray, zip(*points))
            color = f"C{i % 10}"
            ax.plot(xs, ys, marker="o", markersize=2.5, linewidth=1.4, color=color, label=label)
            if key in selection[label]:
                higher = HIGHER_IS_BETTER.get(_metric_name(key), False)
                best = int(np.nanargmax(ys) if higher else np.nanargmin(ys))
                ax.plot([xs[best]], [ys[best]], marker="*", markersize=11, color=color, linestyle="none")
        ax.set_xlabel(x)
        ax.set_ylabel(METRIC_LABELS.get(key, key))
        ax.set_title(METRIC_LABELS.get(key, key))
        if logy and key != "lr":
            ax.set_yscale("log")
        ax.grid(True, alpha=0.3)
        starred = any(key in keys for keys in selection.values())
        ax.legend(fontsize=8, title="run (★ best)" if starred else "run", title_fontsize=8)
    for ax in axes[n:]:
        ax.set_visible(False)
    fig.suptitle(title or "Training curves")
    return fig


def plot_evaluation(
    y_true: Any,
    y_pred: Any,
    task: str,
    target_names: Optional[Sequence[str]] = None,
    title: Optional[str] = None,
    panel_size: tuple[float, float] = (4.2, 4.0),
    flagged: Any = None,
    spread: Any = None,
) -> Figure:
    """A model's predictions against the labels, one panel per target (two for a binary one).

    Regression: a parity plot, predicted against true with the line y = x, MAE, RMSE and R²
    in the corner (each molecule a dot; above :data:`PARITY_BIN_ABOVE` molecules, hexagons
    coloured by count).  Binary classification: the ROC curve (with chance's diagonal) and
    the precision-recall curve (with the positive rate, chance's precision), ROC-AUC and
    PR-AUC (average precision) in their legends, and a calibration curve (the fraction of
    positives against the mean predicted probability in bins of equal counts, with the
    Brier score): does a predicted 0.3 mean 30 % active?  Molecules without a label for a target are
    left out of its panels, as are those without a finite prediction; a target with one class
    only says so in place of its curves.
    With ``flagged``, a parity plot draws the molecules with an applicability warning in a
    colour of their own, on top, so that one sees whether the warned molecules err more; with
    ``spread`` (an ensemble's standard deviation) each dot gets a bar of one spread up and
    down, so that one sees whether the members disagree where the mean errs.
    The figures come from :func:`~molsepnorm.inference.metrics.compute_metrics`, so they are
    the ones ``evaluate`` prints (but for molhiv's ROC-AUC, which OGB's Evaluator computes
    the same way).

    Args:
        y_true, y_pred: ``(M, T)`` (or ``(M,)``) labels and predictions (probabilities or
            scores for a binary task), as :func:`~molsepnorm.inference.evaluate.evaluation_frame`
            holds them.
        task: ``"regression"`` or ``"binary"``.
        target_names: a name per target, for the axes (default ``target 0``, ...).
        title: figure title.
        panel_size: inches per panel.
        flagged: ``(M,)`` booleans, True for a molecule with an applicability warning
            (``evaluation_frame``'s ``warning`` column not empty), or None.
        spread: ``(M, T)`` (or ``(M,)``) the members' standard deviation, or None; drawn
            below :data:`PARITY_BIN_ABOVE` molecules.
    """
    y = np.asarray(y_true, dtype=np.float64)
    p = np.asarray(y_pred, dtype=np.float64)
    y, p = (y.reshape(-1, 1), p.reshape(-1, 1)) if y.ndim == 1 else (y, p)
    if y.shape != p.shape:
        raise ValueError(f"y_true {y.shape} and y_pred {p.shape} differ in shape")
    if task not in ("regression", "binary"):
        raise ValueError(f"unknown task {task!r}; expected 'regression' or 'binary'")
    names = list(target_names) if target_names is not None else [f"target {t}" for t in range(y.shape[1])]
    if len(names) != y.shape[1]:
        raise ValueError(f"{len(names)} target names for {y.shape[1]} targets")
    warned = np.zeros(y.shape[0], dtype=bool) if flagged is None else np.asarray(flagged, dtype=bool).ravel()
    if warned.shape != (y.shape[0],):
        raise ValueError(f"flagged has {warned.size} values for {y.shape[0]} molecules")
    bars = None if spread is None else np.asarray(spread, dtype=np.float64)
    if bars is not None:
        bars = bars.reshape(-1, 1) if bars.ndim == 1 else bars
        if bars.shape != y.shape:
            raise ValueError(f"spread has shape {bars.shape}; the predictions {y.shape}")
    per_target = 1 if task == "regression" else 3
    n = y.shape[1] * per_target
    cols = min(n, 3)
    rows_n = math.ceil(n / cols)
    fig = Figure(figsize=(panel_size[0] * cols, panel_size[1] * rows_n + 0.5), layout="constrained")
    axes = np.atleast_1d(fig.subplots(rows_n, cols, squeeze=False)).ravel()
    for t, name in enumerate(names):
        labelled = np.isfinite(y[:, t]) & np.isfinite(p[:, t])  # a molecule without a prediction is not drawn
        yt, pt = y[labelled, t], p[labelled, t]
        if task == "regression":
            _parity_panel(fig, axes[t], yt, pt, name, warned[labelled], None if bars is None else bars[labelled, t])
        else:
            _classification_panels(*axes[3 * t:3 * t + 3], yt, pt, name)
    for ax in axes[n:]:
        ax.set_visible(False)
    default = "Predicted against true" if task == "regression" else "ROC, precision-recall and calibration"
    fig.suptitle(textwrap.fill(title or default, 44 * cols, break_on_hyphens=False))
    return fig


def _parity_panel(fig: Figure, ax: Any, y: np.ndarray, p: np.ndarray, name: str, warned: np.ndarray,
                  spread: Optional[np.ndarray]) -> None:
    ax.set_title(name)
    ax.set_xlabel(f"true {name}")
    ax.set_ylabel(f"predicted {name}")
    if y.size == 0:
        ax.text(0.5, 0.5, "no labelled molecule", ha="center", va="center", transform=ax.transAxes)
        return
    low, high = float(min(y.min(), p.min())), float(max(y.max(), p.max()))
    pad = 0.04 * (high - low) if high > low else 1.0
    low, high = low - pad, high + pad
    size = float(np.clip(3000 / y.size, 4, 24))
    if y.size > PARITY_BIN_ABOVE:
        cells = ax.hexbin(y, p, gridsize=60, bins="log", mincnt=1, cmap="viridis", extent=(low, high, low, high))
        fig.colorbar(cells, ax=ax, label="molecules (log scale)")
    else:
        if spread is not None:
            ax.errorbar(y, p, yerr=spread, fmt="none", ecolor="0.55", elinewidth=0.8, alpha=0.7,
                        label="members' spread (± 1 std)")
        ax.scatter(y[~warned], p[~warned], s=size, alpha=0.6, linewidths=0, color="C0",
                   label=f"no warning ({int((~warned).sum()):,})" if warned.any() else None)
    if warned.any():
        ax.scatter(y[warned], p[warned], s=max(size, 10.0), alpha=0.9, linewidths=0, color="C3",
                   label=f"applicability warning ({int(warned.sum()):,})")
    ax.plot([low, high], [low, high], linestyle="--", color="0.4", linewidth=1, label="y = x")
    ax.set_xlim(low, high)
    ax.set_ylim(low, high)
    ax.set_aspect("equal")
    m = compute_metrics("regression", y, p)
    ax.text(0.03, 0.97, f"MAE {m['mae']:.4g}\nRMSE {m['rmse']:.4g}\nR² {m['r2']:.3f}\nn = {y.size:,}",
            transform=ax.transAxes, va="top", ha="left", fontsize=8,
            bbox={"boxstyle": "round", "facecolor": "white", "alpha": 0.8, "edgecolor": "0.7"})
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)


def _classification_panels(roc: Any, pr: Any, calibration: Any, y: np.ndarray, s: np.ndarray, name: str) -> None:
    from sklearn.calibration import calibration_curve
    from sklearn.metrics import brier_score_loss, precision_recall_curve, roc_curve

    roc.set_title(f"{name}: ROC")
    roc.set_xlabel("false positive rate")
    roc.set_ylabel("true positive rate")
    pr.set_title(f"{name}: precision-recall")
    pr.set_xlabel("recall")
    pr.set_ylabel("precision")
    calibration.set_title(f"{name}: calibration")
    calibration.set_xlabel("predicted probability (mean of a bin)")
    calibration.set_ylabel("fraction positive in the bin")
    for ax in (roc, pr, calibration):
        ax.set_xlim(-0.02, 1.02)
        ax.set_ylim(-0.02, 1.02)
        ax.grid(True, alpha=0.3)
    positives = int((y == 1).sum())
    if positives == 0 or positives == y.size:
        for ax in (roc, pr, calibration):
            ax.text(0.5, 0.5, f"one class only ({y.size:,} molecules):\nno curve", ha="center", va="center",
                    transform=ax.transAxes)
        return
    m = compute_metrics("binary", y, s)
    fpr, tpr, _ = roc_curve(y, s)
    roc.plot(fpr, tpr, color="C0", linewidth=1.6, label=f"ROC-AUC {m['rocauc']:.3f}")
    roc.plot([0, 1], [0, 1], linestyle="--", color="0.4", linewidth=1, label="chance")
    roc.legend(loc="lower right", fontsize=8, title=f"{positives:,} of {y.size:,} positive", title_fontsize=8)
    precision, recall, _ = precision_recall_curve(y, s)
    pr.step(recall, precision, where="post", color="C0", linewidth=1.6, label=f"PR-AUC {m['prauc']:.3f}")
    rate = positives / y.size
    pr.axhline(rate, linestyle="--", color="0.4", linewidth=1, label=f"chance ({rate:.3f})")
    pr.legend(loc="upper right", fontsize=8)
    if not ((s >= 0) & (s <= 1)).all():  # scores, not probabilities: nothing to calibrate against
        calibration.text(0.5, 0.5, "scores, not probabilities:\nno calibration", ha="center", va="center",
                         transform=calibration.transAxes)
        return
    # bins of equal counts: with few positives (molhiv: 3 %) equal-width bins above 0.2 hold a handful each
    bins = int(min(CALIBRATION_BINS, max(2, y.size // 20)))
    fraction, predicted = calibration_curve(y, s, n_bins=bins, strategy="quantile")
    calibration.plot(predicted, fraction, marker="o", markersize=3.5, color="C0", linewidth=1.4,
                     label=f"{len(predicted)} bins of ~{y.size // bins:,}; Brier {brier_score_loss(y, s):.4f}")
    calibration.plot([0, 1], [0, 1], linestyle="--", color="0.4", linewidth=1, label="perfectly calibrated")
    top = float(max(predicted.max(), fraction.max()))
    if top < 0.5:  # a rare class: zoom in where the bins are
        calibration.set_xlim(-0.01, top * 1.1 + 0.01)
        calibration.set_ylim(-0.01, top * 1.1 + 0.01)
    calibration.legend(loc="upper left", fontsize=8)


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_figure_path(path: PathLike) -> Path:
    """``path`` if matplotlib can write a figure in the format its suffix names (none: PNG).

    Raises:
        ValueError: an unknown suffix, naming the formats there are; checked before the work
            whose figure it is, not after.
    """
    path = Path(path)
    kind = _figure_format(path)
    known = Figure().canvas.get_supported_filetypes()
    if kind not in known:
        raise ValueError(f"{path}: matplotlib cannot write a .{kind} figure; use one of "
                         + ", ".join(f".{k}" for k in sorted(known)))
    return path


def save_figure(fig: Figure, path: PathLike, dpi: int = 110) -> Path:
    """Write ``fig`` as PNG (or whatever the suffix says: pdf, svg, ...) and return the path.
    It is drawn to a temporary file first, then renamed: a crash never leaves half a figure."""
    path = Path(path)
    with atomic_write(path, "wb") as fh:
        fig.savefig(fh, dpi=dpi, format=_figure_format(path))
    return path


def _figure_format(path: Path) -> str:
    """The figure format a file name asks for: its suffix, PNG without one."""
    return path.suffix.lstrip(".").lower() or "png"
