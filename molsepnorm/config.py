"""What every run's configuration shares (training's, molsepnorm.train.config, and
pretraining's, molsepnorm.pretrain.config): YAML read with errors naming the file and
written atomically, dotted overrides (``{"train.lr": 1e-4}``), sections as dataclasses
whose unknown keys are errors, checks of single values that name the key, the ``model:``
section checked against the Graphormer's config, and the optimizer and schedule keys
``train:`` and ``pretrain:`` share.

Importing this module loads neither torch nor the model: the CLI reads its choices.
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional, Union

import yaml

from molsepnorm._yaml import safe_load
from molsepnorm.errors import ConfigError
from molsepnorm.inference.device import DEVICES

PathLike = Union[str, os.PathLike]

# choices of the keys train: and pretrain: share
BATCHINGS = ("random", "bucket")
NONFINITE = ("stop", "skip")
CPU_MALLOC = ("heap", "default")  # cpu_malloc: see molsepnorm.train.allocator
PRECISIONS = ("auto", "fp32", "bf16")


class SavesYaml:
    """``save_yaml`` for a configuration with ``to_dict`` (training and pretraining runs)."""

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def save_yaml(self, path: PathLike) -> None:
        """Write the configuration to ``path`` as YAML, atomically (a torn one would block resume)."""
        from molsepnorm._atomic import atomic_write

        with atomic_write(path, fixed_temporary=True) as fh:
            fh.write(yaml.safe_dump(self.to_dict(), sort_keys=False))

    def check_writable(self) -> None:
        """Raise :class:`ConfigError` now, before any data is loaded, if a value cannot be written
        to the run's ``config.yaml`` (a numpy array or number, a ``pandas.Index`` given from Python),
        naming the first such value."""
        found = _unwritable(self.to_dict(), "")
        if found is not None:
            name, value = found
            kind = f"{type(value).__module__.split('.')[0]}.{type(value).__name__}"  # numpy.ndarray
            raise ConfigError(f"{name} is a {kind}, which the run's config.yaml cannot hold: give plain Python "
                              "values (str, int, float, bool, and lists and dicts of them: list(...), float(...))")


def _unwritable(value: Any, name: str) -> Optional[tuple[str, Any]]:
    """The dotted name and value of the first leaf of ``value`` YAML cannot write, or None."""
    if isinstance(value, dict):
        items = [(f"{name}.{key}" if name else str(key), item) for key, item in value.items()]
    elif isinstance(value, (list, tuple)):
        items = [(f"{name}[{i}]", item) for i, item in enumerate(value)]
    else:
        try:
            yaml.safe_dump(value)
        except yaml.YAMLError:
            return name, value
        return None
    return next((found for key, item in items if (found := _unwritable(item, key)) is not None), None)


# model keys whose default is a value but which also take null (see GraphormerConfig)
_OPTIONAL_MODEL_KEYS = ("first_cls_norm",)


def validate_model_section(model: Mapping[str, Any]) -> None:
    """Check the ``model:`` section against :class:`~molsepnorm.nn.graphormer.GraphormerConfig`
    (keys, choices, ranges); the vocabulary and number of targets come from the data later.

    Raises:
        ConfigError: ``model: ...`` naming the key and the allowed values.
    """
    if not isinstance(model, Mapping):
        raise ConfigError(f"section 'model' must be a mapping, got {type(model).__name__}")
    from molsepnorm.nn.graphormer import GraphormerConfig

    defaults = {f.name: f.default for f in dataclasses.fields(GraphormerConfig)}
    for key, value in model.items():
        default = defaults.get(key)
        optional_none = value is None and key in _OPTIONAL_MODEL_KEYS
        if isinstance(default, (bool, int, float, str)) and not optional_none and not _same_kind(value, default):
            raise ConfigError(f"model.{key} must be {type(default).__name__}, got {value!r}")
    try:
        GraphormerConfig.from_dict(dict(model))
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"model: {exc}") from None


def _same_kind(value: Any, default: Any) -> bool:
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(default, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float))
    return isinstance(value, type(default))


def read_yaml(path: PathLike) -> dict[str, Any]:
    """Read a YAML mapping, with errors that name the file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"configuration file not found: {path}") from None
    try:
        raw = safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping of sections (model:, train:, ...)")
    return raw


