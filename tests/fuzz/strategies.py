"""Hypothesis strategies for the fuzz tests: strings that are, almost are, or are not molecules.

Loaded by ``tests/fuzz/conftest.py`` (under ``--import-mode=importlib`` test modules cannot
import each other) and handed to the tests through the ``fuzz`` fixture.

Sources of inputs, from least to most molecule-like:

* :func:`random_text`: any Unicode text, lone surrogates, NUL and other control
  characters, every kind of line break and whitespace included;
* :func:`smiles_alphabet_text`: random strings over the characters SMILES is written in;
* :func:`token_smiles`: SMILES assembled from atom / bond / ring / branch tokens,
  syntactically plausible but chemically random (valence, kekulization, aromaticity
  errors, exotic elements, charges, isotopes, dative and quadruple bonds, mixtures);
* :func:`mutated_smiles`: real SMILES (ogbg-molhiv and RDKit's NCI set) truncated, with
  characters deleted / inserted / swapped, ring-closure digits changed, brackets and
  parentheses unbalanced, fragments glued together;
* :func:`large_smiles`: molecules of 500 to 2,000 atoms (chains, PEG, peptides,
  macrocycles, polyaromatics, hundreds of fragments).

File builders (:func:`smi_file`, :func:`csv_file`, :func:`sdf_file`) return the bytes of
an input file together with the ids the prediction output must list, in order.
"""
from __future__ import annotations

import csv
import gzip
import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from hypothesis import strategies as st

# --- raw material ------------------------------------------------------------------------------

#: Characters SMILES (and CXSMILES, reaction SMILES) are written in, plus separators.
SMILES_ALPHABET = "CNOSPFIBHKLMZTUWVXYcnospbrlaegiu[]()=#$:/\\-+@%.*0123456789|>~<{}&, \t"
#: Characters that trip text readers and parsers: NUL, line breaks of every kind, Unicode
#: whitespace, a byte-order mark, the replacement character, lone surrogates.
NASTY_CHARS = "\x00\r\n\t\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u2028\u2029\u3000\ufeff\ufffd\ud800\udfff"
#: The same without the lone surrogates, which no UTF-8 file can hold.
FILE_NASTY_CHARS = "".join(c for c in NASTY_CHARS if not "\ud800" <= c <= "\udfff")

#: Atoms of everyday organic molecules, with the bonds they can make: most of what
#: :func:`token_smiles` draws.  Aromatic rings come whole (their own ring labels, %50+).
ORGANIC_TOKENS: dict[str, int] = {
    "C": 4, "N": 3, "O": 2, "S": 2, "F": 1, "Cl": 1, "Br": 1, "[C@@H]": 3, "[NH3+]": 1, "[O-]": 1,
    "c%50ccccc%50": 1, "c%51ccncc%51": 1, "c%52cc[nH]c%52": 1, "c%53ccc(Cl)cc%53": 1,
}  # fmt: skip
#: Everything else: charges, isotopes, metals, exotic and invalid atoms.
EXOTIC_TOKENS = (
    "P", "I", "B", "o", "s", "p", "b", "[se]", "[te]",
    "[CH2-]", "[CH-]", "[C-]", "[NH4+]", "[NH3+]", "[NH2+]", "[N+]", "[N-]", "[NH-]", "[O-]", "[OH+]", "[O+]",
    "[S-]", "[S+]", "[SH+]", "[P+]", "[PH]", "[PH2]", "[PH+]", "[B-]", "[B-2]", "[C+30]",
    "[Na+]", "[K+]", "[Li]", "[Mg+2]", "[Ca+2]", "[Cl-]", "[Br-]", "[I-]", "[Al]", "[AlH3-3]", "[GeH2+]",
    "[Se]", "[Si]", "[Ge]", "[As]", "[Fe+2]", "[Fe@TH1]", "[Cu]", "[Zn+2]", "[Pt]", "[Gd+3]", "[U]", "[Og]",
    "[Xe]", "[He]", "[H]", "[H+]", "[H-]", "[2H]", "[3H]", "[13C]", "[13CH4]", "[15NH3]", "[18O]", "[999C]",
    "[C@H]", "[C@]", "[C@@]", "[N@+]", "[Co@OH1]", "[Pt@SP1]", "[As@TB1]", "[C@AL1]",
    "[C:1]", "[CH3:12]", "*", "[*]", "[R]", "[Xx]", "[CH9]",
)  # fmt: skip
#: Bonds: mostly implicit single, sometimes double / triple, rarely anything else.
BOND_TOKENS = ("",) * 12 + ("=", "=", "=", "#", "-", "/", "\\", ":", "$", "->", "<-", "~")
RING_LABELS = ("1", "2", "3", "4", "9", "%10", "%99", "%(123)")


