"""The checkpoint: one typed object, saved atomically, loaded weights-only, by path or name.

A checkpoint file is one plain ``dict`` of tensors and primitives (no pickled classes), so
``torch.load(path, map_location="cpu", weights_only=True)`` reads it on any machine and a
checkpoint file can never run code.  :class:`Checkpoint` is that dict as typed fields;
:meth:`Checkpoint.load` is the only reader and :meth:`Checkpoint.save` the only writer.
It holds everything needed to rebuild the model and its input pipeline from the one file:

============================  ==========================================================
key                           content
============================  ==========================================================
``format``                    ``"molsepnorm-checkpoint"``
``format_version``            :data:`FORMAT_VERSION` (checked on load; version 1 files are
                              read too, their model config completed as version 1 built it)
``package_version``           molsepnorm version that wrote it
``kind``                      ``"best"``, ``"last"`` or ``"encoder"`` (pretraining's)
``created``                   ISO-8601 time of writing (UTC)
``model``                     ``{"config": GraphormerConfig.to_dict(), "state_dict": ...}``
``featurizer``                ``{"vocab", "featurizer_version", "encoding_version",
                              "multi_hop_max_dist"}``
``task``                      ``{"type": "regression" | "binary" | "pretrained", "target_names",
                              "metric", "higher_is_better"}``
``target_scaling``            ``{"mean": [...], "std": [...]}`` or None (not scaled)
``data``                      ``{"dataset", "name", "options", "source", "sizes",
                              "data_root"}``: what the model was trained on
``config``                    the resolved experiment config (model / train / data)
``metrics``                   ``{"val": {...}}`` (+ ``"test"`` once the run has ended)
``applicability``             what the training split looked like (feature values, largest
                              molecule, a fingerprint sample): ``ApplicabilityDomain.to_payload()``
                              of :mod:`~molsepnorm.checkpoint.domain`; absent in checkpoints
                              written before it existed
``epoch``, ``step``           position in training when written (epochs completed)
``training_state``            ``last`` only: optimizer, scheduler, RNG states and the
                              position; opaque here, owned by the loop that wrote it
                              (:mod:`molsepnorm.train.state`: best-so-far, early-stopping
                              counter, batches done in the epoch; :mod:`molsepnorm.pretrain.loop`:
                              the corpus position)
============================  ==========================================================
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import os
import pickle
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Optional, Union

import torch
from torch import Tensor

from molsepnorm._atomic import atomic_write
from molsepnorm.checkpoint.scaling import TargetScaler
from molsepnorm.errors import MolsepnormError
from molsepnorm.formats import file_format
from molsepnorm.version import __version__

if TYPE_CHECKING:
    from molsepnorm.checkpoint.domain import ApplicabilityDomain
    from molsepnorm.data.registry import DatasetSplits
    from molsepnorm.nn.graphormer import Graphormer

PathLike = Union[str, os.PathLike]

FORMAT = "molsepnorm-checkpoint"
FORMAT_VERSION = 2
# Model keys added since version 1, with the value that rebuilds a version-1 model.
_V1_MODEL_DEFAULTS = {"first_cls_norm": None, "readout": "cls"}

__all__ = ["Checkpoint", "CheckpointError", "DataProvenance", "FeaturizerSpec", "TaskSpec", "FORMAT_VERSION",
           "check_ensemble", "save_checkpoint"]


class CheckpointError(MolsepnormError, ValueError):
    """A checkpoint file is missing, truncated, of another format or version, or unsafe."""


@dataclass(frozen=True)
class FeaturizerSpec:
    """How the model's input molecules must be featurized."""

    vocab: str  # "ogb" | "zinc"
    featurizer_version: int
    encoding_version: int
    multi_hop_max_dist: int  # K of the edge encoding: collate with the same K

    @classmethod
    def current(cls, vocab: str, multi_hop_max_dist: int) -> "FeaturizerSpec":
        """This molsepnorm's featurizer and encodings, in ``vocab``."""
        from molsepnorm.chem import FEATURIZER_VERSION
        from molsepnorm.encodings import ENCODING_VERSION

        return cls(vocab, int(FEATURIZER_VERSION), int(ENCODING_VERSION), int(multi_hop_max_dist))

    def version_mismatch(self) -> Optional[str]:
        """A sentence if this molsepnorm featurizes differently from the one that trained the model."""
        now = FeaturizerSpec.current(self.vocab, self.multi_hop_max_dist)
        if (self.featurizer_version, self.encoding_version) == (now.featurizer_version, now.encoding_version):
            return None
        return (f"trained with featurizer v{self.featurizer_version} / encodings v{self.encoding_version}, this "
                f"molsepnorm has v{now.featurizer_version} / v{now.encoding_version}: outputs may be off")


