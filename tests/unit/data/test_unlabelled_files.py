"""Files of molecules without targets through load_dataset: .smi files, a CSV of SMILES alone
(or with ``target_columns=[]``), an SD file with ``target_columns=[]``.

Each becomes an ``"unlabelled"`` data set (graphs without ``y``, no metric), featurized,
cached and split as labelled files are, every bad line named.  The molecules are real:
RDKit's NCI ``first_5K.smi`` and ``first_200.props.sdf``.
"""
from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
import torch
from rdkit import Chem, RDConfig

from molsepnorm.chem import featurize_graph
from molsepnorm.data import load_dataset
from molsepnorm.data.registry import UNLABELLED, looks_like_table
from molsepnorm.errors import DatasetFormatError

NCI = Path(RDConfig.RDDataDir) / "NCI"


@pytest.fixture(scope="module")
def nci_lines() -> list[str]:
    """The first 60 lines of RDKit's first_5K.smi (``SMILES<TAB>NSC number``)."""
    with open(NCI / "first_5K.smi") as handle:
        return [next(handle) for _ in range(60)]


def test_a_smi_file_is_an_unlabelled_split_data_set_named_by_its_lines(tmp_path: Path, nci_lines) -> None:
    lines = list(nci_lines)
    lines[9] = "C1CCC unclosed\n"  # line 10: a ring never closed
    lines.insert(20, "\n")  # a blank line is not a record: the lines below move down by one
    lines.insert(30, "c1ccccc1O\n")  # line 31: no name, so no id
    lines.insert(40, "C1CC\n")  # line 41: a bad line without a name: named by its line alone
    path = tmp_path / "mols.smi"
    path.write_text("".join(lines))
    with pytest.raises(DatasetFormatError, match=r"mols\.smi: 2 invalid SMILES.*\n  row 10 \(id 'unclosed'\): "
                                                 r"'C1CCC'.*\n  row 41: 'C1CC': "):
        load_dataset(path, progress=False)
    with pytest.warns(UserWarning, match=r"row 10"):
        splits = load_dataset(path, on_invalid="skip", progress=False)
    assert splits.task == UNLABELLED and splits.metric is None and not splits.labelled
    assert splits.target_names == [] and splits.num_tasks == 0
    assert [(s.row, s.id, s.smiles) for s in splits.skipped] == [(10, "unclosed", "C1CCC"), (41, None, "C1CC")]
    assert sum(splits.sizes.values()) == 60 and splits.info["format"] == "smi"
    records = [line for line in lines if line.strip()]
    assert splits.ids[:3] == [line.split()[1] for line in records[:3]] and splits.ids[29] is None
    for part in ("train", "val", "test"):
        for record, data in zip(splits.split_indices[part], splits[part]):
            assert getattr(data, "y", None) is None  # no targets, as a corpus's graphs
            smiles = records[record].split()[0]
            assert data.smiles == smiles
            expected = featurize_graph(Chem.MolFromSmiles(smiles), "ogb")
            assert torch.equal(data.x, torch.from_numpy(expected.x))

    gz = tmp_path / "mols.smi.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    assert looks_like_table(str(gz)) and looks_like_table("not-here.ism")
    with pytest.warns(UserWarning, match=r"mols\.smi\.gz: 2 row"):
        again = load_dataset(gz, on_invalid="skip", split="scaffold", seed=2, progress=False)
    assert again.task == UNLABELLED and sum(again.sizes.values()) == 60
    with pytest.raises(DatasetFormatError, match="a .smi file of SMILES has no split column"):
        load_dataset(path, split="column:fold", on_invalid="skip", progress=False)


@pytest.mark.parametrize("option, value", [("target_columns", ["tpsa"]), ("target_columns", "tpsa"),
                                           ("smiles_column", "smiles"), ("id_column", "name")])
def test_a_smi_file_refuses_column_options_in_one_line(tmp_path: Path, nci_lines, option, value) -> None:
    path = tmp_path / "few.smi"
    path.write_text("".join(nci_lines[:10]))
    with pytest.raises(DatasetFormatError, match=rf"few\.smi: a \.smi file .* no columns: {option}="):
        load_dataset(path, progress=False, **{option: value})


@pytest.mark.parametrize("name, option", [("few.smi", "sep"), ("few.sdf", "sep"), ("few.csv", "download")])
def test_an_option_a_files_loader_does_not_take_is_named_with_those_it_takes(tmp_path: Path, nci_lines, name,
                                                                              option) -> None:
    path = tmp_path / name  # the check comes before the file is read: its content does not matter here
    path.write_text("".join(nci_lines[:10]))
    with pytest.raises(TypeError, match=rf"few\.\w+ \(a \w+ file\) does not take option\(s\) {option}; it "
                                        r"accepts: .*\bsplit\b"):
        load_dataset(path, progress=False, **{option: ","})


def test_a_smi_file_takes_no_targets_and_no_header(tmp_path: Path, nci_lines) -> None:
    path = tmp_path / "few.smi"
    path.write_text("".join(nci_lines[:10]))
    with pytest.raises(DatasetFormatError, match=r"task='binary' needs targets"):
        load_dataset(path, progress=False, task="binary")
    assert load_dataset(path, progress=False, target_columns=[], task=UNLABELLED).task == UNLABELLED
    table = tmp_path / "table.txt"  # a CSV saved as .txt is read as SMILES per line: its header says so
    table.write_text("smiles,name\n" + "".join(",".join(line.split()) + "\n" for line in nci_lines[:10]))
    with pytest.raises(DatasetFormatError, match=r"table\.txt: line 1 is a header \('smiles,name'\), not a "
                                                 r"molecule: a \.txt file .* name it \.csv or \.tsv"):
        load_dataset(table, progress=False)


