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
from dataclasses import dataclass, field
from typing import Any, MutableMapping, Optional, Union

import numpy as np
import torch
from torch import Tensor

from molsepnorm.errors import MolsepnormError

PathLike = Union[str, os.PathLike]

__all__ = ["CheckpointEmbeddings", "graph_embeddings", "checkpoint_embeddings"]


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
    batch_size: int = 256,
    device: Union[str, torch.device] = "cpu",
    progress: Optional[bool] = False,
) -> Tensor:
    """Graph-token embeddings (M, D) of ``model`` on the M graphs of ``data``, in data order.

    Args:
        model: a :class:`~molsepnorm.nn.graphormer.Graphormer`; put in eval mode for the
            call and restored afterwards.
        data: a sequence of encoded graphs (a split of :func:`molsepnorm.load_dataset`).
        batch_size: molecules per batch.
        device: where to run the model.
        progress: a bar of the molecules embedded (None: only on a terminal).

    Returns:
        float32 CPU tensor (M, D).
    """
    from molsepnorm.inference.runner import Runner, run

    if len(data) == 0:
        raise MolsepnormError("no molecules to embed: the split is empty")
    out = run([Runner(model.to(device), "regression")], data, embed=True, batch_size=batch_size, progress=progress,
              description="embedding").values[0]
    assert not np.isnan(out).any(), "a molecule was left without an embedding"
    return torch.from_numpy(out.astype(np.float32))


def checkpoint_embeddings(
    checkpoint: PathLike,
    dataset: Optional[str] = None,
    split: str = "test",
    data_root: Optional[PathLike] = None,
    options: Optional[dict[str, Any]] = None,
    batch_size: int = 256,
    device: str = "cpu",
    loaded: Optional[MutableMapping[Any, Any]] = None,
    progress: Optional[bool] = None,
) -> CheckpointEmbeddings:
    """Graph-token embeddings of a model on a split (see
    :func:`molsepnorm.checkpoint.checkpoint_data`: by default its own test split).

    Args:
        checkpoint: a ``best.pt`` / ``last.pt`` file or a bundled model name.
        dataset: data set name or CSV (default: the one the model was trained on).
        split: ``train``, ``val``, ``test`` or ``all``.
        data_root: folder of the raw data sets.
        options: :func:`~molsepnorm.data.load_dataset` options.
        batch_size: molecules per batch.
        device: ``cpu``, ``cuda`` or ``auto``.
        loaded: memo of loaded data sets, shared across calls.
        progress: a bar of the molecules embedded (None: only on a terminal).
    """
    from molsepnorm.checkpoint import Checkpoint, checkpoint_data
    from molsepnorm.inference.device import resolve_device

    ckpt = Checkpoint.load(checkpoint)
    data, splits = checkpoint_data(ckpt, dataset, split, data_root, options, targets=False, loaded=loaded)
    z = graph_embeddings(ckpt.build_model(), data, batch_size, resolve_device(device), progress=progress)
    config = dict(ckpt.model_config)
    info = {"epoch": ckpt.epoch, "step": ckpt.step, "kind": ckpt.kind, "metrics": ckpt.metrics}
    return CheckpointEmbeddings(embeddings=z, checkpoint=str(checkpoint), dataset=splits.name, split=split,
                                norm=str(config.get("norm", "?")), model_config=config, info=info)