#: ``TaskSpec.type`` of a self-supervised encoder (``molsepnorm pretrain``): no targets, its
#: task head untrained; it embeds molecules and starts a fine-tuning (``train --init``).
PRETRAINED = "pretrained"


@dataclass(frozen=True)
class TaskSpec:
    """What the model predicts and how it is scored."""

    type: str  # "regression" | "binary" | PRETRAINED
    target_names: tuple[str, ...]
    metric: str  # model-selection metric: "mae" | "rocauc" | ...
    higher_is_better: bool


@dataclass(frozen=True)
class DataProvenance:
    """The data set a model was trained on, so that evaluation can reload the same split."""

    dataset: Optional[str] = None  # what was given to load_dataset (a name or a CSV path)
    name: Optional[str] = None  # DatasetSplits.name
    options: Mapping[str, Any] = field(default_factory=dict)  # load_dataset options
    source: Optional[str] = None  # where the raw data was read
    sizes: Mapping[str, int] = field(default_factory=dict)  # molecules per split
    data_root: Optional[str] = None  # the data root of the training run
    sha256: Optional[str] = None  # a file's content as training read it (None: a named data set, older checkpoints)

    @property
    def recorded_file(self) -> Optional[str]:
        """Where training read its file (the absolute path recorded), or None: a named data set,
        or a file of an older checkpoint, which recorded a relative path."""
        is_file = self.dataset is not None and file_format(self.dataset) is not None
        if is_file and self.source is not None and os.path.isabs(self.source):
            return self.source
        return None

    def same_data(self, other: DataProvenance) -> bool:
        """Whether ``other`` read the same data with the same loading options: two files by
        where they were read (whatever names training was given), else by name."""
        mine, theirs = self.recorded_file, other.recorded_file
        same = mine == theirs if mine is not None and theirs is not None else self.dataset == other.dataset
        return same and dict(self.options) == dict(other.options)


