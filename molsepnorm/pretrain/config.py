"""Pretraining configuration: a YAML preset, overridden by flags, saved resolved.

A preset has three sections::

    model:     # GraphormerConfig fields (molsepnorm.nn): the encoder to pretrain
    pretrain:  # PretrainOptions: objective, optimizer, budget, batches, seed, device
    corpus:    # CorpusConfig: the unlabelled molecules and how to read them

A training preset (``configs/tiny.yaml``: ``model:`` / ``train:`` / ``data:``) is accepted
too: its ``model:`` section gives the encoder, its other sections are left out (they
describe supervised training).  Names shared with ``molsepnorm train`` (``batch_size``,
``lr``, ``warmup_steps``, ``seed``, ...) mean the same thing.  Importing this module loads
neither torch nor the model.
"""
from __future__ import annotations

import dataclasses
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
    dataclass_from,
    dotted_overrides,
    plain_paths,
    read_yaml,
    validate_model_section,
)
from molsepnorm.errors import ConfigError

#: ``masked``: masked-atom prediction (Hu et al., ICLR 2020); ``contrastive``: InfoNCE between
#: two views of each molecule's graph token (SimCSE, Gao et al. 2021; GraphCL, You et al. 2020);
#: ``both``: their weighted sum.
OBJECTIVES = ("masked", "contrastive", "both")
#: How the two views of the contrastive objective differ: ``mask`` (atom attributes masked,
#: GraphCL), ``drop_nodes`` (atoms left out as tokens, GraphCL), ``dropout`` (the model's own
#: dropout only, SimCSE; needs ``model.dropout`` > 0).
AUGMENTATIONS = ("mask", "drop_nodes", "dropout")
#: What a masked atom's head predicts: ``type`` (the first atom column: the element in the
#: OGB vocabulary, the ZINC atom type), ``all`` (every atom column, one softmax each) or
#: ``context`` (every column, plus the atom's environment -- its columns and its bonded
#: neighbours' elements and bond types -- as one hashed class, after GROVER, Rong et al. 2020).
MASK_TARGETS = ("type", "all", "context")
#: The scale the motif head predicts counts on: ``log`` (log(1 + count)) or ``linear`` (the
#: count itself, which a sum over atom states can represent exactly).
MOTIF_SCALES = ("log", "linear")
#: Which atoms the atom head is scored on: ``masked`` (Hu et al. 2020: only the masked ones,
#: from their context) or ``all`` (the masked ones from their context plus the visible ones
#: reconstructed, the two losses averaged: the final atom states then keep each atom's own
#: chemistry, which a fine-tuned readout of the atom states needs).
ATOM_LOSSES = ("masked", "all")
#: The atom head between the final atom states and the masked-atom logits: ``linear`` (Hu et
#: al. 2020) or ``mlp`` (Linear-GELU-Linear, a small decoder that, like MAE's and GraphMAE's,
#: takes on the pretext's specifics and is dropped after pretraining).
ATOM_HEADS = ("linear", "mlp")
#: Time-budget-only runs: warm-up steps when ``warmup_steps`` is not given.
DEFAULT_WARMUP_WITHOUT_MAX_STEPS = 500


