"""A corpus as an endless, resumable stream of padded batches, featurized a chunk at a time.

The records of the corpus are numbered in file order and cut into *blocks* of
``chunk_size`` consecutive records (block ``b`` holds records ``b * C + 1 .. (b + 1) * C``).
Process ``r`` of ``W`` (DDP) takes the blocks ``b`` with ``b % W == r``; each block is
featurized when it is reached (in this process, or by worker processes one block ahead:
:func:`molsepnorm.predict.featurizing.featurized_chunks`), its molecules are cut into
batches (size-bucketed or random) with a seed drawn from ``(seed, pass, block)``, and the
batches are yielded in that order.  At the end of the corpus the next pass begins.

A corpus read more than once is featurized once when its graphs fit in
:data:`GRAPH_CACHE_BYTES` (molhiv's 32,901 training molecules: about 260 MiB): the first
pass keeps them and the next passes train on them without reading the file again (a file
changed during a run is not seen).  A larger corpus is read and featurized again every
pass, and memory holds one block of graphs (two with workers), never the corpus: the
blocks kept while the first pass had not yet outgrown the budget are let go.  The graph-level
targets (motif counts, descriptors: RDKit substructure searches that cost as much as
featurizing) are kept the same way, all or none, within :data:`TARGET_CACHE_BYTES`
(molhiv's: 11 MB of motif counts), whether the graphs fit or not.  A :class:`Position`
``(pass, block, batches done)`` is all a resume needs: the records before the block are
read again but not featurized, the block is featurized again and its first batches are
skipped, so a resumed run sees the very same batches (and the next pass featurizes only
the blocks that the resumed pass did not reach, the others being kept).
"""
from __future__ import annotations

import contextlib
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterator, Mapping, Optional

import numpy as np
import torch

from molsepnorm.data.collate import GraphBatch, GraphCollator
from molsepnorm.errors import MolsepnormError
from molsepnorm.predict.featurizing import featurized_chunks
from molsepnorm.chem.readers import Record
from molsepnorm.pretrain.corpus import Corpus
from molsepnorm.train.batching import make_train_sampler


#: Most bytes of featurized graphs kept across passes: all of a process's blocks or none
#: (see the module docstring; pretraining sets it from ``corpus.cache_mb``).
GRAPH_CACHE_BYTES = 512 * 2**20
#: Most bytes of graph-level targets kept across passes, all of a process's blocks or none
#: (pretraining: half of ``corpus.cache_mb``).
TARGET_CACHE_BYTES = 256 * 2**20


@dataclass(frozen=True)
class Position:
    """Where a process stands in the corpus: the pass, the block it is in (a global block
    number) and how many batches of that block it has trained on."""

    corpus_pass: int = 0
    block: int = 0
    batches: int = 0

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> "Position":
        return cls(int(raw["corpus_pass"]), int(raw["block"]), int(raw["batches"]))


