"""Models that ship inside the package (``molsepnorm/models/``), by name.

Each bundled model is a ``best.pt`` written by this project's own ``molsepnorm train``,
or an *ensemble* of several (the same preset trained with different seeds, predicting
their mean, as ``predict --model a --model b`` does), plus a model card (``<name>.md``:
data set, command, seeds, metrics) and the training preset (``<name>.yaml``).
``molsepnorm predict`` uses :data:`DEFAULT_MODEL` when no ``--model`` is given, so
prediction works offline on a fresh install.  :func:`resolve_models` gives every file of
a name (predict, evaluate); :func:`resolve_model` the one file of a name that is one
checkpoint (whatever reads a single model: ``embed``, ``analyze``, ``train --init``).

A bundled *encoder* (``kind="encoder"``) is the ``encoder.pt`` of a ``molsepnorm
pretrain`` run, with its card and pretraining preset: it has no trained head, so it does
not predict; ``molsepnorm train --init NAME`` fine-tunes it on labelled data.
"""
from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Optional, Sequence, Union

from molsepnorm.errors import MolsepnormError

PathLike = Union[str, os.PathLike]


@dataclass(frozen=True)
class BundledModel:
    """One model shipped in ``molsepnorm/models``.

    Attributes:
        name: what ``--model`` / ``Predictor.load`` accept.
        checkpoints: file names in ``molsepnorm/models``: one checkpoint, or the members of
            an ensemble (several ``best.pt`` of one preset and data set, averaged).
        card: file name of the model card (markdown).
        summary: one line for ``molsepnorm models``.
        kind: ``"model"`` (predicts; ``--model NAME``) or ``"encoder"`` (pretrained, no
            head; ``molsepnorm train --init NAME``).
    """

    name: str
    checkpoints: tuple[str, ...]
    card: str
    summary: str
    kind: str = "model"

    @property
    def paths(self) -> list[Path]:
        """Absolute paths of the checkpoint files (the members, for an ensemble)."""
        return [_models_dir() / name for name in self.checkpoints]

    @property
    def is_ensemble(self) -> bool:
        return len(self.checkpoints) > 1

    @property
    def preset_path(self) -> Path:
        """The training (or pretraining) preset, ``<name>.yaml``."""
        return _models_dir() / f"{self.name}.yaml"

    @property
    def card_path(self) -> Path:
        """Absolute path of the model card."""
        return _models_dir() / self.card


BUNDLED: dict[str, BundledModel] = {
    m.name: m
    for m in (
        BundledModel(
            name="tpsa-nci-small",
            checkpoints=("tpsa-nci-small.pt",),
            card="tpsa-nci-small.md",
            summary="a small demonstration: topological polar surface area (TPSA, Å²), which RDKit computes "
                    "exactly; SepNorm Graphormer, 4 layers x 64, trained on RDKit's 4,999 NCI molecules",
        ),
        BundledModel(
            name="hiv-activity",
            checkpoints=("hiv-activity-seed0.pt", "hiv-activity-seed1.pt", "hiv-activity-seed2.pt"),
            card="hiv-activity.md",
            summary="probability of HIV replication inhibition (molhiv, scaffold split): an "
                    "ensemble of three SepNorm Graphormers fine-tuned from molhiv-encoder (seeds 0, 1, 2), each "
                    "blended with a fingerprint model",
        ),
        BundledModel(
            name="molhiv-encoder",
            checkpoints=("molhiv-encoder.pt",),
            card="molhiv-encoder.md",
            summary="pretrained encoder for regression on your own CSV / SDF (OGB vocabulary, every element): the "
                    "default SepNorm Graphormer, masked atoms and functional-group counts on molhiv's 32,901 "
                    "training molecules (no labels)",
            kind="encoder",
        ),
        BundledModel(
            name="moses-encoder",
            checkpoints=("moses-encoder.pt",),
            card="moses-encoder.md",
            summary="the same recipe on 152k MOSES molecules: the regression default until molhiv-encoder, which "
                    "fine-tunes better (docs/pretraining.md)",
            kind="encoder",
        ),
        BundledModel(
            name="moses-encoder-long",
            checkpoints=("moses-encoder-long.pt",),
            card="moses-encoder-long.md",
            summary="the same recipe pretrained ten times longer (25,000 steps, 1.5M MOSES molecules): the default "
                    "start for classification in the OGB vocabulary",
            kind="encoder",
        ),
        BundledModel(
            name="moses-encoder-zinc",
            checkpoints=("moses-encoder-zinc.pt",),
            card="moses-encoder-zinc.md",
            summary="pretrained encoder for zinc-subset / zinc (ZINC vocabulary): the default SepNorm Graphormer, "
                    "masked atoms on 1.5M MOSES molecules (its gain on zinc-subset with 10 % of the labels: its "
                    "card)",
            kind="encoder",
        ),
    )
}
DEFAULT_MODEL = "hiv-activity"
#: The encoder ``molsepnorm train`` starts from by default (``train.init: auto``), by the
#: atom vocabulary the data is featurized in ...
DEFAULT_ENCODERS = {"ogb": "molhiv-encoder", "zinc": "moses-encoder-zinc"}
#: ... and, for a classification task (binary targets), where it differs: the longer MOSES
#: pretraining fine-tunes better on a user's small classification set (solubility-class)
#: than ``molhiv-encoder``, which wins on molhiv itself, the molecules it was pretrained on
#: (docs/pretraining.md; ``hiv-activity`` starts from it), and worse on small additive regressions.
CLASSIFICATION_ENCODERS = {"ogb": "moses-encoder-long"}


