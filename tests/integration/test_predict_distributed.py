"""``predict_partitioned`` on a local Dask cluster of two worker processes: real MOSES
SMILES with real invalid lines, the bundled model, one row per record in input order."""
from __future__ import annotations

import csv
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from molsepnorm.data.moses import moses_smiles
from molsepnorm.errors import InvalidMoleculeError, MolsepnormError
from molsepnorm.predict import predict_file
from molsepnorm.predict.distributed import (
    MANIFEST,
    MissingExtraError,
    combine_outputs,
    part_name,
    predict_partitioned,
    read_manifest,
)

MODEL = "tpsa-nci-small"


def hiv_unparsable(data_root: Path) -> list[str]:
    """Two MoleculeNet HIV SMILES (hypervalent Al, B) that today's RDKit rejects."""
    with open(data_root / "sources" / "moleculenet" / "HIV.csv", encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    return [rows[137]["smiles"], rows[987]["smiles"]]


def write_input(path: Path, data_root: Path) -> int:
    """300 MOSES test SMILES (every 40th named) with 4 bad records and 2 blank lines; the records."""
    lines = [f"{s} moses-{k}".encode() if k % 40 == 0 else s.encode()
             for k, s in enumerate(moses_smiles("test", root=data_root, limit=300))]
    bad_al, bad_b = hiv_unparsable(data_root)
    lines[10:10] = [bad_al.encode()]
    lines[150:150] = [b"C1CC unclosed", b"", b"\xff\xfeCCO not-utf8", b""]
    lines.append(bad_b.encode())
    path.write_bytes(b"\n".join(lines) + b"\n")
    return sum(1 for line in lines if line.strip())


def read(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def test_partitions_on_two_workers_give_one_row_per_record_in_order(tmp_path: Path, data_root: Path,
                                                                    bundled_predictor) -> None:
    distributed = pytest.importorskip("distributed", reason="the optional extra is absent: pip install "
                                                            "'molsepnorm[dask]' (dev installs it)")
    source = tmp_path / "moses300.smi"
    n = write_input(source, data_root)
    assert n == 304
    reference = predict_file(bundled_predictor, source, out=tmp_path / "single.csv")  # one process, no Dask

    out = tmp_path / "parts"
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) \
            as cluster, distributed.Client(cluster) as client:
        summary = predict_partitioned(MODEL, source, out, client=client, partition_size=64)
        workers = set(client.scheduler_info()["workers"])
        with pytest.raises(InvalidMoleculeError, match=rf"{source}, row 11: invalid molecule '.*\[Al\]"):
            predict_partitioned(MODEL, source, tmp_path / "strict", client=client, partition_size=64, strict=True)
    assert not (tmp_path / "strict" / MANIFEST).exists()

    assert [p.output for p in summary.partitions] == [part_name(k) for k in range(5)]
    assert [(p.first_record, p.last_record, p.rows) for p in summary.partitions] == \
        [(1, 64, 64), (65, 128, 64), (129, 192, 64), (193, 256, 64), (257, 304, 48)]
    assert {p.worker for p in summary.partitions} <= workers
    assert (summary.total, summary.ok, summary.failed) == (304, 300, 4)
    assert (summary.ok, summary.failed) == (reference.ok, reference.failed)
    manifest = read_manifest(out)
    assert manifest["records"] == 304 and [p["rows"] for p in manifest["partitions"]] == [64, 64, 64, 64, 48]
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST, *(part_name(k) for k in range(5))]  # no temp files

    parts = pd.concat([read(out / p.output) for p in summary.partitions], ignore_index=True)
    single = read(tmp_path / "single.csv")
    columns = bundled_predictor.output_columns()  # id, smiles, tpsa, error (and what predict adds)
    assert list(parts.columns) == list(single.columns) == manifest["columns"] == columns
    assert parts["id"].tolist() == single["id"].tolist()  # one row per record, in input order
    assert parts["id"].iloc[0] == "moses-0" and parts["id"].iloc[1] == "2"
    for column in (c for c in columns if c != "tpsa"):
        assert parts[column].tolist() == single[column].tolist(), column
    failed = parts.index[parts["error"] != ""].tolist()
    assert failed == [10, 150, 151, 303]
    assert "UTF-8" in parts["error"][151] and "unclosed ring" in parts["error"][150]
    assert (parts["tpsa"].iloc[failed] == "").all()
    values = parts["tpsa"].replace("", "nan").astype(float).to_numpy()
    np.testing.assert_allclose(values, single["tpsa"].replace("", "nan").astype(float).to_numpy(), rtol=1e-5)

    combined = tmp_path / "all.csv"
    assert combine_outputs(out, combined) == 304
    assert read(combined).equals(parts)
    damaged = tmp_path / "damaged"
    shutil.copytree(out, damaged)
    (damaged / part_name(2)).unlink()
    with pytest.raises(MolsepnormError, match=rf"part files missing: {part_name(2)}"):
        read_manifest(damaged)


def test_the_output_folder_must_be_empty(tmp_path: Path) -> None:
    pytest.importorskip("distributed", reason="the optional extra is absent: pip install 'molsepnorm[dask]'")
    source = tmp_path / "in.smi"
    source.write_text("CCO\n")
    out = tmp_path / "parts"
    out.mkdir()
    (out / part_name(0)).write_text("id,smiles,tpsa,error\n")  # left by an earlier run
    with pytest.raises(MolsepnormError, match="the folder is not empty"):
        predict_partitioned(MODEL, source, out)
    assert json.dumps(sorted(p.name for p in out.iterdir())) == json.dumps([part_name(0)])


def test_without_dask_the_error_names_the_extra(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # as if not installed: import raises ImportError
    with pytest.raises(MissingExtraError, match=r'pip install "molsepnorm\[dask\]"'):
        predict_partitioned(MODEL, tmp_path / "in.smi", tmp_path / "parts")
    assert not (tmp_path / "parts").exists()
