"""SMILES or RDKit Mol -> sanitized RDKit Mol, or an error that carries RDKit's reason.

``parse_molecule`` is the single entry point through which every molecule enters
molsepnorm.  A SMILES string goes through ``Chem.MolFromSmiles`` with its default
settings (sanitization, removal of ordinary explicit hydrogens, stereo perception), so
the result is exactly the molecule that ``ogb.utils.smiles2graph`` sees.  Only when that
fails is the input looked at again to find out why:

* a syntax error leaves no molecule at all; the reason is RDKit's own log message,
  captured with ``rdBase.CaptureErrorLog``;
* a chemistry error (valence, kekulization, ...) leaves a molecule when parsed with
  ``sanitize=False``; the reasons are those of ``Chem.DetectChemistryProblems``.

RDKit's log is silenced while parsing (``rdBase.BlockLogs``), so millions of molecules
do not flood stderr.  Entering ``BlockLogs`` (and, on failure, ``CaptureErrorLog``) per
call costs nothing measurable next to the parse itself, so no process-wide log handler
is installed.  Both switch RDKit's process-wide logger; under concurrent threads a
warning may occasionally slip through to stderr, never into another thread's reason
(diagnosis is serialized by a lock).
"""
from __future__ import annotations

import math
import re
import threading
from dataclasses import dataclass
from typing import Optional, Union

from rdkit import Chem, rdBase

from molsepnorm.errors import InvalidMoleculeError

MolInput = Union[str, Chem.Mol]

# RDKit prefixes each log line with "[HH:MM:SS] ".
_TIMESTAMP = re.compile(r"^\[\d\d:\d\d:\d\d\]\s?")
_NO_REASON = "RDKit could not parse the SMILES (no reason given)"
# Captures are process-wide; serialize the (rare) diagnosis of failures so that two
# threads explaining two bad SMILES do not read each other's messages.
_DIAGNOSIS_LOCK = threading.Lock()


@dataclass(frozen=True)
class SmilesTraits:
    """Which rarely set RDKit values a molecule may carry, as its SMILES text tells.

    RDKit's SMILES parser sets an atom's chiral tag only from ``@`` and a double bond's
    stereo only from the directional bonds ``/`` and ``\\``; a dative bond is written
    ``->`` / ``<-`` (but sanitization also makes bonds to metals dative, which only the
    molecule tells); a CXSMILES extension (``|...|``) may set any of them.  A featurizer
    can skip reading a value that cannot be there (it is RDKit's default on every atom or
    bond).  ``True`` means "may be present": read it.
    """

    chiral_tags: bool = True
    bond_stereo: bool = True
    dative_bonds: bool = True


#: Traits of a molecule of unknown origin (an RDKit Mol input): everything may be present.
ANY_TRAITS = SmilesTraits()


def smiles_traits(text: str) -> SmilesTraits:
    """The :class:`SmilesTraits` of the molecule ``Chem.MolFromSmiles(text)`` builds."""
    if "|" in text:
        return ANY_TRAITS
    return SmilesTraits(chiral_tags="@" in text, bond_stereo="/" in text or "\\" in text,
                        dative_bonds=">" in text or "<" in text)


