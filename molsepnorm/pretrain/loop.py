"""The :class:`Pretrainer`: self-supervised steps on a streamed corpus, logs, checkpoints, resume.

Read top to bottom:

1. ``__init__``: the resolved config, the Graphormer encoder inside a
   :class:`~molsepnorm.pretrain.objectives.PretextModel`, DDP, the corpus stream, AdamW
   with ``molsepnorm train``'s schedule, and a :class:`PretrainStep` (``train``'s
   :class:`~molsepnorm.train.step.TrainStep` with the pretext loss);
2. :meth:`Pretrainer.fit`: steps until ``max_steps`` or the time budget; a row of
   ``metrics.jsonl`` every ``log_every`` steps, ``last.pt`` every
   ``checkpoint_every_steps``; at the end ``encoder.pt`` and ``results.json``.

``last.pt`` and ``encoder.pt`` are ordinary :class:`~molsepnorm.checkpoint.Checkpoint`
files whose task is ``"pretrained"`` (no targets; the Graphormer's task head is untrained),
so ``molsepnorm train --init``, ``embed`` and ``Checkpoint.load`` read them like any
other.  ``last.pt`` also carries the training state (optimizer, scheduler, every
process's RNG and corpus position, the pretext heads): a run killed at any moment
continues with ``molsepnorm pretrain --resume`` exactly as if it had not stopped.
"""
from __future__ import annotations

import copy
import itertools
import logging
import time
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Optional

import numpy as np
from torch import Tensor

from molsepnorm import _stop
from molsepnorm.chem.descriptors import descriptor_names, descriptor_values
from molsepnorm.checkpoint import Checkpoint, DataProvenance, FeaturizerSpec, TaskSpec
from molsepnorm.checkpoint.checkpoint import PRETRAINED
from molsepnorm.checkpoint.run_dir import RunDir
from molsepnorm.data.collate import GraphBatch
from molsepnorm.errors import ConfigError, MolsepnormError
from molsepnorm.chem.readers import Record
from molsepnorm.pretrain.config import DEFAULT_WARMUP_WITHOUT_MAX_STEPS, PretrainExperiment
from molsepnorm.pretrain.corpus import Corpus, open_corpus
from molsepnorm.pretrain.objectives import PretextModel, describe, graph_targets
from molsepnorm.pretrain.stream import CorpusStream, Position
from molsepnorm.train import distributed as ddp
from molsepnorm.train.batching import bucketed_batch_norm
from molsepnorm.train.logs import LOGGER_NAME
from molsepnorm.train.schedule import make_scheduler, resolve_warmup
from molsepnorm.train.state import (capture_rng_state, reseed_after_resize, restore_rng_state, seed_everything,
                                    seed_rank)
from molsepnorm.train.optimizer import make_adamw
from molsepnorm.train.step import TrainStep, skip_or_stop

log = logging.getLogger(LOGGER_NAME)

#: The order of a metrics.jsonl row's metrics, each the mean over its steps; a part of the
#: objective not named here (``step.parts``) follows them, so none is left out.
PARTS = ("loss", "masked_loss", "masked_acc", "visible_loss", "visible_acc", "contrastive_loss", "contrastive_acc",
         "motif_loss", "descriptor_loss")
_COUNTS = ("steps", "graphs", "seconds")  # window totals that are not metrics
DESCRIPTOR_REFERENCE = 2000  # corpus records whose molecules' descriptors standardize the descriptor targets
MAX_INVALID_LOGGED = 20  # invalid molecules named in the log one by one; the rest are counted


@dataclass
class PretrainResult:
    """What :meth:`Pretrainer.fit` returns."""

    run_dir: Optional[Path]
    steps: int
    stopped: str  # "max_steps" or "time_budget"
    seconds: float  # training time, summed over resumes
    molecules: int  # molecules trained on (all processes; a molecule counts once per pass)
    passes: float  # passes over the corpus begun by process 0 (its pass number + 1)
    invalid: int  # records that gave no graph (all processes)
    last: dict[str, float] = field(default_factory=dict)  # the last row of metrics.jsonl
    history: list[dict[str, Any]] = field(default_factory=list)
    encoder: Optional[Path] = None


