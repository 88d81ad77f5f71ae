"""The library entry points behind ``molsepnorm analyze`` and ``molsepnorm plot``.

>>> from molsepnorm.analysis import analyze_checkpoints, plot_runs
>>> result = analyze_checkpoints(["runs/sep/best.pt", "runs/share/best.pt"], split="test")
>>> result.metrics["sep"]["effective_rank"], result.metrics["sep"]["uniformity"]
>>> result.figures["spectrum"]          # a matplotlib Figure
>>> result.save("analysis/")            # analysis.json, spectrum.png, summary.png
>>> fig = plot_runs(["runs/sep", "runs/share"])

Chen et al. (NeurIPS 2023) argue that SepNorm gives the graph token embeddings that
collapse less (singular values decaying more slowly, a higher effective rank: Roy &
Vetterli 2007) and are more uniform on the sphere (Wang & Isola, ICML 2020); these
functions measure both on any checkpoint.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence, Union

import numpy as np

from molsepnorm._json import jsonable

PathLike = Union[str, os.PathLike]

__all__ = ["AnalysisResult", "analyze_checkpoints", "analyze_embeddings", "plot_runs", "read_run",
           "DEFINITIONS", "NORM_NAMES"]

NORM_NAMES = {"sep": "SepNorm", "share": "ShareNorm"}

# what each number of the JSON means (written into it)
DEFINITIONS = {
    "embeddings": "graph-token ([CLS]) embedding after the final norm, which the prediction head reads (with the "
                  "atom states' sum under readout cls+sum); "
                  "eval mode (BatchNorm on running statistics), one row per molecule of the split: (M, D)",
    "singular_values": "singular values of the centered embedding matrix Z - mean(Z, 0), largest first",
    "singular_values_raw": "singular values of the embedding matrix Z itself, largest first",
    "effective_rank": "exp(-sum_k p_k log p_k), p_k = s_k / sum_j s_j, s = centered singular values "
                      "(Roy & Vetterli, EUSIPCO 2007); between 1 and min(M, D)",
    "effective_rank_raw": "the same on the raw (uncentered) singular values",
    "uniformity": "log mean_{i<j} exp(-2 ||x_i - x_j||^2) over all distinct pairs of L2-normalized "
                  "embeddings x_i = z_i / ||z_i|| (Wang & Isola, ICML 2020); lower is more uniform, 0 = all "
                  "embeddings point the same way",
    "explained_variance_topk": "sum_{i<=k} s_i^2 / sum_i s_i^2 (centered): the share of the variance in the "
                               "top-k principal directions",
    "components_90": "fewest principal directions holding 90% of the variance",
}


@dataclass
class AnalysisResult:
    """Figures and numbers of an embedding analysis of one or more models.

    Attributes:
        metrics: ``{label: {"effective_rank", "effective_rank_raw", "uniformity",
            "explained_variance_top1", "explained_variance_top5", "components_90",
            "num_embeddings", "embedding_dim", "uniformity_points", ...}}`` (floats, ints).
        spectra: ``{label: centered singular values (K,)}``, largest first.
        spectra_raw: ``{label: raw singular values (K,)}``.
        figures: ``{"spectrum": Figure, "summary": Figure}`` (matplotlib).
        models: ``{label: {"checkpoint", "norm", "epoch", "step", "val_metrics",
            "graphormer_val_metrics"}}`` (empty entries for :func:`analyze_embeddings`):
            ``val_metrics`` are what the model predicts, a blend with its companion where it
            has one; ``graphormer_val_metrics`` the Graphormer's alone, whose graph tokens
            are analyzed (the same without a companion). A companion given the whole weight
            makes two models' ``val_metrics`` equal whatever their norms.
        info: ``{"dataset", "split"}`` and the analysis settings.
    """

    metrics: dict[str, dict[str, Any]]
    spectra: dict[str, np.ndarray]
    spectra_raw: dict[str, np.ndarray]
    figures: dict[str, Any] = field(default_factory=dict)
    models: dict[str, dict[str, Any]] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Everything but the figures, as plain JSON types (non-finite numbers become None)."""
        models = {}
        for label, numbers in self.metrics.items():
            models[label] = {**self.models.get(label, {}), **numbers,
                             "singular_values": self.spectra[label].tolist(),
                             "singular_values_raw": self.spectra_raw[label].tolist()}
        return jsonable({**self.info, "definitions": DEFINITIONS, "models": models})

    def table(self) -> str:
        """A fixed-width text table, one row per model."""
        header = ["model", "M", "D", "eff. rank", "eff. rank raw", "uniformity", "top-1 var", "top-5 var",
                  "dims 90%"]
        rows = [header]
        for label, m in self.metrics.items():
            rows.append([label, str(m["num_embeddings"]), str(m["embedding_dim"]), f"{m['effective_rank']:.2f}",
                         f"{m['effective_rank_raw']:.2f}", f"{m['uniformity']:.4f}",
                         f"{m.get('explained_variance_top1', float('nan')):.3f}",
                         f"{m.get('explained_variance_top5', float('nan')):.3f}", str(m.get("components_90", "-"))])
        widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)

    def save(self, out_dir: PathLike, dpi: int = 110) -> dict[str, Path]:
        """Write ``analysis.json`` and one PNG per figure into ``out_dir``; returns the paths."""
        from molsepnorm._atomic import atomic_write
        from molsepnorm.analysis.plots import save_figure

        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        written = {"json": out / "analysis.json"}
        for name, fig in self.figures.items():
            written[name] = save_figure(fig, out / f"{name}.png", dpi=dpi)
        payload = self.to_dict()
        payload["files"] = {k: p.name for k, p in written.items()}
        with atomic_write(written["json"]) as fh:
            fh.write(json.dumps(payload, indent=2) + "\n")
        return written


