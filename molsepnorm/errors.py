"""Exceptions raised by molsepnorm.

Every error that concerns user input names the input (file, row) and the reason,
so that a chemist can find and fix the offending record.
"""
from __future__ import annotations

from typing import Optional


class MolsepnormError(Exception):
    """Base class of every error molsepnorm raises on purpose."""


class InvalidMoleculeError(MolsepnormError, ValueError):
    """A molecule could not be turned into a graph.

    Attributes:
        smiles: the input as given (SMILES string, or a description of the input).
        reason: why it failed, in RDKit's words where RDKit gave one
            (parse error, valence, kekulization, unsupported element, ...), on one line.
        source: the file the record came from, if any.
        row: the 1-based record or line number in ``source``, if any.
    """

    def __init__(self, smiles: str, reason: str, source: Optional[str] = None, row: Optional[int] = None):
        self.smiles = smiles
        self.reason = " ".join(str(reason).split())  # one line, as an output file's cell holds it
        self.source = source
        self.row = row
        super().__init__(self._message())

    def _message(self) -> str:
        where = ""
        if self.source is not None and self.row is not None:
            where = f"{self.source}, row {self.row}: "
        elif self.row is not None:
            where = f"row {self.row}: "
        elif self.source is not None:
            where = f"{self.source}: "
        return f"{where}invalid molecule {self.smiles!r}: {self.reason}"

    def at(self, source: Optional[str], row: Optional[int]) -> "InvalidMoleculeError":
        """A copy of this error that names the file and row it came from."""
        return InvalidMoleculeError(self.smiles, self.reason, source=source, row=row)


class DatasetNotFoundError(MolsepnormError, FileNotFoundError):
    """A data set's files are missing and could not be downloaded."""


class DatasetFormatError(MolsepnormError, ValueError):
    """A data set file exists but cannot be used (missing column, bad row, ...)."""


class ConfigError(MolsepnormError, ValueError):
    """A configuration file or flag has an unknown key or an invalid value."""
