"""SD files, one record at a time: blocks, their data fields, and the molecule of a block.

The one SDF reader under the streaming record reader (:class:`~molsepnorm.chem.readers.
RecordReader`: ``predict``, ``pretrain``) and labelled-SDF data sets (:mod:`molsepnorm.data.sdf_dataset`), so both
cut a file into the same records, number them alike and read each molecule the same way:

* :func:`sdf_blocks`: the records of a binary stream, separated by ``$$$$`` lines (any of
  ``\\n``, ``\\r\\n`` or ``\\r`` line endings), each with its 1-based record number, its
  first line in the file and its text (or why it is not text);
* :func:`sdf_data_fields`: the ``> <NAME>`` data items of a record;
* :func:`molblock_to_mol`: the record's molecule *unsanitized* (``MolFromMolBlock(
  sanitize=False, removeHs=False)``: the atoms, charges, isotopes and stereo flags as
  written), or RDKit's reason for not reading it.  Sanitization is left to
  :func:`~molsepnorm.chem.parse_molecule`, which gives the chemistry reasons.

Only one record is held in memory at a time.
"""
from __future__ import annotations

import contextlib
import io
import re
import threading
from dataclasses import dataclass
from typing import Any, BinaryIO, Iterator, Optional

SDF_END = "$$$$"
_SDF_FIELD = re.compile(r"^>.*?<([^>]*)>")


@dataclass(frozen=True)
class SdfBlock:
    """One record of an SD file.

    Attributes:
        index: 1-based record number.
        line: the record's first line in the file (1-based).
        text: the record without its ``$$$$`` line, ``\\n`` line endings; ``""`` on error.
        error: why the record is not text (not UTF-8), else None.
    """

    index: int
    line: int
    text: str
    error: Optional[str] = None

    @property
    def title(self) -> str:
        """The title line (RDKit's ``_Name``), stripped."""
        return self.text.split("\n", 1)[0].strip()


def universal_lines(stream: BinaryIO) -> Iterator[bytes]:
    """The lines of a binary stream ended by ``\\n``, ``\\r\\n`` or a lone ``\\r`` (old Mac
    files), each without its ending: without this a ``\\r``-only ``.smi`` was one record
    whose name swallowed every later molecule, and a ``\\r``-only SDF one failed record."""
    for raw in stream:
        body = raw[:-1] if raw.endswith(b"\n") else raw
        if body.endswith(b"\r"):
            body = body[:-1]
        yield from body.split(b"\r") if b"\r" in body else (body,)


def sdf_blocks(stream: BinaryIO) -> Iterator[SdfBlock]:
    """Every record of an SD file, in order; a last record without its ``$$$$`` counts,
    trailing blank lines do not.  A UTF-8 byte-order mark on the first line is accepted."""
    index = 0
    block: list[bytes] = []
    start = 1
    for number, raw in enumerate(universal_lines(stream), start=1):
        if raw.strip() == SDF_END.encode():
            index += 1
            yield _decode_block(index, start, block)
            block, start = [], number + 1
        else:
            block.append(raw + b"\n")
    if any(raw.strip() for raw in block):
        yield _decode_block(index + 1, start, block)


def _decode_block(index: int, start: int, raw_lines: list[bytes]) -> SdfBlock:
    try:
        text = b"".join(raw_lines).decode("utf-8-sig" if start == 1 else "utf-8")
    except UnicodeDecodeError as exc:
        return SdfBlock(index, start, "", f"the SDF record is not valid UTF-8 text ({exc.reason} at byte {exc.start})")
    return SdfBlock(index, start, text.replace("\r\n", "\n"))


def sdf_data_fields(block: str) -> dict[str, str]:
    """The ``> <NAME>`` data fields after ``M  END`` of one SDF record (text with ``\\n``)."""
    end = block.find("M  END")
    if end < 0:
        return {}
    fields: dict[str, str] = {}
    lines = block[end:].split("\n")[1:]
    i = 0
    while i < len(lines):
        match = _SDF_FIELD.match(lines[i])
        i += 1
        if match is None:
            continue
        value: list[str] = []
        while i < len(lines) and lines[i].strip():
            value.append(lines[i])
            i += 1
        fields[match.group(1)] = "\n".join(value)
    return fields


_RDKIT_LOG_LOCK = threading.Lock()
_RDKIT_NOISE = re.compile(r"^(\*{4}|-{10}|Stacktrace:|\d+# |Violation occurred on line|Failed Expression:)")


def molblock_to_mol(block: str) -> Any:
    """The unsanitized Mol of a mol block, or a string saying why RDKit cannot read it."""
    from rdkit import Chem, rdBase

    with rdBase.BlockLogs():
        mol = Chem.MolFromMolBlock(block, sanitize=False, removeHs=False)
    if mol is not None:
        return mol
    # The mol-file parser logs its reason on RDKit's warning log, which CaptureErrorLog does
    # not see: send RDKit's log to Python's stderr for this one call and capture that.  The
    # log quotes the bad field cut at a byte count; a cut inside a multi-byte character
    # cannot reach Python and went to the terminal instead, so the reason is read from the
    # block with every non-ASCII character (none is valid in a mol block) replaced by "?".
    if not block.isascii():
        block = "".join(c if c.isascii() else "?" for c in block)
    buffer = io.StringIO()
    with _RDKIT_LOG_LOCK:
        rdBase.LogToPythonStderr()
        try:
            with contextlib.redirect_stderr(buffer):
                Chem.MolFromMolBlock(block, sanitize=False, removeHs=False)
        finally:
            rdBase.LogToCppStreams()
    lines = [re.sub(r"^\[\d\d:\d\d:\d\d\]\s?", "", line).strip() for line in buffer.getvalue().splitlines()]
    # an Invariant violation comes with a C++ stack trace and its frame: keep the message
    kept = [line for line in lines if line and not _RDKIT_NOISE.match(line)]
    reason = "; ".join(dict.fromkeys(kept))
    return "RDKit cannot read the SDF record: " + (reason or "no reason given (empty or malformed mol block)")
