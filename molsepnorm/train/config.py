"""Training configuration: a YAML preset, overridden by command-line flags, saved resolved.

A preset (``configs/*.yaml``) has three sections::

    model:   # GraphormerConfig fields (molsepnorm.nn), kept here as a plain dict
    train:   # TrainConfig fields (optimizer, schedule, batches, loss, seed, device)
    data:    # DataConfig fields (which data set, where, how to split a CSV)

Flags override single keys (``{"train.lr": 1e-4, "model.norm": "share"}``); ``None``
means "not given".  The resolved :class:`ExperimentConfig` is written to the run
directory as ``config.yaml`` and is all that :func:`molsepnorm.train.resume` needs.

Importing this module loads neither torch nor the model, so the CLI can offer its choices
cheaply; :meth:`ExperimentConfig.validate` imports the model's config class to check the
``model:`` section before any data is loaded.
"""
from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Union

from molsepnorm.config import (
    NONFINITE,
    PathLike,
    SavesYaml,
    check_choice,
    check_name_or_path,
    check_optimization,
    check_positive,
    check_positive_or_auto,
    dataclass_from,
    dotted_overrides,
    plain_paths,
    read_yaml,
    validate_model_section,
)
from molsepnorm.errors import ConfigError
from molsepnorm.metric_names import BINARY_METRICS, REGRESSION_METRICS

LOSSES = ("auto", "l1", "mse", "bce")
MONITORS = ("auto", *REGRESSION_METRICS, *BINARY_METRICS)  # train.monitor


AUTO_EPOCHS = 50  # epochs="auto": this many epochs ...
AUTO_MIN_STEPS = 500  # ... or more, for at least this many optimizer steps ...
AUTO_MAX_EPOCHS = 100  # ... but never more than this many epochs
AUTO_PATIENCE_FRACTION = 0.3  # patience="auto": stop after this fraction of the run's epochs ...
AUTO_PATIENCE_MIN = 10  # ... (at least this many) without a better validation metric
AUTO_BATCH_SIZE = 32  # batch_size="auto": graphs per batch ...
SMALL_SET_BATCH_SIZE = 64  # ... or this many for regression on a training set of ...
SMALL_SET_MOLECULES = (500, 2000)  # ... at least the first and fewer than the second number of molecules
AUTO_LR = {"regression": 1e-3, "binary": 5e-4}  # lr="auto": the peak learning rate of each task
PATIENCE_OFF = "off"


#: Dropout of a classification run (binary targets) whose model section sets none of the
#: three rates: Graphormer's 0.1 on the embeddings and residual branches, the attention
#: probabilities and after the FFN's activation.  Regression keeps the model's default, none.
CLASSIFICATION_DROPOUT = {"dropout": 0.1, "attention_dropout": 0.1, "activation_dropout": 0.1}


def with_task_defaults(config: "ExperimentConfig", task: str, num_train: int) -> "ExperimentConfig":
    """A copy of ``config`` with the defaults that depend on the task and the data size:

    * for ``task == "binary"``, :data:`CLASSIFICATION_DROPOUT` unless the model section
      gives a dropout rate. On molhiv (a scaffold split, 3.5 % actives) a run without
      dropout reaches its best validation epoch early and scores lower on test; on the
      regression sets measured, dropout made the test error worse (docs/accuracy.md,
      "The classification default");
    * ``train.batch_size="auto"`` from the task and the ``num_train`` training molecules
      (:func:`auto_batch_size`) and ``train.lr="auto"`` from the task (:func:`auto_lr`);
    * the fingerprint companion's model keys from ``train.companion``
      (:func:`molsepnorm.train.companion.resolve_companion`; a model section that sets
      ``companion_bits`` keeps its own buckets)."""
    from molsepnorm.train.companion import companion_model_keys, resolve_companion

    resolved = copy.deepcopy(config)
    if task == "binary" and not any(key in config.model for key in CLASSIFICATION_DROPOUT):
        resolved.model.update(CLASSIFICATION_DROPOUT)
    if resolved.train.batch_size == "auto":
        resolved.train.batch_size = auto_batch_size(task, num_train)
    if resolved.train.lr == "auto":
        resolved.train.lr = auto_lr(task)
    companion = resolve_companion(config.train.companion)
    keys = companion_model_keys(companion, task)
    if companion != "none" and config.model.get("companion_bits"):
        keys.pop("companion_bits")
    resolved.model.update(keys)
    return resolved