def parse_molecule(mol_or_smiles: MolInput, sanitized: Optional[bool] = None) -> Chem.Mol:
    """A sanitized RDKit Mol holding the heavy-atom graph of the input.

    Args:
        mol_or_smiles: a SMILES string (surrounding whitespace is ignored; a CXSMILES
            extension ``"SMILES |...|"`` is allowed), or an RDKit ``Mol``.  A Mol is
            copied, never modified; if it is not sanitized yet, the copy is, and ordinary
            explicit hydrogens are removed as ``MolFromSmiles`` would.
        sanitized: for a Mol, whether it is sanitized (False: an SDF record read
            unsanitized); None: told by its property cache, which a Mol that has been
            pickled (sent to a worker process) no longer keeps.

    Returns:
        A new, sanitized ``Chem.Mol`` with at least one atom.

    Raises:
        InvalidMoleculeError: the input is not a valid molecule: SMILES syntax errors,
            chemistry problems (valence, kekulization, ...), an empty or whitespace-only
            string, a string that is not valid Unicode (a lone surrogate), a SMILES with
            a non-ASCII character (which RDKit would silently drop), a molecule without
            atoms, or a missing value (``None`` or a float NaN, as read from an empty CSV
            cell).  ``reason`` carries RDKit's own words.
        TypeError: the input is of any other type (a programming error, not bad data).
    """
    if isinstance(mol_or_smiles, str):
        return _parse_smiles(mol_or_smiles)
    if isinstance(mol_or_smiles, Chem.Mol):
        return _sanitize_copy(mol_or_smiles, sanitized)
    if mol_or_smiles is None or (isinstance(mol_or_smiles, float) and math.isnan(mol_or_smiles)):
        raise InvalidMoleculeError(repr(mol_or_smiles), "missing value: no molecule given")
    raise TypeError(f"expected a SMILES string or an RDKit Mol, got {type(mol_or_smiles).__name__}")


def _parse_smiles(smiles: str) -> Chem.Mol:
    text = smiles.strip()
    if not text:
        raise InvalidMoleculeError(smiles, "empty molecule: the SMILES is empty")
    if not text.isascii():
        try:  # RDKit takes UTF-8 and raises UnicodeEncodeError on a lone surrogate ("\ud800")
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidMoleculeError(
                smiles, f"the SMILES is not valid Unicode text ({exc.reason} at position {exc.start + 1})"
            ) from None
    head, *rest = text.split(maxsplit=1)
    tail = rest[0] if rest else ""
    if tail and not tail.startswith("|"):
        # RDKit stops at whitespace and silently reads "CC O" as ethane.
        raise InvalidMoleculeError(
            smiles, f"whitespace inside the SMILES: RDKit would read only {head!r} and ignore {tail!r}"
        )
    if not head.isascii():
        # RDKit silently drops non-ASCII characters at either end ("CCＯ" with a full-width
        # O reads as ethane) and fails on them inside.
        foreign = next(i for i, c in enumerate(head) if not c.isascii())
        char = head[foreign]
        raise InvalidMoleculeError(
            smiles, f"character {char!r} (U+{ord(char):04X}) at position {foreign + 1} is not a SMILES "
            "character (SMILES is ASCII text)"
        )
    with rdBase.BlockLogs():
        mol = Chem.MolFromSmiles(text)
    if mol is None:
        raise InvalidMoleculeError(smiles, _diagnose_smiles(text, head, tail))
    if mol.GetNumAtoms() == 0:
        raise InvalidMoleculeError(smiles, "empty molecule: no atoms")
    return mol


def _diagnose_smiles(text: str, head: str = "", extension: str = "") -> str:
    """Why ``Chem.MolFromSmiles(text)`` returned None, in RDKit's words.

    ``head`` is the SMILES proper and ``extension`` the CXSMILES part after it, as
    ``_parse_smiles`` split them ("" if none).

    RDKit's syntax-error message echoes a window of the input cut at a byte count, which
    can split a multi-byte UTF-8 character; reading that log then raises
    ``UnicodeDecodeError``.  Such an input is explained by its ASCII form instead: every
    non-ASCII character (none belongs to SMILES) replaced by ``?``, positions unchanged.
    """
    try:
        reason = _rdkit_reason(text)
    except UnicodeDecodeError:
        reason = _rdkit_reason("".join(c if c.isascii() else "?" for c in text))
    if extension and reason.endswith(_NO_REASON):
        # RDKit logs nothing when only a CXSMILES extension is malformed ("C1CC1 |$")
        with rdBase.BlockLogs():
            head_parses = Chem.MolFromSmiles(head, sanitize=False) is not None
        if head_parses:
            return (f"SMILES parse error: the CXSMILES extension {extension!r} could not be read "
                    f"(the SMILES {head!r} before it is well-formed)")
    return reason


