"""``evaluate``: the metrics of a trained model on a split of a data set."""
from __future__ import annotations

import os
import warnings
from typing import Any, Optional, Sequence, Union

PathLike = Union[str, os.PathLike]


def evaluate_checkpoint(
    model: Union[PathLike, Sequence[PathLike]],
    dataset: Optional[str] = None,
    split: str = "test",
    data_root: Optional[PathLike] = None,
    options: Optional[dict[str, Any]] = None,
    batch_size: int = 128,
    device: str = "cpu",
) -> dict[str, Any]:
    """Metrics of a checkpoint's model on a split of a data set.

    Args:
        model: a ``best.pt`` / ``last.pt`` file or a bundled model name; several (or a
            bundled ensemble): an ensemble, scored on the mean of its members' predictions
            (probabilities for a binary task), as ``predict`` averages them.
        dataset: data set name or CSV (default: the one the (first) model was trained on,
            with the same loading options, hence the same split).
        split: ``train``, ``val``, ``test``, or ``all`` (the three together).
        data_root: folder of the raw data sets.
        options: ``load_dataset`` options (default: the training run's, for its own data set).
        batch_size: molecules per batch.
        device: ``cpu``, ``cuda`` or ``auto``.

    Returns:
        ``{"checkpoint", "members", "dataset", "split", "num_molecules", "task", "target_names",
        "metrics", "member_metrics"}``; ``members``: the checkpoint file of every model scored;
        ``member_metrics``: each member's own metrics, in that order (one model: ``[metrics]``).

    Raises:
        MolsepnormError: ensemble members that predict different things (as ``predict``).
    """
    from molsepnorm.checkpoint import Checkpoint, check_ensemble, checkpoint_data, resolve_models
    from molsepnorm.inference.device import resolve_device
    from molsepnorm.inference.metrics import compute_metrics
    from molsepnorm.inference.runner import Runner, run

    specs = [model] if isinstance(model, (str, os.PathLike)) else list(model)
    if not specs:
        raise ValueError("evaluate_checkpoint needs at least one model")
    paths = [path for spec in specs for path in resolve_models(spec)]
    checkpoints = [Checkpoint.load(path) for path in paths]
    check_ensemble(checkpoints)
    checkpoint = checkpoints[0]
    same_split = all(c.data.dataset == checkpoint.data.dataset and dict(c.data.options) == dict(checkpoint.data.options)
                     for c in checkpoints[1:])
    if dataset is None and not same_split:
        warnings.warn(f"the ensemble's members were trained on different data; scoring it on {checkpoint.name}'s "
                      f"({checkpoint.data.dataset}); give dataset= to choose", UserWarning, stacklevel=2)
    data, splits = checkpoint_data(checkpoint, dataset, split, data_root, options)
    runners = [Runner.from_checkpoint(c, resolve_device(device)) for c in checkpoints]
    out = run(runners, data, batch_size=batch_size)
    task = checkpoint.task
    metrics = compute_metrics(task.type, out.targets, out.mean(), task.target_names, dataset=splits.name)
    member_metrics = [metrics] if len(runners) == 1 else [
        compute_metrics(task.type, out.targets, values, task.target_names, dataset=splits.name) for values in out.values]
    return {"checkpoint": ", ".join(str(s) for s in specs), "members": [str(p) for p in paths],
            "dataset": splits.name, "split": split, "num_molecules": len(data), "task": task.type,
            "target_names": list(task.target_names), "metrics": metrics, "member_metrics": member_metrics}
