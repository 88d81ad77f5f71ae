"""Streaming record readers: every record kept, in order, with its line and id."""
from __future__ import annotations

import gzip
import io
from pathlib import Path

import pytest
from rdkit import Chem

from molsepnorm.chem.sdf import sdf_data_fields
from molsepnorm.chem.readers import (
    InputFormatError,
    RecordReader,
    detect_format,
    split_smi_line,
)
from molsepnorm.formats import output_stem


def read(path, **kwargs):
    with RecordReader(path, **kwargs) as reader:
        return list(reader)


def test_detect_format_and_stem():
    assert detect_format("a/b.smi") == "smi"
    assert detect_format("a/b.SDF.gz") == "sdf"
    assert detect_format("x.tsv") == "tsv"
    assert detect_format("-") == "smi"
    with pytest.raises(InputFormatError, match="suffix"):
        detect_format("mols.xyz")
    assert output_stem("a/mols.sdf.gz") == "mols"
    assert output_stem("a/mols.smi") == "mols"
    assert output_stem("a/my.data.csv") == "my.data" and output_stem("MOLS.SDF.GZ") == "MOLS"
    assert output_stem("assay.2024") == "assay.2024" and output_stem("data/") == "data"  # not a format suffix


def test_split_smi_line():
    assert split_smi_line("CCO ethanol") == ("CCO", "ethanol")
    assert split_smi_line("CCO  a name with spaces \t") == ("CCO", "a name with spaces")
    assert split_smi_line("CCO") == ("CCO", "")
    assert split_smi_line("C[C@H](O)F |&1:1| racemic") == ("C[C@H](O)F |&1:1|", "racemic")


def test_smi_names_blank_lines_crlf_bom(tmp_path: Path):
    path = tmp_path / "m.smi"
    path.write_bytes(b"\xef\xbb\xbfCCO ethanol\r\n\r\n   \r\nc1ccccc1\r\nC1CC bad ring\r\n")
    records = read(path)
    assert [(r.index, r.line, r.id, r.smiles, r.error) for r in records] == [
        (1, 1, "ethanol", "CCO", None),
        (2, 4, 2, "c1ccccc1", None),
        (3, 5, "bad ring", "C1CC", None),
    ]


def test_smi_non_utf8_line_is_a_record_with_an_error(tmp_path: Path):
    path = tmp_path / "m.smi"
    path.write_bytes(b"CCO a\nC\xff\xfeC b\nCCN c\n")
    records = read(path)
    assert len(records) == 3
    assert records[1].error is not None and "UTF-8" in records[1].error
    assert records[2].smiles == "CCN" and records[2].error is None


def test_smi_gz_and_stdin(tmp_path: Path):
    path = tmp_path / "m.smi.gz"
    with gzip.open(path, "wb") as fh:
        fh.write(b"CCO one\nCCC two\n")
    assert [r.id for r in read(path)] == ["one", "two"]
    stdin = io.BytesIO(b"CCO one\n\nCCC\n")
    records = read("-", stdin=stdin)
    assert [(r.id, r.smiles) for r in records] == [("one", "CCO"), (2, "CCC")]


def test_smi_rejects_columns(tmp_path: Path):
    path = tmp_path / "m.smi"
    path.write_text("CCO\n")
    with pytest.raises(InputFormatError, match="no columns"):
        RecordReader(path, smiles_column="smiles")


def test_csv_auto_columns_quotes_short_rows(tmp_path: Path):
    path = tmp_path / "m.csv"
    path.write_text('Name,Canonical_SMILES,other\r\n'
                    'eth,CCO,1\r\n'
                    '\r\n'
                    '"multi\nline",c1ccccc1,2\r\n'
                    'short\r\n'
                    ',CCN,3\r\n', newline="")
    records = read(path)
    assert [(r.index, r.line, r.id, r.smiles) for r in records] == [
        (1, 2, "eth", "CCO"), (2, 4, "multi\nline", "c1ccccc1"), (3, 6, "short", ""), (4, 7, 4, "CCN")]
    assert records[2].error is not None and "field" in records[2].error
    assert [r.error for r in records if r.index != 3] == [None, None, None]
    with RecordReader(path) as reader:  # what the defaults resolved to, for a loader to read the same
        assert reader.columns == {"smiles_column": "Canonical_SMILES", "id_column": "Name"}
    smi = tmp_path / "m.smi"
    smi.write_text("CCO eth\n")
    with RecordReader(smi) as reader:
        assert reader.columns == {}