def random_text(max_size: int = 60) -> st.SearchStrategy[str]:
    """Any text: all of Unicode (lone surrogates included) with extra weight on nasty characters."""
    anything = st.characters(exclude_categories=())  # lone surrogates included
    nasty = st.sampled_from(NASTY_CHARS + "CNOc1()[]=")
    return st.text(st.one_of(anything, nasty), max_size=max_size)


def smiles_alphabet_text(max_size: int = 60) -> st.SearchStrategy[str]:
    """Random strings over the characters SMILES is written in."""
    return st.text(st.sampled_from(SMILES_ALPHABET), max_size=max_size)


@st.composite
def token_smiles(draw: st.DrawFn, max_atoms: int = 24) -> str:
    """A SMILES built atom by atom from tokens, with branches and ring closures.

    Organic atoms get bonds within their valence, so a good share parse and sanitize; one
    atom in ten is exotic (any valence assumed) and one SMILES in four is left with open
    rings or branches: those fail in every way RDKit can fail.
    """
    n = draw(st.integers(1, max_atoms))
    out: list[str] = []
    free: list[int] = []  # bonds each atom can still make
    attach = -1  # the atom the next one bonds to
    branches: list[int] = []
    open_rings: list[tuple[str, int]] = []  # (label, atom that opened it)
    for i in range(n):
        if i:
            choice = draw(st.integers(0, 19))
            if choice == 0 or (free[attach] < 1 and not branches):
                out.append(".")
                attach = -1
            elif (choice <= 2 or free[attach] < 1) and branches:
                out.append(")")
                attach = branches.pop()
            elif choice <= 4 and free[attach] >= 2:
                out.append("(")
                branches.append(attach)
        exotic = draw(st.integers(0, 9)) == 0
        token = draw(st.sampled_from(EXOTIC_TOKENS if exotic else sorted(ORGANIC_TOKENS)))
        valence = 2 if exotic else ORGANIC_TOKENS[token]
        order = 0
        if attach >= 0:
            order = min(draw(st.sampled_from([1, 1, 1, 1, 2, 3])), free[attach], valence)
            bond = {1: "", 2: "=", 3: "#"}[max(order, 1)]
            if draw(st.integers(0, 19)) == 0:  # now and then any bond at all
                bond = draw(st.sampled_from(BOND_TOKENS))
            out.append(bond)
            free[attach] -= order
        out.append(token)
        free.append(valence - order)
        attach = i
        roll = draw(st.integers(0, 9))
        labels = [label for label in RING_LABELS if label not in {r for r, _ in open_rings}]
        if roll <= 1 and labels and free[i] >= 1:  # open a ring
            label = draw(st.sampled_from(labels))
            out.append(label)
            open_rings.append((label, i))
            free[i] -= 1
        elif roll <= 5 and open_rings and i - open_rings[-1][1] >= 2 and free[i] >= 1:  # close one
            out.append(open_rings.pop()[0])
            free[i] -= 1
    if draw(st.integers(0, 3)):  # usually balanced; sometimes not
        out.extend(label for label, _ in open_rings)
        out.append(")" * len(branches))
    if draw(st.integers(0, 15)) == 0:  # a CXSMILES extension, well-formed or not
        out.append(draw(st.sampled_from([" |$A;B$|", " |&1:1|", " |", " |$", " |junk|"])))
    return "".join(out)


# --- real SMILES, mutated -------------------------------------------------------------------------------

_MUTATIONS = (
    "truncate", "suffix", "delete", "insert_smiles_char", "insert_any_char", "swap", "ring_digit",
    "drop_bracket", "drop_paren", "add_bracket", "add_paren", "duplicate", "join_dot", "glue",
    "toggle_case", "insert_whitespace", "insert_nasty",
)  # fmt: skip