def test_every_suffix_the_record_reader_knows_is_a_data_set_of_that_format(tmp_path: Path, nci_lines) -> None:
    """What pretraining reads (.txt, .tab.gz, .mol) load_dataset reads too, in the same format."""
    from rdkit.Chem import AllChem

    pairs = [line.split() for line in nci_lines[:12]]
    text = tmp_path / "mols.txt"
    text.write_text("".join(f"{s} {n}\n" for s, n in pairs))
    splits = load_dataset(text, progress=False)
    assert splits.info["format"] == "smi" and splits.ids == [n for _, n in pairs]
    tab = tmp_path / "mols.tab.gz"
    rows = "".join(f"{s}\t{n}\t{i}\n" for i, (s, n) in enumerate(pairs))
    tab.write_bytes(gzip.compress(f"SMILES\tname\tlogp\n{rows}".encode()))
    splits = load_dataset(tab, progress=False)
    assert splits.target_names == ["logp"] and splits.ids == [n for _, n in pairs]
    mol = Chem.AddHs(Chem.MolFromSmiles("CCO"))
    AllChem.Compute2DCoords(mol)
    molfile = tmp_path / "ethanol.mol"
    molfile.write_text(Chem.MolToMolBlock(Chem.RemoveHs(mol)))
    splits = load_dataset(molfile, target_columns=[], sizes=(1.0, 0.0, 0.0), progress=False)
    assert splits.sizes == {"train": 1, "val": 0, "test": 0} and splits.smiles == ["CCO"]


def test_a_csv_of_smiles_alone_or_with_no_target_columns_is_unlabelled(tmp_path: Path, nci_lines) -> None:
    pairs = [line.split() for line in nci_lines[:30]]
    alone = tmp_path / "alone.csv"
    alone.write_text("smiles\n" + "".join(f"{s}\n" for s, _ in pairs))
    splits = load_dataset(alone, progress=False)
    assert splits.task == UNLABELLED and splits.target_names == [] and sum(splits.sizes.values()) == 30
    assert all(getattr(d, "y", None) is None for d in splits.train)

    named = tmp_path / "named.csv"  # a text column would be read as a target by default
    named.write_text("Name,smiles,note\n" + "".join(f"NSC{n},{s},x\n" for s, n in pairs))
    with pytest.raises(DatasetFormatError, match=r"not finite numbers"):
        load_dataset(named, progress=False)
    splits = load_dataset(named, target_columns=[], progress=False)  # the name column: ids, as predict reads it
    assert splits.task == UNLABELLED and splits.ids == [f"NSC{n}" for _, n in pairs]
    numbered = tmp_path / "numbered.csv"  # a numeric id column is an id, not a target
    numbered.write_text("ID,smiles\n" + "".join(f"{n},{s}\n" for s, n in pairs))
    splits = load_dataset(numbered, progress=False)
    assert splits.task == UNLABELLED and splits.ids == [n for _, n in pairs]


def test_a_csvs_default_columns_are_the_record_readers(tmp_path: Path, nci_lines) -> None:
    """The SMILES column named like 'smiles', the id column 'id' else 'name', never one taken
    by the SMILES, the split or a named target; an empty id cell is no id."""
    from molsepnorm.chem.readers import RecordReader

    pairs = [line.split() for line in nci_lines[:20]]
    names = [f"NSC{n}" for _, n in pairs]
    path = tmp_path / "mols.csv"
    path.write_text(" Name ,canonical_smiles,id,logp\n" + "".join(
        f"NSC{n},{s},{'' if i == 3 else 100 + i},{i}\n" for i, (s, n) in enumerate(pairs)))
    with RecordReader(path) as reader:
        assert reader.columns == {"smiles_column": "canonical_smiles", "id_column": "id"}
    splits = load_dataset(path, target_columns=["logp"], progress=False)
    assert splits.ids[2:5] == ["102", None, "104"]  # the id column; an empty cell is no id
    splits = load_dataset(path, target_columns=["logp", "id"], progress=False)  # a target is not the ids
    assert splits.target_names == ["logp", "id"] and splits.ids == names

    two = tmp_path / "two.csv"  # a second SMILES column is not a target
    two.write_text("canonical_smiles,isomeric_smiles,logp\n" + "".join(f"{s},{s},{i}\n" for i, (s, _) in
                                                                      enumerate(pairs)))
    assert load_dataset(two, progress=False).target_names == ["logp"]

    folds = tmp_path / "folds.csv"  # a split column named id is not the ids either
    folds.write_text("smiles,name,id\n" + "".join(f"{s},NSC{n},{'train' if i < 16 else 'test'}\n"
                                                  for i, (s, n) in enumerate(pairs)))
    splits = load_dataset(folds, split="column:id", progress=False)
    assert splits.task == UNLABELLED and splits.sizes["test"] == 4 and splits.ids == names


def test_an_sd_file_with_no_target_fields_asked_for_is_unlabelled() -> None:
    with pytest.raises(DatasetFormatError, match="name the target field"):
        load_dataset(NCI / "first_200.props.sdf", progress=False)
    splits = load_dataset(NCI / "first_200.props.sdf", target_columns=[], progress=False)
    assert splits.task == UNLABELLED and splits.sizes == {"train": 160, "val": 20, "test": 20}
    assert np.all([getattr(d, "y", None) is None for d in splits.test])