@dataclass
class PretrainOptions:
    """How to pretrain: the objective, the optimizer and schedule, the budget, batches, device.

    The optimizer is ``molsepnorm train``'s (AdamW, linear warm-up then linear decay over
    ``max_steps``, clipping).  With ``time_budget`` alone the length is unknown: the
    learning rate warms up over ``warmup_steps`` (default 500) and then stays at ``lr``.
    """

    # the defaults: the recipe that fine-tuned best of those measured (docs/pretraining.md)
    objective: str = "masked"  # see OBJECTIVES
    mask_rate: float = 0.15  # fraction of each molecule's atoms masked (at least one)
    mask_targets: str = "all"  # see MASK_TARGETS
    atom_loss: str = "all"  # see ATOM_LOSSES
    atom_head: str = "linear"  # see ATOM_HEADS
    augment: list[str] = field(default_factory=lambda: ["mask"])  # contrastive views; see AUGMENTATIONS
    drop_rate: float = 0.1  # drop_nodes: fraction of each molecule's atoms left out (never all)
    temperature: float = 0.1  # InfoNCE temperature
    masked_weight: float = 1.0  # weight of the masked-atom loss in "both"
    contrastive_weight: float = 1.0  # weight of the contrastive loss in "both"
    motif_weight: float = 1.0  # > 0: add the functional-group count loss (GROVER's motifs) with this weight; 0: off
    motif_scale: str = "log"  # see MOTIF_SCALES
    motif_environments: int = 0  # > 0: the motif targets also count atom environments (radius 0, 1) in this many buckets
    descriptor_weight: float = 0.0  # > 0: add the readout's regression of RDKit's 2D descriptors (ChemBERTa-2's MTR) with this weight
    max_steps: Optional[int] = None  # optimizer steps
    time_budget: Optional[float] = None  # minutes of training (summed over resumes)
    batch_size: int = 64  # molecules per batch (per process under DDP)
    batching: str = "bucket"  # within a chunk: "bucket" (similar sizes, less padding) | "random"
    max_tokens: Optional[int] = None  # token budget of a bucketed batch; None: batch_size * (mean atoms + 1)
    lr: float = 5e-4
    end_lr: float = 1e-9
    warmup_steps: Optional[int] = None  # None: warmup_fraction of max_steps (500 with a time budget only)
    warmup_fraction: float = 0.05
    weight_decay: float = 0.01
    adam_betas: tuple[float, float] = (0.9, 0.999)
    adam_eps: float = 1e-8
    clip_norm: Optional[float] = 5.0
    seed: int = 0
    device: str = "auto"
    precision: str = "auto"  # "fp32" | "bf16" (CUDA) | "auto" (bf16 on CUDA)
    num_workers: int = 0  # processes featurizing the next chunk while this one trains
    threads: Optional[int] = None  # torch.set_num_threads on CPU
    cpu_malloc: str = "heap"  # as molsepnorm train's train.cpu_malloc
    log_every: int = 50  # steps per row of metrics.jsonl
    checkpoint_every_steps: int = 500  # last.pt every N steps (and at the start and the end)
    on_nonfinite: str = "stop"  # NaN/inf loss or gradient: "stop" (error naming the step and records) | "skip" the batch
    max_skipped_batches: int = 10  # with "skip": stop after this many non-finite batches in a row
    progress: bool = True

    def validate(self) -> None:
        """Raise :class:`ConfigError` naming the first invalid value."""
        check_choice("pretrain.objective", self.objective, OBJECTIVES)
        check_choice("pretrain.mask_targets", self.mask_targets, MASK_TARGETS)
        check_choice("pretrain.atom_loss", self.atom_loss, ATOM_LOSSES)
        check_choice("pretrain.atom_head", self.atom_head, ATOM_HEADS)
        check_choice("pretrain.motif_scale", self.motif_scale, MOTIF_SCALES)
        self.augment = augmentations(self.augment)
        if not self.augment and self.uses_contrastive:
            raise ConfigError(f"pretrain.augment is empty: the contrastive objective needs two views that differ "
                              f"({', '.join(AUGMENTATIONS)})")
        for kind in self.augment:
            check_choice("pretrain.augment", kind, AUGMENTATIONS)
        if self.uses_contrastive and isinstance(self.batch_size, int) and self.batch_size < 2:
            raise ConfigError(f"pretrain.batch_size {self.batch_size} with objective {self.objective}: InfoNCE "
                              "picks each molecule's other view among the batch's, so it needs at least 2 molecules "
                              "(with 1 its loss is 0 and its accuracy 1 at every step)")
        if self.max_steps is None and self.time_budget is None:
            raise ConfigError("pretrain: give max_steps or time_budget (or both): a corpus is read in passes "
                              "for as long as the budget allows")
        check_choice("pretrain.on_nonfinite", self.on_nonfinite, NONFINITE)
        for name in ("max_steps", "batch_size", "max_tokens", "warmup_steps", "threads", "log_every",
                     "checkpoint_every_steps", "max_skipped_batches"):
            value = getattr(self, name)
            if value is None and name in ("max_steps", "max_tokens", "warmup_steps", "threads"):
                continue
            if name == "warmup_steps":
                if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                    raise ConfigError(f"pretrain.warmup_steps must be >= 0, got {value!r}")
                continue
            check_positive(f"pretrain.{name}", value)
        if not isinstance(self.motif_environments, int) or isinstance(self.motif_environments, bool) \
                or self.motif_environments < 0:
            raise ConfigError(f"pretrain.motif_environments must be an integer >= 0, got {self.motif_environments!r}")
        if self.time_budget is not None and not self.time_budget > 0:
            raise ConfigError(f"pretrain.time_budget must be positive (minutes), got {self.time_budget}")
        for name in ("mask_rate", "drop_rate"):
            if not 0 < getattr(self, name) < 1:
                raise ConfigError(f"pretrain.{name} must be in (0, 1), got {getattr(self, name)}")
        if not self.temperature > 0:
            raise ConfigError(f"pretrain.temperature must be positive, got {self.temperature}")
        for name in ("masked_weight", "contrastive_weight", "motif_weight", "descriptor_weight"):
            if not getattr(self, name) >= 0:
                raise ConfigError(f"pretrain.{name} must be >= 0, got {getattr(self, name)}")
        check_optimization("pretrain", self)

    @property
    def uses_masked(self) -> bool:
        return self.objective in ("masked", "both")

    @property
    def uses_contrastive(self) -> bool:
        return self.objective in ("contrastive", "both")

    @property
    def uses_motifs(self) -> bool:
        return self.motif_weight > 0

    @property
    def uses_descriptors(self) -> bool:
        return self.descriptor_weight > 0

    def unused_options(self) -> list[str]:
        """The options set away from their defaults that this objective never reads
        (``--augment`` with ``masked``, ``--mask-targets`` with ``contrastive``, ...)."""
        unused = []
        if not self.uses_contrastive:
            unused += ["augment", "drop_rate", "temperature"]
        if not self.uses_masked:
            unused += ["mask_targets", "atom_loss", "atom_head"] + ([] if "mask" in self.augment else ["mask_rate"])
        if self.objective != "both":  # the weights of the sum of the two
            unused += ["masked_weight", "contrastive_weight"]
        if not self.uses_motifs:
            unused += ["motif_scale", "motif_environments"]
        defaults = PretrainOptions()
        return [name for name in unused if getattr(self, name) != getattr(defaults, name)]