def auto_batch_size(task: str, num_train: int) -> int:
    """Graphs per batch of ``batch_size="auto"``: :data:`SMALL_SET_BATCH_SIZE` for regression
    on a training set of 500 to 1,999 molecules (:data:`SMALL_SET_MOLECULES`), else
    :data:`AUTO_BATCH_SIZE`.

    A step on small molecules is mostly the per-operation overhead of a few hundred small
    operations, so 64 graphs cost much less than two steps of 32. On a set of a few
    hundred to a thousand molecules the larger batch at :func:`auto_lr`'s rate trains in
    less time to the same test error; on a set of thousands the smaller batch's extra
    steps still lower the error. Below 500 molecules :func:`auto_epochs`' floor of
    :data:`AUTO_MIN_STEPS` steps sets the run's length at either batch size, so 64 saves no
    time there (on 399 molecules of nci-tpsa it took as long and erred more).
    Classification keeps 32 graphs: on a small set there, 64 lowered the test ROC-AUC and
    saved little time, as its runs stop early (docs/accuracy.md, "Batches and learning
    rate for regression")."""
    low, high = SMALL_SET_MOLECULES
    small = task == "regression" and low <= num_train < high
    return SMALL_SET_BATCH_SIZE if small else AUTO_BATCH_SIZE


def auto_lr(task: str) -> float:
    """Peak learning rate of ``lr="auto"``: :data:`AUTO_LR` of the task, whatever the batch.

    Fine-tuned from the bundled encoder, regression gained from 1e-3 over 5e-4 at either
    batch size (nci-tpsa, Crippen logP; FreeSolv and solubility at 64 graphs), and it lets
    an additive property reach chemprop's error in less time (docs/accuracy.md, "Batches
    and learning rate for regression"); classification keeps the 5e-4 its defaults were
    measured with on molhiv."""
    return AUTO_LR[task]


def resolve_monitor(monitor: str, task: str, metric: str) -> str:
    """The validation metric that picks ``best.pt`` and drives early stopping: ``metric``
    (the data set's) for ``"auto"``, else ``monitor``, which must be a metric of the task
    (:data:`MONITORS`; ``"logloss"`` selects as chemprop does)."""
    if monitor == "auto":
        return metric
    allowed = BINARY_METRICS if task == "binary" else REGRESSION_METRICS
    if monitor not in allowed:
        raise ConfigError(f"train.monitor {monitor!r} is not a {task} metric: use auto or one of "
                          + ", ".join(allowed))
    return monitor


#: ``train.companion``: the fingerprint companion (molsepnorm.train.companion)
COMPANIONS = ("auto", "none", "fingerprint")


#: ``average_best: auto`` in a classification run: best.pt averages the weights of this
#: many best epochs (molsepnorm.train.soup).  Regression keeps the best epoch's weights.
CLASSIFICATION_AVERAGE_BEST = 5


def resolve_average_best(average_best: Union[int, str], task: str) -> int:
    """How many best epochs ``best.pt`` averages: :data:`CLASSIFICATION_AVERAGE_BEST` for
    ``"auto"`` in a classification run (``task == "binary"``), 1 for ``"auto"`` otherwise.

    On molhiv's scaffold split the validation ROC-AUC of consecutive epochs differs by
    points and the single best epoch is often a lucky one; the average of the five best
    was ahead on the mean on both classification sets measured (docs/accuracy.md,
    "Choosing the checkpoint")."""
    if average_best == "auto":
        return CLASSIFICATION_AVERAGE_BEST if task == "binary" else 1
    return int(average_best)


