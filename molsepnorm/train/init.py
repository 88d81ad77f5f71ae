"""Fine-tuning from an existing model: ``molsepnorm train --init CKPT|NAME [--freeze-encoder]``.

The init checkpoint is any molsepnorm checkpoint read by the one loader
(:meth:`Checkpoint.load <molsepnorm.checkpoint.Checkpoint.load>`): a pretrained encoder
(``molsepnorm pretrain``'s ``encoder.pt`` / ``last.pt``, task ``"pretrained"``), a
bundled model by name, or a fine-tuned ``best.pt`` / ``last.pt``.

* The **architecture** is the checkpoint's: every key of its model config but dropout and
  the head (:data:`OWN_KEYS`) replaces the training config's (a different value given in
  the config is named in a warning).  The data must be featurized in its vocabulary: a CSV
  or SDF is featurized so unless ``--vocab`` says otherwise; a benchmark in another
  vocabulary is an error naming both.
* The **weights** of the encoder are loaded; the **head** is kept when the checkpoint was
  trained on the same task and targets (continuing a fine-tuned model; its target scaling
  too), otherwise a new head is initialised and the log says so.
* **By default** (``train.init: auto``) a run fine-tunes the bundled encoder of its data's
  vocabulary and task (:func:`~molsepnorm.checkpoint.bundled.default_encoder`) when the model
  section asks for nothing but that encoder's architecture, and trains from scratch when
  it names another (a ShareNorm, a deeper model); ``--init none`` trains from scratch.
  :func:`resolve_init` decides, and the run's ``config.yaml`` records the outcome.
* ``--freeze-encoder`` (a linear probe): only the head trains; the encoder's parameters
  get no gradient and its modules stay in eval mode (no dropout, norm statistics fixed).
"""
from __future__ import annotations

import copy
import logging
from typing import Any, Optional

from torch import nn

from molsepnorm.checkpoint import Checkpoint
from molsepnorm.checkpoint.scaling import TargetScaler
from molsepnorm.errors import MolsepnormError
from molsepnorm.train.config import ExperimentConfig
from molsepnorm.train.logs import LOGGER_NAME

log = logging.getLogger(LOGGER_NAME)

#: Model keys a fine-tuning takes from its own config (default: the init checkpoint's):
#: regularization, and the head (which is new unless the task and targets match).
OWN_KEYS = ("dropout", "attention_dropout", "activation_dropout", "readout", "num_tasks", "companion_bits",
            "companion_radius", "companion_blend", "companion_counts")
HEAD = "head."  # the task head's parameters in a Graphormer state dict
COMPANION = "companion."  # the fingerprint companion's buffers: refitted by every run, never loaded
AUTO, NONE = "auto", "none"  # train.init: the default encoder if it fits; from scratch
#: model keys that come from the data, not the architecture
DATA_KEYS = ("atom_dims", "bond_dims", "vocab")


class InitError(MolsepnormError, ValueError):
    """The init checkpoint cannot start this training run (missing, another vocabulary, ...)."""


def load_init(spec: str) -> Checkpoint:
    """The checkpoint named by ``--init``: a file or a bundled model name.

    Raises:
        InitError: naming ``spec`` and why it cannot be read.
    """
    try:
        return Checkpoint.load(spec)
    except MolsepnormError as err:
        raise InitError(f"--init {spec}: {err}") from None


def explicit_init(spec: Optional[str]) -> Optional[str]:
    """``train.init`` when it names a checkpoint or model, else None (``auto``, ``none``, unset)."""
    return None if spec is None or spec in (AUTO, NONE) else spec


def resolve_init(config: ExperimentConfig, vocab: str, task: str) -> tuple[Optional[str], Optional[Checkpoint]]:
    """What a run of ``config`` on data in ``vocab`` with ``task`` starts from: ``(spec,
    checkpoint)``, or ``(None, None)`` for from scratch.  ``train.init`` itself unless it
    is ``auto``, which means the bundled encoder of ``vocab`` and ``task``
    (:func:`~molsepnorm.checkpoint.bundled.default_encoder`) when every architecture key
    the model section gives has that encoder's value (the log says which, and why not).
    The checkpoint is read once, here."""
    from molsepnorm.checkpoint.bundled import default_encoder

    spec = config.train.init
    if spec != AUTO:
        spec = explicit_init(spec)
        return spec, (load_init(spec) if spec else None)
    name = default_encoder(vocab, task)
    if name is None:
        log.info("init: from scratch (no bundled encoder reads the %r vocabulary)", vocab)
        return None, None
    encoder = load_init(name)
    differ = sorted(key for key, value in dict(config.model).items()
                    if key not in OWN_KEYS + DATA_KEYS and encoder.model_config.get(key) != value)
    if differ:
        log.info("init: from scratch (train.init auto): %s %s not the bundled encoder %s's",
                 ", ".join(f"model.{key}" for key in differ), "is" if len(differ) == 1 else "are", name)
        return None, None
    return name, encoder