@dataclass
class PretrainProgress:
    """Mutable progress of this process; all of it goes into ``last.pt``."""

    step: int = 0
    seconds: float = 0.0  # training time so far (the time budget counts it)
    molecules: int = 0  # molecules this process trained on
    invalid: int = 0  # records of this process's blocks that gave no graph
    skipped: int = 0  # non-finite batches skipped (pretrain.on_nonfinite = "skip")
    skipped_in_a_row: int = 0
    position: dict[str, int] = field(default_factory=lambda: Position().to_dict())
    window: dict[str, float] = field(default_factory=dict)  # sums since the last metrics row

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> "PretrainProgress":
        known = set(cls.__dataclass_fields__)
        return cls(**{k: copy.deepcopy(v) for k, v in raw.items() if k in known})


class PretrainStep(TrainStep):
    """:class:`~molsepnorm.train.step.TrainStep` whose loss is the pretext model's; the
    parts of the last loss are in :attr:`parts`."""

    parts: dict[str, Tensor]

    def compute_loss(self, batch: GraphBatch) -> Tensor:
        with self.autocast():
            loss, self.parts = self.model(batch)
        return loss.float()


def resolve_model_config(config: PretrainExperiment) -> dict[str, Any]:
    """The ``model:`` section completed: the corpus's vocabulary, every default filled in."""
    from molsepnorm.nn.graphormer import GraphormerConfig

    model = {**config.model, "vocab": config.vocab, "num_tasks": 1}
    return GraphormerConfig.from_dict(model).to_dict()