def analyze_embeddings(
    embeddings: Mapping[str, Any],
    title: Optional[str] = None,
    uniformity_max_points: Optional[int] = 10_000,
    t: float = 2.0,
    what: str = "graph-token",
) -> AnalysisResult:
    """Analyze embedding matrices you already have: ``{label: (M, D) tensor or array}``.

    Args:
        embeddings: one matrix per model (M may differ between models).
        title: suffix of the figure titles (e.g. ``"zinc-subset test"``).
        uniformity_max_points: above this many rows, uniformity uses a seeded random
            subset of that size (the pairwise cost grows as M^2); None: always exact.
        t: uniformity temperature.
        what: what the embeddings are, for the figure titles (``"[CLS]"`` for an image model).
    """
    from molsepnorm.analysis.plots import plot_spectra, plot_summary
    from molsepnorm.analysis.spectrum import spectrum_stats

    if not embeddings:
        raise ValueError("nothing to analyze: give at least one embedding matrix")
    metrics: dict[str, dict[str, Any]] = {}
    spectra: dict[str, np.ndarray] = {}
    spectra_raw: dict[str, np.ndarray] = {}
    for label, z in embeddings.items():
        stats = spectrum_stats(z, top_k=(1, 5), t=t, max_points=uniformity_max_points)
        spectra[label] = stats.pop("singular_values").numpy()
        spectra_raw[label] = stats.pop("singular_values_raw").numpy()
        metrics[label] = stats
    suffix = f" ({title})" if title else ""
    figures = {
        "spectrum": plot_spectra(spectra, normalize=True, title=f"Spectrum of the centered {what} embeddings{suffix}"),
        "summary": plot_summary(metrics, title=f"{what[:1].upper()}{what[1:]} embedding figures{suffix}"),
    }
    info = {"uniformity_t": t, "uniformity_max_points": uniformity_max_points}
    return AnalysisResult(metrics=metrics, spectra=spectra, spectra_raw=spectra_raw, figures=figures, info=info)


def analyze_checkpoints(
    paths: Union[PathLike, Sequence[PathLike]],
    dataset: Optional[str] = None,
    split: str = "test",
    labels: Optional[Sequence[str]] = None,
    data_root: Optional[PathLike] = None,
    options: Optional[dict[str, Any]] = None,
    batch_size: int = 256,
    device: str = "cpu",
    uniformity_max_points: Optional[int] = 10_000,
    progress: Optional[bool] = None,
) -> AnalysisResult:
    """Spectrum, effective rank and uniformity of the graph-token embeddings of checkpoints.

    Args:
        paths: checkpoint files (``best.pt`` / ``last.pt``) or bundled model names (one
            alone, or any iterable of them); a bundled ensemble is analyzed member by member
            (one label each).
        dataset: data set name or file (CSV, SDF, or a ``.smi`` of unlabelled molecules;
            default: each model's training data set, with its split).
        split: ``train``, ``val``, ``test`` or ``all``.
        labels: one name per checkpoint (default: ``"<SepNorm|ShareNorm> <run directory>"``).
        data_root: folder of the raw data sets.
        options: :func:`~molsepnorm.data.load_dataset` options (a CSV's columns, split, ...).
        batch_size: molecules per batch.
        device: ``cpu``, ``cuda`` or ``auto``.
        uniformity_max_points: see :func:`analyze_embeddings`.
        progress: a bar of the molecules embedded, per model (None: only on a terminal).

    Returns:
        An :class:`AnalysisResult`: ``.metrics``, ``.spectra``, ``.figures``; ``.save(dir)``.
    """
    from molsepnorm.analysis.embeddings import checkpoint_embeddings
    from molsepnorm.checkpoint import resolve_models

    paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)  # one model, or a generator's
    if not paths:
        raise ValueError("give at least one checkpoint")
    if labels is not None and len(labels) != len(paths):
        raise ValueError(f"{len(labels)} label(s) for {len(paths)} checkpoint(s)")
    members = [resolve_models(spec) for spec in paths]  # a bundled ensemble: each member is a model
    if labels is not None:
        labels = [label if len(files) == 1 else f"{label} ({file.stem})"
                  for label, files in zip(labels, members) for file in files]
    paths = [Path(spec) if len(files) == 1 else file  # one model: as given (a bundled name stays a name)
             for spec, files in zip(paths, members) for file in files]
    loaded: dict[Any, Any] = {}
    computed = [checkpoint_embeddings(p, dataset=dataset, split=split, data_root=data_root, options=options,
                                      batch_size=batch_size, device=device, loaded=loaded, progress=progress)
                for p in paths]
    names = list(labels) if labels is not None else default_labels(paths, [c.norm for c in computed])
    datasets = sorted({c.dataset for c in computed})
    where = f"{', '.join(datasets)} {split}"
    result = analyze_embeddings({name: c.embeddings for name, c in zip(names, computed)}, title=where,
                                uniformity_max_points=uniformity_max_points)
    for name, c in zip(names, computed):
        metrics = c.info.get("metrics") or {}
        alone = (((metrics.get("companion") or {}).get("scores") or {}).get("graphormer") or {}).get("val")
        result.models[name] = {"checkpoint": c.checkpoint, "norm": c.norm, "epoch": c.info.get("epoch"),
                               "step": c.info.get("step"), "val_metrics": metrics.get("val", {}),
                               "graphormer_val_metrics": alone if alone is not None else metrics.get("val", {})}
    result.info = {"dataset": datasets[0] if len(datasets) == 1 else datasets, "split": split,
                   **result.info}
    return result