def test_csv_non_utf8_row_is_a_record_with_an_error(tmp_path: Path):
    path = tmp_path / "m.csv"
    path.write_bytes(b"smiles,id\nCCO,a\nC\xffC,b\nCCN,c\n")
    records = read(path)
    assert [r.id for r in records] == ["a", "b", "c"]
    assert [r.error is None for r in records] == [True, False, True]
    assert "UTF-8" in records[1].error


def test_csv_explicit_and_missing_columns(tmp_path: Path):
    path = tmp_path / "m.tsv"
    path.write_text("mol\tcode\nCCO\tA1\nCCC\tA2\n")
    records = read(path, smiles_column="mol", id_column="CODE")
    assert [(r.id, r.smiles) for r in records] == [("A1", "CCO"), ("A2", "CCC")]
    with RecordReader(path, smiles_column="MOL") as reader:
        assert reader.columns == {"smiles_column": "mol", "id_column": None}
    with pytest.raises(InputFormatError, match="no SMILES column"):
        RecordReader(path)
    with pytest.raises(InputFormatError, match="'nope'"):
        RecordReader(path, smiles_column="mol", id_column="nope")
    empty = tmp_path / "e.csv"
    empty.write_text("\n\n")
    with pytest.raises(InputFormatError, match="empty file"):
        RecordReader(empty)


def _sdf_block(smiles: str, name: str, **props: str) -> str:
    mol = Chem.MolFromSmiles(smiles)
    mol.SetProp("_Name", name)
    for k, v in props.items():
        mol.SetProp(k, v)
    sio = io.StringIO()
    with Chem.SDWriter(sio) as writer:
        writer.write(mol)
    return sio.getvalue()


def test_sdf_broken_record_is_kept_and_reading_goes_on(tmp_path: Path):
    broken = "broken\n  junk\n\n  2  1  0  0  0  0  0  0  0  0999 V2000\n    0.0 0.0 0.0 C   0  0\nM  END\n$$$$\n"
    text = _sdf_block("CCO", "ethanol", code="E1") + broken + _sdf_block("c1ccccc1O", "phenol", code="P1")
    path = tmp_path / "m.sdf"
    path.write_text(text.replace("\n", "\r\n"), newline="")
    records = read(path)
    assert [r.id for r in records] == ["ethanol", "broken", "phenol"]
    assert records[0].mol is not None and records[0].error is None
    assert records[1].mol is None and "RDKit cannot read the SDF record" in records[1].error
    assert "line too short" in records[1].error  # RDKit's own reason
    assert records[2].mol is not None and records[2].mol.GetNumAtoms() == 7  # unsanitized: Kekulé form
    assert records[0].line == 1 and records[1].line > records[0].line
    by_field = read(path, id_column="code")
    assert by_field[0].id == "E1" and by_field[2].id == "P1"
    assert "no data field 'code'" in by_field[1].error
    # a field the first record lacks is a misspelt --id-column, not a record without it: one
    # error up front, naming the fields there are, rather than an error on every row
    with pytest.raises(InputFormatError, match=r"record 1 \(line 1\), the first readable one, has no data field "
                                               r"'cod' for --id-column; its fields: code"):
        read(path, id_column="cod")


def test_sdf_non_ascii_field_gives_rdkits_reason_without_a_stack_trace_or_terminal_noise(tmp_path: Path, capfd):
    block = _sdf_block("CCO", "ethanol")
    lines = block.split("\n")
    atom = next(i for i, line in enumerate(lines) if line.rstrip().endswith("0") and " C " in line)
    lines[atom] = lines[atom].replace(" C ", " \u00e9\u00e9", 1)  # the element symbol, as UTF-8 bytes
    path = tmp_path / "m.sdf"
    path.write_text("\n".join(lines) + _sdf_block("CCN", "ethylamine"), encoding="utf-8")
    records = read(path)
    assert [r.id for r in records] == ["ethanol", "ethylamine"]
    assert records[0].mol is None and "Element '??' not found" in records[0].error
    assert "Stacktrace" not in records[0].error and "#" not in records[0].error
    assert records[1].mol is not None
    out, err = capfd.readouterr()
    assert "Element" not in err and "Cannot convert" not in err