def keeps_head(init: Checkpoint, splits: Any) -> bool:
    """Whether the init's head predicts this data set's task and targets (then it is kept)."""
    return init.task.type == splits.task and list(init.task.target_names) == list(splits.target_names)


def with_init_vocabulary(config: ExperimentConfig) -> ExperimentConfig:
    """A copy of ``config`` whose CSV / SDF data set is featurized in the init's vocabulary
    (unless the data options name one): call before the data is loaded."""
    from molsepnorm.data.registry import looks_like_table

    spec = explicit_init(config.train.init)
    if spec is None or "vocab" in config.data.options or not looks_like_table(str(config.data.dataset)):
        return config
    resolved = copy.deepcopy(config)
    resolved.data.options["vocab"] = load_init(spec).featurizer.vocab
    return resolved


def init_config(config: ExperimentConfig, init: Checkpoint, splits: Any) -> ExperimentConfig:
    """A copy of ``config`` whose model section is the init's architecture (see the module docstring).

    Raises:
        InitError: the data set is featurized in another vocabulary than the init's.
    """
    vocab = init.featurizer.vocab
    if splits.vocab != vocab:
        hint = (f"; featurize it as the encoder was with --vocab {vocab}" if _is_file(config) else
                f"; choose an init checkpoint in the {splits.vocab!r} vocabulary")
        raise InitError(f"--init {init.name}: the encoder reads the {vocab!r} atom vocabulary but {splits.name} is "
                        f"featurized with {splits.vocab!r}{hint}")
    resolved = copy.deepcopy(config)
    given, encoder = dict(config.model), dict(init.model_config)
    model = {key: value for key, value in encoder.items() if key not in OWN_KEYS}
    for key, value in model.items():
        if key in given and given[key] != value and key not in ("atom_dims", "bond_dims"):
            log.warning("model.%s is %r in the configuration but %r in the init checkpoint %s: the checkpoint's "
                        "is used", key, given[key], value, init.name)
    for key in OWN_KEYS:
        if key in given:
            model[key] = given[key]
        elif key in encoder and key != "num_tasks":
            model[key] = encoder[key]
    if keeps_head(init, splits):
        model["readout"] = encoder.get("readout", model.get("readout"))  # the kept head reads what it read
    resolved.model = model
    return resolved


def load_init_weights(model: nn.Module, init: Checkpoint, splits: Any) -> None:
    """Load the init's encoder weights (and its head, if :func:`keeps_head`) into ``model``.

    Raises:
        InitError: a weight of the encoder is missing from the checkpoint or does not fit.
    """
    keep = keeps_head(init, splits)
    state = {k: v for k, v in init.state_dict.items()
             if (keep or not k.startswith(HEAD)) and not k.startswith(COMPANION)}
    try:
        missing, unexpected = model.load_state_dict(state, strict=False)
    except RuntimeError as err:
        raise InitError(f"--init {init.name}: its weights do not fit the model: {err}") from None
    bad = [k for k in missing if keep or not k.startswith(HEAD)] + list(unexpected)
    if bad:
        raise InitError(f"--init {init.name}: the checkpoint does not match the model (missing or unexpected "
                        f"weights: {', '.join(bad[:6])}{' ...' if len(bad) > 6 else ''})")
    what = f"{init.task.type} on {init.data.name or init.data.dataset}, step {init.step}"
    if keep:
        log.info("init: encoder and head from %s (%s): same task and targets", init.name, what)
    else:
        log.info("init: encoder from %s (%s); a new head for %s (%s)", init.name, what, splits.task,
                 ", ".join(splits.target_names))


def init_scaler(init: Optional[Checkpoint], splits: Any, fitted: Optional[TargetScaler]) -> Optional[TargetScaler]:
    """The target scaling of a run: a kept head's own, else the one fitted on this data."""
    if init is not None and fitted is not None and init.target_scaling is not None and keeps_head(init, splits):
        return init.target_scaling
    return fitted


def freeze_encoder(model: nn.Module) -> int:
    """Stop gradients to every parameter but the head's; returns the parameters left to train."""
    trainable = 0
    for name, parameter in model.named_parameters():
        head = name.startswith(HEAD)
        parameter.requires_grad_(head)
        trainable += parameter.numel() if head else 0
    return trainable


def encoder_eval(model: nn.Module) -> None:
    """Put every module of a frozen encoder in eval mode (after ``model.train()``): no
    dropout, and its norms' running statistics neither used from the batch nor updated."""
    for name, module in model.named_children():
        if name != HEAD.rstrip("."):
            module.eval()


def _is_file(config: ExperimentConfig) -> bool:
    from molsepnorm.data.registry import looks_like_table

    return looks_like_table(str(config.data.dataset))
