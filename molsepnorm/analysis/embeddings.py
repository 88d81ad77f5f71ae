"""Graph-token embeddings of a model on a data set split: the matrix every analysis reads.

The embedding of a molecule is the Graphormer's graph token ([CLS]) after the final
norm, the input of the prediction head (:meth:`molsepnorm.nn.graphormer.Graphormer.embed`).
With SepNorm (Chen et al., NeurIPS 2023) that final norm is a BatchNorm for the graph
token; with ShareNorm it is the LayerNorm shared with the atom tokens.

Embeddings are computed in eval mode (dropout off, BatchNorm on its running statistics, so
a molecule's embedding does not depend on its batch-mates) under
:func:`torch.inference_mode`, in float32, in size-sorted batches, and returned in the
order of the data set: one row per molecule, none dropped.
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, MutableMapping, Optional, Union

import numpy as np
import torch
from torch import Tensor

from molsepnorm.errors import MolsepnormError

PathLike = Union[str, os.PathLike]

__all__ = ["CheckpointEmbeddings", "graph_embeddings", "checkpoint_embeddings", "load_split"]


@dataclass
class CheckpointEmbeddings:
    """The graph-token embeddings of one checkpoint on one split.

    Attributes:
        embeddings: (M, D) float32, row i = molecule i of the split (data set order).
        checkpoint: path of the checkpoint file.
        dataset: data set name (``"zinc-subset"``, a CSV's name, ...).
        split: ``train`` / ``val`` / ``test`` / ``all``.
        norm: the model's norm, ``"sep"`` or ``"share"``.
        model_config: the model's ``GraphormerConfig`` as a dict.
        info: the checkpoint's epoch, step and validation metrics.
    """

    embeddings: Tensor
    checkpoint: str
    dataset: str
    split: str
    norm: str
    model_config: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def num_molecules(self) -> int:
        return int(self.embeddings.size(0))


def graph_embeddings(
    model: torch.nn.Module,
    data: Any,
    multi_hop_max_dist: Optional[int] = None,
    batch_size: int = 256,
    device: Union[str, torch.device] = "cpu",
) -> Tensor:
    """Graph-token embeddings (M, D) of ``model`` on the M graphs of ``data``, in data order.

    Args:
        model: a :class:`~molsepnorm.nn.graphormer.Graphormer`; put in eval mode for the
            call and restored afterwards.
        data: a sequence of encoded graphs (a split of :func:`molsepnorm.load_dataset`).
        multi_hop_max_dist: hops of the edge encoding to collate (default: the model's).
        batch_size: molecules per batch.
        device: where to run the model.

    Returns:
        float32 CPU tensor (M, D).
    """
    from torch.utils.data import DataLoader

    from molsepnorm.data.collate import GraphCollator
    from molsepnorm.train.batching import EvalBatches

    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    M = len(data)
    if M == 0:
        raise MolsepnormError("no molecules to embed: the split is empty")
    hops = int(multi_hop_max_dist if multi_hop_max_dist is not None else model.config.multi_hop_max_dist)
    batches = EvalBatches(_sizes(data), batch_size)
    loader = DataLoader(data, batch_sampler=batches, collate_fn=GraphCollator(hops))
    was_training = model.training
    model.eval()
    out: Optional[Tensor] = None
    try:
        with torch.inference_mode():
            for index, batch in zip(batches.batches, loader):
                g = model.embed(batch.to(device)).float().cpu()  # (B, D)
                if out is None:
                    out = torch.full((M, g.size(1)), float("nan"), dtype=torch.float32)
                out[torch.as_tensor(index, dtype=torch.long)] = g
    finally:
        model.train(was_training)
    assert out is not None and not torch.isnan(out).any(), "a molecule was left without an embedding"
    return out


def _sizes(data: Any) -> np.ndarray:
    """Atoms per molecule (to sort batches by size)."""
    from molsepnorm.train.loop import _sizes as fast_sizes  # PyG in-memory fast path

    return fast_sizes(data)


def load_split(
    checkpoint: dict[str, Any],
    dataset: Optional[str] = None,
    split: str = "test",
    data_root: Optional[PathLike] = None,
    options: Optional[dict[str, Any]] = None,
    loaded: Optional[MutableMapping[Any, Any]] = None,
    path: str = "checkpoint",
) -> tuple[Any, str]:
    """``(graphs of the split, data set name)`` for a loaded checkpoint.

    As :func:`molsepnorm.train.api.evaluate_checkpoint`: by default the data set the
    model was trained on, with the training run's loading options (hence the same split)
    and its data root when that still exists; a CSV is featurized in the model's
    vocabulary.  ``loaded`` memoizes :func:`~molsepnorm.data.load_dataset` calls across
    checkpoints.
    """
    from molsepnorm.data.registry import load_dataset

    trained_on = checkpoint.get("data", {}) or {}
    if dataset is None:
        dataset = trained_on.get("dataset")
        if dataset is None:
            raise MolsepnormError(f"{path}: the checkpoint names no data set; give a data set")
    same = dataset == trained_on.get("dataset")
    if options is None:
        options = dict(trained_on.get("options", {}) or {}) if same else {}
    else:
        options = dict(options)
    if data_root is None and same:
        trained_root = ((checkpoint.get("config", {}) or {}).get("data", {}) or {}).get("data_root")
        if trained_root and Path(trained_root).is_dir():
            data_root = trained_root
    if not same and _is_table(dataset):
        options.setdefault("vocab", checkpoint["featurizer"]["vocab"])
    key = (str(dataset), None if data_root is None else str(data_root), repr(sorted(options.items())))
    if loaded is not None and key in loaded:
        splits = loaded[key]
    else:
        splits = load_dataset(dataset, root=data_root, **options)
        if loaded is not None:
            loaded[key] = splits
    _check_featurization(checkpoint, splits, path)
    if split == "all":
        from torch.utils.data import ConcatDataset

        return ConcatDataset([splits.train, splits.val, splits.test]), splits.name
    return splits[split], splits.name


def checkpoint_embeddings(
    checkpoint: PathLike,
    dataset: Optional[str] = None,
    split: str = "test",
    data_root: Optional[PathLike] = None,
    options: Optional[dict[str, Any]] = None,
    batch_size: int = 256,
    device: str = "cpu",
    loaded: Optional[MutableMapping[Any, Any]] = None,
) -> CheckpointEmbeddings:
    """Graph-token embeddings of a checkpoint's model on a split (see :func:`load_split`).

    Args:
        checkpoint: a ``best.pt`` / ``last.pt`` file.
        dataset: data set name or CSV (default: the one the model was trained on).
        split: ``train``, ``val``, ``test`` or ``all``.
        data_root: folder of the raw data sets.
        options: :func:`~molsepnorm.data.load_dataset` options.
        batch_size: molecules per batch.
        device: ``cpu``, ``cuda`` or ``auto``.
        loaded: memo of loaded data sets, shared across calls.
    """
    from molsepnorm.nn.graphormer import Graphormer
    from molsepnorm.train.checkpoint import load_checkpoint, model_from_checkpoint
    from molsepnorm.train.distributed import resolve_device

    ckpt = load_checkpoint(checkpoint)
    data, name = load_split(ckpt, dataset, split, data_root, options, loaded, path=str(checkpoint))
    dev = resolve_device(device)
    model = model_from_checkpoint(ckpt).to(dev)
    assert isinstance(model, Graphormer)
    z = graph_embeddings(model, data, ckpt["featurizer"]["multi_hop_max_dist"], batch_size, dev)
    config = dict(ckpt["model"]["config"])
    info = {"epoch": ckpt.get("epoch"), "step": ckpt.get("step"), "kind": ckpt.get("kind"),
            "metrics": ckpt.get("metrics", {})}
    return CheckpointEmbeddings(embeddings=z, checkpoint=str(checkpoint), dataset=name, split=split,
                                norm=str(config.get("norm", "?")), model_config=config, info=info)


def _is_table(name: str) -> bool:
    return name.lower().endswith((".csv", ".tsv", ".tab", ".csv.gz", ".tsv.gz")) or Path(name).is_file()


def _check_featurization(ckpt: dict[str, Any], splits: Any, path: str) -> None:
    """The data must be featurized like the training data (the targets do not matter here)."""
    from molsepnorm.chem import FEATURIZER_VERSION
    from molsepnorm.encodings import ENCODING_VERSION

    feat = ckpt["featurizer"]
    if splits.vocab != feat["vocab"]:
        raise MolsepnormError(f"{path}: the model reads the {feat['vocab']!r} atom vocabulary but {splits.name} "
                              f"is featurized with {splits.vocab!r}")
    if (feat["featurizer_version"], feat["encoding_version"]) != (FEATURIZER_VERSION, ENCODING_VERSION):
        warnings.warn(f"{path}: trained with featurizer v{feat['featurizer_version']} / encodings "
                      f"v{feat['encoding_version']}, this molsepnorm has v{FEATURIZER_VERSION} / "
                      f"v{ENCODING_VERSION}: embeddings may be off", stacklevel=3)
