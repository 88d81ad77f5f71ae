"""A labelled SD file through load_dataset: targets from data fields, ids, splits, bad records, caching.

RDKit's own ``NCI/first_200.props.sdf`` (200 molecules; numeric fields such as AMW and
CLOGP in every record, P1 in 30 of them, text fields such as CP) is the real input;
files with broken records are written in ``tmp_path`` from its records.  RDKit's
``SDMolSupplier`` is the reference reading of each molecule.
"""
from __future__ import annotations

import gzip
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from rdkit import Chem, RDConfig
from rdkit.Chem import AllChem

from molsepnorm.chem import featurize_graph
from molsepnorm.data import load_dataset
from molsepnorm.data.cache import COMPLETE
from molsepnorm.errors import DatasetFormatError

FIRST_200 = Path(RDConfig.RDDataDir) / "NCI" / "first_200.props.sdf"


@pytest.fixture(scope="module")
def reference() -> list[Chem.Mol]:
    """RDKit's reading of every record of first_200.props.sdf (none fails)."""
    mols = list(Chem.SDMolSupplier(str(FIRST_200)))
    assert len(mols) == 200 and all(m is not None for m in mols)
    return mols


@pytest.fixture(scope="module")
def blocks() -> list[str]:
    """The records of first_200.props.sdf as text, each ending with its ``$$$$`` line."""
    text = FIRST_200.read_text()
    return [b + "$$$$\n" for b in text.split("$$$$\n") if b.strip()]


def start_lines(records: list[str]) -> list[int]:
    """The first line of each record of a file made of ``records``."""
    starts, line = [], 1
    for record in records:
        starts.append(line)
        line += record.count("\n")
    return starts


def test_first_200_props_targets_molecules_ids_and_cache(reference) -> None:
    splits = load_dataset(FIRST_200, target_columns=["AMW"], progress=False)
    assert splits.sizes == {"train": 160, "val": 20, "test": 20}
    assert splits.task == "regression" and splits.metric == "mae" and splits.target_names == ["AMW"]
    assert splits.skipped == [] and splits.info["format"] == "sdf" and splits.source == FIRST_200.resolve()
    assert splits.ids == list(range(1, 201))  # the titles are blank: record numbers
    assert splits.smiles == [Chem.MolToSmiles(m) for m in reference]
    used = np.sort(np.concatenate(list(splits.split_indices.values())))
    assert used.tolist() == list(range(200))  # 0-based records
    for part in ("train", "val", "test"):
        for record, data in zip(splits.split_indices[part], splits[part]):
            mol = reference[record]
            assert math.isclose(float(data.y), float(mol.GetProp("AMW")), rel_tol=1e-6)
            assert data.smiles == Chem.MolToSmiles(mol)  # the molecule as RDKit reads the record
            expected = featurize_graph(mol, "ogb")
            for name in ("x", "edge_index", "edge_attr", "spd", "path_next"):
                assert torch.equal(data[name], torch.from_numpy(getattr(expected, name))), name

    marker = splits.cache_dir / COMPLETE
    stamp = marker.stat().st_mtime_ns
    again = load_dataset(FIRST_200, target_columns=["amw"], split="scaffold", seed=3, progress=False)
    assert again.cache_dir == splits.cache_dir and marker.stat().st_mtime_ns == stamp  # no rebuild
    assert again.target_names == ["AMW"] and sum(again.sizes.values()) == 200


def test_a_field_some_records_lack_is_a_listed_missing_target(reference) -> None:
    with pytest.warns(UserWarning, match=r"170 target value\(s\) missing") as warned:
        both = load_dataset(FIRST_200, target_columns=["AMW", "P1"], progress=False)
    message = str(warned[0].message)
    assert "record 2 (line 82): no field 'P1'" in message and "... and 120 more" in message
    y = torch.cat([d.y for part in ("train", "val", "test") for d in both[part]]).numpy()
    assert y.shape == (200, 2) and np.isnan(y[:, 1]).sum() == 170 and not np.isnan(y[:, 0]).any()

    with pytest.warns(UserWarning) as warned:
        p1 = load_dataset(FIRST_200, target_columns="P1", progress=False)
    assert [str(w.message).split(":\n")[0].split(": ", 1)[1] for w in warned] == [
        "170 target value(s) missing or not numbers, read as missing (NaN)",
        "170 record(s) left out of the data set (listed in DatasetSplits.skipped)"]
    assert sum(p1.sizes.values()) == 30 and len(p1.skipped) == 170
    has_p1 = [i + 1 for i, m in enumerate(reference) if m.HasProp("P1")]
    assert sorted(set(range(1, 201)) - {s.record for s in p1.skipped}) == has_p1
    first = p1.skipped[0]
    assert (first.record, first.row, first.reason) == (2, 82, "every target is missing")
    assert str(first) == "record 2 (line 82): 'c1ccc2sc(SSc3nc4ccccc4s3)nc2c1': every target is missing"


