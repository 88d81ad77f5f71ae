"""``evaluate``: the metrics of a trained model on a split of a data set, and the table of
its per-molecule predictions (:func:`evaluation_frame`) that ``evaluate --predictions`` and a
training run's ``test_predictions.csv`` write."""
from __future__ import annotations

import os
import warnings
from typing import TYPE_CHECKING, Any, Optional, Sequence, Union

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

    from molsepnorm.data.registry import DatasetSplits

PathLike = Union[str, os.PathLike]
#: how a predicted value is written in a CSV: 7 significant digits, float32's precision
VALUE_FORMAT = ".7g"


def evaluate_checkpoint(
    model: Union[PathLike, Sequence[PathLike]],
    dataset: Optional[str] = None,
    split: Optional[str] = None,
    data_root: Optional[PathLike] = None,
    options: Optional[dict[str, Any]] = None,
    batch_size: int = 128,
    device: str = "cpu",
    predictions: bool = False,
    applicability: bool = True,
    progress: Optional[bool] = None,
) -> dict[str, Any]:
    """Metrics of a checkpoint's model on a split of a data set.

    Args:
        model: a ``best.pt`` / ``last.pt`` file or a bundled model name; several (or a
            bundled ensemble): an ensemble, scored on the mean of its members' predictions
            (probabilities for a binary task), as ``predict`` averages them.
        dataset: data set name or CSV (default: the one the (first) model was trained on,
            with the same loading options, hence the same split).
        split: ``train``, ``val``, ``test``, or ``all`` (the three together); None:
            ``all`` of a file other than the model's own when ``options`` give it no split
            method (an external set is scored whole), else ``test``
            (:func:`~molsepnorm.checkpoint.data.default_split`).
        data_root: folder of the raw data sets.
        options: ``load_dataset`` options (default: the training run's, for its own data set).
        batch_size: molecules per batch.
        device: ``cpu``, ``cuda`` or ``auto``.
        predictions: also return each molecule's labels and predictions as a DataFrame
            (key ``"predictions"``; :func:`evaluation_frame`).
        applicability: check every molecule against the models' applicability domains, as
            ``predict`` does (its ``warning`` column), and score the molecules with a warning
            and those without apart: does the warning point at worse predictions?
        progress: a bar of the molecules scored (None: only on a terminal).

    Returns:
        ``{"checkpoint", "members", "dataset", "split", "num_molecules", "task", "target_names",
        "metrics", "member_metrics"}``; for a regression ensemble ``"spread"``, how its members'
        spread ranks its errors (:func:`~molsepnorm.inference.metrics.spread_ranks_errors`);
        with ``applicability`` ``"num_flagged"`` (molecules
        with a warning) and, when some are, ``"metrics_by_warning"`` (``{"no warning": metrics,
        "warning": metrics}``), and with ``predictions`` ``"predictions"``; ``members``: the
        checkpoint file of every model scored; ``member_metrics``: each member's own metrics, in
        that order (one model: ``[metrics]``).

    Raises:
        MolsepnormError: ensemble members that predict different things (as ``predict``), or
            a pretrained encoder (no trained head: nothing to score).
    """
    from molsepnorm.checkpoint import (Checkpoint, check_ensemble, checkpoint_data, default_split, distinct_domains,
                                       resolve_models)
    from molsepnorm.inference.device import resolve_device
    from molsepnorm.inference.metrics import compute_metrics, spread_ranks_errors
    from molsepnorm.inference.runner import Runner, check_predicts, run

    specs = [model] if isinstance(model, (str, os.PathLike)) else list(model)
    if not specs:
        raise ValueError("evaluate_checkpoint needs at least one model")
    paths = resolve_models(specs)
    checkpoints = [Checkpoint.load(path) for path in paths]
    for path, loaded in zip(paths, checkpoints):  # a pretrained encoder has nothing to score
        check_predicts(loaded.task.type, str(path))
    check_ensemble(checkpoints)
    checkpoint = checkpoints[0]
    if dataset is None and not all(c.data.same_data(checkpoint.data) for c in checkpoints[1:]):
        warnings.warn(f"the ensemble's members were trained on different data; scoring it on {checkpoint.name}'s "
                      f"({checkpoint.data.dataset}); give dataset= to choose", UserWarning, stacklevel=2)
    if split is None:
        split = default_split(checkpoint, dataset, options)
    data, splits = checkpoint_data(checkpoint, dataset, split, data_root, options)
    runners = [Runner.from_checkpoint(c, resolve_device(device)) for c in checkpoints]
    out = run(runners, data, batch_size=batch_size, progress=progress, description=f"scoring {split}")
    task = checkpoint.task
    mean, std = out.mean(), (out.std() if len(runners) > 1 else None)  # the ensemble's prediction and spread
    metrics = compute_metrics(task.type, out.targets, mean, task.target_names, dataset=splits.name)
    member_metrics = [metrics] if len(runners) == 1 else [
        compute_metrics(task.type, out.targets, values, task.target_names, dataset=splits.name) for values in out.values]
    report = {"checkpoint": ", ".join(str(s) for s in specs), "members": [str(p) for p in paths],
              "dataset": splits.name, "split": split, "num_molecules": len(data), "task": task.type,
              "target_names": list(task.target_names), "metrics": metrics, "member_metrics": member_metrics}
    if std is not None and task.type == "regression":  # does the members' spread rank the errors?
        report["spread"] = spread_ranks_errors(out.targets, mean, std, task.target_names)
    flags = None
    if applicability:
        domains = distinct_domains(checkpoints, stacklevel=2)
        if domains:
            flags = applicability_warnings(domains, data, splits.smiles_of(split), splits.vocab)
            flagged = np.array([bool(w) for w in flags], dtype=bool)
            report["num_flagged"] = int(flagged.sum())
            if flagged.any():
                report["metrics_by_warning"] = {
                    name: compute_metrics(task.type, out.targets[rows], mean[rows], task.target_names,
                                          dataset=splits.name)
                    for name, rows in (("no warning", ~flagged), ("warning", flagged))}
    if predictions:
        report["predictions"] = evaluation_frame(splits, split, out.targets, mean, task.type, std=std,
                                                 warning_column=flags, target_names=task.target_names)
    return report