def auto_epochs(steps_per_epoch: int) -> int:
    """Epochs of ``epochs="auto"``: AUTO_EPOCHS, raised on a data set of a few hundred
    molecules to reach AUTO_MIN_STEPS optimizer steps, at most AUTO_MAX_EPOCHS.

    On such sets more epochs kept improving the test error (docs/accuracy.md); the bounds
    keep the training time within chemprop's default 50 epochs on 2 CPU cores."""
    wanted = -(-AUTO_MIN_STEPS // max(1, steps_per_epoch))  # ceil
    return min(AUTO_MAX_EPOCHS, max(AUTO_EPOCHS, wanted))


def auto_patience(epochs: int) -> int:
    """Epochs without improvement after which ``patience="auto"`` stops a run of
    ``epochs`` epochs: AUTO_PATIENCE_FRACTION of them, at least AUTO_PATIENCE_MIN.

    molhiv, which peaks early and then overfits, stops well before its last epoch; no run
    stops before :func:`earliest_stop`."""
    return max(AUTO_PATIENCE_MIN, math.ceil(AUTO_PATIENCE_FRACTION * epochs))


def earliest_stop(patience: Union[int, str, None], epochs: int) -> int:
    """The first epoch at whose start early stopping may end a run of ``epochs`` epochs.

    With ``patience="auto"`` the patience counts from the later of the best epoch and the
    schedule's midpoint, so no run stops before ``epochs // 2 + patience``: in the first
    half the learning rate is high and the validation metric noisy, and an early lucky
    epoch that is not beaten for a while is no sign the run has converged (docs/accuracy.md,
    "The comparison from scratch", its "Early stopping waits for the second half").  An
    explicit patience counts from the best epoch alone: 0."""
    if patience != "auto":
        return 0
    return epochs // 2 + auto_patience(epochs)


def resolve_patience(patience: Union[int, str, None], epochs: int) -> Optional[int]:
    """The early-stopping patience in epochs of a run of ``epochs`` epochs; None: off."""
    if patience is None or patience == PATIENCE_OFF:
        return None
    if patience == "auto":
        return auto_patience(epochs)
    return int(patience)


@dataclass
class TrainConfig:
    """How to train: optimizer, schedule, batches, loss, seed and device.

    The optimizer is the published Graphormer recipe's (AdamW, warm-up then linear decay
    to 1e-9, weight decay 0.01, gradient clipping at norm 5). The defaults of length,
    learning rate and batches were chosen by ablation against chemprop's defaults on
    2 CPU cores (docs/accuracy.md): ``epochs="auto"``, 5 % warm-up, batches of molecules of
    similar size, 32 of them (64 for regression on 500 to 1,999 training molecules), a peak
    learning rate of 1e-3 for regression and 5e-4 for classification (``batch_size="auto"``,
    ``lr="auto"``, resolved by :func:`with_task_defaults`).
    """

    # epochs to run: a number; "auto": AUTO_EPOCHS, more on a small data set (at least
    # AUTO_MIN_STEPS optimizer steps, at most AUTO_MAX_EPOCHS epochs); None: as many as
    # max_steps needs
    epochs: Union[int, str, None] = "auto"
    max_steps: Optional[int] = None  # optimizer steps; stops mid-epoch when reached
    # graphs per batch (per device under DDP); "auto": auto_batch_size of the training set's size
    batch_size: Union[int, str] = "auto"
    eval_batch_size: Optional[int] = None  # graphs per evaluation batch; None: 2 * batch_size
    batching: str = "bucket"  # "random": shuffled batches of batch_size graphs;
    # "bucket": size-bucketed batches under max_tokens (at most batch_size graphs)
    max_tokens: Optional[int] = None  # token budget of a bucketed batch; None: batch_size * (mean atoms + 1)
    lr: Union[float, str] = "auto"  # peak learning rate; "auto": auto_lr of the task
    end_lr: float = 1e-9  # learning rate at the last step
    warmup_steps: Optional[int] = None  # linear warm-up steps; None: warmup_fraction of all steps
    warmup_fraction: float = 0.05
    weight_decay: float = 0.01
    adam_betas: tuple[float, float] = (0.9, 0.999)
    adam_eps: float = 1e-8
    clip_norm: Optional[float] = 5.0  # max gradient norm; None: no clipping
    ema_decay: Optional[float] = None  # evaluate and save a moving average of the weights (molsepnorm.train.ema); None: off
    loss: str = "auto"  # "l1" | "mse" | "bce" | "auto" (l1 for regression, bce for binary)
    standardize_targets: bool = True  # regression targets scaled to mean 0, std 1 for training
    seed: int = 0
    device: str = "auto"  # "cpu" | "cuda" | "auto" (cuda when available)
    precision: str = "auto"  # "fp32" | "bf16" (autocast, CUDA only) | "auto" (bf16 on CUDA)
    num_workers: int = 0  # DataLoader workers
    # the validation metric that picks best.pt and drives early stopping: a metric name; "auto": the
    # data set's (resolve_monitor)
    monitor: str = "auto"
    # best.pt: the weights of the best epoch (1), or the average of the weights of this many best epochs
    # (molsepnorm.train.soup); "auto": CLASSIFICATION_AVERAGE_BEST for classification, 1 for regression
    average_best: Union[int, str] = "auto"
    # a linear model on substructure counts fitted on the training split and blended with the Graphormer
    # (molsepnorm.train.companion): "auto" (= "fingerprint") | "fingerprint" | "none"; the blend weight
    # on it, in (0, 1], or "auto": 0.5 for binary targets, chosen per target on validation for regression
    companion: str = "auto"
    companion_weight: Union[float, str] = "auto"
    # regression with companion_weight "auto": fit the companion before the first epoch and let the
    # validation metric of the blend (its weights chosen anew every epoch) pick best.pt and drive early
    # stopping; False: the Graphormer's own metric does, and the companion is fitted after the last epoch
    monitor_blend: bool = True
    # early stopping: a number of epochs without a better validation metric; "auto":
    # AUTO_PATIENCE_FRACTION of the epochs (at least AUTO_PATIENCE_MIN); "off" or None: never
    patience: Union[int, str, None] = "auto"
    checkpoint_every_steps: Optional[int] = None  # also write last.pt every N steps mid-epoch
    # at an epoch's end, write last.pt only once this many seconds of training have passed since the
    # previous write (the run's last epoch always writes it); 0: every epoch. A kill loses at most this much.
    checkpoint_every_seconds: float = 30.0
    threads: Optional[int] = None  # torch.set_num_threads on CPU; None: leave as is
    cpu_malloc: str = "heap"  # CPU: "heap" (glibc keeps large tensors in its heap: faster, more memory) | "default"
    on_nonfinite: str = "stop"  # NaN/inf loss or gradient: "stop" (error naming step and batch) | "skip" the batch
    max_skipped_batches: int = 10  # with "skip": stop after this many non-finite batches in a row
    progress: bool = True  # progress bar on the terminal (rank 0 only)
    # fine-tuning (molsepnorm.train.init): a checkpoint file or bundled model name whose encoder starts the
    # model (its architecture overrides the model section); "auto": the bundled encoder of the data's
    # vocabulary when the model section is its architecture (the default one), else none; "none" or
    # None: from scratch. freeze_encoder: train the head only
    init: Optional[str] = "auto"
    freeze_encoder: bool = False

    def validate(self) -> None:
        """Raise :class:`ConfigError` naming the first invalid value."""
        if self.epochs is None and self.max_steps is None:
            raise ConfigError("train: give epochs or max_steps (or both)")
        check_positive_or_auto("train.epochs", self.epochs, allow_none=True)
        check_positive("train.max_steps", self.max_steps, allow_none=True)
        check_positive_or_auto("train.batch_size", self.batch_size)
        lr = self.lr
        if lr != "auto" and (isinstance(lr, bool) or not isinstance(lr, (int, float)) or not lr > 0):
            raise ConfigError(f"train.lr must be a number > 0 or 'auto', got {lr!r}")
        check_positive("train.eval_batch_size", self.eval_batch_size, allow_none=True)
        check_positive("train.max_tokens", self.max_tokens, allow_none=True)
        if self.patience not in ("auto", PATIENCE_OFF):
            try:
                check_positive("train.patience", self.patience, allow_none=True)
            except ConfigError:
                raise ConfigError(f"train.patience must be a positive integer, 'auto' or 'off', "
                                  f"got {self.patience!r}") from None
        check_positive("train.checkpoint_every_steps", self.checkpoint_every_steps, allow_none=True)
        seconds = self.checkpoint_every_seconds
        if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or not seconds >= 0:
            raise ConfigError(f"train.checkpoint_every_seconds must be a number >= 0, got {seconds!r}")
        check_positive("train.threads", self.threads, allow_none=True)
        check_positive("train.max_skipped_batches", self.max_skipped_batches)
        check_choice("train.on_nonfinite", self.on_nonfinite, NONFINITE)
        check_choice("train.monitor", self.monitor, MONITORS)
        check_positive_or_auto("train.average_best", self.average_best)
        check_choice("train.companion", self.companion, COMPANIONS)
        weight = self.companion_weight
        if weight != "auto" and (not isinstance(weight, (int, float)) or isinstance(weight, bool)
                                 or not 0 < weight <= 1):
            raise ConfigError(f"train.companion_weight must be a number in (0, 1] or 'auto', got {weight!r}")
        if self.warmup_steps is not None and self.warmup_steps < 0:
            raise ConfigError(f"train.warmup_steps must be >= 0, got {self.warmup_steps}")
        if self.ema_decay is not None and not 0 < self.ema_decay < 1:
            raise ConfigError(f"train.ema_decay must be in (0, 1) or null, got {self.ema_decay}")
        check_optimization("train", self, lowest_auto_lr=min(AUTO_LR.values()))
        check_choice("train.loss", self.loss, LOSSES)
        if self.init is not None and not isinstance(self.init, str):
            raise ConfigError(f"train.init must be a checkpoint path or model name, got {self.init!r}")
        for key in ("freeze_encoder", "monitor_blend"):
            if not isinstance(getattr(self, key), bool):
                raise ConfigError(f"train.{key} must be true or false, got {getattr(self, key)!r}")


@dataclass
class DataConfig:
    """Which data set to train on, where its raw files are, and how to split a CSV.

    ``dataset`` is a registered name (``zinc-subset``, ``zinc``, ``molhiv``, ``nci-tpsa``, ...)
    or the path of a CSV / SDF / SMILES file; ``options`` are passed on to
    :func:`molsepnorm.load_dataset` (for a CSV: ``smiles_column``, ``target_columns``,
    ``split``, ``seed``, ...).
    """

    dataset: Optional[str] = None
    data_root: Optional[str] = None
    options: dict[str, Any] = field(default_factory=dict)
    # train on a random fraction of the training split only (validation and test as they
    # are): learning curves, and fine-tuning with few labels (docs/pretraining.md)
    train_fraction: float = 1.0
    # the seed that draws that fraction (independent of train.seed: runs with other model
    # seeds train on the same molecules; another value draws another subset)
    train_fraction_seed: int = 0

    def validate(self) -> None:
        """Raise :class:`ConfigError` if no data set is named."""
        check_name_or_path("data.dataset", self.dataset, "data set", "give --dataset NAME or a CSV path")
        if isinstance(self.train_fraction, bool) or not isinstance(self.train_fraction, (int, float)) \
                or not 0 < self.train_fraction <= 1:
            raise ConfigError(f"data.train_fraction must be in (0, 1], got {self.train_fraction!r}")
        if isinstance(self.train_fraction_seed, bool) or not isinstance(self.train_fraction_seed, int) \
                or self.train_fraction_seed < 0:
            raise ConfigError(f"data.train_fraction_seed must be an integer >= 0, got {self.train_fraction_seed!r}")
        if self.train_fraction_seed and self.train_fraction == 1:
            raise ConfigError(f"data.train_fraction_seed is {self.train_fraction_seed} but data.train_fraction is 1: "
                              "the seed draws a fraction of the training split; give --train-fraction F below 1 too")
        if not isinstance(self.options, dict):
            raise ConfigError(f"data.options must be a mapping, got {type(self.options).__name__}")


@dataclass
class ExperimentConfig(SavesYaml):
    """Model, training and data configuration of one run."""

    model: dict[str, Any] = field(default_factory=dict)
    train: TrainConfig = field(default_factory=TrainConfig)
    data: DataConfig = field(default_factory=DataConfig)

    def validate(self) -> None:
        """Check every section, the model's included, before any data is loaded.

        Raises:
            ConfigError: naming the key and, for a choice, the allowed values.
        """
        self.train.validate()
        self.data.validate()
        validate_model_section(self.model)
        self.check_writable()

    def to_dict(self) -> dict[str, Any]:
        """A plain-data copy (YAML- and checkpoint-safe)."""
        train = dataclasses.asdict(self.train)
        train["adam_betas"] = [float(b) for b in self.train.adam_betas]
        return plain_paths({"model": dict(self.model), "train": train, "data": dataclasses.asdict(self.data)})

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], source: str = "configuration") -> "ExperimentConfig":
        """Build from ``{"model": ..., "train": ..., "data": ...}``; unknown keys are errors."""
        unknown = set(raw) - {"model", "train", "data"}
        if unknown:
            raise ConfigError(f"{source}: unknown section(s) {sorted(unknown)}; expected model, train, data")
        model = raw.get("model") or {}
        if not isinstance(model, Mapping):
            raise ConfigError(f"{source}: section 'model' must be a mapping")
        train = dataclass_from(TrainConfig, raw.get("train") or {}, f"{source}: train")
        train.adam_betas = tuple(float(b) for b in train.adam_betas)  # type: ignore[assignment]
        data = dataclass_from(DataConfig, raw.get("data") or {}, f"{source}: data")
        data.options = dict(data.options or {})
        return cls(model=dict(model), train=train, data=data)


