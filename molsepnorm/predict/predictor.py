"""``Predictor``: a trained Graphormer (or an ensemble) applied to new molecules.

>>> from molsepnorm.predict import Predictor
>>> p = Predictor.load("tpsa-nci-small")          # a bundled name or a best.pt path
>>> p.predict(["CCO", "c1ccccc1O", "C1CC"])       # a pandas DataFrame
   id     smiles       tpsa                                              error
0   1        CCO  19.862339                                                NaN
1   2  c1ccccc1O  20.139008                                                NaN
2   3       C1CC        NaN  SMILES parse error: unclosed ring for input: '...
>>> p.embed("CCO").shape                        # graph-token embeddings, numpy
(1, 64)

Every molecule is featurized with the checkpoint's own vocabulary plus the Graphormer
encodings, molecules are batched by size, and the model runs in eval mode under
``torch.inference_mode``: BatchNorm uses its running statistics, so a prediction does not
depend on the molecule's batch-mates.  Regression outputs are mapped back to the data
set's units; binary logits become probabilities.  Several checkpoints form an ensemble:
the mean per target plus the standard deviation across models (``ddof=0``).

A molecule that cannot be predicted (invalid SMILES, an atom outside the model's
vocabulary, ...) becomes a row with its reason in ``error``, unless ``strict=True``.  A
molecule unlike the model's training data (an element, charge or bond it never saw, more
atoms than any training molecule, a low similarity to all of them; see
:mod:`molsepnorm.checkpoint.domain`) is predicted, with the reasons in ``warning``.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Optional, Sequence, Union

import numpy as np

from molsepnorm.errors import InvalidMoleculeError, MolsepnormError
from molsepnorm.predict.featurizing import MAX_ATOMS, Featurized, featurized_chunks

if TYPE_CHECKING:
    import pandas as pd
    import torch

    from molsepnorm.checkpoint import Checkpoint
    from molsepnorm.chem.readers import Record
    from molsepnorm.inference import Runner
    from molsepnorm.inference.runner import RunOutput

PathLike = Union[str, os.PathLike]

DEFAULT_BATCH_SIZE = 128
DEFAULT_CHUNK_SIZE = 2_000


@dataclass
class Member:
    """One model of a :class:`Predictor`: its checkpoint (weights dropped once the model is
    built) and the runner that applies it."""

    checkpoint: "Checkpoint"
    runner: "Runner"

    @property
    def source(self) -> str:
        return self.checkpoint.name

    @property
    def task(self) -> str:
        return self.checkpoint.task.type

    @property
    def target_names(self) -> list[str]:
        return list(self.checkpoint.task.target_names)

    @property
    def vocab(self) -> str:
        return self.checkpoint.featurizer.vocab


@dataclass
class ChunkResult:
    """Predictions (or embeddings) of consecutive records, in input order.

    ``values`` is ``(n, T)`` predictions or ``(n, D)`` embeddings, NaN on failed rows;
    ``std`` the ensemble's standard deviation (``(n, T)``) or None; ``smiles`` what the
    output shows (the input SMILES; RDKit's SMILES for a Mol / SDF record); ``warnings``
    why a row lies outside the model's applicability domain (None: it does not, or was
    not checked; an empty list: no row was checked).
    """

    records: list[Record]
    smiles: list[str]
    values: np.ndarray
    std: Optional[np.ndarray]
    errors: list[Optional[str]]
    warnings: list[Optional[str]] = field(default_factory=list)

    @property
    def num_ok(self) -> int:
        return sum(e is None for e in self.errors)

    @property
    def num_warned(self) -> int:
        return sum(w is not None for w in self.warnings)

    def warning_column(self) -> list[Optional[str]]:
        """One warning (or None) per record."""
        return list(self.warnings) if self.warnings else [None] * len(self.records)


class Predictor:
    """Trained model(s) ready to predict or embed molecules.

    Build with :meth:`load`.  Args of the constructor: the loaded :class:`Member` s (all
    with the same vocabulary, task and targets), the torch device, and the batching
    (``batch_size`` molecules at most, ``max_tokens`` padded tokens at most),
    ``max_atoms``, the largest molecule predicted (larger ones get a row with the reason;
    None: no limit), and ``applicability``: check every molecule against the models'
    applicability domains (:attr:`domains`; the ``warning`` column; its cost:
    docs/applicability.md).  A model whose checkpoint carries no domain (written before
    molsepnorm recorded one) is noted once, with a ``UserWarning``, and gives no warnings.
    A pretrained encoder (``molsepnorm pretrain``'s ``encoder.pt``) embeds but does not
    predict: :meth:`predict` and :meth:`predict_records` refuse it when called.
    ``member_threads``: how many members of an ensemble run a batch at the same time
    (``"auto"``: one per usable CPU when torch runs one thread, as after
    :func:`~molsepnorm.inference.device.inference_process_settings` ``(1)``, else one; see
    :func:`~molsepnorm.inference.runner.run`).

    A Predictor changes no process-wide state, so threads may share one (load it with
    ``member_threads=1`` when several threads or processes predict at once: they
    already share the CPUs).  For a large
    stream on a CPU, call :func:`molsepnorm.inference.device.inference_process_settings`
    once first, as the CLI does (it keeps oneDNN's kernel cache from growing).
    """

    def __init__(self, members: Sequence[Member], device: Union[str, "torch.device"] = "cpu",
                 batch_size: int = DEFAULT_BATCH_SIZE, max_tokens: Optional[int] = None,
                 max_atoms: Optional[int] = MAX_ATOMS, applicability: bool = True,
                 member_threads: Union[int, str] = "auto") -> None:
        import torch

        from molsepnorm.inference.device import resolve_member_threads

        if not members:
            raise ValueError("a Predictor needs at least one model")
        _check_compatible(members)
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.members = list(members)
        self.device = torch.device(device)
        for m in self.members:
            m.runner.model.to(self.device).eval()
        self.batch_size = int(batch_size)
        self.max_tokens = max_tokens
        if max_atoms is not None and max_atoms < 1:
            raise ValueError(f"max_atoms must be >= 1 or None, got {max_atoms}")
        self.max_atoms = max_atoms
        from molsepnorm.checkpoint.domain import distinct_domains

        self.domains = distinct_domains([m.checkpoint for m in self.members], stacklevel=3) if applicability else []
        resolve_member_threads(member_threads, len(self.members), self.device)  # refuse a bad value now
        self.member_threads = member_threads

    # --- construction --------------------------------------------------------------------
    @classmethod
    def load(cls, *models: Union[PathLike, Iterable[PathLike]], device: str = "cpu",
             batch_size: int = DEFAULT_BATCH_SIZE,
             max_tokens: Optional[int] = None, max_atoms: Optional[int] = MAX_ATOMS,
             applicability: bool = True, member_threads: Union[int, str] = "auto") -> "Predictor":
        """Load one checkpoint (an ensemble with several) by path or bundled name.

        Args:
            models: ``best.pt`` paths or bundled model names (``molsepnorm models``), as
                arguments or one iterable of them (a list, a glob); none: the default
                bundled model (an empty iterable is an error).  A bundled ensemble brings
                all its members.
            device: ``cpu``, ``cuda`` or ``auto``.
            batch_size, max_tokens, max_atoms, applicability, member_threads: see the class.

        Raises:
            UnknownModelError: a name that is neither a file nor a bundled model.
            CheckpointError: an unreadable or foreign checkpoint.
            MolsepnormError: ensemble members that predict different things.
        """
        from molsepnorm.checkpoint import DEFAULT_MODEL, Checkpoint, resolve_models
        from molsepnorm.inference import Runner, resolve_device

        if len(models) == 1 and not isinstance(models[0], (str, bytes, os.PathLike)) \
                and isinstance(models[0], Iterable):  # load(["a.pt", "b.pt"]) (any iterable) as load("a.pt", "b.pt")
            models = tuple(models[0])
            if not models:  # e.g. a glob that matched nothing: not a request for the default model
                raise MolsepnormError("Predictor.load: the list of models is empty (call Predictor.load() "
                                      "for the default model)")
        members = []
        for spec in list(models) or [DEFAULT_MODEL]:
            paths = resolve_models(spec)  # a bundled ensemble: every member
            for i, path in enumerate(paths):
                checkpoint = Checkpoint.load(path)
                checkpoint.source = str(spec) if len(paths) == 1 else f"{spec} (member {i + 1}: {path.name})"
                runner = Runner.from_checkpoint(checkpoint)
                checkpoint.state_dict = {}  # the model holds the weights now
                members.append(Member(checkpoint, runner))
        return cls(members, device=resolve_device(device), batch_size=batch_size, max_tokens=max_tokens,
                   max_atoms=max_atoms, applicability=applicability, member_threads=member_threads)

    def __repr__(self) -> str:
        sources = ", ".join(m.source for m in self.members)
        what = f"targets {', '.join(self.target_names)}" if self.target_names else "no head: embeddings only"
        return f"Predictor({sources}: {self.task}, {what}, {self.vocab} vocabulary, device {self.device})"

    # --- what it predicts ------------------------------------------------------------------
    @property
    def task(self) -> str:
        return self.members[0].task

    @property
    def target_names(self) -> list[str]:
        return list(self.members[0].target_names)

    @property
    def vocab(self) -> str:
        return self.members[0].vocab

    @property
    def multi_hop_max_dist(self) -> int:
        """Hops of the edge encoding to collate batches with (the largest of the members')."""
        return max(m.runner.multi_hop_max_dist for m in self.members)

    @property
    def is_ensemble(self) -> bool:
        return len(self.members) > 1

    @property
    def embedding_dim(self) -> int:
        return self.members[0].checkpoint.embedding_dim

    def output_columns(self) -> list[str]:
        """Columns of a prediction table: id, smiles, each target (+ ``_std``), error, warning."""
        return ["id", "smiles", *value_columns(self.target_names, self.is_ensemble), "error", "warning"]

    # --- notebook API ----------------------------------------------------------------------
    def predict(self, molecules: Any, ids: Optional[Sequence[Any]] = None, strict: bool = False) -> "pd.DataFrame":
        """Predict every molecule; a DataFrame shaped like ``molsepnorm predict``'s CSV.

        Args:
            molecules: a SMILES, an RDKit Mol, or a list / tuple / numpy array /
                ``pandas.Series`` of them (None or NaN entries are missing molecules).
            ids: one id per molecule (default: a Series' index labels, so that
                ``frame.loc[output["id"]]`` are the rows; a Mol's ``_Name``; else the 1-based
                position, as the CLI numbers a file's rows).
            strict: raise :class:`InvalidMoleculeError` at the first molecule that cannot
                be predicted, instead of reporting it in ``error``.

        Returns:
            One row per input, in order: ``id``, ``smiles``, one column per target (a
            probability for binary tasks), ``<target>_std`` for an ensemble,
            ``error``: the reason, missing (``frame["error"].isna()``) where the row
            was predicted, and ``warning``: why a predicted molecule lies outside the
            model's applicability domain (reasons joined with ``"; "``), missing where
            it does not -- as ``pandas.read_csv`` reads the CLI's output.
        """
        import pandas as pd

        chunks = list(self.predict_records(to_records(molecules, ids), strict=strict))
        return pd.concat([prediction_frame(c, self.target_names) for c in chunks], ignore_index=True) if chunks \
            else pd.DataFrame(columns=self.output_columns())

    def embed(self, molecules: Any, strict: bool = False) -> np.ndarray:
        """Graph-token embeddings after the final norm: float32 ``(n, D)``, NaN rows for
        molecules that cannot be embedded (or raise at the first one with ``strict``).
        Their applicability warnings: :meth:`applicability`."""
        parts = [c.values for c in self.embed_records(to_records(molecules, None), strict=strict)]
        if not parts:
            return np.zeros((0, self.embedding_dim), dtype=np.float32)
        return np.concatenate(parts).astype(np.float32)

    def applicability(self, molecules: Any) -> list[Optional[str]]:
        """Why each molecule lies outside the models' applicability domains: one string per
        molecule, the reasons joined with ``"; "``, None where there is none -- for a
        molecule that cannot be featurized too (its reason is :meth:`predict`'s ``error``).

        The same check as :meth:`predict`'s ``warning`` column, without running the model.
        """
        return [f.warning or None for chunk, featurized in
                featurized_chunks(to_records(molecules, None), self.vocab, DEFAULT_CHUNK_SIZE,
                                  max_atoms=self.max_atoms, domains=self.domains)
                for f in featurized]

    # --- streaming API (the CLI) -------------------------------------------------------------
    def predict_records(self, records: Iterable[Record], chunk_size: int = DEFAULT_CHUNK_SIZE, strict: bool = False,
                        source: Optional[str] = None, workers: int = 0) -> Iterator[ChunkResult]:
        """Predictions of ``records`` chunk by chunk: memory stays bounded by ``chunk_size``.

        Args:
            workers: featurize in this many worker processes (0: in this process).

        Raises:
            MolsepnormError: at the call, before any record is read, for a pretrained
                encoder (no trained head: it embeds, it does not predict).
            InvalidMoleculeError: with ``strict``, at the first bad record (naming
                ``source`` and the record's line).
        """
        self.check_predicts()  # here, not in the generator below: at the call, not at the first chunk
        return self._chunks(records, chunk_size, strict, source, workers, embed=False)

    def embed_records(self, records: Iterable[Record], chunk_size: int = DEFAULT_CHUNK_SIZE, strict: bool = False,
                      source: Optional[str] = None, workers: int = 0) -> Iterator[ChunkResult]:
        """Embeddings of ``records`` chunk by chunk (a single model only)."""
        if self.is_ensemble:
            raise MolsepnormError(f"embeddings come from one model, and this is an ensemble of {len(self.members)} ("
                                  f"{'; '.join(m.source for m in self.members)}): give one checkpoint file (a bundled "
                                  f"ensemble's member files are listed by `molsepnorm models`)")
        return self._chunks(records, chunk_size, strict, source, workers, embed=True)

    def check_predicts(self) -> None:
        """Raise :class:`MolsepnormError` if these models cannot predict: a pretrained
        encoder (``molsepnorm pretrain``'s ``encoder.pt``) has no trained head; it embeds
        (:meth:`embed`) and starts a fine-tuning (``molsepnorm train --init``)."""
        from molsepnorm.inference.runner import check_predicts

        check_predicts(self.task, self.members[0].source)

    def featurize(self, molecule: Any) -> Any:
        """The encoded graph (PyG ``Data``) of one molecule in this model's vocabulary.

        Raises:
            InvalidMoleculeError: the molecule is invalid or outside the vocabulary.
        """
        from molsepnorm.chem import featurize

        return featurize(molecule, self.vocab, encodings=True, max_atoms=self.max_atoms)

    # --- internals ---------------------------------------------------------------------------
    def _chunks(self, records: Iterable[Record], chunk_size: int, strict: bool, source: Optional[str], workers: int,
                embed: bool) -> Iterator[ChunkResult]:
        for chunk, featurized in featurized_chunks(records, self.vocab, chunk_size, workers, self.max_atoms,
                                                   self.domains):
            yield self._run_chunk(chunk, featurized, strict, source, embed=embed)

    def _run_chunk(self, chunk: list[Record], featurized: list[Featurized], strict: bool, source: Optional[str],
                   embed: bool) -> ChunkResult:
        smiles = [f.smiles for f in featurized]
        errors = [f.error for f in featurized]
        if strict:
            bad = next((i for i, e in enumerate(errors) if e is not None), None)
            if bad is not None:
                record = chunk[bad]
                raise InvalidMoleculeError(smiles[bad] or str(record.id), errors[bad], source=source, row=record.line)
        positions = [i for i, f in enumerate(featurized) if f.graph is not None]
        graphs = [featurized[i].graph for i in positions]
        width = self.embedding_dim if embed else len(self.target_names)
        values = np.full((len(chunk), width), np.nan)
        std = np.full((len(chunk), width), np.nan) if self.is_ensemble and not embed else None
        if graphs:
            out = self._forward(graphs, embed)
            rows = np.asarray(positions)
            values[rows] = out.mean()
            if std is not None:
                std[rows] = out.std()
        return ChunkResult(chunk, smiles, values, std, errors, [f.warning for f in featurized])

    def _forward(self, graphs: list[Any], embed: bool) -> "RunOutput":
        """Outputs of every member for ``graphs`` (embeddings: the first member's), in their order."""
        from molsepnorm.inference.runner import run

        members = self.members[:1] if embed else self.members
        return run([m.runner for m in members], graphs, embed=embed, batch_size=self.batch_size,
                   max_tokens=self.max_tokens, member_threads=self.member_threads)


# --- helpers ---------------------------------------------------------------------------------


def value_columns(target_names: Sequence[str], ensemble: bool) -> list[str]:
    """Output column names of the targets: ``t`` (and ``t_std``) per target, clear of the
    fixed ``id`` / ``smiles`` / ``error`` columns."""
    columns = []
    for name in target_names:
        name = f"{name}_pred" if name in ("id", "smiles", "error") else name
        columns.append(name)
        if ensemble:
            columns.append(f"{name}_std")
    return columns


def prediction_frame(chunk: ChunkResult, target_names: Sequence[str]) -> "pd.DataFrame":
    """A chunk as a DataFrame with the CLI's columns."""
    import pandas as pd

    columns = value_columns(target_names, chunk.std is not None)
    data: dict[str, Any] = {"id": [r.id for r in chunk.records], "smiles": chunk.smiles}
    for t in range(len(target_names)):
        if chunk.std is None:
            data[columns[t]] = chunk.values[:, t]
        else:
            data[columns[2 * t]] = chunk.values[:, t]
            data[columns[2 * t + 1]] = chunk.std[:, t]
    data["error"] = chunk.errors
    data["warning"] = chunk.warning_column()
    return pd.DataFrame(data)


def to_records(molecules: Any, ids: Optional[Sequence[Any]]) -> list[Record]:
    """API inputs (a SMILES, a Mol, a list / array / Series of them) as records."""
    import pandas as pd
    from rdkit import Chem

    from molsepnorm.chem.readers import Record  # at call time: the chem package imports RDKit

    if isinstance(molecules, pd.DataFrame):
        raise TypeError("pass one column of SMILES (e.g. df['smiles']), not a whole DataFrame")
    if isinstance(molecules, (bytes, bytearray)):
        raise TypeError("got bytes: pass the SMILES as a str (molecules.decode())")
    if isinstance(molecules, (str, Chem.Mol)):
        items: list[Any] = [molecules]
    elif isinstance(molecules, pd.Series):
        items = molecules.tolist()
        if ids is None:
            ids = molecules.index.tolist()  # pandas' labels, so that frame.loc[output.id] is the row
    elif isinstance(molecules, np.ndarray):
        items = molecules.reshape(-1).tolist()
    elif isinstance(molecules, Iterable):
        items = list(molecules)
    else:
        raise TypeError(f"expected SMILES, an RDKit Mol, or a list / Series of them; got {type(molecules).__name__}")
    if ids is not None:
        ids = list(ids)
        if len(ids) != len(items):
            raise ValueError(f"got {len(ids)} ids for {len(items)} molecules")
    records = []
    for i, item in enumerate(items):
        ident = ids[i] if ids is not None else i + 1
        if isinstance(item, str):
            records.append(Record(i + 1, i + 1, ident, item.strip()))
        elif isinstance(item, Chem.Mol):
            if ids is None and item.HasProp("_Name") and item.GetProp("_Name").strip():
                ident = item.GetProp("_Name").strip()
            records.append(Record(i + 1, i + 1, ident, "", mol=item, mol_sanitized=not item.NeedsUpdatePropertyCache()))
        elif item is None or item is pd.NA or (isinstance(item, float) and math.isnan(item)):
            records.append(Record(i + 1, i + 1, ident, "", error="missing value: no molecule given"))
        else:
            raise TypeError(f"molecule {i + 1}: expected a SMILES string or an RDKit Mol, got {type(item).__name__}")
    return records


def _check_compatible(members: Sequence[Member]) -> None:
    from molsepnorm.checkpoint import check_ensemble

    check_ensemble([m.checkpoint for m in members])