def test_sdf_gz_last_record_without_terminator(tmp_path: Path):
    text = _sdf_block("CCO", "a") + _sdf_block("CCN", "b").rsplit("$$$$", 1)[0]
    path = tmp_path / "m.sdf.gz"
    with gzip.open(path, "wt") as fh:
        fh.write(text)
    records = read(path)
    assert [r.id for r in records] == ["a", "b"]
    assert all(r.mol is not None for r in records)


def test_sdf_unsanitizable_record_reaches_the_predictor_unsanitized(tmp_path: Path):
    mol = Chem.MolFromSmiles("CN(C)(C)(C)C", sanitize=False)
    block = Chem.MolToMolBlock(mol, kekulize=False) + "$$$$\n"
    path = tmp_path / "m.sdf"
    path.write_text(block)
    (record,) = read(path)
    assert record.error is None and record.mol is not None  # the chemistry reason comes from parse_molecule


def test_sdf_data_fields():
    block = _sdf_block("CCO", "x", a="1", b="two words").replace("$$$$", "")
    assert sdf_data_fields(block) == {"a": "1", "b": "two words"}


def test_reader_reports_bytes_read(tmp_path: Path):
    path = tmp_path / "m.smi"
    path.write_text("CCO\n" * 1000)
    with RecordReader(path) as reader:
        assert reader.total_bytes == 4000
        assert len(list(reader)) == 1000
        assert reader.bytes_read == 4000 and reader.records_read == 1000


def test_csv_missing_requested_column_is_named_with_its_role_and_option(tmp_path: Path):
    path = tmp_path / "m.csv"
    path.write_text("smiles,code\nCCO,a\n")
    with pytest.raises(InputFormatError, match=r"m\.csv: no column 'smi' for the SMILES; the header has 'smiles', "
                                               r"'code': give --smiles-column one of them"):
        RecordReader(path, smiles_column="smi")
    with pytest.raises(InputFormatError, match=r"no column 'nope' for the ids; .*: give --id-column one of them"):
        RecordReader(path, id_column="nope")


@pytest.mark.parametrize("name, text, sep, fix", [
    ("excel.csv", "id;smiles;logp\na;CCO;-0,31\nb;CCC;1,5\n", "';'", "save the file comma-separated"),
    ("tabs.csv", "\nsmiles\tname\nCCO\ta\n", r"'\t'", "name the file .tsv"),
    ("commas.tsv", "smiles,name\nCCO,a\n", "','", "name the file .csv"),
])
def test_csv_with_another_separator_is_refused_with_the_fix(tmp_path: Path, name, text, sep, fix):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(InputFormatError) as info:
        RecordReader(path)
    message = str(info.value)
    assert message.startswith(f"{path}: the header line is one column ") and f"separated by {sep}" in message
    assert fix in message
    with pytest.raises(InputFormatError, match="the header line is one column"):
        RecordReader(path, smiles_column="smiles")  # before the column is looked for


def test_smi_header_line_is_skipped_and_lines_keep_their_numbers(tmp_path: Path):
    path = tmp_path / "m.smi"
    path.write_text("\nSMILES Name\nCCO ethanol\n\nc1ccccc1\n")
    assert [(r.index, r.line, r.id, r.smiles) for r in read(path)] == [(1, 3, "ethanol", "CCO"), (2, 5, 2, "c1ccccc1")]
    path.write_bytes(b"\xef\xbb\xbfsmiles\r\nCCO\r\n")
    assert [(r.index, r.line, r.smiles) for r in read(path)] == [(1, 2, "CCO")]
    path.write_text("CCO a\nsmiles b\n")  # only the first line may be a header
    assert [(r.line, r.smiles) for r in read(path)] == [(1, "CCO"), (2, "smiles")]