@dataclass
class CorpusConfig:
    """The unlabelled molecules: a named corpus or a file, and how to read and featurize it.

    ``corpus`` is a name of :data:`molsepnorm.pretrain.corpus.CORPORA` (``moses``,
    ``molhiv``, ``nci``) or the path of a ``.smi`` / ``.csv`` / ``.tsv`` / ``.sdf`` file
    (optionally gzipped).
    """

    corpus: Optional[str] = None
    data_root: Optional[str] = None  # where named corpora are read (default $MOLSEPNORM_DATA)
    smiles_column: Optional[str] = None  # CSV / TSV: default the first column named like "smiles"
    vocab: Optional[str] = None  # featurizer vocabulary: "ogb" (any element) | "zinc"; None: model.vocab, else ogb
    limit: Optional[int] = None  # read only the first N records (each pass)
    chunk_size: int = 4096  # records featurized together; batches are shuffled within a chunk
    max_atoms: int = 1000  # larger molecules are left out (logged and counted)
    # MiB per process of featurized graphs kept from the first pass for the next ones, all or none
    # (their graph-level targets: half as much); 0: read and featurize the corpus every pass
    cache_mb: int = 512

    def validate(self) -> None:
        from molsepnorm.chem.featurize import VOCABS

        check_name_or_path("corpus.corpus", self.corpus, "corpus", "give --corpus NAME or a file of molecules")
        if self.vocab is not None:
            check_choice("corpus.vocab", self.vocab, VOCABS)
        for name in ("limit", "chunk_size", "max_atoms"):
            check_positive(f"corpus.{name}", getattr(self, name), allow_none=name == "limit")
        if isinstance(self.cache_mb, bool) or not isinstance(self.cache_mb, int) or self.cache_mb < 0:
            raise ConfigError(f"corpus.cache_mb must be a whole number of MiB >= 0, got {self.cache_mb!r}")


