"""Streaming readers of molecule files: one :class:`Record` per input record, in order.

Formats (``.gz`` allowed on any of them; ``-`` reads standard input):

* ``smi``: ``SMILES [name]`` per line (ended by ``\\n``, ``\\r\\n`` or ``\\r``); blank lines
  are not records.  A first non-blank line whose first word is ``smiles`` (any case:
  ``SMILES Name``) is a header, skipped (records keep their real line numbers).  The name
  is the rest of the line (it may contain spaces).  A CXSMILES extension ``SMILES |...|``
  stays with the SMILES.
* ``csv`` / ``tsv``: a header line, then one record per line (quoted fields may span
  lines).  The SMILES column is ``smiles_column``, else the column named ``smiles``, else
  the first whose name contains "smiles" (any case); the id column is ``id_column``, else
  a column named ``id``, else ``name`` (:mod:`molsepnorm.formats`, as ``load_dataset``
  reads a CSV).  A header that is one column holding ``;`` or a tab (``,`` for a TSV) is
  refused: the file's separator is not the format's.
* ``sdf``: records separated by ``$$$$`` lines (any of those line endings).  The id is
  the title line (RDKit's ``_Name``) or the data field named by ``id_column``.  Each
  record is parsed *unsanitized* (``MolFromMolBlock(sanitize=False, removeHs=False)``)
  so that the predictor's :func:`~molsepnorm.chem.parse_molecule` gives the chemistry
  reasons.  Blocks, fields and mol blocks are read by :mod:`molsepnorm.chem.sdf`, as
  labelled SDF data sets read them.

Nothing is skipped but blank lines (and a ``.smi`` header): a line that is not UTF-8, a CSV
row too short to hold the SMILES, an SDF block RDKit cannot read, all become records
carrying an ``error``.
Windows line endings and a UTF-8 byte-order mark are accepted.  Only one record (one SDF
block, one CSV row) is held in memory at a time.
"""
from __future__ import annotations

import csv
import gzip
import io
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, BinaryIO, Iterator, Optional, Union

from molsepnorm.chem.sdf import SdfBlock, molblock_to_mol, sdf_blocks, sdf_data_fields, universal_lines
from molsepnorm.errors import MolsepnormError
from molsepnorm.formats import (
    FORMATS,
    SEPARATORS,
    SUFFIXES,
    default_id_column,
    default_smiles_column,
    file_format,
    format_suffix,
    misread_separator,
)

STDIN = "-"


class InputFormatError(MolsepnormError, ValueError):
    """The input as a whole cannot be read: unknown format, missing column, no header."""


@dataclass(frozen=True)
class Record:
    """One input record.

    Attributes:
        index: 1-based record number (blank lines do not count).
        line: where it is in the file: the line number for ``smi`` / ``csv`` / ``tsv``
            (a CSV's header is line 1), the first line of the block for ``sdf``.
        id: the name / id field, else ``index``.
        smiles: the SMILES as given (``smi`` / ``csv``), ``""`` for SDF records.
        mol: the unsanitized RDKit Mol of an SDF record, else None.
        error: why the record could not be read, else None.
        mol_sanitized: whether ``mol`` is sanitized, as known where the record was made (an
            SDF record's is not; None: unknown, told by its property cache).  It travels with
            the record to a worker process, where a pickled Mol's property cache no longer
            tells (an unpickled Mol looks sanitized whether or not it was).
    """

    index: int
    line: int
    id: Union[str, int]
    smiles: str
    mol: Any = None
    error: Optional[str] = None
    mol_sanitized: Optional[bool] = None

    @property
    def molecule(self) -> Any:
        """What to featurize: the Mol of an SDF record, else the SMILES."""
        return self.mol if self.mol is not None else self.smiles


def detect_format(path: Union[str, Path]) -> str:
    """The format named by a file's suffix (``.gz`` looked through); ``smi`` for stdin.

    Raises:
        InputFormatError: the suffix names no known format.
    """
    name = str(path)
    if name == STDIN:
        return "smi"
    fmt = file_format(name)
    if fmt is None:
        known = ", ".join(sorted(SUFFIXES))
        raise InputFormatError(f"{path}: cannot tell the format from the suffix {format_suffix(name) or '(none)'!r}; "
                               f"use one of {known} (optionally .gz) or give --format")
    return fmt


