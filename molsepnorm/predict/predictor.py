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
vocabulary, ...) becomes a row with its reason in ``error``, unless ``strict=True``.
"""
from __future__ import annotations

import contextlib
import math
import os
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Optional, Sequence, Union

import numpy as np

from molsepnorm.errors import InvalidMoleculeError, MolsepnormError
from molsepnorm.predict.featurizing import MAX_ATOMS, Featurized, featurized_chunks
from molsepnorm.predict.readers import Record

if TYPE_CHECKING:
    import pandas as pd
    import torch

PathLike = Union[str, os.PathLike]

DEFAULT_BATCH_SIZE = 128
DEFAULT_CHUNK_SIZE = 2_000
# A batch also stops growing at batch_size * TOKENS_PER_MOLECULE padded tokens, so a batch
# of 150-atom molecules is not as long (and as costly) as a batch of 30-atom ones.
TOKENS_PER_MOLECULE = 40


@dataclass
class Member:
    """One model of a :class:`Predictor` and what its checkpoint says about it."""

    source: str  # the path or bundled name it was loaded from
    model: Any  # molsepnorm.nn.Graphormer, eval mode
    scaler: Any  # TargetScaler or None
    task: str  # "regression" | "binary"
    target_names: list[str]
    vocab: str
    multi_hop_max_dist: int
    checkpoint: dict[str, Any]  # everything but the weights


@dataclass
class ChunkResult:
    """Predictions (or embeddings) of consecutive records, in input order.

    ``values`` is ``(n, T)`` predictions or ``(n, D)`` embeddings, NaN on failed rows;
    ``std`` the ensemble's standard deviation (``(n, T)``) or None; ``smiles`` what the
    output shows (the input SMILES; RDKit's SMILES for a Mol / SDF record).
    """

    records: list[Record]
    smiles: list[str]
    values: np.ndarray
    std: Optional[np.ndarray]
    errors: list[Optional[str]]

    @property
    def num_ok(self) -> int:
        return sum(e is None for e in self.errors)


class Predictor:
    """Trained model(s) ready to predict or embed molecules.

    Build with :meth:`load`.  Args of the constructor: the loaded :class:`Member` s (all
    with the same vocabulary, task and targets), the torch device, and the batching
    (``batch_size`` molecules at most, ``max_tokens`` padded tokens at most), and
    ``max_atoms``, the largest molecule predicted (larger ones get a row with the reason;
    None: no limit).
    """

    def __init__(self, members: Sequence[Member], device: Union[str, "torch.device"] = "cpu",
                 batch_size: int = DEFAULT_BATCH_SIZE, max_tokens: Optional[int] = None,
                 max_atoms: Optional[int] = MAX_ATOMS) -> None:
        import torch

        if not members:
            raise ValueError("a Predictor needs at least one model")
        _check_compatible(members)
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.members = list(members)
        self.device = torch.device(device)
        for m in self.members:
            m.model.to(self.device).eval()
        self.batch_size = int(batch_size)
        self.max_tokens = int(max_tokens) if max_tokens is not None else self.batch_size * TOKENS_PER_MOLECULE
        self.multi_hop_max_dist = max(m.multi_hop_max_dist for m in self.members)
        if max_atoms is not None and max_atoms < 1:
            raise ValueError(f"max_atoms must be >= 1 or None, got {max_atoms}")
        self.max_atoms = max_atoms

    # --- construction --------------------------------------------------------------------
    @classmethod
    def load(cls, *models: Union[PathLike, Sequence[PathLike]], device: str = "cpu",
             batch_size: int = DEFAULT_BATCH_SIZE,
             max_tokens: Optional[int] = None, max_atoms: Optional[int] = MAX_ATOMS) -> "Predictor":
        """Load one checkpoint (an ensemble with several) by path or bundled name.

        Args:
            models: ``best.pt`` paths or bundled model names (``molsepnorm models``), as
                arguments or one list; none: the default bundled model.
            device: ``cpu``, ``cuda`` or ``auto``.

        Raises:
            UnknownModelError: a name that is neither a file nor a bundled model.
            CheckpointError: an unreadable or foreign checkpoint.
            MolsepnormError: ensemble members that predict different things.
        """
        from molsepnorm.predict.bundled import DEFAULT_MODEL, resolve_model
        from molsepnorm.train.checkpoint import load_checkpoint, model_from_checkpoint, target_scaler_from_checkpoint
        from molsepnorm.train.distributed import resolve_device

        if len(models) == 1 and isinstance(models[0], (list, tuple)):
            models = tuple(models[0])  # Predictor.load(["a.pt", "b.pt"]) as well as load("a.pt", "b.pt")
        specs = list(models) or [DEFAULT_MODEL]
        members = []
        for spec in specs:
            path = resolve_model(spec)
            ckpt = load_checkpoint(path)
            _warn_versions(ckpt, str(spec))
            feat, task = ckpt["featurizer"], ckpt["task"]
            members.append(Member(
                source=str(spec), model=model_from_checkpoint(ckpt), scaler=target_scaler_from_checkpoint(ckpt),
                task=task["type"], target_names=list(task["target_names"]), vocab=feat["vocab"],
                multi_hop_max_dist=int(feat["multi_hop_max_dist"]),
                checkpoint={k: v for k, v in ckpt.items() if k not in ("model", "training_state")},
            ))
        return cls(members, device=resolve_device(device), batch_size=batch_size, max_tokens=max_tokens,
                   max_atoms=max_atoms)

    def __repr__(self) -> str:
        sources = ", ".join(m.source for m in self.members)
        return (f"Predictor({sources}: {self.task}, targets {', '.join(self.target_names)}, "
                f"{self.vocab} vocabulary, device {self.device})")

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
    def is_ensemble(self) -> bool:
        return len(self.members) > 1

    @property
    def embedding_dim(self) -> int:
        return int(self.members[0].model.config.hidden_dim)

    def output_columns(self) -> list[str]:
        """Columns of a prediction table: id, smiles, each target (+ ``_std``), error."""
        return ["id", "smiles", *value_columns(self.target_names, self.is_ensemble), "error"]

    # --- notebook API ----------------------------------------------------------------------
    def predict(self, molecules: Any, ids: Optional[Sequence[Any]] = None, strict: bool = False) -> "pd.DataFrame":
        """Predict every molecule; a DataFrame shaped like ``molsepnorm predict``'s CSV.

        Args:
            molecules: a SMILES, an RDKit Mol, or a list / tuple / numpy array /
                ``pandas.Series`` of them (None or NaN entries are missing molecules).
            ids: one id per molecule (default: a Series' index if it is not a plain range,
                a Mol's ``_Name``, else the 1-based position).
            strict: raise :class:`InvalidMoleculeError` at the first molecule that cannot
                be predicted, instead of reporting it in ``error``.

        Returns:
            One row per input, in order: ``id``, ``smiles``, one column per target (a
            probability for binary tasks), ``<target>_std`` for an ensemble, and
            ``error``: the reason, missing (``frame["error"].isna()``) where the row
            was predicted -- as ``pandas.read_csv`` reads the CLI's output.
        """
        import pandas as pd

        chunks = list(self.predict_records(to_records(molecules, ids), strict=strict))
        return pd.concat([prediction_frame(c, self.target_names) for c in chunks], ignore_index=True) if chunks \
            else pd.DataFrame(columns=self.output_columns())

    def embed(self, molecules: Any, strict: bool = False) -> np.ndarray:
        """Graph-token embeddings after the final norm: float32 ``(n, D)``, NaN rows for
        molecules that cannot be embedded (or raise at the first one with ``strict``)."""
        parts = [c.values for c in self.embed_records(to_records(molecules, None), strict=strict)]
        if not parts:
            return np.zeros((0, self.embedding_dim), dtype=np.float32)
        return np.concatenate(parts).astype(np.float32)

    # --- streaming API (the CLI) -------------------------------------------------------------
    def predict_records(self, records: Iterable[Record], chunk_size: int = DEFAULT_CHUNK_SIZE, strict: bool = False,
                        source: Optional[str] = None, workers: int = 0) -> Iterator[ChunkResult]:
        """Predictions of ``records`` chunk by chunk: memory stays bounded by ``chunk_size``.

        Args:
            workers: featurize in this many worker processes (0: in this process).

        Raises:
            InvalidMoleculeError: with ``strict``, at the first bad record (naming
                ``source`` and the record's line).
        """
        for chunk, featurized in featurized_chunks(records, self.vocab, chunk_size, workers, self.max_atoms):
            yield self._run_chunk(chunk, featurized, strict, source, embed=False)

    def embed_records(self, records: Iterable[Record], chunk_size: int = DEFAULT_CHUNK_SIZE, strict: bool = False,
                      source: Optional[str] = None, workers: int = 0) -> Iterator[ChunkResult]:
        """Embeddings of ``records`` chunk by chunk (a single model only)."""
        if self.is_ensemble:
            raise MolsepnormError("embeddings come from one model: give a single --model, not an ensemble")
        for chunk, featurized in featurized_chunks(records, self.vocab, chunk_size, workers, self.max_atoms):
            yield self._run_chunk(chunk, featurized, strict, source, embed=True)

    def featurize(self, molecule: Any) -> Any:
        """The encoded graph (PyG ``Data``) of one molecule in this model's vocabulary.

        Raises:
            InvalidMoleculeError: the molecule is invalid or outside the vocabulary.
        """
        from molsepnorm.chem import featurize

        return featurize(molecule, self.vocab, encodings=True, max_atoms=self.max_atoms)

    # --- internals ---------------------------------------------------------------------------
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
            out = self._forward(graphs, embed)  # (members, n_ok, width)
            rows = np.asarray(positions)
            values[rows] = out.mean(axis=0)
            if std is not None:
                std[rows] = out.std(axis=0)
        return ChunkResult(chunk, smiles, values, std, errors)

    def _forward(self, graphs: list[Any], embed: bool) -> np.ndarray:
        """Outputs of every member for ``graphs``, in their order: ``(members, n, width)``."""
        import torch

        from molsepnorm.data.collate import collate_graphs

        sizes = [int(g.num_nodes) for g in graphs]
        members = self.members[:1] if embed else self.members
        width = self.embedding_dim if embed else len(self.target_names)
        out = np.empty((len(members), len(graphs), width))
        # oneDNN caches one primitive per input shape; batches of molecules come in ever new
        # shapes, so with it on, memory crept up by ~100 MB over 100k molecules (measured),
        # for no speed gain on this model's small matrices.
        with torch.inference_mode(), _without_onednn():
            for idx in size_batches(sizes, self.batch_size, self.max_tokens):
                batch = collate_graphs([graphs[i] for i in idx], self.multi_hop_max_dist).to(self.device)
                for k, member in enumerate(members):
                    if embed:
                        y = member.model.embed(batch)
                    else:
                        y = member.model(batch)
                        if member.task == "binary":
                            y = torch.sigmoid(y)
                        elif member.scaler is not None:
                            y = member.scaler.inverse_transform(y)
                    out[k, idx] = y.double().cpu().numpy()
        return out


# --- helpers ---------------------------------------------------------------------------------


def size_batches(sizes: Sequence[int], batch_size: int, max_tokens: int,
                 max_pairs: Optional[int] = None) -> list[list[int]]:
    """Indices cut into batches of similar size.

    Molecules are sorted by size and cut greedily; a batch of ``B`` molecules padded to
    ``N`` atoms holds at most ``batch_size`` molecules, ``B * (N + 1) <= max_tokens`` tokens
    and ``B * (N + 1)**2 <= max_pairs`` token pairs (default ``max_tokens * 40``): the
    attention bias and edge paths grow with the pairs, so the pair cap keeps a batch of
    200-atom molecules as small in memory as one of 40-atom molecules.  A molecule over a
    budget on its own gets a batch of its own.
    """
    max_pairs = max_tokens * TOKENS_PER_MOLECULE if max_pairs is None else max_pairs
    order = sorted(range(len(sizes)), key=lambda i: sizes[i])
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        length = int(sizes[i]) + 1  # + the graph token; sorted, so the newest is the longest
        count = len(current) + 1
        if current and (count > batch_size or count * length > max_tokens or count * length ** 2 > max_pairs):
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


@contextlib.contextmanager
def _without_onednn() -> Iterator[None]:
    """Switch PyTorch's oneDNN (mkldnn) CPU kernels off for the duration (process-wide flag)."""
    import torch

    previous = torch.backends.mkldnn.enabled
    torch.backends.mkldnn.enabled = False
    try:
        yield
    finally:
        torch.backends.mkldnn.enabled = previous


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
    return pd.DataFrame(data)


def to_records(molecules: Any, ids: Optional[Sequence[Any]]) -> list[Record]:
    """API inputs (a SMILES, a Mol, a list / array / Series of them) as records."""
    import pandas as pd
    from rdkit import Chem

    if isinstance(molecules, pd.DataFrame):
        raise TypeError("pass one column of SMILES (e.g. df['smiles']), not a whole DataFrame")
    if isinstance(molecules, (str, Chem.Mol)):
        items: list[Any] = [molecules]
    elif isinstance(molecules, pd.Series):
        items = molecules.tolist()
        if ids is None and not isinstance(molecules.index, pd.RangeIndex):
            ids = molecules.index.tolist()
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
            records.append(Record(i + 1, i + 1, ident, "", mol=item))
        elif item is None or (isinstance(item, float) and math.isnan(item)):
            records.append(Record(i + 1, i + 1, ident, "", error="missing value: no molecule given"))
        else:
            raise TypeError(f"molecule {i + 1}: expected a SMILES string or an RDKit Mol, got {type(item).__name__}")
    return records


def _check_compatible(members: Sequence[Member]) -> None:
    first = members[0]
    for m in members[1:]:
        for what in ("vocab", "task", "target_names"):
            if getattr(m, what) != getattr(first, what):
                raise MolsepnormError(
                    f"cannot ensemble {first.source} and {m.source}: different {what.replace('_', ' ')} "
                    f"({getattr(first, what)!r} vs {getattr(m, what)!r})")


def _warn_versions(ckpt: dict[str, Any], source: str) -> None:
    from molsepnorm.chem import FEATURIZER_VERSION
    from molsepnorm.encodings import ENCODING_VERSION

    feat = ckpt["featurizer"]
    if (feat.get("featurizer_version"), feat.get("encoding_version")) != (FEATURIZER_VERSION, ENCODING_VERSION):
        warnings.warn(f"{source}: trained with featurizer v{feat.get('featurizer_version')} / encodings "
                      f"v{feat.get('encoding_version')}, this molsepnorm has v{FEATURIZER_VERSION} / "
                      f"v{ENCODING_VERSION}: predictions may be off", stacklevel=3)
