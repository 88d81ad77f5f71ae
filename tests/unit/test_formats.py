"""The one table of molecule-file suffixes, as the record reader and load_dataset read it."""
from __future__ import annotations

from pathlib import Path

import pytest

from molsepnorm.chem.readers import InputFormatError, detect_format
from molsepnorm.data.registry import is_sdf, is_smi, looks_like_table
from molsepnorm.formats import (
    default_id_column,
    default_smiles_column,
    file_format,
    format_suffix,
    looks_like_id_column,
    misread_separator,
)


@pytest.mark.parametrize("name, suffix, fmt", [
    ("mols.SMI", ".smi", "smi"), ("a/b.txt.gz", ".txt", "smi"), (Path("x.tab.gz"), ".tab", "tsv"),
    ("ethanol.mol", ".mol", "sdf"), ("c.SD.GZ", ".sd", "sdf"), ("t.csv", ".csv", "csv"),
    ("plain", "", None), ("only.gz", "", None), ("x.tar.gz", ".tar", None), (".smi", "", None),
    ("x.gz.smi", ".smi", "smi"), ("x.mol2", ".mol2", None),
])
def test_a_suffix_names_one_format_for_every_reader(name, suffix, fmt) -> None:
    assert format_suffix(name) == suffix and file_format(name) == fmt
    assert is_smi(name) == (fmt == "smi") and is_sdf(name) == (fmt == "sdf")
    assert looks_like_table(str(name)) == (fmt is not None)  # none of them exists
    if fmt is None:
        with pytest.raises(InputFormatError, match="cannot tell the format"):
            detect_format(name)
    else:
        assert detect_format(name) == fmt


def test_default_columns() -> None:
    assert default_smiles_column(["canonical_smiles", " SMILES ", "id"]) == 1  # the one named smiles first
    assert default_smiles_column(["name", "Canonical_SMILES"]) == 1 and default_smiles_column(["a", "b"]) is None
    assert default_id_column(["Name", "smiles", "ID"]) == 2  # id before name, wherever they are
    assert default_id_column(["Name", "smiles", "ID"], taken=[2]) == 0
    assert default_id_column(["smiles", "x"]) is None


@pytest.mark.parametrize("name", ["compound_id", "mol_id", "ID_number", "chembl_id", "cid", "index", "idx", "CAS",
                                  "cas_no", "PubChem CID", "Compound ID", "mol-id", "CompoundID", "molId", "ids"])
def test_identifier_like_column_names(name) -> None:
    assert looks_like_id_column(name)


@pytest.mark.parametrize("name", ["logp", "tpsa", "acid", "Lipid", "octane_number", "retention_index", "batch_no",
                                  "number of rings", "valid", "name", "", "pIC50"])
def test_property_column_names(name) -> None:
    assert not looks_like_id_column(name)


def test_misread_separator() -> None:
    assert misread_separator(["a;smiles;y"], ",") == ";" and misread_separator(["smiles\tlogp"], ",") == "\t"
    assert misread_separator(["smiles,logp"], "\t") == "," and misread_separator(["a;b,c;d"], "\t") == ";"
    assert misread_separator(["smiles"], ",") is None and misread_separator(["a;b", "c"], ",") is None
    assert misread_separator(["a;b"], ";") is None