def _rdkit_reason(text: str) -> str:
    """RDKit's reason for rejecting ``text``: its syntax error, chemistry problems, or log."""
    with _DIAGNOSIS_LOCK, rdBase.BlockLogs():
        with rdBase.CaptureErrorLog() as capture:
            raw = Chem.MolFromSmiles(text, sanitize=False)
        if raw is None:
            return "SMILES parse error: " + _syntax_reason(capture.messages)
        problems = Chem.DetectChemistryProblems(raw)
        if problems:
            return "; ".join(p.Message() for p in problems)
        with rdBase.CaptureErrorLog() as capture:
            Chem.MolFromSmiles(text)
    lines = _log_lines(capture.messages)
    return "; ".join(lines) if lines else _NO_REASON


def _log_lines(messages: str) -> list[str]:
    lines = (_TIMESTAMP.sub("", line).strip() for line in messages.splitlines())
    unique: list[str] = []
    for line in lines:
        if line and line not in unique:
            unique.append(line)
    return unique


def _syntax_reason(messages: str) -> str:
    """Condense RDKit's multi-line SMILES parse error into one line.

    RDKit logs e.g. ``syntax error while parsing: Cx``, ``check for mistakes around
    position 2:``, the SMILES, a ``~^`` pointer, ``Failed parsing SMILES 'Cx' for
    input: 'Cx'``.  Keep the first two kinds; the echo and pointer lines say nothing
    new, and the "Failed parsing" line only when nothing else was said.
    """
    prefix = "SMILES Parse Error:"
    reasons = [
        line[len(prefix):].strip().rstrip(":")
        for line in _log_lines(messages)
        if line.startswith(prefix)
    ]
    specific = [r for r in reasons if not r.startswith("Failed parsing SMILES")]
    chosen = specific or reasons
    return "; ".join(chosen) if chosen else _NO_REASON


def _sanitize_copy(mol: Chem.Mol, sanitized: Optional[bool] = None) -> Chem.Mol:
    """A sanitized, hydrogen-suppressed copy of ``mol``, as ``MolFromSmiles`` would build it.

    A sanitized Mol (``sanitized``; None: one whose property cache is up to date) is not
    sanitized again: sanitization is not idempotent for some organometallics (ring and
    radical perception change), and a second pass would make a Mol input differ from its
    SMILES.
    """
    if mol.GetNumAtoms() == 0:
        raise InvalidMoleculeError(describe_mol(mol), "empty molecule: no atoms")
    work = Chem.Mol(mol)
    if sanitized is None:
        sanitized = not work.NeedsUpdatePropertyCache()
    has_hydrogens = any(work.GetAtomWithIdx(i).GetAtomicNum() == 1 for i in range(work.GetNumAtoms()))
    with rdBase.BlockLogs():
        if not sanitized:
            problems = Chem.DetectChemistryProblems(work)
            if problems:
                raise InvalidMoleculeError(describe_mol(work), "; ".join(p.Message() for p in problems))
        try:
            if not sanitized or has_hydrogens:
                # Like the SMILES parser: remove ordinary explicit Hs, then sanitize once.
                work = Chem.RemoveHs(work, sanitize=True)
            Chem.AssignStereochemistry(work, cleanIt=True)  # a no-op when already done
        except Exception as exc:  # RDKit raises several unrelated exception types here
            raise InvalidMoleculeError(describe_mol(work), str(exc) or type(exc).__name__) from exc
    return work


def describe_mol(mol: Chem.Mol) -> str:
    """A SMILES for messages and outputs about a Mol input (best effort: it may be unsanitized),
    else ``"<RDKit Mol with N atoms>"`` where RDKit cannot write one; never raises."""
    try:
        with rdBase.BlockLogs():
            return Chem.MolToSmiles(mol)
    except Exception:  # noqa: BLE001 - a description must never raise
        return f"<RDKit Mol with {mol.GetNumAtoms()} atoms>"