@dataclass
class Checkpoint:
    """A trained (or training) Graphormer and everything needed to use it.

    Attributes:
        model_config: ``GraphormerConfig.to_dict()`` (vocabulary sizes resolved).
        state_dict: the model's weights, on CPU.
        featurizer, task, target_scaling, data: see the classes of these fields.
        config: the resolved experiment config of the run that wrote it (plain data).
        metrics: ``{"val": {...}, "test": {...}}`` as far as known.
        kind: ``"best"``, ``"last"`` or ``"encoder"`` (a pretrained encoder).
        epoch, step: position in training when written.
        training_state: ``last`` only, for ``--resume`` (plain data; see
            :mod:`molsepnorm.train.state` and :mod:`molsepnorm.pretrain.loop`).
        applicability: the training split's applicability domain (None: a checkpoint
            written before molsepnorm recorded it; predictions then carry no warning).
        package_version, created: who wrote it, when.
        source: the path or bundled name it was loaded from (not saved).
    """

    model_config: dict[str, Any]
    state_dict: dict[str, Tensor]
    featurizer: FeaturizerSpec
    task: TaskSpec
    target_scaling: Optional[TargetScaler] = None
    data: DataProvenance = field(default_factory=DataProvenance)
    config: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    kind: str = "best"
    epoch: Optional[int] = None
    step: Optional[int] = None
    training_state: Optional[dict[str, Any]] = None
    applicability: Optional["ApplicabilityDomain"] = None
    package_version: str = __version__
    created: Optional[str] = None
    source: Optional[str] = None

    # --- reading -----------------------------------------------------------------------
    @classmethod
    def load(cls, spec: PathLike) -> "Checkpoint":
        """Read a checkpoint file, or a bundled model by name (``molsepnorm models``).

        The file is read onto the CPU with weights-only unpickling; its format and version
        are checked, and a featurizer older or newer than this molsepnorm's is warned
        about once, here.

        Raises:
            UnknownModelError: ``spec`` is neither a file nor a bundled model name, or names a
                bundled ensemble (several files: load one of its members, or use
                :class:`~molsepnorm.predict.Predictor` / ``evaluate``, which take the ensemble).
            CheckpointError: the file is truncated or corrupt, holds objects other than
                tensors and plain data, or is not a molsepnorm checkpoint of a version this
                package reads.  The message names the file.
        """
        from molsepnorm.checkpoint.bundled import resolve_model

        path = resolve_model(spec)
        checkpoint = cls.from_payload(_read_payload(path), where=str(path))
        checkpoint.source = str(spec)
        mismatch = checkpoint.featurizer.version_mismatch()
        if mismatch:
            warnings.warn(f"{spec}: {mismatch}", stacklevel=2)
        return checkpoint

    @classmethod
    def from_payload(cls, data: Mapping[str, Any], where: str = "checkpoint") -> "Checkpoint":
        """The typed view of a checkpoint dict (as written by :meth:`to_payload`)."""
        try:
            model, feat, task = data["model"], data["featurizer"], data["task"]
            raw_data = dict(data.get("data") or {})
            config = dict(data.get("config") or {})
            if raw_data.get("data_root") is None:  # checkpoints before the field kept it in the config only
                raw_data["data_root"] = (config.get("data") or {}).get("data_root")
            known = {f.name for f in dataclasses.fields(DataProvenance)}
            return cls(
                model_config=dict(model["config"]),
                state_dict=dict(model["state_dict"]),
                featurizer=FeaturizerSpec(str(feat["vocab"]), int(feat["featurizer_version"]),
                                          int(feat["encoding_version"]), int(feat["multi_hop_max_dist"])),
                task=TaskSpec(str(task["type"]), tuple(str(t) for t in task["target_names"]), str(task["metric"]),
                              bool(task["higher_is_better"])),
                target_scaling=TargetScaler.from_dict(data["target_scaling"]) if data.get("target_scaling") else None,
                data=DataProvenance(**{k: v for k, v in raw_data.items() if k in known}),
                config=config,
                metrics=dict(data.get("metrics") or {}),
                kind=str(data.get("kind", "best")),
                epoch=data.get("epoch"),
                step=data.get("step"),
                training_state=data.get("training_state"),
                applicability=_domain(data.get("applicability"), where),
                package_version=str(data.get("package_version", "?")),
                created=data.get("created"),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f"{where}: checkpoint is missing or has a malformed entry: {exc!r}") from None

    # --- writing -----------------------------------------------------------------------
    def to_payload(self) -> dict[str, Any]:
        """The plain dict written to disk (tensors and primitives only)."""
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "package_version": self.package_version,
            "created": self.created or _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "kind": self.kind,
            "model": {"config": dict(self.model_config),
                      "state_dict": {k: v.detach().cpu() for k, v in self.state_dict.items()}},
            "featurizer": dataclasses.asdict(self.featurizer),
            "task": {"type": self.task.type, "target_names": list(self.task.target_names),
                     "metric": self.task.metric, "higher_is_better": self.task.higher_is_better},
            "target_scaling": self.target_scaling.to_dict() if self.target_scaling is not None else None,
            "data": {**dataclasses.asdict(self.data), "options": dict(self.data.options),
                     "sizes": {k: int(v) for k, v in self.data.sizes.items()}},
            "config": dict(self.config),
            "metrics": dict(self.metrics),
            "epoch": self.epoch,
            "step": self.step,
            **({"training_state": _on_cpu(self.training_state)} if self.training_state is not None else {}),
            **({"applicability": self.applicability.to_payload()} if self.applicability is not None else {}),
        }

    def save(self, path: PathLike) -> Path:
        """Write to ``path`` atomically (see :func:`save_checkpoint`); returns the path."""
        return save_checkpoint(self.to_payload(), path)

    # --- using -------------------------------------------------------------------------
    def build_model(self) -> "Graphormer":
        """The Graphormer with these weights, float32, in eval mode on CPU."""
        from molsepnorm.nn.graphormer import Graphormer, GraphormerConfig

        # its random initial weights, replaced below, leave the caller's generator where it was (a
        # process-wide state: do not load in one thread while another draws random numbers)
        with torch.random.fork_rng(devices=[]):
            model = Graphormer(GraphormerConfig.from_dict(dict(self.model_config)))
        model.load_state_dict(self.state_dict)
        return model.eval()

    @property
    def name(self) -> str:
        """How to call this model in messages: where it was loaded from."""
        return self.source or "checkpoint"

    @property
    def embedding_dim(self) -> int:
        return int(self.model_config["hidden_dim"])

    def check_data(self, splits: "DatasetSplits", targets: bool = True) -> None:
        """Raise unless ``splits`` is featurized as this model reads (and, with ``targets``,
        labelled with the same task and number of targets).

        Raises:
            MolsepnormError: naming the checkpoint, the data set and what differs.
        """
        where = self.name
        if splits.vocab != self.featurizer.vocab:
            raise MolsepnormError(f"{where}: the model reads the {self.featurizer.vocab!r} atom vocabulary but "
                                  f"{splits.name} is featurized with {splits.vocab!r}")
        if not targets:
            return
        if splits.task != self.task.type:
            raise MolsepnormError(f"{where}: a {self.task.type} model cannot be scored on the {splits.task} data set "
                                  f"{splits.name}")
        names = list(self.task.target_names)
        if splits.num_tasks != len(names):
            raise MolsepnormError(f"{where}: the model predicts {len(names)} target(s) ({', '.join(names)}) but "
                                  f"{splits.name} has {splits.num_tasks} ({', '.join(splits.target_names)})")
        if list(splits.target_names) != names:
            warnings.warn(f"{where}: target names differ: model {names}, data {list(splits.target_names)}; "
                          "scoring column by column", stacklevel=3)

    def summary(self) -> str:
        """A few human-readable lines describing the checkpoint."""
        m = self.model_config
        return "\n".join([
            f"checkpoint {self.name}",
            f"  {self.kind} after epoch {self.epoch} (step {self.step}), molsepnorm {self.package_version}",
            f"  data {self.data.dataset}: {self.task.type}, targets {', '.join(self.task.target_names)}",
            f"  model norm={m.get('norm')} layers={m.get('num_layers')} hidden={m.get('hidden_dim')} "
            f"vocab={m.get('vocab')}",
        ])


