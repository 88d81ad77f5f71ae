"""Seeing what SepNorm does: graph-token embedding analysis, training-curve plots and
pictures of a model's predictions (parity plots, ROC and precision-recall curves).

* :mod:`~molsepnorm.analysis.embeddings` - graph-token embeddings (M, D) of a checkpoint
  on a data set split
* :mod:`~molsepnorm.analysis.spectrum` - singular-value spectrum, effective rank (Roy &
  Vetterli 2007), uniformity (Wang & Isola, ICML 2020), explained variance
* :mod:`~molsepnorm.analysis.plots` - matplotlib figures (Agg, no pyplot state)
* :mod:`~molsepnorm.analysis.api` - :func:`analyze_checkpoints`, :func:`analyze_embeddings`,
  :func:`plot_runs`: the functions behind ``molsepnorm analyze`` and ``molsepnorm plot``

The claim under test (Chen et al., "On Separate Normalization in Self-supervised
Transformers", NeurIPS 2023): normalizing the graph token separately gives it embeddings
that collapse less and are more uniform.  Heavy dependencies load on first use.
"""
from __future__ import annotations

from molsepnorm._lazy import lazy_exports
_EXPORTS = {
    "AnalysisResult": "molsepnorm.analysis.api",
    "analyze_checkpoints": "molsepnorm.analysis.api",
    "analyze_embeddings": "molsepnorm.analysis.api",
    "plot_runs": "molsepnorm.analysis.api",
    "read_run": "molsepnorm.analysis.api",
    "CheckpointEmbeddings": "molsepnorm.analysis.embeddings",
    "checkpoint_embeddings": "molsepnorm.analysis.embeddings",
    "graph_embeddings": "molsepnorm.analysis.embeddings",
    "singular_values": "molsepnorm.analysis.spectrum",
    "effective_rank": "molsepnorm.analysis.spectrum",
    "uniformity": "molsepnorm.analysis.spectrum",
    "explained_variance": "molsepnorm.analysis.spectrum",
    "components_for_variance": "molsepnorm.analysis.spectrum",
    "spectrum_stats": "molsepnorm.analysis.spectrum",
    "plot_spectra": "molsepnorm.analysis.plots",
    "plot_summary": "molsepnorm.analysis.plots",
    "plot_curves": "molsepnorm.analysis.plots",
    "plot_evaluation": "molsepnorm.analysis.plots",
    "check_figure_path": "molsepnorm.analysis.plots",
    "save_figure": "molsepnorm.analysis.plots",
}

__all__ = list(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