def plain_paths(value: Any) -> Any:
    """``value`` with every ``os.PathLike`` inside it (a notebook's ``Path``) made a ``str``,
    as YAML and checkpoints store it."""
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, dict):
        return {k: plain_paths(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(plain_paths(v) for v in value)
    return value


def dotted_overrides(overrides: Mapping[str, Any], sections: tuple[str, ...]) -> Iterator[tuple[str, str, Any]]:
    """``(section, key, value)`` of each ``section.key`` override given (a ``None`` value is a
    flag not given: skipped); a section not in ``sections`` is a :class:`ConfigError`."""
    for dotted, value in overrides.items():
        if value is None:
            continue
        section, _, key = dotted.partition(".")
        if section not in sections or not key:
            expected = ", ".join(f"{name}.KEY" for name in sections[:-1]) + f" or {sections[-1]}.KEY"
            raise ConfigError(f"override {dotted!r}: expected {expected}")
        yield section, key, value


def dataclass_from(cls: type, values: Mapping[str, Any], where: str) -> Any:
    """``cls(**values)`` for a config section's dataclass; a section that is not a mapping,
    or a key ``cls`` has no field for, is a :class:`ConfigError` starting with ``where``
    (``"configs/x.yaml: train"``) and listing the known keys."""
    if not isinstance(values, Mapping):
        raise ConfigError(f"{where} must be a mapping")
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(values) - names
    if unknown:
        import difflib

        close = {key: difflib.get_close_matches(str(key), names, n=1) for key in sorted(unknown, key=str)}
        meant = "; ".join(f"{key!r}: did you mean {match[0]!r}?" for key, match in close.items() if match)
        raise ConfigError(f"{where}: unknown key(s) {sorted(unknown, key=str)}" + (f" ({meant})" if meant else "")
                          + f"; known: {sorted(names)}")
    for key in dataclasses.fields(cls):  # numbers and switches: a quoted value is an error, not text
        value = values.get(key.name, key.default)
        if value is None and ("Optional" in str(key.type) or "None" in str(key.type)):
            continue
        if isinstance(key.default, float) and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ConfigError(f"{where}.{key.name} must be a number, got {value!r}")
        if isinstance(key.default, bool) and not isinstance(value, bool):
            raise ConfigError(f"{where}.{key.name} must be true or false, got {value!r}")
    try:
        return cls(**values)
    except TypeError as exc:  # pragma: no cover - guarded by the key check above
        raise ConfigError(f"{where}: {exc}") from None


def check_name_or_path(name: str, value: Any, what: str, how: str) -> None:
    """Raise :class:`ConfigError` unless ``value`` is a non-empty name or path (a DataFrame
    from a notebook is told how to become a file); ``how``: what to give when it is unset."""
    if value is not None and not isinstance(value, (str, os.PathLike)):
        from molsepnorm.data.registry import dataframe_hint

        raise ConfigError(f"{name} must be a {what} name or a file path, got a {type(value).__name__}"
                          f"{dataframe_hint(value)}")
    if value is None or not str(value):
        raise ConfigError(f"{name} is not set: {how}")


def check_positive(name: str, value: Optional[int], allow_none: bool = False) -> None:
    """Raise :class:`ConfigError` unless ``value`` is an integer > 0 (not a bool), or None
    with ``allow_none``; ``name`` is the dotted key (``train.batch_size``)."""
    if value is None and allow_none:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")


def check_choice(name: str, value: Any, choices: tuple[str, ...]) -> None:
    """Raise :class:`ConfigError` naming the key and the allowed values unless ``value`` is one."""
    if value not in choices:
        raise ConfigError(f"{name} must be one of {', '.join(choices)}; got {value!r}")


def check_positive_or_auto(name: str, value: Union[int, str, None], allow_none: bool = False) -> None:
    """Like :func:`check_positive`, also accepting ``"auto"``; the error says both."""
    if value == "auto":
        return
    try:
        check_positive(name, value, allow_none=allow_none)
    except ConfigError:
        raise ConfigError(f"{name} must be a positive integer or 'auto', got {value!r}") from None


def check_optimization(section: str, options: Any, lowest_auto_lr: Optional[float] = None) -> None:
    """Check the keys ``train:`` and ``pretrain:`` share, which mean the same in both: the
    optimizer and schedule (``lr``, ``end_lr``, ``warmup_fraction``, ``weight_decay``,
    ``clip_norm``, ``adam_betas``), ``num_workers``, ``batching``, ``device``,
    ``precision`` and ``cpu_malloc`` of ``options`` (a
    :class:`~molsepnorm.train.config.TrainConfig` or
    :class:`~molsepnorm.pretrain.config.PretrainOptions`). ``lowest_auto_lr``: where
    ``lr`` may be ``"auto"`` (training, which resolves it with the data), the lowest rate it
    can resolve to, which ``end_lr`` must not exceed.

    Raises:
        ConfigError: ``<section>.<key> ...`` for the first invalid value.
    """
    lr = options.lr
    if lr == "auto" and lowest_auto_lr is not None:
        lr = lowest_auto_lr
    if isinstance(lr, bool) or not isinstance(lr, (int, float)):
        raise ConfigError(f"{section}.lr must be a number > 0, got {lr!r}")
    if not lr > 0:
        raise ConfigError(f"{section}.lr must be positive, got {lr}")
    if not 0 <= options.end_lr <= lr:
        raise ConfigError(f"{section}.end_lr must be in [0, lr], got {options.end_lr}")
    if not 0 <= options.warmup_fraction < 1:
        raise ConfigError(f"{section}.warmup_fraction must be in [0, 1), got {options.warmup_fraction}")
    if options.weight_decay < 0:
        raise ConfigError(f"{section}.weight_decay must be >= 0, got {options.weight_decay}")
    if options.clip_norm is not None and not options.clip_norm > 0:
        raise ConfigError(f"{section}.clip_norm must be positive or null, got {options.clip_norm}")
    if len(options.adam_betas) != 2:
        raise ConfigError(f"{section}.adam_betas must have two values, got {options.adam_betas}")
    if options.num_workers < 0:
        raise ConfigError(f"{section}.num_workers must be >= 0, got {options.num_workers}")
    check_choice(f"{section}.batching", options.batching, BATCHINGS)
    check_choice(f"{section}.device", options.device, DEVICES)
    check_choice(f"{section}.precision", options.precision, PRECISIONS)
    check_choice(f"{section}.cpu_malloc", options.cpu_malloc, CPU_MALLOC)
