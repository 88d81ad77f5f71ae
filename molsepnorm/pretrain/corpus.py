"""Unlabelled molecules for pretraining: a named corpus or a file, read as a stream of records.

Named corpora (:data:`CORPORA`):

* ``moses``: the 1,584,663 training SMILES of MOSES (``<data root>/moses/train.csv.gz``,
  :func:`molsepnorm.data.moses.moses_smiles`), drug-like molecules from ZINC Clean Leads;
* ``molhiv``: the 32,901 SMILES of ogbg-molhiv's scaffold *training* split, through the
  project's molhiv loader (validation and test molecules are left out, so that a model
  fine-tuned on molhiv is scored on molecules it never saw, even unlabelled);
* ``nci``: the 4,999 SMILES of RDKit's ``NCI/first_5K.smi`` (ships with RDKit: tests, demos).

A file is read by :class:`molsepnorm.chem.readers.RecordReader` (``.smi``, ``.csv`` /
``.tsv`` with a SMILES column, ``.sdf``; any of them gzipped), one record at a time, so a
corpus never has to fit in memory.  Every pass over the corpus opens it again, unless the
stream kept the first pass's graphs (:mod:`molsepnorm.pretrain.stream`: a small corpus).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Mapping, Optional

from molsepnorm.chem.readers import Record, RecordReader
from molsepnorm.errors import MolsepnormError
from molsepnorm.pretrain.config import CorpusConfig

CORPORA = ("moses", "molhiv", "nci")


@dataclass(frozen=True)
class Corpus:
    """One corpus: what it is, where it is read, and a fresh pass over its records.

    Attributes:
        name: the corpus name, or the file's path.
        source: the file (or folder) read.
        open: a new iterator over the records of one pass, in file order; each record's
            ``index`` (1-based) numbers it within the corpus, ``line`` locates it in ``source``.
        columns: a CSV / TSV file's SMILES and id columns as read
            (:attr:`~molsepnorm.chem.readers.RecordReader.columns`), so that a data set
            loader reads the same molecules later; empty otherwise.
    """

    name: str
    source: str
    open: Callable[[], Iterator[Record]]
    columns: Mapping[str, Optional[str]] = field(default_factory=dict)

    def records(self, limit: Optional[int] = None) -> Iterator[Record]:
        """One pass over the records (the first ``limit`` only, if given)."""
        for record in self.open():
            if limit is not None and record.index > limit:
                return
            yield record


def open_corpus(config: CorpusConfig) -> Corpus:
    """The :class:`Corpus` named by ``config.corpus``: a name of :data:`CORPORA` or a file.

    Raises:
        MolsepnormError: neither a known corpus nor an existing file; a named corpus whose
            files are missing (the message says where they were looked for).
    """
    spec = str(config.corpus)
    path = Path(spec).expanduser()
    if not path.is_file() and spec.lower() in CORPORA:
        return _NAMED[spec.lower()](config)
    if not path.is_file():
        raise MolsepnormError(f"corpus {spec!r}: no such file, and no corpus of that name (named corpora: "
                              f"{', '.join(CORPORA)}; or a .smi / .csv / .tsv / .sdf file, optionally .gz)")
    with RecordReader(path, smiles_column=config.smiles_column) as reader:  # format and columns checked now
        columns = reader.columns
    return Corpus(spec, str(path.resolve()), lambda: _file_records(path, config.smiles_column), columns)


def _file_records(path: Path, smiles_column: Optional[str]) -> Iterator[Record]:
    with RecordReader(path, smiles_column=smiles_column) as reader:
        yield from reader


def _moses(config: CorpusConfig) -> Corpus:
    from molsepnorm.data.moses import FILES, moses_folder, moses_smiles

    _no_column(config, "moses")

    def records() -> Iterator[Record]:
        for k, smiles in enumerate(moses_smiles("train", config.data_root, limit=config.limit)):
            yield Record(index=k + 1, line=k + 2, id=k + 1, smiles=smiles)

    return Corpus("moses", str(moses_folder(config.data_root) / FILES["train"].name), records)


def _molhiv(config: CorpusConfig) -> Corpus:
    from molsepnorm.data.registry import load_dataset

    _no_column(config, "molhiv")
    splits = load_dataset("molhiv", root=config.data_root, progress=False)
    if splits.smiles is None:
        raise MolsepnormError(f"corpus molhiv: {splits.source} has no mapping/mol.csv.gz, the SMILES of its graphs")
    ids = [int(i) for i in splits.split_indices["train"]]
    smiles = [str(splits.smiles[i]) for i in ids]
    mapping = Path(splits.source) / "mapping" / "mol.csv.gz"

    def records() -> Iterator[Record]:
        for k, (graph, text) in enumerate(zip(ids, smiles)):
            yield Record(index=k + 1, line=graph + 2, id=graph, smiles=text)  # line of mapping/mol.csv.gz

    return Corpus("molhiv", str(mapping), records)


def _nci(config: CorpusConfig) -> Corpus:
    from rdkit import RDConfig

    _no_column(config, "nci")
    path = Path(os.path.join(RDConfig.RDDataDir, "NCI", "first_5K.smi"))
    if not path.is_file():
        raise MolsepnormError(f"corpus nci: RDKit's {path} is missing: is RDKit installed in full?")
    return Corpus("nci", str(path), lambda: _file_records(path, None))


def _no_column(config: CorpusConfig, name: str) -> None:
    if config.smiles_column is not None:
        raise MolsepnormError(f"corpus {name} has its own SMILES column: --smiles-column applies to a CSV / TSV "
                              "file")


_NAMED: dict[str, Callable[[CorpusConfig], Corpus]] = {"moses": _moses, "molhiv": _molhiv, "nci": _nci}