class Pretrainer:
    """Pretrains a Graphormer encoder on an unlabelled corpus (see the module docstring).

    Args:
        config: the pretraining experiment (not modified: :attr:`config` is a resolved copy).
        run_dir: where to write (rank 0 only); None writes nothing.
        env: the distributed environment (default: this process alone).
        corpus: the corpus, if already opened (default: from ``config.corpus``).
    """

    def __init__(self, config: PretrainExperiment, run_dir: Optional[RunDir | str | Path] = None,
                 env: Optional[ddp.DistEnv] = None, corpus: Optional[Corpus] = None) -> None:
        from molsepnorm.nn.graphormer import Graphormer, GraphormerConfig

        config.validate()
        self.config = copy.deepcopy(config)
        self.config.model = resolve_model_config(config)
        self.config.corpus.vocab = self.config.vocab
        self.options = po = self.config.pretrain
        self.env = env or ddp.DistEnv(device=ddp.resolve_device(po.device))
        self.device = self.env.device
        if run_dir is not None and not isinstance(run_dir, RunDir):
            run_dir = RunDir(run_dir)
        self.run_dir: Optional[RunDir] = run_dir if self.env.is_main else None
        self.use_bf16 = self.device.type == "cuda" and po.precision in ("auto", "bf16")

        seed_everything(po.seed)  # the same initial weights on every rank
        self.model_config = GraphormerConfig.from_dict(self.config.model)
        pretext = PretextModel(Graphormer(self.model_config), po)
        pretext = ddp.maybe_sync_batchnorm(pretext, self.env).to(self.device)
        self.pretext: PretextModel = pretext
        self.model = ddp.wrap_ddp(pretext, self.env)
        self._check_views()
        bucketed = bucketed_batch_norm(self.model_config, po.batching)
        if bucketed:
            log.warning("%s. Prefer pretrain.batching: random in the preset, or the batchrenorm kind "
                        "(docs/accuracy.md).", bucketed)
        unused = po.unused_options()
        if unused:
            log.info("objective %s%s does not read %s (kept in config.yaml for another objective): %s",
                     po.objective, "" if po.uses_motifs else " without motifs",
                     "this option" if len(unused) == 1 else "these options",
                     ", ".join(f"{name} {getattr(po, name)!r}" for name in unused))

        self.corpus = corpus or open_corpus(self.config.corpus)
        cc = self.config.corpus
        self.stream = CorpusStream(
            self.corpus, self.config.vocab, cc.chunk_size, po.batch_size, po.batching, po.max_tokens, po.seed,
            self.model_config.multi_hop_max_dist, self.env.rank, self.env.world_size, po.num_workers, cc.limit,
            cc.max_atoms, on_invalid=self._invalid,
            graph_targets=partial(graph_targets, options=po) if po.uses_motifs or po.uses_descriptors else None,
            graph_cache_bytes=cc.cache_mb * 2**20, target_cache_bytes=cc.cache_mb * 2**19)

        params = [p for p in self.pretext.parameters() if p.requires_grad]
        self.optimizer = make_adamw(params, self.device, lr=po.lr, betas=tuple(po.adam_betas), eps=po.adam_eps,
                                    weight_decay=po.weight_decay)
        if po.max_steps is not None:
            self.warmup_steps = resolve_warmup(po.warmup_steps, po.warmup_fraction, po.max_steps)
            self.scheduler = make_scheduler(self.optimizer, po.lr, po.end_lr, self.warmup_steps, po.max_steps)
        else:  # the length is unknown: warm-up, then the peak rate for as long as the budget lasts
            self.warmup_steps = DEFAULT_WARMUP_WITHOUT_MAX_STEPS if po.warmup_steps is None else po.warmup_steps
            self.scheduler = make_scheduler(self.optimizer, po.lr, po.lr, self.warmup_steps,
                                            max(1, self.warmup_steps))
        self.step = PretrainStep(self.model, self.optimizer, self.scheduler, "pretext", None, po.clip_norm,
                                 self.device, self.use_bf16, self.env)
        if self.env.is_distributed:  # different masks and dropout per rank, same weights
            seed_rank(po.seed, self.env.rank)
        self.state = PretrainProgress(position=self.stream.start().to_dict())
        self.last_row: dict[str, Any] = {}  # the latest row of metrics.jsonl

    def _check_views(self) -> None:
        """What makes the contrastive objective's two views differ, checked against the model:
        its dropout applies in every forward pass (each view draws its own), listed or not."""
        po, mc = self.options, self.model_config
        if not po.uses_contrastive:
            return
        rates = {name: getattr(mc, name) for name in ("dropout", "attention_dropout", "activation_dropout")
                 if getattr(mc, name, 0)}
        others = [a for a in po.augment if a != "dropout"]
        if not rates and not others:
            raise ConfigError("pretrain.augment is only 'dropout' and the model has no dropout (model.dropout, "
                              "attention_dropout, activation_dropout are 0): the two views would be the same "
                              "molecule, and the contrastive objective learns nothing. Add mask or drop_nodes "
                              "(--augment mask,dropout), or give the model dropout")
        if "dropout" in po.augment and not rates:
            log.warning("augment 'dropout' with a model without dropout: the views differ only by %s",
                        ", ".join(others))
        elif rates and "dropout" not in po.augment:
            log.info("the model's dropout (%s) also makes the views differ: it applies in every forward pass",
                     ", ".join(f"{k} {v:g}" for k, v in rates.items()))

    # ------------------------------------------------------------------ training
    def fit(self) -> PretrainResult:
        """Pretrain until ``max_steps`` or the time budget; write ``encoder.pt`` and ``results.json``.

        On CPU with ``cpu_malloc: heap`` glibc keeps large blocks in its heap while this runs
        (:mod:`molsepnorm.train.allocator`), as ``molsepnorm train`` does.
        """
        from molsepnorm.train.allocator import heap_for_large_blocks

        from molsepnorm._torch_state import torch_threads

        with heap_for_large_blocks(self.device.type == "cpu" and self.options.cpu_malloc == "heap"), \
                torch_threads(self.options.threads if self.device.type == "cpu" else None):
            return self._fit()

    def _fit(self) -> PretrainResult:
        from tqdm import tqdm

        po, st = self.options, self.state
        if st.step == 0 and st.molecules == 0:
            self._log_start()
            if po.uses_descriptors:
                self._scale_descriptors()
            self._save_last()  # from now on the run directory always holds a resumable last.pt
        bar = tqdm(total=po.max_steps, initial=st.step, desc="pretrain", unit="step", dynamic_ncols=True,
                   disable=None if (po.progress and self.env.is_main) else True, leave=False)
        stopped = self._stop_reason()
        self.pretext.train()
        batches = self.stream.batches(Position.from_dict(st.position))
        t0 = time.perf_counter()
        with _stop.step_boundaries():  # a signal here ends the step, writes last.pt, then stops; later, at once
            try:
                while stopped is None:
                    position, batch = next(batches)
                    done = self.step(batch)
                    if not done.applied:
                        self._non_finite(done.problem, position, batch)
                        st.position = position.to_dict()  # a resumed run does not meet this batch again
                        t0 = time.perf_counter()
                        continue
                    st.skipped_in_a_row = 0
                    st.step += 1
                    st.position = position.to_dict()
                    st.molecules += done.graphs
                    seconds = time.perf_counter() - t0
                    st.seconds += seconds
                    self._accumulate(done.loss, done.graphs, seconds)
                    bar.update(1)
                    if st.step % po.log_every == 0:
                        row = self._log_row()
                        bar.set_postfix(loss=f"{row['loss']:.4f}", refresh=False)
                    if st.step % po.checkpoint_every_steps == 0:
                        self._save_last()
                    stopped = self._stop_reason()
                    if stopped == "signal":
                        self._save_last()
                        log.info("stopped by a signal after step %d; last.pt written: molsepnorm pretrain --resume %s",
                                 st.step, self.run_dir.path if self.run_dir is not None else "RUN")
                        _stop.stop_now()
                    t0 = time.perf_counter()  # the checks and writes above are not training time
            finally:
                bar.close()
                batches.close()
        return self._finish(stopped)

    def _non_finite(self, problem: Optional[str], position: Position, batch: GraphBatch) -> None:
        """A batch nothing was applied from: ``pretrain.on_nonfinite`` stops naming it, or skips it."""
        po, st = self.options, self.state
        st.skipped_in_a_row = skip_or_stop(
            f"{problem} at step {st.step + 1}, {self._where(position, batch)}",
            "Try a lower --lr, check these molecules, or --on-nonfinite skip.", po.on_nonfinite,
            st.skipped_in_a_row, po.max_skipped_batches, "pretrain")
        st.skipped += 1

    def _stop_reason(self) -> Optional[str]:
        po, st = self.options, self.state
        if po.max_steps is not None and st.step >= po.max_steps:
            return "max_steps"
        over = po.time_budget is not None and st.seconds >= 60.0 * po.time_budget
        signalled = _stop.asked() is not None  # the command line's SIGTERM / Ctrl-C: molsepnorm._stop
        if self.env.is_distributed:  # every rank stops at the same step
            over, signalled = (total > 0 for total in ddp.all_reduce_sum([float(over), float(signalled)], self.env))
        if signalled:
            return "signal"
        return "time_budget" if over else None

    def _accumulate(self, loss: float, graphs: int, seconds: float) -> None:
        window = self.state.window
        window["steps"] = window.get("steps", 0) + 1
        window["graphs"] = window.get("graphs", 0) + graphs
        window["seconds"] = window.get("seconds", 0.0) + seconds
        window["loss"] = window.get("loss", 0.0) + loss
        for name, value in self.step.parts.items():
            window[name] = window.get(name, 0.0) + float(value)

    def _log_row(self) -> dict[str, Any]:
        """The mean of the window's metrics over its steps and processes, appended to metrics.jsonl."""
        st, window = self.state, self.state.window
        parts = [p for p in PARTS if p in window] + sorted(set(window) - set(PARTS) - set(_COUNTS))
        names = [*_COUNTS, "invalid", "molecules", *parts]  # the same on every process: the objective's parts
        values = [float(st.invalid) if n == "invalid" else float(st.molecules) if n == "molecules"
                  else float(window.get(n, 0.0)) for n in names]
        sums = dict(zip(names, ddp.all_reduce_sum(values, self.env)))
        steps = sums["steps"] or 1.0
        position = Position.from_dict(st.position)
        row: dict[str, Any] = {"step": st.step, "pass": position.corpus_pass + 1, "molecules": int(sums["molecules"]),
                               "lr": self.scheduler.get_last_lr()[0]}
        row.update({name: sums[name] / steps for name in parts})
        row["invalid"] = int(sums["invalid"])
        if self.options.on_nonfinite == "skip":
            row["skipped_batches"] = st.skipped  # this process's, since the start
        row["seconds"] = st.seconds
        seconds = sums["seconds"] / self.env.world_size
        row["steps_per_second"] = steps / self.env.world_size / seconds if seconds > 0 else float("nan")
        row["graphs_per_second"] = sums["graphs"] / seconds if seconds > 0 else float("nan")
        st.window = {}
        if self.run_dir is not None:
            self.run_dir.append_metrics(row)
            log.info("step %d  loss %.4f%s%s  (%d molecules, pass %d, %.1f steps/s)", st.step, row["loss"],
                     f"  masked acc {row['masked_acc']:.3f}" if "masked_acc" in row else "",
                     f"  contrastive acc {row['contrastive_acc']:.3f}" if "contrastive_acc" in row else "",
                     row["molecules"], row["pass"], row["steps_per_second"])
        self.last_row = row
        return row

    def _where(self, position: Position, batch: GraphBatch) -> str:
        smiles = f"; molecules: {batch.smiles[:5]}{' ...' if len(batch.smiles) > 5 else ''}" if batch.smiles else ""
        first = position.block * self.config.corpus.chunk_size + 1
        return (f"pass {position.corpus_pass + 1}, batch {position.batches} of the chunk of records {first}.."
                f"{first + self.config.corpus.chunk_size - 1} of {self.corpus.source}{smiles}")

    def _invalid(self, record: Record, reason: str) -> None:
        self.state.invalid += 1
        if self.env.is_main and self.state.invalid <= MAX_INVALID_LOGGED:
            log.warning("left out: %s, line %d (record %d): %r: %s", self.corpus.source, record.line, record.index,
                        record.smiles, reason)
            if self.state.invalid == MAX_INVALID_LOGGED:
                log.warning("further molecules left out are counted in metrics.jsonl ('invalid'), not named")

    def _log_start(self) -> None:
        mc, po, cc = self.model_config, self.options, self.config.corpus
        n_params = self.pretext.encoder.num_parameters()
        log.info("corpus %s (%s), vocabulary %s%s; chunks of %d records, batches of %d (%s)", self.corpus.name,
                 self.corpus.source, self.config.vocab, f", first {cc.limit} records" if cc.limit else "",
                 cc.chunk_size, po.batch_size, po.batching)
        log.info("encoder Graphormer norm=%s, %d layers, hidden %d, %d parameters; device %s%s", mc.norm,
                 mc.num_layers, mc.hidden_dim, n_params, self.device,
                 f" x {self.env.world_size} processes" if self.env.is_distributed else "")
        budget = [f"{po.max_steps} steps" if po.max_steps else "", f"{po.time_budget:g} min" if po.time_budget else ""]
        log.info("objective: %s; budget %s; lr %g, %d warm-up steps", describe(po),
                 " or ".join(b for b in budget if b), po.lr, self.warmup_steps)
        if self.run_dir is not None:
            log.info("run directory %s", self.run_dir.path)

    def _scale_descriptors(self) -> None:
        """Standardize the descriptor targets by the first :data:`DESCRIPTOR_REFERENCE` records
        of the corpus, featurized as the stream featurizes them (records that give no graph are
        left out) and described from the same SMILES as the targets; the same on every rank, and
        a resume reads the scale from ``last.pt``."""
        from molsepnorm.predict.featurizing import featurize_records

        records = list(itertools.islice(self.corpus.records(self.config.corpus.limit), DESCRIPTOR_REFERENCE))
        featurized = featurize_records(records, self.config.vocab, max_atoms=self.config.corpus.max_atoms)
        values = [descriptor_values(item.graph.smiles) for item in featurized if item.graph is not None]
        if not values:
            raise MolsepnormError(f"corpus {self.corpus.name}: none of its first {len(records)} records gives a "
                                  f"molecule to scale the descriptors by")
        self.pretext.set_descriptor_scale(np.stack(values))
        log.info("descriptor targets standardized by %d molecules of the corpus's first %d records", len(values),
                 len(records))

    # ------------------------------------------------------------------ checkpoints
    def encoder_checkpoint(self, kind: str, metrics: Optional[dict[str, Any]] = None) -> Checkpoint:
        """The encoder as a :class:`~molsepnorm.checkpoint.Checkpoint` of task ``"pretrained"``."""
        cc = self.config.corpus
        return Checkpoint(
            model_config=self.model_config.to_dict(),
            state_dict=self.pretext.encoder.state_dict(),
            featurizer=FeaturizerSpec.current(self.config.vocab, self.model_config.multi_hop_max_dist),
            task=TaskSpec(PRETRAINED, (), "none", False),
            data=DataProvenance(dataset=str(cc.corpus), name=self.corpus.name, options={"limit": cc.limit, **self.corpus.columns},
                                source=self.corpus.source, sizes={}, data_root=cc.data_root),
            config=self.config.to_dict(),
            metrics=metrics if metrics is not None else {"pretrain": dict(self.last_row)},
            kind=kind,
            epoch=Position.from_dict(self.state.position).corpus_pass,
            step=self.state.step,
        )

    def _save_last(self) -> None:
        # every rank's RNG state and corpus position: a resumed DDP run continues each stream
        gathered = ddp.all_gather_objects({"rng": capture_rng_state(), "progress": self.state.to_dict()}, self.env)
        if self.run_dir is None:
            return
        checkpoint = self.encoder_checkpoint("last")
        checkpoint.training_state = {
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "rng": [g["rng"] for g in gathered],
            "world_size": len(gathered),
            "progress": gathered[0]["progress"],
            "rank_progress": [g["progress"] for g in gathered],
            "pretext_heads": self.pretext.heads_state_dict(),
            "pretrain": True,
        }
        if self.options.uses_descriptors:  # RDKit's list changes between releases: a resume checks it
            checkpoint.training_state["descriptors"] = descriptor_names()
        checkpoint.save(self.run_dir.last)

    def load_training_state(self, checkpoint: Checkpoint) -> None:
        """Restore the encoder, heads, optimizer, scheduler, progress, RNG and corpus position
        from a pretraining ``last.pt``."""
        ts = checkpoint.training_state
        if not ts or not ts.get("pretrain"):
            raise MolsepnormError(f"{checkpoint.name} is not the last.pt of a pretraining run")
        if self.options.uses_descriptors and ts.get("descriptors") != descriptor_names():
            saved = ts.get("descriptors") or []
            raise MolsepnormError(
                f"{checkpoint.name} was pretrained on {len(saved)} RDKit descriptors, and this RDKit computes a "
                f"different list ({len(descriptor_names())}; first difference: "
                f"{_first_difference(saved, descriptor_names())}): resume it with the RDKit version it began with")
        self.pretext.encoder.load_state_dict(checkpoint.state_dict)
        self.pretext.load_state_dict({**{f"encoder.{k}": v for k, v in checkpoint.state_dict.items()},
                                      **ts["pretext_heads"]})
        self.optimizer.load_state_dict(ts["optimizer"])
        self.scheduler.load_state_dict(ts["scheduler"])
        ranks = ts["rank_progress"]
        if len(ranks) == self.env.world_size:
            self.state = PretrainProgress.from_dict(ranks[self.env.rank])
            restore_rng_state(ts["rng"][self.env.rank])
            return
        # another number of processes: every stream restarts after the furthest block reached
        furthest = max((Position.from_dict(r["position"]) for r in ranks), key=lambda p: (p.corpus_pass, p.block))
        first = furthest.block + 1
        first += (self.env.rank - first) % self.env.world_size
        self.state = PretrainProgress.from_dict(ranks[0])
        self.state.position = Position(furthest.corpus_pass, first, 0).to_dict()
        self.state.molecules = sum(int(r["molecules"]) for r in ranks) if self.env.is_main else 0
        self.state.invalid = sum(int(r["invalid"]) for r in ranks) if self.env.is_main else 0
        self.state.window = {}
        log.warning("checkpoint written by %d processes, resumed on %d: the corpus continues after chunk %d and RNG "
                    "streams are re-seeded; the run goes on but will not match an uninterrupted one exactly",
                    len(ranks), self.env.world_size, furthest.block)
        reseed_after_resize(self.options.seed, self.state.step, self.env.rank)

    # ------------------------------------------------------------------ the end
    def _finish(self, stopped: str) -> PretrainResult:
        st = self.state
        if st.window.get("steps"):
            self._log_row()  # the steps since the last row
        self._save_last()
        sums = ddp.all_reduce_sum([float(st.molecules), float(st.invalid)], self.env)
        history = self.run_dir.read_metrics() if self.run_dir is not None else []
        last = dict(self.last_row)
        encoder = None
        position = Position.from_dict(st.position)
        if self.run_dir is not None:
            encoder = self.run_dir.path / "encoder.pt"
            self.encoder_checkpoint("encoder", metrics={"pretrain": last}).save(encoder)
            self.run_dir.write_results({
                "corpus": self.corpus.name, "objective": self.options.objective, "steps": st.step,
                "stopped": stopped, "seconds": st.seconds, "molecules": int(sums[0]), "invalid": int(sums[1]),
                "pass": position.corpus_pass + 1, "last": last})
            log.info("finished (%s) after %d steps, %.0f s; encoder %s", stopped, st.step, st.seconds, encoder)
            po = self.options
            if stopped == "time_budget" and po.max_steps is not None and st.step < po.max_steps:
                log.warning("the time budget ended the run at step %d of max_steps %d, over which the learning rate "
                            "decays: it stopped at %.3g, its peak being %g%s. A --max-steps that the budget fits "
                            "(steps/s in metrics.jsonl) anneals it", st.step,
                            po.max_steps, self.scheduler.get_last_lr()[0], po.lr,
                            ", still warming up" if st.step < self.warmup_steps else "")
        ddp.barrier(self.env)
        return PretrainResult(run_dir=self.run_dir.path if self.run_dir else None, steps=st.step, stopped=stopped,
                              seconds=st.seconds, molecules=int(sums[0]), passes=position.corpus_pass + 1,
                              invalid=int(sums[1]), last=last, history=history, encoder=encoder)


def _first_difference(saved: list[str], today: list[str]) -> str:
    """Where two descriptor lists first differ, for an error message."""
    for k, (a, b) in enumerate(zip(saved, today)):
        if a != b:
            return f"position {k + 1}: {a} then, {b} now"
    return f"position {min(len(saved), len(today)) + 1}: one list ends there"