class RecordReader:
    """Iterate the :class:`Record` s of one input; a context manager that closes the file.

    Args:
        path: a file, or ``"-"`` for standard input.
        fmt: ``smi``, ``csv``, ``tsv`` or ``sdf``; None: from the suffix.
        smiles_column: CSV / TSV column of the SMILES.
        id_column: CSV / TSV column, or SDF data field, of the record ids.
        stdin: the binary stream read for ``"-"`` (default ``sys.stdin.buffer``).

    Raises:
        InputFormatError: unknown format; ``smiles_column`` / ``id_column`` given for a
            format without columns; a CSV header without the requested column.
        FileNotFoundError: the file does not exist.
    """

    def __init__(
        self,
        path: Union[str, Path],
        fmt: Optional[str] = None,
        smiles_column: Optional[str] = None,
        id_column: Optional[str] = None,
        stdin: Optional[BinaryIO] = None,
    ) -> None:
        self.source = str(path)
        self.format = fmt or detect_format(path)
        if self.format not in FORMATS:
            raise InputFormatError(f"unknown format {self.format!r}; choose one of {', '.join(FORMATS)}")
        if self.format == "smi" and (smiles_column or id_column):
            raise InputFormatError(".smi input has no columns: --smiles-column / --id-column apply to "
                                   "CSV / TSV (and --id-column to SDF data fields)")
        if self.format == "sdf" and smiles_column:
            raise InputFormatError("SDF input holds molecules, not SMILES: --smiles-column does not apply")
        self.smiles_column = smiles_column
        self.id_column = id_column
        self.is_stdin = self.source == STDIN
        if self.is_stdin:
            self._raw: BinaryIO = stdin if stdin is not None else sys.stdin.buffer
            self.total_bytes: Optional[int] = None
        else:
            p = Path(path)
            if not p.is_file():
                raise FileNotFoundError(f"input file not found: {p}")
            self._raw = open(p, "rb")  # noqa: SIM115 - closed by close()
            self.total_bytes = p.stat().st_size
        self._stream: BinaryIO = self._raw
        if self.source.lower().endswith(".gz"):
            self._stream = gzip.GzipFile(fileobj=self._raw, mode="rb")  # type: ignore[assignment]
        self._columns_checked = False
        self.records_read = 0  # records handed out so far (bytes_read runs ahead of what was predicted)
        if self.format in ("csv", "tsv"):
            self._open_table()

    @property
    def columns(self) -> dict[str, Optional[str]]:
        """A CSV / TSV's columns as read: ``{"smiles_column": header, "id_column": header or
        None}`` (what the default "named like smiles" / ``id`` / ``name`` resolved to); ``{}``
        for the other formats."""
        if self.format not in ("csv", "tsv"):
            return {}
        return {"smiles_column": self._header[self._smiles_at],  # type: ignore[index]
                "id_column": None if self._id_at is None else self._header[self._id_at]}

    # --- progress ---------------------------------------------------------------------
    @property
    def bytes_read(self) -> int:
        """Bytes of the (compressed) file consumed so far, for a progress bar."""
        try:
            return self._raw.tell()
        except (OSError, ValueError):
            return 0

    # --- lifecycle ----------------------------------------------------------------------
    def close(self) -> None:
        if self._stream is not self._raw:
            self._stream.close()
        if not self.is_stdin:
            self._raw.close()

    def __enter__(self) -> "RecordReader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __iter__(self) -> Iterator[Record]:
        records = (self._smi_records() if self.format == "smi" else self._sdf_records() if self.format == "sdf"
                   else self._table_records())
        for record in records:
            self.records_read = record.index
            yield record

    # --- .smi ---------------------------------------------------------------------------
    def _smi_records(self) -> Iterator[Record]:
        index, first = 0, True
        for number, raw in enumerate(universal_lines(self._stream), start=1):
            text, error = _decode(raw, first=number == 1)
            if error is None and not text.strip():
                continue
            if first:
                first = False
                if error is None and is_smi_header(text):
                    continue  # a header: only the first non-blank line may be one
            index += 1
            if error is not None:
                yield Record(index, number, index, text.strip(), error=error)
                continue
            smiles, name = split_smi_line(text)
            yield Record(index, number, name or index, smiles)

    # --- .csv / .tsv ----------------------------------------------------------------------
    def _open_table(self) -> None:
        delimiter = "," if self.format == "csv" else "\t"
        # errors="replace": a bad byte becomes U+FFFD and only its record fails (see _table_records)
        self._text: IO[str] = io.TextIOWrapper(self._stream, encoding="utf-8-sig", errors="replace", newline="")
        self._csv = csv.reader(self._text, delimiter=delimiter)
        header = next(self._csv, None)
        while header is not None and not any(cell.strip() for cell in header):
            header = next(self._csv, None)
        if header is None:
            raise InputFormatError(f"{self.source}: empty file: a {self.format.upper()} needs a header line")
        self._header = [cell.strip() for cell in header]
        found = misread_separator(self._header, delimiter)
        if found is not None:
            raise InputFormatError(
                f"{self.source}: the header line is one column {self._header[0]!r} holding "
                f"{SEPARATORS[found]}: the fields look separated by {found!r}, not {delimiter!r}; "
                + ("name the file .tsv (predict: or give --format tsv)" if found == "\t" else
                   "name the file .csv (predict: or give --format csv)" if found == "," else
                   "save the file comma-separated (.csv) or tab-separated (.tsv): there is no option for "
                   f"{found!r}"))
        self._smiles_at = self._column(self.smiles_column, "smiles")
        self._id_at = self._column(self.id_column, "id")

    def _column(self, requested: Optional[str], role: str) -> Optional[int]:
        header = self._header
        lowered = [h.lower() for h in header]
        if requested is not None:
            if requested in header:
                return header.index(requested)
            if requested.lower() in lowered:
                return lowered.index(requested.lower())
            what, option = ("SMILES", "--smiles-column") if role == "smiles" else ("ids", "--id-column")
            raise InputFormatError(f"{self.source}: no column {requested!r} for the {what}; the header has "
                                   f"{', '.join(map(repr, header))}: give {option} one of them")
        if role == "id":
            return default_id_column(header, taken=[self._smiles_at])
        found = default_smiles_column(header)
        if found is None:
            raise InputFormatError(f"{self.source}: no SMILES column (none is named like 'smiles'); give "
                                   f"--smiles-column, one of {', '.join(map(repr, header))}")
        return found

    def _table_records(self) -> Iterator[Record]:
        index = 0
        line = self._csv.line_num + 1  # first line of the next row
        while True:
            try:
                row = next(self._csv)
            except StopIteration:
                return
            except csv.Error as exc:  # e.g. a NUL byte; the reader moves on to the next line
                index += 1
                yield Record(index, line, index, "", error=f"unreadable {self.format.upper()} line: {exc}")
                line = self._csv.line_num + 1
                continue
            start, line = line, self._csv.line_num + 1
            if not any(cell.strip() for cell in row):
                continue
            index += 1
            ident: Union[str, int] = index
            if self._id_at is not None and self._id_at < len(row) and row[self._id_at].strip():
                ident = row[self._id_at].strip()
            if self._smiles_at >= len(row):
                yield Record(index, start, ident, "", error=(
                    f"the row has {len(row)} field(s); the SMILES column {self._header[self._smiles_at]!r} "
                    f"is field {self._smiles_at + 1}"))
                continue
            smiles = row[self._smiles_at].strip()
            if "\ufffd" in smiles or "\ufffd" in str(ident):
                yield Record(index, start, ident, smiles, error="the line is not valid UTF-8 text")
                continue
            yield Record(index, start, ident, smiles)

    # --- .sdf -----------------------------------------------------------------------------
    def _sdf_records(self) -> Iterator[Record]:
        for block in sdf_blocks(self._stream):
            yield self._sdf_record(block)

    def _sdf_record(self, block: SdfBlock) -> Record:
        index, start = block.index, block.line
        if block.error is not None:
            return Record(index, start, index, "", error=block.error)
        fields = sdf_data_fields(block.text)
        ident: Union[str, int] = block.title or index
        if self.id_column is not None:
            if self.id_column not in fields:
                if not self._columns_checked:  # the first record: a misspelt field, not a record without it
                    raise InputFormatError(
                        f"{self.source}: record {index} (line {start}), the first readable one, has no data field "
                        f"{self.id_column!r} for --id-column; its fields: {', '.join(fields) or 'none'}. "
                        "Without --id-column a record's id is its title line.")
                return Record(index, start, ident, "", error=f"the SDF record has no data field "
                                                             f"{self.id_column!r} for its id")
            ident = fields[self.id_column].strip() or index
        self._columns_checked = True
        mol = molblock_to_mol(block.text)
        if isinstance(mol, str):
            return Record(index, start, ident, "", error=mol)
        return Record(index, start, ident, "", mol=mol, mol_sanitized=False)