def applicability_warnings(domains: Sequence[Any], graphs: Sequence[Any], smiles: Optional[Sequence[str]],
                           vocab: str) -> list[Optional[str]]:
    """Why each molecule lies outside the applicability domains (None: it does not), as
    ``predict``'s ``warning`` column says it.  The molecule compared by similarity is
    :func:`~molsepnorm.checkpoint.domain.graph_molecule`'s: its SMILES (``smiles``, one per
    graph, where the graph keeps none of its own: OGB's molhiv), else rebuilt (ZINC)."""
    from molsepnorm.checkpoint.domain import domain_warning, graph_molecule

    out = []
    for i, graph in enumerate(graphs):
        try:
            mol = graph_molecule(graph, vocab, None if smiles is None else smiles[i])
        except Exception:  # noqa: BLE001 - domain_warning then says why the check could not be made
            mol = None
        out.append(domain_warning(domains, graph, mol) or None)
    return out


def evaluation_frame(
    splits: "DatasetSplits",
    split: str,
    y_true: np.ndarray,
    y_pred: np.ndarray,
    task: str,
    std: Optional[np.ndarray] = None,
    warning_column: Optional[Sequence[Optional[str]]] = None,
    target_names: Optional[Sequence[str]] = None,
) -> "pd.DataFrame":
    """Each molecule of a split with its labels and predictions, one row per molecule in the
    order the split holds them (the order of :func:`~molsepnorm.inference.runner.run`'s rows).

    Columns: ``split`` (only for ``split="all"``: train, val and test in that order),
    ``index`` (the molecule's index in the data set: :attr:`DatasetSplits.split_indices`),
    ``id`` and ``smiles`` where the data set keeps them, then per target ``t``: ``t_true``
    (NaN where unlabelled), ``t_pred`` (a probability for a binary task), ``t_std`` (an
    ensemble's spread, with ``std``) and, for regression, ``t_error`` (``t_pred - t_true``);
    last ``warning`` (with ``warning_column``: :func:`applicability_warnings`, None when none,
    as in ``predict``'s table; an empty cell in the CSV).

    Args:
        splits: the data set the rows come from.
        split: ``train``, ``val``, ``test`` or ``all``.
        y_true, y_pred: ``(M, T)`` labels and predictions in the data set's units.
        task: ``"regression"`` or ``"binary"``.
        std: ``(M, T)`` the members' standard deviation of an ensemble, or None.
        warning_column: one applicability warning per molecule, or None.
        target_names: the targets' names in the columns (default: the data set's; a model
            scored on a data set whose columns it names otherwise passes its own).

    Raises:
        ValueError: arrays whose shape is not ``(molecules of the split, targets)``.
    """
    import pandas as pd

    index = splits.indices(split)
    names = list(target_names) if target_names is not None else list(splits.target_names)
    shape = (len(index), len(names))
    for name, values in (("y_true", y_true), ("y_pred", y_pred), ("std", std)):
        if values is not None and np.shape(values) != shape:
            raise ValueError(f"{name} has shape {np.shape(values)}; the {split} split of {splits.name} needs {shape}")
    if warning_column is not None and len(warning_column) != len(index):
        raise ValueError(f"{len(warning_column)} warnings for the {len(index)} molecules of the {split} split")
    columns: dict[str, Any] = {}
    if split == "all":
        columns["split"] = [part for part in splits.parts(split) for _ in range(len(splits.split_indices[part]))]
    columns["index"] = index
    if splits.ids is not None:
        columns["id"] = [splits.ids[i] for i in index]
    if splits.smiles is not None:
        columns["smiles"] = splits.smiles_of(split)
    for t, name in enumerate(names):
        columns[f"{name}_true"] = np.asarray(y_true, dtype=np.float64)[:, t]
        columns[f"{name}_pred"] = np.asarray(y_pred, dtype=np.float64)[:, t]
        if std is not None:
            columns[f"{name}_std"] = np.asarray(std, dtype=np.float64)[:, t]
        if task == "regression":
            columns[f"{name}_error"] = columns[f"{name}_pred"] - columns[f"{name}_true"]
    if warning_column is not None:
        columns["warning"] = list(warning_column)
    return pd.DataFrame(columns)


def flagged_rows(frame: "pd.DataFrame") -> Optional[np.ndarray]:
    """Which rows of an :func:`evaluation_frame` carry an applicability warning, ``(M,)`` bool;
    None without a ``warning`` column.  (A missing warning may read as None or NaN: pandas
    turns None into NaN in a column of text, and NaN is true as a bool.)"""
    if "warning" not in frame:
        return None
    return frame["warning"].map(lambda w: isinstance(w, str) and w != "").to_numpy(dtype=bool)


def write_evaluation_csv(frame: "pd.DataFrame", path: PathLike, fixed_temporary: bool = False) -> None:
    """Write an :func:`evaluation_frame` as CSV, atomically (``fixed_temporary``: in a run
    directory, :class:`molsepnorm._atomic.AtomicFile`): numbers as ``predict`` writes them
    (:data:`VALUE_FORMAT`), empty cells for NaN."""
    from molsepnorm._atomic import atomic_write

    with atomic_write(path, fixed_temporary=fixed_temporary, newline="") as fh:
        frame.to_csv(fh, index=False, float_format=f"%{VALUE_FORMAT}")