class CorpusStream:
    """The batches of one process (see the module docstring).

    Args:
        corpus: the records.
        vocab: featurizer vocabulary (``"ogb"`` / ``"zinc"``).
        chunk_size: records per block.
        batch_size: most molecules per batch.
        batching: ``"bucket"`` or ``"random"`` (:func:`~molsepnorm.train.batching.make_train_sampler`).
        max_tokens: token budget of a bucketed batch (None: ``batch_size * (mean atoms + 1)`` of the block).
        seed: base seed of the batch order.
        multi_hop_max_dist: K of the collated edge paths (the model's).
        rank, world_size: this process among the DDP processes.
        workers: featurizing processes (0: this process).
        limit: read only the first ``limit`` records.
        max_atoms: larger molecules are left out (reported through ``on_invalid``).
        on_invalid: called with each record that gives no graph and the reason, in the
            first pass only (and not again when a resume featurizes a block a second time).
        graph_targets: computes each molecule's graph-level pretext targets from its
            graph, (M,) float (such as :func:`~molsepnorm.chem.motifs.motif_counts` of its
            SMILES); a block's are computed in this process when the block is first reached
            (kept for the next passes, see the module docstring) and batched as ``y`` (B, M).
            None: batches carry no ``y``.
        graph_cache_bytes: most bytes of graphs kept for the next passes (0: none kept).
        target_cache_bytes: most bytes of targets kept for the next passes (0: none kept).
    """

    def __init__(self, corpus: Corpus, vocab: str, chunk_size: int, batch_size: int, batching: str = "bucket",
                 max_tokens: Optional[int] = None, seed: int = 0, multi_hop_max_dist: int = 5, rank: int = 0,
                 world_size: int = 1, workers: int = 0, limit: Optional[int] = None, max_atoms: Optional[int] = None,
                 on_invalid: Optional[Callable[[Record, str], None]] = None,
                 graph_targets: Optional[Callable[[Any], np.ndarray]] = None,
                 graph_cache_bytes: int = GRAPH_CACHE_BYTES, target_cache_bytes: int = TARGET_CACHE_BYTES) -> None:
        self.corpus = corpus
        self.vocab = vocab
        self.chunk_size = int(chunk_size)
        self.batch_size = int(batch_size)
        self.batching = batching
        self.max_tokens = max_tokens
        self.seed = int(seed)
        self.collate = GraphCollator(multi_hop_max_dist)
        self.rank, self.world_size = int(rank), int(world_size)
        self.workers = int(workers)
        self.limit = limit
        self.max_atoms = max_atoms
        self.on_invalid = on_invalid or (lambda record, reason: None)
        self.graph_targets = graph_targets
        self.graph_cache_bytes = int(graph_cache_bytes)
        self.target_cache_bytes = int(target_cache_bytes)
        # block -> its graphs; None once they are more than graph_cache_bytes
        self._graph_cache: Optional[dict[int, list[Any]]] = {} if self.graph_cache_bytes > 0 else None
        self._graph_bytes = 0
        self._all_cached = False  # a whole pass's blocks are in _graph_cache: later passes read no file
        # block -> its targets, as computed in an earlier pass; None once they are more than target_cache_bytes
        self._target_cache: Optional[dict[int, np.ndarray]] = {} if self.target_cache_bytes > 0 else None
        self._target_bytes = 0

    def start(self) -> Position:
        """The position of a run that has not begun: pass 0, this process's first block."""
        return Position(0, self.rank, 0)

    def batches(self, start: Position) -> Iterator[tuple[Position, GraphBatch]]:
        """``(position after the batch, batch)`` from ``start`` on, for ever (pass after pass).

        Raises:
            MolsepnormError: a whole pass gave this process no molecule (an empty corpus,
                every molecule invalid, or fewer blocks than processes).
        """
        corpus_pass, first, skip = start.corpus_pass, start.block, start.batches
        while True:
            found = False
            # invalid records are reported in the first pass only, and those of a block begun
            # before a resume have been already
            quiet = -1 if corpus_pass > 0 else (first if skip else None)
            whole_pass = first == self.rank and skip == 0
            source = self._cached_blocks(first) if self._all_cached else self._read_blocks(first, quiet)
            with contextlib.closing(source) as blocks:
                for block, graphs in blocks:
                    if not self._all_cached:
                        self._keep_graphs(block, graphs)
                    done = skip if block == first else 0
                    order = self._batches(graphs, corpus_pass, block)
                    targets = self._targets(block, graphs) if done < len(order) else None
                    for k in range(done, len(order)):
                        found = True
                        batch = self.collate([graphs[i] for i in order[k]])
                        if targets is not None:
                            batch.y = torch.from_numpy(targets[order[k]])
                        yield Position(corpus_pass, block, k + 1), batch
            if whole_pass and self._graph_cache is not None:  # every block of a pass was kept
                self._all_cached = True
            if not found and whole_pass:
                raise MolsepnormError(
                    f"corpus {self.corpus.name}: a whole pass gave process {self.rank} of {self.world_size} no "
                    f"molecule to train on (is the corpus empty or all invalid? with several processes it needs "
                    f"at least {self.world_size} chunks of {self.chunk_size} records: lower corpus.chunk_size)")
            corpus_pass, first, skip = corpus_pass + 1, self.rank, 0

    def _read_blocks(self, first: int, quiet: Optional[int] = None) -> Iterator[tuple[int, list[Any]]]:
        """Like :meth:`_blocks`, but a block kept in an earlier pass comes from memory, in its
        place in the order (after a resume inside pass 0, pass 1 featurizes only the blocks
        that pass 0 did not reach)."""
        kept = self._graph_cache or {}
        cached = sorted(b for b in kept if b >= first)
        for block, graphs in self._blocks(first, quiet, skip=frozenset(cached)):
            while cached and cached[0] < block:
                b = cached.pop(0)
                yield b, kept[b]
            yield block, graphs
        for b in cached:
            yield b, kept[b]

    def _blocks(self, first: int, quiet: Optional[int] = None,
                skip: frozenset[int] = frozenset()) -> Iterator[tuple[int, list[Any]]]:
        """``(block number, its graphs)`` of this process from block ``first`` on, one pass,
        but for the blocks in ``skip`` (their records are read, not featurized); the invalid
        records of block ``quiet`` (-1: of every block) are not reported."""
        C, W, r = self.chunk_size, self.world_size, self.rank
        mine = (rec for rec in self.corpus.records(self.limit)
                if (rec.index - 1) // C >= first and ((rec.index - 1) // C) % W == r
                and (rec.index - 1) // C not in skip)
        with contextlib.closing(featurized_chunks(mine, self.vocab, C, self.workers, self.max_atoms)) as chunks:
            for records, featurized in chunks:
                block = (records[0].index - 1) // C
                graphs = []
                for record, item in zip(records, featurized):
                    if item.graph is not None:
                        graphs.append(item.graph)
                    elif quiet not in (-1, block):
                        self.on_invalid(record, str(item.error))
                if graphs:
                    yield block, graphs

    def _cached_blocks(self, first: int) -> Iterator[tuple[int, list[Any]]]:
        """``(block number, its graphs)`` from block ``first`` on, one pass, as kept by the first."""
        assert self._graph_cache is not None
        for block in sorted(b for b in self._graph_cache if b >= first):
            yield block, self._graph_cache[block]

    def _keep_graphs(self, block: int, graphs: list[Any]) -> None:
        """Keep a block's graphs for the next passes, or give up keeping any once they are too many."""
        if self._graph_cache is None or block in self._graph_cache:
            return
        self._graph_bytes += sum(graph_bytes(g) for g in graphs)
        if self._graph_bytes > self.graph_cache_bytes:
            self._graph_cache = None  # the corpus does not fit: read every pass, holding one block
            return
        self._graph_cache[block] = graphs

    def _targets(self, block: int, graphs: list[Any]) -> Optional[np.ndarray]:
        """The graph-level targets of a block's molecules, (n, M) float32, or None; those of a
        block met in an earlier pass (the same records, hence the same graphs) are reused."""
        if self.graph_targets is None:
            return None
        cache = self._target_cache
        if cache is not None and block in cache:
            return cache[block]
        targets = np.stack([np.asarray(self.graph_targets(g), dtype=np.float32) for g in graphs])
        if cache is not None:
            self._target_bytes += targets.nbytes
            if self._target_bytes > self.target_cache_bytes:
                self._target_cache = None  # too many to keep: computed every pass
            else:
                cache[block] = targets
        return targets

    def _batches(self, graphs: list[Any], corpus_pass: int, block: int) -> list[list[int]]:
        """The batches of a block (indices into ``graphs``), fixed by ``(seed, pass, block)``."""
        seed = int(np.random.SeedSequence([self.seed, corpus_pass, block]).generate_state(1)[0])
        sizes = [int(g.num_nodes) for g in graphs]
        sampler = make_train_sampler(sizes, self.batch_size, self.batching, self.max_tokens, seed=seed)
        return [list(batch) for batch in sampler]


def graph_bytes(graph: Any) -> int:
    """About how many bytes a featurized molecule (a ``MolGraph``) holds: its arrays, its
    SMILES and the objects around them."""
    return sum(int(a.nbytes) + 112 for a in graph if isinstance(a, np.ndarray)) + len(graph.smiles) + 200