def test_gzipped_copy_is_the_same_data_set(tmp_path: Path) -> None:
    plain = load_dataset(FIRST_200, target_columns=["CLOGP"], split="scaffold", progress=False)
    copy = tmp_path / "first_200.props.sdf.gz"
    with open(FIRST_200, "rb") as src, gzip.open(copy, "wb") as dst:
        shutil.copyfileobj(src, dst)
    zipped = load_dataset(str(copy), target_columns=["CLOGP"], split="scaffold", progress=False)
    for part in ("train", "val", "test"):
        assert np.array_equal(zipped.split_indices[part], plain.split_indices[part])
        assert torch.equal(torch.cat([d.y for d in zipped[part]]), torch.cat([d.y for d in plain[part]]))
    assert zipped.smiles == plain.smiles and zipped.info["sha256"] != plain.info["sha256"]


def test_stereo_charges_and_isotopes_come_from_the_mol_block(tmp_path: Path) -> None:
    wanted = ["C[C@H](N)C(=O)O", "C/C=C/Cl", "C[NH+](C)CC(=O)[O-]", "[2H]C([2H])([2H])O", "F[C@@H](Cl)Br"]
    records = []
    for i, smiles in enumerate(wanted):
        mol = Chem.MolFromSmiles(smiles)
        if i == len(wanted) - 1:  # stereo from 3D coordinates
            mol = Chem.AddHs(mol)
            AllChem.EmbedMolecule(mol, randomSeed=7)
        else:  # stereo from 2D wedges and double-bond geometry
            AllChem.Compute2DCoords(mol)
        records.append(f"{Chem.MolToMolBlock(mol)}>  <y>\n{i}\n\n$$$$\n")
    path = tmp_path / "stereo.sdf"
    path.write_text("".join(records))
    splits = load_dataset(path, target_columns="y", sizes=(0.6, 0.2, 0.2), progress=False)
    by_record = {int(r): d for part in ("train", "val", "test")
                 for r, d in zip(splits.split_indices[part], splits[part])}
    for i, smiles in enumerate(wanted):
        assert by_record[i].smiles == Chem.MolToSmiles(Chem.MolFromSmiles(smiles)), smiles
        expected = featurize_graph(Chem.MolFromSmiles(smiles), "ogb")
        assert torch.equal(by_record[i].x, torch.from_numpy(expected.x)), smiles  # chirality, charge columns
        assert torch.equal(by_record[i].edge_attr, torch.from_numpy(expected.edge_attr)), smiles  # E/Z
    assert int(by_record[0].x[1, 1]) != 0 and int(by_record[4].x[1, 1]) != 0  # the chiral tags were read


def test_bad_records_and_non_numeric_fields_are_listed_by_record_and_line(tmp_path: Path, blocks) -> None:
    records = blocks[:12]
    records[3] = records[3].replace(records[3].split("\n")[3], "  x  y  0  0  0  0  0  0  0  0999 V2000", 1)
    pentavalent = Chem.MolToMolBlock(Chem.MolFromSmiles("CN(C)(C)(C)C", sanitize=False), kekulize=False)
    records[6] = pentavalent + records[6][records[6].index("M  END") + len("M  END\n"):]
    records[8] = records[8].replace(records[8].split(">  <AMW>  (9) \n")[1].split("\n")[0], "high", 1)
    records[9] = records[9].replace(">  <AMW>", ">  <MW>")
    lines = start_lines(records)
    path = tmp_path / "bad.sdf"
    path.write_text("".join(records))

    with pytest.warns(UserWarning, match=r"2 target value\(s\)") as warned, \
            pytest.raises(DatasetFormatError) as info:
        load_dataset(path, target_columns=["AMW"], progress=False)
    notes = str(warned[0].message)
    assert f"record 9 (line {lines[8]}): field 'AMW' is 'high', not a number" in notes
    assert f"record 10 (line {lines[9]}): no field 'AMW'" in notes
    message = str(info.value)
    assert str(path.resolve()) in message and "2 invalid molecule record(s)" in message
    assert "on_invalid='skip'" in message
    assert f"record 4 (line {lines[3]}): RDKit cannot read the SDF record" in message
    assert f"record 7 (line {lines[6]}): 'CN(C)(C)(C)C': Explicit valence for atom # 1 N" in message

    with pytest.warns(UserWarning) as warned:
        splits = load_dataset(path, target_columns=["AMW"], on_invalid="skip", progress=False)
    assert "4 record(s) left out" in str(warned[-1].message)
    assert [(s.record, s.row) for s in splits.skipped] == [(k, lines[k - 1]) for k in (4, 7, 9, 10)]
    reasons = [s.reason for s in splits.skipped]
    assert "RDKit cannot read" in reasons[0] and "valence" in reasons[1]
    assert reasons[2:] == ["every target is missing"] * 2
    used = set(np.concatenate(list(splits.split_indices.values())).tolist())
    assert used == set(range(12)) - {3, 6, 8, 9} and sum(splits.sizes.values()) == 8


