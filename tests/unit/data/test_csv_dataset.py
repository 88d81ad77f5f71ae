"""A user's CSV / TSV through load_dataset: tasks, targets, splits, errors, caching.

The tables are written in ``tmp_path`` from real molecules of RDKit's NCI set; caches go
to ``MOLSEPNORM_CACHE`` (content-addressed, so identical tables share one cache).
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from rdkit import Chem, RDConfig
from torch_geometric.data import Data

from molsepnorm.data import load_dataset
from molsepnorm.data.cache import COMPLETE
from molsepnorm.data.splits import murcko_scaffold
from molsepnorm.encodings import encode
from molsepnorm.errors import DatasetFormatError, DatasetNotFoundError

BAD_SMILES = {  # real failures: a hypervalent Si salt (NCI line 3371), an unclosed ring, plain text
    "CCCCNCCCC.F[Si](F)(F)(F)(F)F": "valence",
    "C1CCC": "ring",
    "not-a-molecule": "",
}


@pytest.fixture(scope="module")
def nci() -> list[tuple[str, float]]:
    """The first 120 parseable (SMILES, TPSA) pairs of RDKit's NCI file."""
    path = os.path.join(RDConfig.RDDataDir, "NCI", "first_5k.tpsa.csv")
    rows = []
    with open(path) as handle:
        for line in handle:
            if line.startswith("#"):
                continue
            smiles, _, tpsa = line.strip().rpartition(",")
            if Chem.MolFromSmiles(smiles) is not None:
                rows.append((smiles, float(tpsa)))
            if len(rows) == 120:
                break
    return rows