def is_smi_header(text: str) -> bool:
    """Whether a ``.smi`` line is a header: its first word is ``smiles``, in any case."""
    words = text.split(maxsplit=1)
    return bool(words) and words[0].lower() == "smiles"


def split_smi_line(text: str) -> tuple[str, str]:
    """``"SMILES name with spaces"`` -> ``("SMILES", "name with spaces")``; a ``|...|``
    CXSMILES extension after the SMILES stays with it."""
    text = text.strip()
    parts = text.split(maxsplit=1)
    if not parts:
        return "", ""
    smiles, rest = parts[0], (parts[1] if len(parts) > 1 else "")
    if rest.startswith("|"):
        close = rest.find("|", 1)
        if close > 0:
            smiles = f"{smiles} {rest[:close + 1]}"
            rest = rest[close + 1:]
    return smiles, rest.strip()


def _decode(raw: bytes, first: bool) -> tuple[str, Optional[str]]:
    """A line's text without its line ending, and an error if it is not UTF-8."""
    try:
        text = raw.decode("utf-8-sig" if first else "utf-8")
    except UnicodeDecodeError as exc:
        return raw.decode("utf-8", errors="replace").rstrip("\r\n"), (
            f"the line is not valid UTF-8 text ({exc.reason} at byte {exc.start})")
    return text.rstrip("\r\n"), None