def default_encoder(vocab: str, task: str) -> "str | None":
    """The bundled encoder a default run (``train.init: auto``) on data in ``vocab`` with
    ``task`` (``"regression"`` or ``"binary"``) starts from, or None (from scratch)."""
    if task == "binary" and vocab in CLASSIFICATION_ENCODERS:
        return CLASSIFICATION_ENCODERS[vocab]
    return DEFAULT_ENCODERS.get(vocab)


def default_embedding_model() -> Path:
    """The checkpoint ``embed`` reads when given no model: the default model's file, or its
    first member when it is an ensemble (embeddings come from one model)."""
    return BUNDLED[DEFAULT_MODEL].paths[0]


class UnknownModelError(MolsepnormError, ValueError):
    """A ``--model`` that is neither a checkpoint file nor a bundled model name."""


def _models_dir() -> Path:
    return Path(str(resources.files("molsepnorm.models")))


def bundled_models() -> list[BundledModel]:
    """Every bundled model, default first."""
    return sorted(BUNDLED.values(), key=lambda m: (m.name != DEFAULT_MODEL, m.name))


def resolve_models(spec: Union[PathLike, Sequence[PathLike]]) -> list[Path]:
    """The checkpoint files meant by ``spec``: an existing file, else every file of a
    bundled model (one, or an ensemble's members; a member alone by its name, such as
    ``hiv-activity-seed0``), else a run directory's ``best.pt`` (``encoder.pt`` for
    pretraining); for a list of such specs, all their files in order (an ensemble of
    ensembles is one ensemble).

    Raises:
        UnknownModelError: neither; the message lists the bundled models.
        CheckpointError: ``spec`` looks like a file path and no such file exists.
    """
    if not isinstance(spec, (str, os.PathLike)):
        return [path for one in spec for path in resolve_models(one)]
    path = Path(spec)
    if path.is_file():
        return [path]
    member = _bundled_member(str(spec))
    if member is not None:
        return [member]
    model = BUNDLED.get(str(spec))
    if model is None and path.is_dir():
        return [_run_directory_model(path)]
    if model is not None:
        missing = [p for p in model.paths + ([ensemble_metrics_path(model)] if model.is_ensemble else [])
                   if not p.is_file()]
        if missing:
            raise UnknownModelError(f"bundled model {model.name!r} is missing its file {missing[0]}: the "
                                    "installation is incomplete (reinstall molsepnorm)")
        return model.paths
    names = ", ".join(BUNDLED)
    if path.suffix or len(path.parts) > 1:  # meant as a file
        from molsepnorm.checkpoint.checkpoint import CheckpointError

        raise CheckpointError(f"checkpoint not found: {path} (nor is it a bundled model: {names})")
    close = difflib.get_close_matches(str(spec), list(BUNDLED), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise UnknownModelError(f"model {str(spec)!r}: no such checkpoint file, and no bundled model of that "
                            f"name{hint} (bundled: {names})")


#: the model a run directory holds, in order of preference: a training run's, a pretraining run's
RUN_DIRECTORY_MODELS = ("best.pt", "encoder.pt")


def _run_directory_model(folder: Path) -> Path:
    """The model of a run directory given where a checkpoint is meant: its ``best.pt`` (a
    training run) or ``encoder.pt`` (pretraining).

    Raises:
        CheckpointError: it holds neither (``last.pt`` alone: the run has not finished).
    """
    for name in RUN_DIRECTORY_MODELS:
        if (folder / name).is_file():
            return folder / name
    from molsepnorm.checkpoint.checkpoint import CheckpointError

    unfinished = " (its last.pt is an unfinished run's: give it by name to use it)" if (folder / "last.pt").is_file() \
        else ""
    raise CheckpointError(f"{folder} is a folder holding no {' or '.join(RUN_DIRECTORY_MODELS)}{unfinished}; give a "
                          "checkpoint file")


def _bundled_member(name: str) -> Optional[Path]:
    """One member of a bundled ensemble named by its file's stem (``hiv-activity-seed0``), as
    ``molsepnorm models`` lists them; None for any other name."""
    for model in BUNDLED.values():
        if model.is_ensemble:
            for path in model.paths:
                if path.stem == name and path.is_file():
                    return path
    return None


def resolve_model(spec: PathLike) -> Path:
    """The one checkpoint file meant by ``spec``: an existing file, else a bundled model's
    name, for whatever reads a single model.

    Raises:
        UnknownModelError: neither (the message lists the bundled models), or a bundled
            ensemble (the message names its member files, each a model of its own).
        CheckpointError: ``spec`` looks like a file path and no such file exists.
    """
    paths = resolve_models(spec)
    if len(paths) > 1:
        members = ", ".join(str(p) for p in paths)
        raise UnknownModelError(f"{str(spec)!r} is an ensemble of {len(paths)} models, and this reads one model: "
                                f"give one of its members by name ({', '.join(p.stem for p in paths)}) or file "
                                f"({members}); predict and evaluate take the ensemble by name")
    return paths[0]


def ensemble_metrics_path(model: BundledModel) -> Path:
    """``<name>.metrics.json`` beside an ensemble's members: the ensemble's own validation and
    test metrics (no member checkpoint holds them), written by ``scripts/bundle_ensemble.py``
    with :func:`~molsepnorm.inference.evaluate.evaluate_checkpoint`, with the sha256 of
    every member it scored."""
    return _models_dir() / f"{model.name}.metrics.json"


def model_listing(model: BundledModel) -> dict[str, Any]:
    """What ``molsepnorm models`` shows: name, task, targets, metrics, size, files.

    An ensemble's metrics are those of the mean prediction (``<name>.metrics.json``); its
    size is that of all its members; ``checkpoints`` lists them."""
    import json

    from molsepnorm.checkpoint.checkpoint import Checkpoint

    ckpt = Checkpoint.load(model.paths[0])
    cfg = ckpt.model_config
    metrics = ckpt.metrics
    if model.is_ensemble:
        metrics = json.loads(ensemble_metrics_path(model).read_text(encoding="utf-8"))["metrics"]
    return {
        "name": model.name,
        "kind": model.kind,
        "default": model.name == DEFAULT_MODEL,
        "summary": model.summary,
        "task": ckpt.task.type,
        "targets": list(ckpt.task.target_names),
        "dataset": ckpt.data.dataset,
        "metrics": metrics,
        "steps": ckpt.step,
        "architecture": f"{cfg['norm']}norm Graphormer, {cfg['num_layers']} layers x {cfg['hidden_dim']}, "
                        f"{cfg['vocab']} vocabulary" + (f"; an ensemble of {len(model.paths)}" if model.is_ensemble
                                                         else ""),
        "size_bytes": sum(p.stat().st_size for p in model.paths),
        "checkpoints": [str(p) for p in model.paths],
        "card": str(model.card_path),
    }