def write(path: Path, header: list[str], rows: list[list[object]], sep: str = ",") -> Path:
    lines = [sep.join(header)] + [sep.join("" if v is None else str(v) for v in row) for row in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def ys(dataset) -> np.ndarray:
    return torch.cat([d.y for d in dataset]).numpy()


def test_regression_csv(tmp_path: Path, nci) -> None:
    path = write(tmp_path / "tpsa.csv", ["smiles", "tpsa"], [[s, t] for s, t in nci[:100]])
    splits = load_dataset(str(path), target_columns=["tpsa"], progress=False)
    assert splits.task == "regression" and splits.metric == "mae" and not splits.higher_is_better
    assert dataclasses.replace(splits, metric="r2").higher_is_better  # every metric evaluation knows
    assert splits.target_names == ["tpsa"] and splits.vocab == "ogb"
    assert splits.sizes == {"train": 80, "val": 10, "test": 10}
    assert splits.skipped == []
    by_smiles = dict(nci)
    for split in ("train", "val", "test"):
        for rows_index, data in zip(splits.split_indices[split], splits[split]):
            n = int(data.num_nodes)
            assert data.y.dtype == torch.float32 and data.y.shape == (1, 1)
            assert data.x.shape == (n, 9) and data.edge_attr.shape[1] == 3
            assert data.spd.numel() == n * n and data.path_next.numel() == n * n and data.degree.numel() == n
            reference = encode(Data(x=data.x, edge_index=data.edge_index, num_nodes=n))  # the graph search
            for name in ("degree", "spd", "path_next"):
                assert torch.equal(data[name], reference[name]), name
            assert data.smiles == nci[rows_index][0]  # split_indices are data rows of the file
            assert math.isclose(float(data.y), by_smiles[data.smiles], rel_tol=1e-6)
    assert splits.source == path.resolve()
    assert "train=80" in repr(splits) and "val=10" in repr(splits)


def test_binary_is_inferred_and_can_be_forced(tmp_path: Path, nci) -> None:
    path = write(tmp_path / "active.csv", ["SMILES", "active"], [[s, int(t > 50)] for s, t in nci[:60]])
    splits = load_dataset(path, smiles_column="smiles", progress=False)  # case-insensitive column match
    assert splits.task == "binary" and splits.metric == "rocauc" and splits.higher_is_better
    assert set(np.unique(ys(splits.train))) <= {0.0, 1.0}
    assert load_dataset(path, task="regression", progress=False).task == "regression"

    numbers = write(tmp_path / "numbers.csv", ["smiles", "tpsa"], [[s, t] for s, t in nci[:60]])
    with pytest.raises(DatasetFormatError, match=r"task='binary' needs targets 0 or 1") as info:
        load_dataset(numbers, task="binary", progress=False)
    assert "row 2, column 'tpsa'" in str(info.value)


def test_multitarget_with_missing_cells(tmp_path: Path, nci) -> None:
    rows = []
    for i, (s, t) in enumerate(nci[:50]):
        a = "" if i % 5 == 1 else t
        b = "NA" if i % 7 == 3 and i % 5 != 1 else round(t / 10.0, 3)
        rows.append([s, a, b])
    rows[35][1], rows[35][2] = "", "nan"  # i = 35: every target missing -> skipped with a warning
    path = write(tmp_path / "multi.csv", ["smiles", "a", "b"], rows)
    with pytest.warns(UserWarning, match=r"1 row\(s\) left out") as record:
        splits = load_dataset(path, target_columns=["a", "b"], progress=False)
    assert "row 37" in str(record[0].message)  # data row 35 is line 37
    assert record[0].filename == __file__  # the warning points at the caller's line
    assert splits.target_names == ["a", "b"] and splits.task == "regression"
    assert [(s.row, s.reason) for s in splits.skipped] == [(37, "every target is missing")]
    assert sum(splits.sizes.values()) == 49
    for split in ("train", "val", "test"):
        for i, data in zip(splits.split_indices[split], splits[split]):
            assert data.y.shape == (1, 2)
            assert math.isnan(data.y[0, 0]) == (i % 5 == 1)
            assert math.isnan(data.y[0, 1]) == (i % 7 == 3 and i % 5 != 1)
    assert 35 not in np.concatenate(list(splits.split_indices.values()))


def test_tsv(tmp_path: Path, nci) -> None:
    path = write(tmp_path / "tpsa.tsv", ["smiles", "tpsa"], [[s, t] for s, t in nci[:40]], sep="\t")
    splits = load_dataset(path, progress=False)  # default targets: every other column
    assert splits.target_names == ["tpsa"] and sum(splits.sizes.values()) == 40


def test_random_and_scaffold_splits(tmp_path: Path, nci) -> None:
    path = write(tmp_path / "tpsa.csv", ["smiles", "tpsa"], [[s, t] for s, t in nci])
    n = len(nci)
    for kind in ("random", "scaffold"):
        a = load_dataset(path, split=kind, seed=1, progress=False)
        b = load_dataset(path, split=kind, seed=1, progress=False)
        c = load_dataset(path, split=kind, seed=2, progress=False)
        joined = np.concatenate([a.split_indices[s] for s in ("train", "val", "test")])
        assert sorted(joined.tolist()) == list(range(n)), kind
        assert all(np.array_equal(a.split_indices[s], b.split_indices[s]) for s in a.split_indices)
        assert not all(np.array_equal(a.split_indices[s], c.split_indices[s]) for s in a.split_indices)
        assert a.info["split"] == kind and a.sizes == {s: len(a.split_indices[s]) for s in a.sizes}
    random = load_dataset(path, split="random", sizes=(0.5, 0.25, 0.25), progress=False)
    assert random.sizes == {"train": 60, "val": 30, "test": 30}

    scaffold = load_dataset(path, split="scaffold", seed=0, progress=False)
    owner = {}
    for split in ("train", "val", "test"):
        for data in scaffold[split]:
            key = murcko_scaffold(Chem.MolFromSmiles(data.smiles))
            assert owner.setdefault(key, split) == split, f"scaffold {key!r} is in two splits"


def test_column_split(tmp_path: Path, nci) -> None:
    labels = ["train"] * 30 + ["Valid"] * 6 + ["TEST"] * 4
    path = write(tmp_path / "folds.csv", ["smiles", "tpsa", "fold"], [[s, t, f] for (s, t), f in zip(nci, labels)])
    by_name = load_dataset(path, split="fold", progress=False)
    explicit = load_dataset(path, split="column:fold", progress=False)
    assert by_name.target_names == ["tpsa"]  # the split column is not a target
    assert by_name.sizes == {"train": 30, "val": 6, "test": 4}
    assert by_name.split_indices["val"].tolist() == list(range(30, 36))
    assert all(np.array_equal(by_name.split_indices[s], explicit.split_indices[s]) for s in by_name.split_indices)

    labels[7] = "dev"
    bad = write(tmp_path / "badfold.csv", ["smiles", "tpsa", "fold"], [[s, t, f] for (s, t), f in zip(nci, labels)])
    with pytest.raises(DatasetFormatError, match=r"row 9: 'dev'"):
        load_dataset(bad, split="fold", progress=False)
    with pytest.raises(DatasetFormatError, match=r"split='kfold' is not 'random', 'scaffold'.*'fold'"):
        load_dataset(bad, split="kfold", progress=False)


def test_missing_columns_list_the_available_ones(tmp_path: Path, nci) -> None:
    path = write(tmp_path / "cols.csv", ["mol", "tpsa"], [[s, t] for s, t in nci[:10]])
    with pytest.raises(DatasetFormatError,
                       match=r"no SMILES column \(none is named like 'smiles'\); the columns are: 'mol', 'tpsa'"):
        load_dataset(path)
    with pytest.raises(DatasetFormatError, match=r"no target column 'logp'; the columns are: 'mol', 'tpsa'"):
        load_dataset(path, smiles_column="mol", target_columns=["tpsa", "logp"])
    with pytest.raises(DatasetNotFoundError, match="does not exist"):
        load_dataset(tmp_path / "absent.csv")


def test_non_numeric_target_names_row_and_column(tmp_path: Path, nci) -> None:
    rows = [[s, t] for s, t in nci[:10]]
    rows[3][1] = "12,5"  # a decimal comma, quoted by hand below
    rows[6][1] = "high"
    text = "smiles,tpsa\n" + "\n".join(f'{s},"{t}"' for s, t in rows) + "\n"
    path = tmp_path / "words.csv"
    path.write_text(text)
    with pytest.raises(DatasetFormatError) as info:
        load_dataset(path)
    message = str(info.value)
    assert "2 target cell(s)" in message
    assert "row 5, column 'tpsa': '12,5'" in message and "row 8, column 'tpsa': 'high'" in message


def test_invalid_smiles_are_all_listed(tmp_path: Path, nci) -> None:
    rows = [[s, t] for s, t in nci[:30]]
    for position, bad in zip((4, 11, 25), BAD_SMILES):
        rows[position][0] = bad
    path = write(tmp_path / "bad.csv", ["smiles", "tpsa"], rows)
    with pytest.raises(DatasetFormatError) as info:
        load_dataset(path, progress=False)
    message = str(info.value)
    assert "3 invalid SMILES" in message and str(path.resolve()) in message and "on_invalid='skip'" in message
    for line, (bad, reason) in zip((6, 13, 27), BAD_SMILES.items()):
        assert f"row {line}: {bad!r}" in message
        assert reason in message.lower()

    with pytest.warns(UserWarning, match=r"3 row\(s\) left out"):
        splits = load_dataset(path, on_invalid="skip", progress=False)
    assert [s.row for s in splits.skipped] == [6, 13, 27]
    assert [s.smiles for s in splits.skipped] == list(BAD_SMILES)
    assert all(s.reason for s in splits.skipped)
    assert sum(splits.sizes.values()) == 27
    used = np.concatenate(list(splits.split_indices.values()))
    assert not {4, 11, 25} & set(used.tolist())


def test_second_load_hits_the_cache_and_edits_rebuild(tmp_path: Path, nci) -> None:
    path = write(tmp_path / "edit.csv", ["smiles", "tpsa"], [[s, t] for s, t in nci[:40]])
    first = load_dataset(path, progress=False)
    marker = first.cache_dir / COMPLETE
    stamp = (marker.stat().st_mtime_ns, (first.cache_dir / "data.pt").stat().st_mtime_ns)
    start = time.perf_counter()
    second = load_dataset(path, split="scaffold", progress=False)  # split options do not rebuild
    assert time.perf_counter() - start < 5
    assert second.cache_dir == first.cache_dir
    assert (marker.stat().st_mtime_ns, (first.cache_dir / "data.pt").stat().st_mtime_ns) == stamp

    rows = [[s, t + 1000.0] for s, t in nci[:40]]
    write(path, ["smiles", "tpsa"], rows)
    edited = load_dataset(path, progress=False)
    assert edited.cache_dir != first.cache_dir
    assert json.loads((edited.cache_dir / COMPLETE).read_text())["molecules"] == 40
    assert ys(edited.train).min() >= 1000.0 > ys(first.train).max()


def test_zinc_vocabulary(tmp_path: Path) -> None:
    path = write(tmp_path / "zinc.csv", ["smiles", "y"], [["CCO", 1.0], ["c1ccccc1N", 2.0], ["CC(=O)[O-]", 3.0],
                                                          ["CCN", 4.0], ["CCCl", 5.0]])
    splits = load_dataset(path, vocab="zinc", sizes=(0.6, 0.2, 0.2), progress=False)
    data = splits.train[0]
    assert splits.vocab == "zinc" and data.x.shape[1] == 1 and data.edge_attr.dim() == 1


def test_id_column_names_molecules_and_is_not_a_target(tmp_path: Path, nci) -> None:
    rows = [[f"NSC-{i}", s, t] for i, (s, t) in enumerate(nci[:20])]
    rows[4][1] = "C1CCC"
    path = write(tmp_path / "ids.csv", ["name", "smiles", "tpsa"], rows)
    with pytest.warns(UserWarning, match=r"row 6 \(id 'NSC-4'\): 'C1CCC'"):
        splits = load_dataset(path, id_column="Name", on_invalid="skip", progress=False)
    assert splits.target_names == ["tpsa"] and splits.ids == [r[0] for r in rows]
    assert [(s.row, s.id) for s in splits.skipped] == [(6, "NSC-4")]
    with pytest.raises(DatasetFormatError, match=r"no id column 'code'"):
        load_dataset(path, id_column="code", progress=False)


def test_a_target_named_twice_is_refused(tmp_path: Path, nci) -> None:
    path = write(tmp_path / "twice.csv", ["smiles", "logp", "tpsa"], [[s, 1.0, t] for s, t in nci[:10]])
    with pytest.raises(DatasetFormatError, match=r"twice\.csv: target_columns names the column 'logp' twice: "
                                                 r".*name each target column once"):
        load_dataset(path, target_columns=["logp", "logp"], progress=False)
    with pytest.raises(DatasetFormatError, match=r"the column 'tpsa' twice \(as 'tpsa' and 'TPSA'\)"):
        load_dataset(path, target_columns=["tpsa", "logp", "TPSA"], progress=False)


@pytest.mark.parametrize("options, role", [
    ({"target_columns": "smiles"}, "SMILES"), ({"target_columns": ["tpsa", "SMILES"]}, "SMILES"),
    ({"target_columns": ["fold"], "split": "fold"}, "split"),
    ({"target_columns": ["tpsa", "code"], "id_column": "code"}, "id"),
])
def test_a_target_that_is_the_smiles_split_or_id_column_is_refused(tmp_path: Path, nci, options, role) -> None:
    rows = [[f"c{i}", s, t, "train" if i < 8 else "test"] for i, (s, t) in enumerate(nci[:10])]
    path = write(tmp_path / "roles.csv", ["code", "smiles", "tpsa", "fold"], rows)
    with pytest.raises(DatasetFormatError, match=rf"roles\.csv: target column '\w+' is the {role} column "
                                                 r"\('\w+'\), not a target; leave it out of target_columns"):
        load_dataset(path, progress=False, **options)


@pytest.mark.parametrize("column, values", [
    ("compound_id", "integers"), ("mol_id", "integers"), ("ID_number", "integers"), ("cid", "integers"),
    ("index", "integers"), ("CompoundID", "integers"), ("chembl_id", "words"), ("PubChem CID", "integers"),
])
def test_a_default_target_of_identifiers_is_refused(tmp_path: Path, nci, column, values) -> None:
    ids = [str(100 + 7 * i) if values == "integers" else f"CHEMBL{i}" for i in range(10)]
    ids[2] = ""  # a missing cell does not count
    path = write(tmp_path / "ids.csv", ["smiles", column, "tpsa"], [[s, i, t] for (s, t), i in zip(nci, ids)])
    with pytest.raises(DatasetFormatError, match=rf"ids\.csv: column '{column}' looks like an identifier .* all "
                                                 r"unique (integers|non-numbers).* target_columns \(--target-columns\)"
                                                 r".* id_column \(--id-column\)"):
        load_dataset(path, progress=False)


def test_columns_like_identifiers_load_when_named_or_not_identifiers(tmp_path: Path, nci) -> None:
    rows = [[s, 100 + i, i % 3, 1200 + 10 * i, t] for i, (s, t) in enumerate(nci[:20])]
    header = ["smiles", "compound_id", "batch_no", "retention_index", "tpsa"]
    path = write(tmp_path / "named.csv", header, rows)
    splits = load_dataset(path, target_columns=["tpsa"], id_column="compound_id", progress=False)
    assert splits.target_names == ["tpsa"] and splits.ids == [str(100 + i) for i in range(20)]
    assert load_dataset(path, target_columns=["compound_id", "tpsa"], progress=False).target_names == \
        ["compound_id", "tpsa"]  # named: the user's choice
    repeated = write(tmp_path / "repeated.csv", header, [[*r[:1], r[2], *r[2:]] for r in rows])  # mol ids repeat
    assert load_dataset(repeated, progress=False).target_names == header[1:]  # not unique; a property's name


@pytest.mark.parametrize("name, text, sep, fix", [
    ("excel.csv", "smiles;logp\n{s};-0,31\n{s};1,5\n", ";", r"pass sep=';' to load_dataset"),
    ("plain.csv", "a;smiles;y\nx;{s};1\ny;{s};2\n", ";", r"pass sep=';'"),
    ("tabs.csv", "smiles\tlogp\n{s}\t1\n{s}\t2\n", "\t", r"name the file \.tsv \(or \.tab\), or pass sep='\\t'"),
    ("commas.tsv", "smiles,logp\n{s},1\n{s},2\n", ",", r"name the file \.csv"),
])
def test_a_table_with_another_separator_is_named_with_the_fix(tmp_path: Path, name, text, sep, fix) -> None:
    path = tmp_path / name
    path.write_text(text.format(s="CCO"))
    with pytest.raises(DatasetFormatError, match=rf"{name.replace('.', '[.]')}: the header line is one column .* "
                                                 rf"the fields look separated by {re.escape(repr(sep))}.*; {fix}"):
        load_dataset(path, progress=False)
    if sep == ";":
        assert load_dataset(path, sep=";", target_columns=[], progress=False, sizes=(1, 0, 0)).task == "unlabelled"


def test_copies_of_a_molecule_in_two_splits_are_named(tmp_path: Path, nci) -> None:
    """The same molecule twice (written another way the second time: canonical SMILES
    compare) is counted, and a warning names the rows whose copies lie in different splits;
    a scaffold split keeps copies together and says nothing."""
    import warnings

    benzene = ["c1ccccc1", "C1=CC=CC=C1"]  # one molecule, two spellings
    labels = ["train"] * 30 + ["val"] * 5 + ["test"] * 5
    rows = [[s, t, f] for (s, t), f in zip(nci, labels)]
    rows[3][0], rows[37][0] = benzene  # file rows 5 (train) and 39 (test)
    rows[10][0] = rows[11][0] = "CCO"  # both in train: counted, no warning of its own
    path = write(tmp_path / "copies.csv", ["smiles", "tpsa", "fold"], rows)
    with pytest.warns(UserWarning, match=r"copies\.csv: 2 molecule\(s\) appear more than once \(4 rows\), 1 of them "
                                         r"in more than one split.*\n  row 5 \(train\), row 39 \(test\)$"):
        column = load_dataset(path, split="column:fold", progress=False)
    assert column.info["duplicates"] == {"molecules": 2, "rows": 4, "across_splits": 1}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scaffold = load_dataset(path, split="scaffold", target_columns="tpsa", progress=False)
    assert scaffold.info["duplicates"] == {"molecules": 2, "rows": 4, "across_splits": 0}


def test_a_header_without_rows_is_named_as_such(tmp_path: Path) -> None:
    path = tmp_path / "header.csv"
    path.write_text("smiles,tpsa\n\n")
    with pytest.raises(DatasetFormatError, match=r"header\.csv: no data rows: the file holds a header line only"):
        load_dataset(path, progress=False)


def test_targets_that_train_otherwise_than_a_user_may_think_are_named(tmp_path: Path, nci) -> None:
    """A constant target, a 0/1 column among numbers (trained as regression with the rest) and
    targets of very different spreads (the mean MAE that picks best.pt follows the widest)
    each load, with a warning that names them and the fix."""
    rows = [[s, t, 1.0, int(t > 40), round(t / 1000.0, 5)] for s, t in nci[:60]]
    path = write(tmp_path / "t.csv", ["smiles", "tpsa", "const", "polar", "small"], rows)

    def said(targets: list[str]) -> str:
        with pytest.warns(UserWarning) as record:
            splits = load_dataset(path, target_columns=targets, progress=False)
        assert splits.task == "regression"
        return "\n".join(str(w.message) for w in record)

    text = said(["tpsa", "const"])
    assert "'const' (1) hold one value in every row" in text and "--target-columns" in text
    text = said(["tpsa", "polar"])
    assert "'polar' hold only 0 and 1" in text and "--target-columns polar" in text
    assert "spreads differ" not in text  # the 0/1 column says it all
    text = said(["tpsa", "small"])
    assert "spreads differ" in text and "follows 'tpsa'" in text
    with warnings.catch_warnings():  # one target of its own: nothing to say
        warnings.simplefilter("error")
        assert load_dataset(path, target_columns=["polar"], progress=False).task == "binary"
        load_dataset(path, target_columns=["tpsa"], progress=False)
