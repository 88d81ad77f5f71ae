"""Models that ship inside the package (``molsepnorm/models/``), by name.

Each bundled model is a ``best.pt`` written by this project's own ``molsepnorm train``
plus a model card (``<name>.md``: data set, command, seed, metrics) and the training
preset (``<name>.yaml``).  ``molsepnorm predict`` uses :data:`DEFAULT_MODEL` when no
``--model`` is given, so prediction works offline on a fresh install.

A bundled *encoder* (``kind="encoder"``) is the ``encoder.pt`` of a ``molsepnorm
pretrain`` run, with its card and pretraining preset: it has no trained head, so it does
not predict; ``molsepnorm train --init NAME`` fine-tunes it on labelled data.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Union

from molsepnorm.errors import MolsepnormError

PathLike = Union[str, os.PathLike]


@dataclass(frozen=True)
class BundledModel:
    """One model shipped in ``molsepnorm/models``.

    Attributes:
        name: what ``--model`` / ``Predictor.load`` accept.
        checkpoint: file name of the checkpoint in ``molsepnorm/models``.
        card: file name of the model card (markdown).
        summary: one line for ``molsepnorm models``.
        kind: ``"model"`` (predicts; ``--model NAME``) or ``"encoder"`` (pretrained, no
            head; ``molsepnorm train --init NAME``).
    """

    name: str
    checkpoint: str
    card: str
    summary: str
    kind: str = "model"

    @property
    def path(self) -> Path:
        """Absolute path of the checkpoint file."""
        return _models_dir() / self.checkpoint

    @property
    def card_path(self) -> Path:
        """Absolute path of the model card."""
        return _models_dir() / self.card


BUNDLED: dict[str, BundledModel] = {
    m.name: m
    for m in (
        BundledModel(
            name="tpsa-nci-small",
            checkpoint="tpsa-nci-small.pt",
            card="tpsa-nci-small.md",
            summary="a small demonstration: topological polar surface area (TPSA, Å²), which RDKit computes "
                    "exactly; SepNorm Graphormer, 4 layers x 64, trained on RDKit's 4,999 NCI molecules",
        ),
        BundledModel(
            name="hiv-activity",
            checkpoint="hiv-activity.pt",
            card="hiv-activity.md",
            summary="probability of HIV replication inhibition (molhiv, scaffold split, test ROC-AUC 0.785); the "
                    "default SepNorm Graphormer fine-tuned from a MOSES-pretrained encoder, blended with a "
                    "fingerprint model",
        ),
        BundledModel(
            name="molhiv-encoder",
            checkpoint="molhiv-encoder.pt",
            card="molhiv-encoder.md",
            summary="pretrained encoder for regression on your own CSV / SDF (OGB vocabulary, every element): the "
                    "default SepNorm Graphormer, masked atoms and functional-group counts on molhiv's 32,901 "
                    "training molecules (no labels)",
            kind="encoder",
        ),
        BundledModel(
            name="moses-encoder",
            checkpoint="moses-encoder.pt",
            card="moses-encoder.md",
            summary="the same recipe on 152k MOSES molecules: the regression default until molhiv-encoder, which "
                    "fine-tunes better (docs/pretraining.md)",
            kind="encoder",
        ),
        BundledModel(
            name="moses-encoder-long",
            checkpoint="moses-encoder-long.pt",
            card="moses-encoder-long.md",
            summary="the same recipe pretrained ten times longer (25,000 steps, 1.5M MOSES molecules): the default "
                    "start for classification in the OGB vocabulary, and the start of hiv-activity",
            kind="encoder",
        ),
        BundledModel(
            name="moses-encoder-zinc",
            checkpoint="moses-encoder-zinc.pt",
            card="moses-encoder-zinc.md",
            summary="pretrained encoder for zinc-subset / zinc (ZINC vocabulary): the default SepNorm Graphormer, "
                    "masked atoms on 1.5M MOSES molecules; 26 % lower zinc-subset MAE with 10 % of the labels",
            kind="encoder",
        ),
    )
}
DEFAULT_MODEL = "hiv-activity"
#: The encoder ``molsepnorm train`` starts from by default (``train.init: auto``), by the
#: atom vocabulary the data is featurized in ...
DEFAULT_ENCODERS = {"ogb": "molhiv-encoder", "zinc": "moses-encoder-zinc"}
#: ... and, for a classification task (binary targets), where it differs: the longer
#: pretraining fine-tunes better on bioactivity (molhiv) and worse on small additive
#: regressions (docs/pretraining.md).
CLASSIFICATION_ENCODERS = {"ogb": "moses-encoder-long"}


def default_encoder(vocab: str, task: str) -> "str | None":
    """The bundled encoder a default run (``train.init: auto``) on data in ``vocab`` with
    ``task`` (``"regression"`` or ``"binary"``) starts from, or None (from scratch)."""
    if task == "binary" and vocab in CLASSIFICATION_ENCODERS:
        return CLASSIFICATION_ENCODERS[vocab]
    return DEFAULT_ENCODERS.get(vocab)


class UnknownModelError(MolsepnormError, ValueError):
    """A ``--model`` that is neither a checkpoint file nor a bundled model name."""


def _models_dir() -> Path:
    return Path(str(resources.files("molsepnorm.models")))


def bundled_models() -> list[BundledModel]:
    """Every bundled model, default first."""
    return sorted(BUNDLED.values(), key=lambda m: (m.name != DEFAULT_MODEL, m.name))


def resolve_model(spec: PathLike) -> Path:
    """The checkpoint file meant by ``spec``: an existing file, else a bundled model's name.

    Raises:
        UnknownModelError: neither; the message lists the bundled models.
    """
    path = Path(spec)
    if path.is_file():
        return path
    model = BUNDLED.get(str(spec))
    if model is not None:
        if not model.path.is_file():
            raise UnknownModelError(f"bundled model {model.name!r} is missing its file {model.path}: the "
                                    "installation is incomplete (reinstall molsepnorm)")
        return model.path
    names = ", ".join(BUNDLED)
    if path.suffix or len(path.parts) > 1:  # meant as a file
        from molsepnorm.checkpoint.checkpoint import CheckpointError

        raise CheckpointError(f"checkpoint not found: {path} (nor is it a bundled model: {names})")
    raise UnknownModelError(f"--model {str(spec)!r}: no such checkpoint file, and no bundled model of that "
                            f"name (bundled: {names})")


def model_listing(model: BundledModel) -> dict[str, Any]:
    """What ``molsepnorm models`` shows: name, task, targets, metrics, size, files."""
    from molsepnorm.checkpoint.checkpoint import Checkpoint

    ckpt = Checkpoint.load(model.path)
    cfg = ckpt.model_config
    return {
        "name": model.name,
        "kind": model.kind,
        "default": model.name == DEFAULT_MODEL,
        "summary": model.summary,
        "task": ckpt.task.type,
        "targets": list(ckpt.task.target_names),
        "dataset": ckpt.data.dataset,
        "metrics": ckpt.metrics,
        "steps": ckpt.step,
        "architecture": f"{cfg['norm']}norm Graphormer, {cfg['num_layers']} layers x {cfg['hidden_dim']}, "
                        f"{cfg['vocab']} vocabulary",
        "size_bytes": model.path.stat().st_size,
        "checkpoint": str(model.path),
        "card": str(model.card_path),
    }
