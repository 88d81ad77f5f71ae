"""A corpus as an endless, resumable stream of padded batches, featurized a chunk at a time.

The records of the corpus are numbered in file order and cut into *blocks* of
``chunk_size`` consecutive records (block ``b`` holds records ``b * C + 1 .. (b + 1) * C``).
Process ``r`` of ``W`` (DDP) takes the blocks ``b`` with ``b % W == r``; each block is
featurized when it is reached (in this process, or by worker processes one block ahead:
:func:`molsepnorm.predict.featurizing.featurized_chunks`), its molecules are cut into
batches (size-bucketed or random) with a seed drawn from ``(seed, pass, block)``, and the
batches are yielded in that order.  At the end of the corpus the next pass begins.

Memory holds one block of graphs (two with workers), never the corpus's.  The blocks'
graph-level targets (motif counts, descriptors: RDKit substructure searches that cost as
much as featurizing) are kept from one pass to the next, up to
:data:`TARGET_CACHE_BYTES`, so a corpus of that size (molhiv's 32,901 training molecules:
11 MB of motif targets) computes them once, not every pass.  A :class:`Position`
``(pass, block, batches done)`` is all a resume needs: the records before the block are
read again but not featurized, the block is featurized again and its first batches are
skipped, so a resumed run sees the very same batches.
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


#: Most bytes of graph-level targets kept across passes (blocks past it are computed again
#: every pass, as before the cache).
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
            SMILES); a block's are computed in this process when the block is reached and
            batched as ``y`` (B, M).  None: batches carry no ``y``.
        target_cache_bytes: most bytes of targets kept for the next passes (0: none kept).
    """

    def __init__(self, corpus: Corpus, vocab: str, chunk_size: int, batch_size: int, batching: str = "bucket",
                 max_tokens: Optional[int] = None, seed: int = 0, multi_hop_max_dist: int = 5, rank: int = 0,
                 world_size: int = 1, workers: int = 0, limit: Optional[int] = None, max_atoms: Optional[int] = None,
                 on_invalid: Optional[Callable[[Record, str], None]] = None,
                 graph_targets: Optional[Callable[[Any], np.ndarray]] = None,
                 target_cache_bytes: int = TARGET_CACHE_BYTES) -> None:
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
        self.target_cache_bytes = int(target_cache_bytes)
        self._target_cache: dict[int, np.ndarray] = {}  # block -> its targets, as computed in an earlier pass

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
            with contextlib.closing(self._blocks(first, quiet)) as blocks:
                for block, graphs in blocks:
                    done = skip if block == first else 0
                    order = self._batches(graphs, corpus_pass, block)
                    targets = self._targets(block, graphs) if done < len(order) else None
                    for k in range(done, len(order)):
                        found = True
                        batch = self.collate([graphs[i] for i in order[k]])
                        if targets is not None:
                            batch.y = torch.from_numpy(targets[order[k]])
                        yield Position(corpus_pass, block, k + 1), batch
            if not found and first == self.rank and skip == 0:
                raise MolsepnormError(
                    f"corpus {self.corpus.name}: a whole pass gave process {self.rank} of {self.world_size} no "
                    f"molecule to train on (is the corpus empty or all invalid? with several processes it needs "
                    f"at least {self.world_size} chunks of {self.chunk_size} records: lower corpus.chunk_size)")
            corpus_pass, first, skip = corpus_pass + 1, self.rank, 0

    def _blocks(self, first: int, quiet: Optional[int] = None) -> Iterator[tuple[int, list[Any]]]:
        """``(block number, its graphs)`` of this process from block ``first`` on, one pass;
        the invalid records of block ``quiet`` (-1: of every block) are not reported."""
        C, W, r = self.chunk_size, self.world_size, self.rank
        mine = (rec for rec in self.corpus.records(self.limit)
                if (rec.index - 1) // C >= first and ((rec.index - 1) // C) % W == r)
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

    def _targets(self, block: int, graphs: list[Any]) -> Optional[np.ndarray]:
        """The graph-level targets of a block's molecules, (n, M) float32, or None; those of a
        block met in an earlier pass (the same records, hence the same graphs) are reused."""
        if self.graph_targets is None:
            return None
        targets = self._target_cache.get(block)
        if targets is not None and len(targets) == len(graphs):
            return targets
        targets = np.stack([np.asarray(self.graph_targets(g), dtype=np.float32) for g in graphs])
        if sum(t.nbytes for t in self._target_cache.values()) + targets.nbytes <= self.target_cache_bytes:
            self._target_cache[block] = targets
        return targets

    def _batches(self, graphs: list[Any], corpus_pass: int, block: int) -> list[list[int]]:
        """The batches of a block (indices into ``graphs``), fixed by ``(seed, pass, block)``."""
        seed = int(np.random.SeedSequence([self.seed, corpus_pass, block]).generate_state(1)[0])
        sizes = [int(g.num_nodes) for g in graphs]
        sampler = make_train_sampler(sizes, self.batch_size, self.batching, self.max_tokens, seed=seed)
        return [list(batch) for batch in sampler]