@st.composite
def mutated_smiles(draw: st.DrawFn, real: list[str]) -> str:
    """A real SMILES after one to four random edits (see ``_MUTATIONS``); sometimes none."""
    pick = st.sampled_from(real)
    s = draw(pick)
    for op in draw(st.lists(st.sampled_from(_MUTATIONS), min_size=0, max_size=4)):
        n = len(s)
        at = draw(st.integers(0, n))
        if op == "truncate":
            s = s[:at]
        elif op == "suffix":
            s = s[at:]
        elif op == "delete" and n:
            s = s[: min(at, n - 1)] + s[min(at, n - 1) + 1:]
        elif op == "insert_smiles_char":
            s = s[:at] + draw(st.sampled_from(SMILES_ALPHABET)) + s[at:]
        elif op == "insert_any_char":
            s = s[:at] + draw(st.characters(exclude_categories=())) + s[at:]
        elif op == "swap" and n >= 2:
            i = min(at, n - 2)
            s = s[:i] + s[i + 1] + s[i] + s[i + 2:]
        elif op == "ring_digit":
            digits = [i for i, c in enumerate(s) if c.isdigit()]
            if digits:
                i = draw(st.sampled_from(digits))
                s = s[:i] + draw(st.sampled_from("0123456789")) + s[i + 1:]
        elif op in ("drop_bracket", "drop_paren"):
            marks = [i for i, c in enumerate(s) if c in ("[]" if op == "drop_bracket" else "()")]
            if marks:
                i = draw(st.sampled_from(marks))
                s = s[:i] + s[i + 1:]
        elif op == "add_bracket":
            s = s[:at] + draw(st.sampled_from("[]")) + s[at:]
        elif op == "add_paren":
            s = s[:at] + draw(st.sampled_from("()")) + s[at:]
        elif op == "duplicate" and n:
            end = draw(st.integers(at, n))
            s = s[:end] + s[at:end] + s[end:]
        elif op == "join_dot":
            s = s + "." + draw(pick)
        elif op == "glue":
            s = s + draw(pick)
        elif op == "toggle_case" and n:
            i = min(at, n - 1)
            s = s[:i] + s[i].swapcase() + s[i + 1:]
        elif op == "insert_whitespace":
            s = s[:at] + draw(st.sampled_from([" ", "\t", "\r", "\n", "\r\n", "\xa0", "\u3000"])) + s[at:]
        elif op == "insert_nasty":
            s = s[:at] + draw(st.sampled_from(NASTY_CHARS)) + s[at:]
    return s


def large_smiles() -> st.SearchStrategy[str]:
    """Molecules of 500 to about 2,000 heavy atoms, and one mixture of hundreds of fragments."""
    k = st.integers(100, 400)
    return st.one_of(
        st.integers(500, 2000).map(lambda n: "C" * n),  # alkane
        k.map(lambda n: "O" + "CCO" * (n + 67)),  # polyethylene glycol, 202..1201+ atoms
        k.map(lambda n: "N" + "C(C)C(=O)N" * n + "CC(=O)O"),  # poly-alanine, 5 atoms per residue
        st.integers(500, 1500).map(lambda n: "C1" + "C" * (n - 1) + "1"),  # macrocycle
        k.map(lambda n: "c1ccccc1" + "c1ccc(cc1)" * n + "[NH3+]"),  # polyphenylene with a charge
        k.map(lambda n: ".".join(["[Na+].[Cl-]"] * (n + 150) + ["CCO"])),  # hundreds of fragments
        k.map(lambda n: "C(" * n + "C" + ")" * n + "C" * 400),  # deep branches
    )


def any_smiles(real: list[str]) -> st.SearchStrategy[str]:
    """The mix used where one strategy must cover everything: mostly molecule-like text."""
    return st.one_of(
        random_text(30), smiles_alphabet_text(40), token_smiles(), token_smiles(),
        mutated_smiles(real), mutated_smiles(real), mutated_smiles(real), st.sampled_from(real),
    )  # fmt: skip


# --- loading the real molecules ---------------------------------------------------------------------


def nci_smiles() -> list[str]:
    """The 4,999 SMILES of RDKit's ``NCI/first_5K.smi`` (shipped with every RDKit wheel)."""
    from rdkit import RDConfig

    path = Path(RDConfig.RDDataDir) / "NCI" / "first_5K.smi"
    return [line.split()[0] for line in path.read_text().splitlines() if line.strip()]