@dataclass
class PretrainExperiment(SavesYaml):
    """Model, pretraining and corpus configuration of one pretraining run."""

    model: dict[str, Any] = field(default_factory=dict)
    pretrain: PretrainOptions = field(default_factory=PretrainOptions)
    corpus: CorpusConfig = field(default_factory=CorpusConfig)

    def validate(self) -> None:
        """Check every section (the model's against GraphormerConfig) before any data is read."""
        self.pretrain.validate()
        self.corpus.validate()
        validate_model_section(self.model)
        self.check_writable()
        vocab = self.model.get("vocab")
        if vocab is not None and self.corpus.vocab is not None and vocab != self.corpus.vocab:
            raise ConfigError(f"model.vocab is {vocab!r} but corpus.vocab is {self.corpus.vocab!r}: give one "
                              "vocabulary (--vocab)")

    @property
    def vocab(self) -> str:
        """The featurizer vocabulary of the run: corpus.vocab, else model.vocab, else ogb."""
        return str(self.corpus.vocab or self.model.get("vocab") or "ogb")

    def to_dict(self) -> dict[str, Any]:
        pretrain = dataclasses.asdict(self.pretrain)
        pretrain["adam_betas"] = [float(b) for b in self.pretrain.adam_betas]
        pretrain["augment"] = list(self.pretrain.augment)
        return plain_paths({"model": dict(self.model), "pretrain": pretrain,
                            "corpus": dataclasses.asdict(self.corpus)})

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], source: str = "configuration") -> "PretrainExperiment":
        """Build from ``{"model", "pretrain", "corpus"}``; a training preset's ``train`` / ``data``
        sections are left out; any other section or unknown key is an error."""
        unknown = set(raw) - {"model", "pretrain", "corpus", "train", "data"}
        if unknown:
            raise ConfigError(f"{source}: unknown section(s) {sorted(unknown)}; expected model, pretrain, corpus "
                              "(or a training preset's model, train, data)")
        model = raw.get("model") or {}
        if not isinstance(model, Mapping):
            raise ConfigError(f"{source}: section 'model' must be a mapping")
        model = {k: v for k, v in model.items() if k != "num_tasks"}  # the head is not pretrained
        options = dataclass_from(PretrainOptions, raw.get("pretrain") or {}, f"{source}: pretrain")
        options.adam_betas = tuple(float(b) for b in options.adam_betas)  # type: ignore[assignment]
        options.augment = augmentations(options.augment)
        corpus = dataclass_from(CorpusConfig, raw.get("corpus") or {}, f"{source}: corpus")
        return cls(model=dict(model), pretrain=options, corpus=corpus)


def load_pretrain_config(path: Optional[PathLike] = None,
                         overrides: Optional[Mapping[str, Any]] = None) -> PretrainExperiment:
    """Read a preset (or start from the defaults), apply dotted overrides, validate.

    Args:
        path: a YAML file with ``model:`` / ``pretrain:`` / ``corpus:`` sections, or a
            training preset (only its ``model:`` is read), or None.
        overrides: ``{"pretrain.max_steps": 100, "corpus.corpus": "moses", "model.norm":
            "share"}``; None values are skipped (flag not given).
    """
    raw = read_yaml(path) if path is not None else {}
    source = str(path) if path is not None else "configuration"
    merged = PretrainExperiment.from_dict(raw, source=source).to_dict()
    for section, key, value in dotted_overrides(overrides or {}, ("model", "pretrain", "corpus")):
        merged[section][key] = value
    config = PretrainExperiment.from_dict(merged, source="overrides")
    config.validate()
    _note_unused_training_options(raw, config.pretrain, source)
    return config


def augmentations(value: Union[str, list[str], tuple[str, ...]]) -> list[str]:
    """``pretrain.augment`` as a list: ``"mask,drop"`` (a flag, a YAML string) or a list."""
    if isinstance(value, str):
        return [a.strip() for a in value.split(",") if a.strip()]
    return list(value)


def _plain(value: Any) -> Any:
    """A YAML list and the tuple it became compare equal (``adam_betas``)."""
    return tuple(value) if isinstance(value, list) else value


def _note_unused_training_options(raw: Mapping[str, Any], options: PretrainOptions, source: str) -> None:
    """Warn when a training preset's ``train:`` section sets an option that pretraining also
    has (``lr``, ``batch_size``, ``seed``, ...) to another value than pretraining will use:
    only a preset's ``model:`` is read, and a user who gave ``train.lr: 0.001`` may expect it."""
    import warnings

    train = raw.get("train")
    if not isinstance(train, Mapping):
        return
    shared = {f.name for f in dataclasses.fields(PretrainOptions)}
    differing = [f"{key} {value!r} (pretraining: {getattr(options, key)!r})" for key, value in train.items()
                 if key in shared and _plain(value) != _plain(getattr(options, key))]
    if differing:
        warnings.warn(f"{source}: its train: section is for `molsepnorm train`; pretraining reads only its model: "
                      f"section, so these are not used: {', '.join(differing)}. Set them under pretrain: (or as "
                      "flags) to pretrain with them", UserWarning, stacklevel=3)