def check_ensemble(checkpoints: "list[Checkpoint]") -> None:
    """Check that checkpoints can form an ensemble (their predictions averaged): the same
    atom vocabulary, task and targets.

    Raises:
        MolsepnormError: two that differ; the message names both and what differs.
    """
    first = checkpoints[0]
    for other in checkpoints[1:]:
        for what, a, b in (("vocab", first.featurizer.vocab, other.featurizer.vocab),
                           ("task", first.task.type, other.task.type),
                           ("target names", list(first.task.target_names), list(other.task.target_names))):
            if a != b:
                raise MolsepnormError(f"cannot ensemble {first.name} and {other.name}: different {what} "
                                      f"({a!r} vs {b!r})")


# --- the file ------------------------------------------------------------------------------


def _on_cpu(value: Any) -> Any:
    """``value`` with every tensor in it (nested dicts, lists, tuples) moved to the CPU, so
    that a file written on a GPU (optimizer moments, EMA weights) loads on a machine without
    one, even through a plain ``torch.load`` with no ``map_location``."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, dict):
        return {k: _on_cpu(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_on_cpu(v) for v in value)
    return value


def save_checkpoint(payload: Mapping[str, Any], path: PathLike) -> Path:
    """Write a checkpoint dict to ``path`` atomically (:meth:`Checkpoint.save` calls this).

    The bytes go to ``<path>.tmp``, are flushed and fsynced, then renamed over ``path``
    (:func:`molsepnorm._atomic.atomic_write`): a run killed at any moment leaves
    either the previous file or the new one, never a torn one.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = dict(payload)
    data["format"] = FORMAT
    data["format_version"] = FORMAT_VERSION
    data.setdefault("package_version", __version__)
    data.setdefault("created", _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))
    with atomic_write(path, "wb", fixed_temporary=True) as fh:  # <name>.tmp: a resumed run removes a torn one
        torch.save(data, fh)
    return path


