"""``evaluate``: the metrics of a trained model on a split of a data set."""
from __future__ import annotations

import os
from typing import Any, Optional, Union

PathLike = Union[str, os.PathLike]


def evaluate_checkpoint(
    model: PathLike,
    dataset: Optional[str] = None,
    split: str = "test",
    data_root: Optional[PathLike] = None,
    options: Optional[dict[str, Any]] = None,
    batch_size: int = 128,
    device: str = "cpu",
) -> dict[str, Any]:
    """Metrics of a checkpoint's model on a split of a data set.

    Args:
        model: a ``best.pt`` / ``last.pt`` file or a bundled model name.
        dataset: data set name or CSV (default: the one the model was trained on, with the
            same loading options, hence the same split).
        split: ``train``, ``val``, ``test``, or ``all`` (the three together).
        data_root: folder of the raw data sets.
        options: ``load_dataset`` options (default: the training run's, for its own data set).
        batch_size: molecules per batch.
        device: ``cpu``, ``cuda`` or ``auto``.

    Returns:
        ``{"checkpoint", "dataset", "split", "num_molecules", "task", "target_names", "metrics"}``.
    """
    from molsepnorm.checkpoint import Checkpoint, checkpoint_data
    from molsepnorm.inference.device import resolve_device
    from molsepnorm.inference.metrics import compute_metrics
    from molsepnorm.inference.runner import Runner, run

    checkpoint = Checkpoint.load(model)
    data, splits = checkpoint_data(checkpoint, dataset, split, data_root, options)
    runner = Runner.from_checkpoint(checkpoint, resolve_device(device))
    out = run([runner], data, batch_size=batch_size)
    task = checkpoint.task
    metrics = compute_metrics(task.type, out.targets, out.values[0], task.target_names, dataset=splits.name)
    return {"checkpoint": str(model), "dataset": splits.name, "split": split, "num_molecules": len(data),
            "task": task.type, "target_names": list(task.target_names), "metrics": metrics}