def molhiv_smiles(data_root: Path) -> list[str]:
    """The 41,127 SMILES of ogbg-molhiv's ``mapping/mol.csv.gz`` (verbatim MoleculeNet HIV)."""
    path = data_root / "ogbg_molhiv" / "mapping" / "mol.csv.gz"
    with gzip.open(path, "rt", encoding="utf-8", newline="") as handle:
        return [row["smiles"] for row in csv.DictReader(handle)]


def sdf_blocks() -> list[str]:
    """The 200 mol blocks (with their data fields, without ``$$$$``) of RDKit's ``NCI/first_200.props.sdf``."""
    from rdkit import RDConfig

    text = (Path(RDConfig.RDDataDir) / "NCI" / "first_200.props.sdf").read_text()
    return [block for block in text.split("$$$$\n") if block.strip()]


# --- input files with the rows their predictions must have --------------------------------------------


@dataclass(frozen=True)
class InputFile:
    """The bytes of an input file and, in order, the id of every record the output must list.

    ``ids`` is None where the test can only know the count (``count``).
    """

    suffix: str
    data: bytes
    count: int
    ids: Optional[list[str]] = None

    def write(self, folder: Path, stem: str = "fuzz") -> Path:
        path = folder / f"{stem}{self.suffix}"
        path.write_bytes(self.data)
        return path


def _file_text(max_size: int) -> st.SearchStrategy[str]:
    """Text that a UTF-8 file can hold: no lone surrogates."""
    return st.text(st.one_of(st.characters(codec="utf-8"), st.sampled_from(FILE_NASTY_CHARS)), max_size=max_size)


@st.composite
def smi_file(draw: st.DrawFn, real: list[str]) -> InputFile:
    """A ``.smi`` with ``SMILES name`` lines, blank lines between them, any line endings
    (``\\n``, ``\\r\\n``, a lone ``\\r``), sometimes a byte-order mark or lines that are not UTF-8."""
    n = draw(st.integers(0, 12))
    lines: list[bytes] = []
    ids: list[str] = []
    for k in range(n):
        for _ in range(draw(st.integers(0, 2)) if draw(st.integers(0, 3)) == 0 else 0):
            lines.append(draw(st.sampled_from([b"", b"   ", b"\t", b"\xc2\xa0"])))  # blank lines: not records
        smiles = "".join(draw(any_smiles(real)).split())  # the SMILES is the text up to the first whitespace
        token = (smiles or "C").encode("utf-8", errors="replace")
        if token.startswith(b"\xef\xbb\xbf"):
            token = b"C" + token
        name = f"m{k}"
        if draw(st.integers(0, 19)) == 0:  # a line that is not UTF-8: still a record, id = its index
            token += b"\xff\xfe"
            name = str(k + 1)
            lines.append(token)
        else:
            lines.append(token + draw(st.sampled_from([b" ", b"\t", b"  \t "])) + name.encode())
        ids.append(name)
    eol = draw(st.sampled_from([b"\n", b"\r\n", b"\r"]))
    data = eol.join(lines) + (eol if lines and draw(st.booleans()) else b"")
    if draw(st.integers(0, 7)) == 0:
        data = b"\xef\xbb\xbf" + data
    return InputFile(".smi", data, len(ids), ids)


@st.composite
def raw_smi_file(draw: st.DrawFn) -> InputFile:
    """Arbitrary bytes named ``.smi``; only the number of records is known (see :func:`count_smi_records`)."""
    data = draw(st.one_of(
        st.binary(max_size=300),
        st.lists(st.one_of(st.binary(max_size=20), _file_text(20).map(lambda t: t.encode())), max_size=20)
        .map(b"".join),
    ))  # fmt: skip
    return InputFile(".smi", data, count_smi_records(data))


