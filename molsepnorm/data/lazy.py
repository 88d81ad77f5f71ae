"""Unlabelled SMILES corpora: held compactly, featurized only when a molecule is read.

A corpus of millions of molecules (MOSES: 1.9M) is too large to featurize into a cache up
front: the Graphormer encodings are O(N^2) per molecule and featurizing takes a fraction
of a millisecond each, so an eager cache would cost minutes and gigabytes before the first
batch.  Here the SMILES themselves are kept, as one ``bytes`` buffer plus two offset
arrays (about the decompressed file's size, no Python string per molecule), and
:class:`LazyGraphs` featurizes molecule ``i`` when it is indexed, e.g. inside the worker
processes of a ``torch.utils.data.DataLoader``.
"""
from __future__ import annotations

from typing import Any, Iterator, Optional, Sequence, Union, overload

import numpy as np
from torch.utils.data import Dataset

from molsepnorm.errors import DatasetFormatError, InvalidMoleculeError


def _position(i: Any, n: int) -> int:
    """Record ``i`` of ``n`` (negative: counted from the end) as a position in ``[0, n)``.

    Raises:
        IndexError: ``i`` is out of range.
    """
    j = int(i) + n if int(i) < 0 else int(i)
    if not 0 <= j < n:
        raise IndexError(f"record {i} out of range for {n} SMILES")
    return j


class SmilesColumn(Sequence[str]):
    """An immutable sequence of SMILES stored in one buffer.

    Args:
        buffer: the text of the records, UTF-8.
        starts, ends: int64 ``(n,)`` byte offsets of record ``i`` in ``buffer`` (end
            exclusive, without its line ending).
        source: the file the records came from (for error messages).
        first_line: line number of record 0 in ``source`` (2 when a header precedes it).
    """

    def __init__(self, buffer: bytes, starts: np.ndarray, ends: np.ndarray, source: str, first_line: int = 1) -> None:
        if starts.shape != ends.shape:
            raise ValueError(f"starts {starts.shape} and ends {ends.shape} differ")
        self._buffer = buffer
        self._starts = np.ascontiguousarray(starts, dtype=np.int64)
        self._ends = np.ascontiguousarray(ends, dtype=np.int64)
        self.source = source
        self.first_line = int(first_line)

    @classmethod
    def from_lines(cls, body: bytes, source: str, first_line: int = 1) -> "SmilesColumn":
        """One record per line of ``body`` (``\\n`` or ``\\r\\n`` endings; a final line
        ending is optional).

        Raises:
            DatasetFormatError: a blank line (naming the file and its line): a damaged
                or foreign file, since a blank record would silently shift every later row.
        """
        view = np.frombuffer(body, dtype=np.uint8)
        newlines = np.flatnonzero(view == ord("\n")).astype(np.int64)
        ends = newlines if len(body) == 0 or body.endswith(b"\n") else np.append(newlines, len(body))
        starts = np.concatenate([[0], newlines + 1])[: len(ends)].astype(np.int64)
        carriage = ends > starts
        carriage[carriage] = view[ends[carriage] - 1] == ord("\r")
        ends = ends - carriage
        blank = np.flatnonzero(ends <= starts)
        if len(blank):
            raise DatasetFormatError(f"{source}, row {first_line + int(blank[0])}: blank line where a SMILES was "
                                     f"expected ({len(blank)} blank line(s) in all); the file is damaged")
        return cls(body, starts, ends, source, first_line)

    def __len__(self) -> int:
        return len(self._starts)

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> list[str]: ...

    def __getitem__(self, i: Union[int, slice]) -> Union[str, list[str]]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        j = _position(i, len(self))
        return self._buffer[self._starts[j]:self._ends[j]].decode("utf-8").strip()

    def __iter__(self) -> Iterator[str]:
        for start, end in zip(self._starts.tolist(), self._ends.tolist()):
            yield self._buffer[start:end].decode("utf-8").strip()

    def line(self, i: int) -> int:
        """The line number in :attr:`source` of record ``i``."""
        return self.first_line + int(i)

    @property
    def nbytes(self) -> int:
        """Memory held: the buffer and the offsets."""
        return len(self._buffer) + self._starts.nbytes + self._ends.nbytes

    def __repr__(self) -> str:
        return f"SmilesColumn({len(self):,} SMILES from {self.source}, {self.nbytes / 2**20:.1f} MiB)"


class ConcatSmiles(Sequence[str]):
    """Several :class:`SmilesColumn` s read as one sequence, without copying."""

    def __init__(self, parts: Sequence[SmilesColumn]) -> None:
        self.parts = list(parts)
        self._offsets = np.cumsum([0, *(len(p) for p in self.parts)])

    def __len__(self) -> int:
        return int(self._offsets[-1])

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        j = _position(i, len(self))
        part = int(np.searchsorted(self._offsets, j, side="right")) - 1
        return self.parts[part][j - int(self._offsets[part])]

    def __iter__(self) -> Iterator[str]:
        for part in self.parts:
            yield from part


class LazyGraphs(Dataset):
    """Graphs of a :class:`SmilesColumn`, featurized when indexed, never cached.

    ``dataset[i]`` is a PyG ``Data`` like the graphs of every :class:`DatasetSplits`
    (``x``, ``edge_index``, ``edge_attr``, ``num_nodes``, ``smiles`` and the Graphormer
    encodings ``degree``, ``spd``, ``path_next``) but without ``y``: the corpus is
    unlabelled, and :class:`~molsepnorm.data.collate.GraphCollator` then gives a batch
    ``y=None``.

    Args:
        smiles: the molecules.
        vocab: atom/bond vocabulary, ``"ogb"`` or ``"zinc"``.
        max_atoms: refuse molecules with more heavy atoms (None: no limit).

    Raises (on indexing):
        InvalidMoleculeError: naming the file, its line and RDKit's reason.
    """

    def __init__(self, smiles: SmilesColumn, vocab: str = "ogb", max_atoms: Optional[int] = None) -> None:
        self.smiles = smiles
        self.vocab = vocab
        self.max_atoms = max_atoms

    def __len__(self) -> int:
        return len(self.smiles)

    def __getitem__(self, i: int) -> Any:
        from molsepnorm.chem import featurize

        text = self.smiles[i]
        try:
            return featurize(text, self.vocab, encodings=True, max_atoms=self.max_atoms)
        except InvalidMoleculeError as err:
            index = int(i) + len(self) if int(i) < 0 else int(i)
            raise err.at(self.smiles.source, self.smiles.line(index)) from None

    def __repr__(self) -> str:
        return f"LazyGraphs({len(self):,} molecules of {self.smiles.source}, {self.vocab} vocabulary, featurized on access)"