def load_experiment_config(
    path: Optional[PathLike] = None, overrides: Optional[Mapping[str, Any]] = None
) -> ExperimentConfig:
    """Read a preset (or start from the defaults) and apply dotted-key overrides.

    Args:
        path: a YAML file with ``model:``, ``train:`` and ``data:`` sections, or None.
        overrides: ``{"train.lr": 1e-4, "model.norm": "share", ...}``; ``None`` values are
            ignored (flag not given).

    Returns:
        The merged, validated configuration.
    """
    raw = read_yaml(path) if path is not None else {}
    source = str(path) if path is not None else "configuration"
    config = ExperimentConfig.from_dict(raw, source=source)
    config = apply_overrides(config, overrides or {})
    config.validate()
    return config


def apply_overrides(config: ExperimentConfig, overrides: Mapping[str, Any]) -> ExperimentConfig:
    """A copy of ``config`` with ``section.key`` values replaced (``None`` values skipped)."""
    raw = config.to_dict()
    for section, key, value in dotted_overrides(overrides, ("model", "train", "data")):
        if section == "data" and key not in {f.name for f in dataclasses.fields(DataConfig)}:
            raw["data"]["options"][key] = value  # a load_dataset option such as smiles_column
        else:
            raw[section][key] = value
    return ExperimentConfig.from_dict(raw, source="overrides")