def count_smi_records(data: bytes) -> int:
    """Records of a ``.smi``: lines (ended by ``\\n``, ``\\r\\n`` or ``\\r``) that are not blank;
    a line that is not UTF-8 is a record."""
    count = 0
    for number, line in enumerate(data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")):
        try:
            text = line.decode("utf-8-sig" if number == 0 else "utf-8")
        except UnicodeDecodeError:
            count += 1
            continue
        count += bool(text.strip())
    return count


@st.composite
def csv_file(draw: st.DrawFn, real: list[str]) -> InputFile:
    """A ``.csv`` (written by the csv module: quoted fields with commas, quotes, line breaks)
    with an ``id`` column, a ``smiles`` column of any text, and other columns."""
    n = draw(st.integers(0, 12))
    header = draw(st.permutations(["id", "smiles", "activity"]))
    buffer = io.StringIO(newline="")
    # QUOTE_MINIMAL quotes a field holding "\r" only when "\r" is in the line terminator
    lf = draw(st.booleans())
    writer = csv.writer(buffer, lineterminator="\n" if lf else "\r\n",
                        quoting=csv.QUOTE_ALL if lf else csv.QUOTE_MINIMAL)
    writer.writerow(header)
    ids = []
    for k in range(n):
        smiles = draw(st.one_of(any_smiles(real), _file_text(30)))
        smiles = smiles.encode("utf-8", errors="replace").decode("utf-8")
        cells = {"id": f"r{k}", "smiles": smiles, "activity": draw(_file_text(8))}
        cut = header.index("smiles")
        if header.index("id") < cut and draw(st.integers(0, 15)) == 0:  # a row too short to hold the SMILES
            writer.writerow([cells[c] for c in header[:cut]])
        else:
            writer.writerow([cells[c] for c in header])
        ids.append(f"r{k}")
    return InputFile(".csv", buffer.getvalue().encode("utf-8"), n, ids)


_SDF_LINE_EDITS = ("delete", "duplicate", "truncate", "replace_char", "insert_text", "swap", "number", "bytes")


@st.composite
def sdf_file(draw: st.DrawFn, blocks: list[str]) -> InputFile:
    """An ``.sdf`` of real NCI records titled ``b<k>``, some edited line by line (counts
    lines, atom and bond lines, ``M  END``, data fields), LF, CRLF or CR line endings."""
    n = draw(st.integers(0, 6))
    records: list[bytes] = []
    ids: list[str] = []
    for k in range(n):
        lines = draw(st.sampled_from(blocks)).split("\n")
        lines[0] = f"b{k}"
        for edit in draw(st.lists(st.sampled_from(_SDF_LINE_EDITS), max_size=4)):
            i = draw(st.integers(1, len(lines) - 1)) if len(lines) > 1 else 0
            if i == 0:
                continue
            line = lines[i]
            if edit == "delete":
                del lines[i]
            elif edit == "duplicate":
                lines.insert(i, line)
            elif edit == "truncate":
                lines[i] = line[: draw(st.integers(0, len(line)))]
            elif edit == "replace_char" and line:
                j = draw(st.integers(0, len(line) - 1))
                lines[i] = line[:j] + draw(st.sampled_from(SMILES_ALPHABET + "\x00\r")) + line[j + 1:]
            elif edit == "insert_text":
                lines.insert(i, draw(_file_text(20)).replace("\n", " "))
            elif edit == "swap" and i + 1 < len(lines):
                lines[i], lines[i + 1] = lines[i + 1], lines[i]
            elif edit == "number":
                lines[i] = line.replace(draw(st.sampled_from("0123456789")), draw(st.sampled_from("0123456789-")), 1)
            elif edit == "bytes":
                lines[i] = "\udcff" + line  # becomes an invalid byte below
        lines = [ln.replace("$$$$", "$$$") for ln in lines]  # no accidental record ends
        block = "\n".join(lines).rstrip("\n") + "\n$$$$\n"
        records.append(block.encode("utf-8", errors="surrogateescape"))
        ids.append(f"b{k}" if "\udcff" not in block else str(k + 1))  # not UTF-8: the id is the index
    data = b"".join(records).replace(b"\n", draw(st.sampled_from([b"\n", b"\r\n", b"\r"])))
    return InputFile(".sdf", data, n, ids)


def fuzz_random() -> bool:
    """``MOLSEPNORM_FUZZ_RANDOM=1``: a fresh random seed per run (exploration) instead of the
    fixed, derandomized one (CI)."""
    return os.environ.get("MOLSEPNORM_FUZZ_RANDOM", "") not in ("", "0")