def _read_payload(path: Path) -> dict[str, Any]:
    """The checked dict of a checkpoint file (format and version; see :meth:`Checkpoint.load`)."""
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    with open(path, "rb") as handle:
        head = handle.read(2)
    if not head.startswith((b"PK", b"\x80")):  # torch.save writes a zip archive; legacy files are pickles
        raise CheckpointError(f"{path}: not a checkpoint: torch.save writes a zip archive, and this file is "
                              "neither a zip archive nor a pickle (a text or other data file?)")
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        if "weights_only" in str(exc) or "Weights only" in str(exc):
            raise CheckpointError(
                f"{path}: refused to load: the file holds Python objects other than tensors and plain "
                "data, which could run code when unpickled. Only load checkpoints you trust, and "
                "never with weights_only=False."
            ) from None
        raise CheckpointError(f"{path}: not a readable checkpoint (corrupt or truncated): {exc}") from None
    except (RuntimeError, EOFError, OSError, ValueError, AttributeError, TypeError) as exc:
        raise CheckpointError(f"{path}: not a readable checkpoint (truncated or corrupt file?): {exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not a molsepnorm checkpoint (no 'format': {FORMAT!r} field)")
    version = data.get("format_version")
    if version == 1:
        data = _upgrade_v1(data)
    elif version != FORMAT_VERSION:
        raise CheckpointError(
            f"{path}: checkpoint format version {version!r}, but molsepnorm {__version__} reads version "
            f"{FORMAT_VERSION}; it was written by molsepnorm {data.get('package_version', '?')}"
        )
    for key in ("model", "task", "featurizer"):
        if key not in data:
            raise CheckpointError(f"{path}: checkpoint has no {key!r} entry")
    return data


def _domain(entry: Optional[Mapping[str, Any]], where: str) -> Optional["ApplicabilityDomain"]:
    """The ``applicability`` entry as a domain (RDKit is imported only for a checkpoint that has
    one).  One this molsepnorm cannot read costs the warnings, not the model: a warning, None."""
    if not entry:
        return None
    from molsepnorm.checkpoint.domain import ApplicabilityDomain

    try:
        return ApplicabilityDomain.from_payload(entry)
    except (KeyError, TypeError, ValueError) as exc:
        warnings.warn(f"{where}: applicability data not read ({exc}); predictions carry no warning", stacklevel=3)
        return None


def _upgrade_v1(data: dict[str, Any]) -> dict[str, Any]:
    """A version-1 payload as version 2: model keys added since then get version 1's behaviour."""
    data = dict(data)
    if isinstance(data.get("model"), dict) and isinstance(data["model"].get("config"), dict):
        data["model"] = {**data["model"], "config": {**_V1_MODEL_DEFAULTS, **data["model"]["config"]}}
    if isinstance(data.get("config"), dict) and isinstance(data["config"].get("model"), dict):
        data["config"] = {**data["config"], "model": {**_V1_MODEL_DEFAULTS, **data["config"]["model"]}}
    data["format_version"] = FORMAT_VERSION
    return data