def test_field_names_are_checked_and_the_fields_listed(tmp_path: Path) -> None:
    with pytest.raises(DatasetFormatError) as info:
        load_dataset(FIRST_200, target_columns=["AMW", "LOGS"], progress=False)
    message = str(info.value)
    assert "no record has the target field 'LOGS'" in message
    assert "'AMW', 'CLOGP', 'CP'" in message and "'P1' (30 of 200 records)" in message
    assert "fields holding numbers: 'AMW', 'CLOGP', 'DAYLIGHT_CLOGP'" in message and "'CP'," not in \
        message.split("fields holding numbers")[1]
    with pytest.raises(DatasetFormatError, match=r"name the target field\(s\) of an SD file.*'NUM_RINGS'"):
        load_dataset(FIRST_200, progress=False)
    with pytest.raises(DatasetFormatError, match=r"no record has the id field 'NSC'"):
        load_dataset(FIRST_200, target_columns="AMW", id_column="NSC", progress=False)
    with pytest.raises(DatasetFormatError, match=r"split='kfold' is not 'random', 'scaffold', 'column:FIELD'"):
        load_dataset(FIRST_200, target_columns="AMW", split="kfold", progress=False)
    with pytest.raises(DatasetFormatError, match=r"smiles_column does not apply"):
        load_dataset(FIRST_200, target_columns="AMW", smiles_column="SMILES", progress=False)
    not_gzip = tmp_path / "plain.sdf.gz"
    not_gzip.write_bytes(FIRST_200.read_bytes()[:500])
    with pytest.raises(DatasetFormatError, match=r"cannot be read as a gzipped SD file"):
        load_dataset(not_gzip, target_columns="AMW", progress=False)


def test_split_field_and_id_field(tmp_path: Path, blocks) -> None:
    labels = ["train"] * 14 + ["val"] * 3 + ["Test"] * 3
    records = [b.replace("$$$$\n", f">  <fold>\n{label}\n\n>  <code>\nNCI-{i + 1:03d}\n\n$$$$\n")
               for i, (b, label) in enumerate(zip(blocks[:20], labels))]
    path = tmp_path / "folds.sdf"
    path.write_text("".join(records))
    splits = load_dataset(path, target_columns="CLOGP", split="column:fold", id_column="code", progress=False)
    assert splits.split_indices["val"].tolist() == [14, 15, 16]
    assert splits.split_indices["test"].tolist() == [17, 18, 19]
    assert splits.ids == [f"NCI-{i:03d}" for i in range(1, 21)] and splits.info["split"] == "column:fold"
    assert load_dataset(path, target_columns="CLOGP", split="FOLD", progress=False).sizes == splits.sizes

    records[5] = records[5].replace(">  <fold>\ntrain\n", ">  <fold>\ndev\n")
    records[7] = records[7].replace(">  <fold>\ntrain\n\n", "")
    path.write_text("".join(records))
    lines = start_lines(records)
    with pytest.raises(DatasetFormatError) as info:
        load_dataset(path, target_columns="CLOGP", split="column:fold", progress=False)
    message = str(info.value)
    assert "2 record(s)" in message and "split field 'fold'" in message
    assert f"record 6 (line {lines[5]}): 'dev'" in message and f"record 8 (line {lines[7]}): no field" in message
