"""Atomic, streaming outputs: CSV predictions and NPZ embeddings."""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from molsepnorm.predict.predictor import ChunkResult
from molsepnorm.chem.readers import Record
from molsepnorm.predict.writer import (
    EmbeddingWriter,
    OutputPathError,
    PredictionWriter,
    check_output_path,
    format_value,
)


def chunk(start: int, n: int, width: int = 1, std: bool = False, warned: bool = False) -> ChunkResult:
    """Rows ``start ..``; the first failed; with ``warned`` the second has a warning (else
    no row was checked: a model without applicability data)."""
    records = [Record(start + i, start + i, f"m{start + i}", "C" * (i + 1)) for i in range(n)]
    values = np.arange(start, start + n * width, dtype=float).reshape(n, width) + 0.5
    errors = [None] * n
    values[0] = np.nan
    errors[0] = "bad,\nthing"
    warnings = [None] * n if warned else []
    if warned:
        warnings[1] = "not seen in training: element U;\nnearest training molecule Tanimoto 0.12 < 0.15"
    return ChunkResult(records, [r.smiles for r in records], values,
                       np.full_like(values, 0.25) if std else None, errors, warnings)


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_format_value():
    assert format_value(float("nan")) == ""
    assert format_value(1 / 3) == "0.3333333"
    assert format_value(12345678.0) == "1.234568e+07"


def test_csv_appears_only_on_commit(tmp_path: Path):
    out = tmp_path / "out.csv"
    writer = PredictionWriter(out, ["tpsa"], ensemble=False)
    writer.write(chunk(1, 3))
    assert not out.exists()  # nothing poses as complete output mid-run
    assert len(leftovers(tmp_path)) == 1 and leftovers(tmp_path)[0].endswith(".part")
    writer.write(chunk(4, 2, warned=True))
    assert writer.commit() == str(out)
    assert leftovers(tmp_path) == ["out.csv"]
    frame = pd.read_csv(out)
    assert list(frame.columns) == ["id", "smiles", "tpsa", "error", "warning"]
    assert frame["id"].tolist() == ["m1", "m2", "m3", "m4", "m5"]
    assert frame["error"].tolist()[:2] == ["bad, thing", np.nan]  # one line, commas quoted
    assert np.isnan(frame["tpsa"][0]) and frame["tpsa"][1] == pytest.approx(2.5)
    assert frame["warning"].isna().tolist() == [True, True, True, True, False]  # empty when unchecked or ok
    assert frame["warning"][4] == "not seen in training: element U; nearest training molecule Tanimoto 0.12 < 0.15"


@pytest.mark.parametrize("name, sep", [("out.csv.gz", ","), ("out.tsv", "\t"), ("OUT.TSV.GZ", "\t"), ("plain", ",")])
def test_the_output_name_chooses_csv_or_tsv_gzipped_or_not(tmp_path: Path, name: str, sep: str):
    out = tmp_path / name
    with PredictionWriter(out, ["tpsa"], ensemble=False) as writer:
        writer.write(chunk(1, 3))
    assert leftovers(tmp_path) == [name]
    frame = pd.read_csv(out, sep=sep)  # pandas infers gzip from the name
    assert list(frame.columns) == ["id", "smiles", "tpsa", "error", "warning"] and frame["id"].tolist() == [
        "m1", "m2", "m3"]


@pytest.mark.parametrize("name", ["out.parquet", "out.xlsx", "out.npz"])
def test_an_output_name_of_another_format_is_refused_before_anything_is_written(tmp_path: Path, name: str):
    with pytest.raises(OutputPathError, match=rf"--out .*{name}: predictions are written as CSV or TSV"):
        PredictionWriter(tmp_path / name, ["tpsa"], ensemble=False)
    with pytest.raises(OutputPathError, match=r"embeddings are written as a NumPy \.npz archive"):
        EmbeddingWriter(tmp_path / "emb.csv", 4, "m")
    assert leftovers(tmp_path) == []


def test_csv_abort_on_exception_leaves_nothing(tmp_path: Path):
    out = tmp_path / "out.csv"
    out.write_text("previous result\n")
    with pytest.raises(RuntimeError):
        with PredictionWriter(out, ["tpsa"], ensemble=False) as writer:
            writer.write(chunk(1, 3))
            raise RuntimeError("killed")
    assert leftovers(tmp_path) == ["out.csv"]
    assert out.read_text() == "previous result\n"


def test_csv_ensemble_columns_and_stdout():
    stream = io.StringIO()
    with PredictionWriter("-", ["a", "error"], ensemble=True, stdout=stream) as writer:
        writer.write(chunk(1, 2, width=2, std=True))
    frame = pd.read_csv(io.StringIO(stream.getvalue()))
    assert list(frame.columns) == ["id", "smiles", "a", "a_std", "error_pred", "error_pred_std", "error", "warning"]
    assert frame["a_std"].tolist() == [0.25, 0.25]


def test_check_output_path(tmp_path: Path):
    src = tmp_path / "in.smi"
    src.write_text("CCO\n")
    with pytest.raises(OutputPathError, match="input file itself"):
        check_output_path(src, src)
    with pytest.raises(OutputPathError, match="input file itself"):
        check_output_path(tmp_path / "." / "in.smi", src)
    with pytest.raises(OutputPathError, match="folder"):
        check_output_path(tmp_path, src)
    check_output_path(tmp_path / "new.csv", src)
    check_output_path("-", src)


def test_npz_round_trip_streams_unicode(tmp_path: Path):
    out = tmp_path / "emb.npz"
    first, second = chunk(1, 3, width=4), chunk(4, 2, width=4, warned=True)
    first.records[1] = Record(2, 2, "Ünïcødé-名前", "CCO")
    with EmbeddingWriter(out, dim=4, model="tpsa-nci-small") as writer:
        writer.write(first)
        writer.write(second)
        assert not out.exists()
    assert leftovers(tmp_path) == ["emb.npz"]
    with np.load(out) as npz:
        assert sorted(npz.files) == ["embeddings", "errors", "ids", "model", "ok", "smiles", "warnings"]
        emb = npz["embeddings"]
        assert emb.dtype == np.float32 and emb.shape == (5, 4)
        np.testing.assert_array_equal(emb[1:3], first.values[1:].astype(np.float32))
        assert np.isnan(emb[0]).all() and np.isnan(emb[3]).all()
        assert npz["ids"].tolist() == ["m1", "Ünïcødé-名前", "m3", "m4", "m5"]
        assert npz["smiles"].tolist() == ["C", "CC", "CCC", "C", "CC"]  # the chunk's output SMILES
        assert npz["errors"].tolist()[0] == "bad, thing" and npz["errors"].tolist()[1] == ""
        assert npz["ok"].tolist() == [False, True, True, False, True]
        assert npz["warnings"].tolist() == ["", "", "", "", "not seen in training: element U; nearest training "
                                                            "molecule Tanimoto 0.12 < 0.15"]
        assert str(npz["model"]) == "tpsa-nci-small"


def test_npz_abort_and_stdout_refused(tmp_path: Path):
    out = tmp_path / "emb.npz"
    with pytest.raises(KeyboardInterrupt):
        with EmbeddingWriter(out, dim=1, model="m") as writer:
            writer.write(chunk(1, 2))
            raise KeyboardInterrupt
    assert leftovers(tmp_path) == []
    with pytest.raises(OutputPathError):
        EmbeddingWriter("-", dim=1, model="m")