def default_labels(paths: Sequence[Path], norms: Sequence[str]) -> list[str]:
    """``"SepNorm (sep-seed0)"``: the norm and the run directory (or file stem); unique."""
    labels = []
    for path, norm in zip(paths, norms):
        where = path.parent.name if path.stem in ("best", "last", "encoder") and path.parent.name else path.stem
        labels.append(f"{NORM_NAMES.get(norm, norm)} ({where})")
    return _unique(labels)


def _unique(labels: Sequence[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(label if seen[label] == 1 else f"{label} #{seen[label]}")
    return out


def read_run(run_dir: PathLike) -> list[dict[str, Any]]:
    """The epoch rows of a run directory's ``metrics.jsonl`` (a run still going is fine).

    Raises:
        FileNotFoundError: the directory has no ``metrics.jsonl`` (or ``metrics.csv``).
    """
    from molsepnorm.checkpoint.run_dir import RunDir

    rd = RunDir(run_dir)
    if rd.metrics_jsonl.is_file():
        return rd.read_metrics()
    if rd.metrics_csv.is_file():
        import csv

        with open(rd.metrics_csv, newline="", encoding="utf-8") as fh:
            return [{k: _number(v) for k, v in row.items()} for row in csv.DictReader(fh)]
    raise FileNotFoundError(f"{rd.path}: not a run directory (no metrics.jsonl or metrics.csv)")


def plot_runs(
    run_dirs: Sequence[PathLike],
    metrics: Optional[Sequence[str]] = None,
    labels: Optional[Sequence[str]] = None,
    x: str = "epoch",
    logy: bool = False,
    title: Optional[str] = None,
) -> Any:
    """Training and validation curves of run directories, overlaid: a matplotlib Figure.

    Args:
        run_dirs: run directories (each with ``metrics.jsonl``).
        metrics: ``metrics.jsonl`` keys, one panel each (default: ``train_loss``, the
            validation metric of model selection, ``lr``).
        labels: one name per run (default: the run directory names, made unique).
        x: ``epoch`` or ``step``.
        logy: log scale on the loss / metric panels.
        title: figure title.
    """
    from molsepnorm.analysis.plots import plot_curves

    dirs = [Path(d) for d in run_dirs]
    if not dirs:
        raise ValueError("give at least one run directory")
    if labels is not None and len(labels) != len(dirs):
        raise ValueError(f"{len(labels)} label(s) for {len(dirs)} run(s)")
    names = list(labels) if labels is not None else _run_labels(dirs)
    histories = {name: read_run(d) for name, d in zip(names, dirs)}
    empty = [str(d) for d, name in zip(dirs, names) if not histories[name]]
    if len(empty) == len(dirs):
        raise ValueError(f"no epoch finished yet in {', '.join(empty)}")
    return plot_curves(histories, metrics=metrics, x=x, logy=logy, title=title)


def _run_labels(dirs: Sequence[Path]) -> list[str]:
    names = [d.resolve().name for d in dirs]
    if len(set(names)) < len(names):  # e.g. two "seed0": add the parent folder
        names = [f"{d.resolve().parent.name}/{d.resolve().name}" for d in dirs]
    return _unique(names)


def _number(text: Optional[str]) -> Any:
    if text is None or text == "":
        return None
    try:
        value = float(text)
    except ValueError:
        return text
    return int(value) if value.is_integer() and "." not in text and "e" not in text.lower() else value
