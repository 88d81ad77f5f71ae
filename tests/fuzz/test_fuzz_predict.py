"""Fuzzing prediction: one output row per input record, in order, each predicted or with its reason.

The contract, checked on generated lists and files (``strategies.py``) through
``Predictor.predict``, ``predict_file`` (.smi / .csv / .sdf) and the ``molsepnorm predict``
command:

* nothing raises (but a file-level problem, e.g. a CSV without a SMILES column, which is
  an ``InputFormatError`` naming the file);
* exactly one row per input record, in input order, with the record's id;
* each row holds either a finite prediction and no error, or no prediction and a
  non-empty reason; ok + failed = records;
* no reason comes from the predictor's safety net (``could not featurize the molecule:
  <exception>``), which would mean the featurizer raised something unexpected.

The output CSV is read back with both the csv module and pandas, as users read it.
Fixed real-world failures (MoleculeNet HIV rows, valence, kekulization, salts, isotopes,
CRLF / CR line endings, a CSV without a SMILES column, an SDF with a broken record) are
parametrized at the end.
"""
from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any, Optional

import pandas as pd
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st
from rdkit import Chem, rdBase

from molsepnorm.predict import InputFormatError, predict_file
from molsepnorm.predict.pipeline import RunSummary

#: The prefix of a reason made from an exception the featurizer was not meant to raise.
SAFETY_NET = "could not featurize the molecule"
HIV_REJECTED_ROWS = (137, 987, 12882, 18293, 30784, 30785, 35728)


def check_row(value: Any, error: Any, where: str) -> bool:
    """True for a predicted row, False for a failed one; asserts it is one or the other."""
    failed = isinstance(error, str) and error != ""
    if failed:
        assert error.strip(), where
        assert not error.startswith(SAFETY_NET), f"{where}: unexpected exception: {error}"
        assert value is None or value == "" or (isinstance(value, float) and math.isnan(value)), where
    else:
        assert error is None or error == "" or (isinstance(error, float) and math.isnan(error)), where
        assert math.isfinite(float(value)), f"{where}: no prediction and no reason"
    return not failed


def check_frame(frame: pd.DataFrame, ids: list[Any], target: str = "tpsa") -> int:
    """Assert a ``Predictor.predict`` frame has one row per id, in order; the number predicted."""
    assert list(frame.columns) == ["id", "smiles", target, "error", "warning"]
    assert frame["id"].tolist() == ids
    return sum(check_row(v, e, f"row {i}") for i, (v, e) in enumerate(zip(frame[target], frame["error"])))


def check_output(path: Path, ids: Optional[list[str]], count: int, summary: RunSummary) -> int:
    """Assert the CSV at ``path`` has ``count`` rows (with ``ids``, in order) read by both
    the csv module and pandas, and agrees with ``summary``; the number predicted."""
    with open(path, newline="", encoding="utf-8") as handle:
        header, *rows = list(csv.reader(handle))
    assert header == ["id", "smiles", "tpsa", "error", "warning"]
    assert len(rows) == count, f"{len(rows)} rows for {count} records"
    if ids is not None:
        assert [row[0] for row in rows] == ids
    ok = sum(check_row(row[2], row[3], f"row {i + 1}: {row!r}") for i, row in enumerate(rows))
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    assert len(frame) == count and frame["id"].tolist() == [row[0] for row in rows]
    assert (summary.ok, summary.failed) == (ok, count - ok)
    return ok


def outcome_counts(tally: Any, ok: int, total: int, unit: str = "files") -> None:
    """Count one generated input (a file or a list) and how its records came out."""
    tally.counts[unit] += 1
    tally.add("predicted", ok)
    tally.add("rejected", total - ok)


# --- the Python API -----------------------------------------------------------------------------------


def _mol(text: str) -> Any:
    """The unsanitized Mol of ``text`` (as an SDF record would give it), or None."""
    with rdBase.BlockLogs():
        return Chem.MolFromSmiles(text, sanitize=False)


def test_predict_list(budget, fuzz, real_smiles, predictor, tally, run_property):
    """Lists of SMILES, Mols, None and NaN: one row each, with the given ids."""
    item = st.one_of(
        fuzz.any_smiles(real_smiles), fuzz.any_smiles(real_smiles), fuzz.any_smiles(real_smiles),
        st.none(), st.just(float("nan")),
        st.one_of(fuzz.token_smiles(), st.sampled_from(real_smiles)).map(_mol),
    )  # fmt: skip

    @given(st.lists(item, max_size=10))
    def prop(items: list[Any]) -> None:
        ids = [f"r{k}" for k in range(len(items))]
        frame = predictor.predict(items, ids=ids)
        ok = check_frame(frame, ids)
        for k, text in enumerate(items):
            if isinstance(text, str):
                assert frame["smiles"][k] == text.strip()
        outcome_counts(tally, ok, len(items), "lists")

    run_property(budget, prop, scale=0.5)


def test_zinc_model_names_what_is_outside_its_vocabulary(budget, fuzz, real_smiles, zinc_predictor, tally,
                                                        run_property):
    """A ZINC-vocabulary model: a valid molecule it cannot embed gets a row saying why
    (the atom, bond or charge that has no ZINC token), never a prediction."""
    from molsepnorm.chem import featurize
    from molsepnorm.errors import InvalidMoleculeError

    @given(st.lists(st.one_of(fuzz.token_smiles(), st.sampled_from(real_smiles), fuzz.mutated_smiles(real_smiles)),
                    min_size=1, max_size=8))
    def prop(items: list[str]) -> None:
        frame = zinc_predictor.predict(items)
        ok = check_frame(frame, list(range(1, len(items) + 1)), target="logp")
        for text, error in zip(items, frame["error"]):
            try:
                featurize(text, "ogb")
            except InvalidMoleculeError:
                continue  # not a valid molecule at all
            if isinstance(error, str):
                assert "zinc vocabulary" in error, (text, error)
                tally.counts["valid but outside the zinc vocabulary"] += 1
        outcome_counts(tally, ok, len(items), "lists")

    run_property(budget, prop, scale=0.5)


# --- files -------------------------------------------------------------------------------------------------


FILE_KINDS = {
    "smi": "``.smi`` files with names, blank lines, LF / CRLF / CR line endings, a BOM, non-UTF-8 lines",
    "bytes-as-smi": "any bytes at all named ``.smi``: one row per non-blank line",
    "csv": "CSV files with quoted fields holding commas, quotes, line breaks, NUL; rows too short",
    "sdf": "SDF files of real NCI records edited line by line: broken records keep their row",
}


@pytest.mark.parametrize("kind", list(FILE_KINDS))
def test_predict_fuzzed_files(budget, kind, fuzz, real_smiles, sdf_blocks, predictor, tmp_path, tally, run_property):
    """One output row per record, in order, ids kept (see :data:`FILE_KINDS`)."""
    strategy = {"smi": lambda: fuzz.smi_file(real_smiles), "bytes-as-smi": fuzz.raw_smi_file,
                "csv": lambda: fuzz.csv_file(real_smiles), "sdf": lambda: fuzz.sdf_file(sdf_blocks)}[kind]()

    @given(strategy)
    def prop(file: Any) -> None:
        src = file.write(tmp_path)
        summary = predict_file(predictor, src, out=tmp_path / "out.csv")
        ids = None if kind == "bytes-as-smi" else file.ids  # arbitrary bytes: ids are whatever the lines hold
        outcome_counts(tally, check_output(tmp_path / "out.csv", ids, file.count, summary), file.count)

    run_property(budget, prop, scale=0.3)


def test_cli_on_fuzzed_files(budget, fuzz, real_smiles, predictor, tmp_path, tally, run_property, monkeypatch):
    """``molsepnorm predict`` (in process, the bundled model loaded once): exit 0 when a record
    was predicted, else 1; the summary line counts every record; the preview prints."""
    import molsepnorm.cli.predict as cli

    monkeypatch.setattr(cli, "_load_predictor", lambda *args, **kwargs: predictor)

    @given(st.one_of(fuzz.smi_file(real_smiles), fuzz.csv_file(real_smiles)))
    def prop(file: Any) -> None:
        src = file.write(tmp_path)
        out = tmp_path / "cli.csv"
        result = CliRunner().invoke(cli.predict, [str(src), "--out", str(out), "--no-progress", "--preview", "5"])
        assert result.exception is None or isinstance(result.exception, SystemExit), result.output
        with open(out, newline="", encoding="utf-8") as handle:
            rows = list(csv.reader(handle))[1:]
        assert [row[0] for row in rows] == file.ids
        ok = sum(row[3] == "" for row in rows)
        assert result.exit_code == (0 if ok else 1), result.output
        assert f"ok {ok} / failed {file.count - ok} ({file.count} records)" in result.output
        outcome_counts(tally, ok, file.count)

    run_property(budget, prop, scale=0.1)


# --- fixed real failures ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hiv_rows(data_root) -> pd.DataFrame:
    return pd.read_csv(data_root / "sources" / "moleculenet" / "HIV.csv")


def test_hiv_rows_rdkit_rejects_through_a_csv(hiv_rows, predictor, tmp_path):
    """The seven HIV.csv SMILES today's RDKit rejects, among their neighbours, as a CSV:
    one row each, valence reasons for the seven, predictions for the others."""
    rows = sorted({r + d for r in HIV_REJECTED_ROWS for d in (-1, 0, 1)})
    src = tmp_path / "hiv.csv"
    hiv_rows.iloc[rows].assign(id=[f"hiv{r}" for r in rows]).to_csv(src, index=False)
    summary = predict_file(predictor, src)
    frame = pd.read_csv(tmp_path / "hiv.predictions.csv")
    assert frame["id"].tolist() == [f"hiv{r}" for r in rows]
    failed = frame.loc[frame["error"].notna(), "id"].tolist()
    assert failed == [f"hiv{r}" for r in HIV_REJECTED_ROWS]
    assert all("valence" in e.lower() for e in frame["error"].dropna())
    assert (summary.ok, summary.failed) == (len(rows) - 7, 7)


# (input, predicted?, part of the reason)
FIXED_CASES = [
    ("C(C)(C)(C)(C)C", False, "Explicit valence for atom # 0 C, 5"),
    ("c1cccc1", False, "Can't kekulize mol"),
    ("", False, "empty molecule"),
    ("   ", False, "empty molecule"),
    (None, False, "missing value"),
    ("C1CC", False, "unclosed ring"),
    ("CC(C", False, "extra open parentheses"),
    ("CC\uff2f", False, "not a SMILES character"),  # a full-width O: RDKit alone reads ethane
    ("C\x00C", False, "SMILES parse error"),
    ("\ud800", False, "not valid Unicode"),
    ("C" * 1000, True, None),  # 1,000 atoms
    ("O" + "CCO" * 200, True, None),  # 601-atom polyethylene glycol
    ("[Na+].[Cl-]", True, None),  # salts and mixtures
    ("CC(=O)[O-].[Na+]", True, None),
    ("CCO.c1ccccc1.O", True, None),
    ("[13CH4]", True, None),  # isotopes
    ("[2H]O[2H]", True, None),
    ("C[N+](C)(C)C.[O-]S(=O)(=O)C", True, None),  # charges
    ("[NH3+]CC(=O)[O-]", True, None),
    ("[Og]", True, None),  # OGB vocabulary: any element, odd values go to its "misc" bucket
    ("*", True, None),
    ("[C+30]", True, None),
]


def test_fixed_cases_one_row_each(predictor):
    items = [text for text, _, _ in FIXED_CASES]
    frame = predictor.predict(items)
    assert check_frame(frame, list(range(1, len(items) + 1))) == sum(ok for _, ok, _ in FIXED_CASES)
    for (text, ok, reason), error in zip(FIXED_CASES, frame["error"]):
        if ok:
            assert not isinstance(error, str), (text, error)
        else:
            assert reason in error, (text, error)


@pytest.mark.parametrize("eol", [b"\r\n", b"\r", b"\n"], ids=["crlf", "cr", "lf"])
def test_smi_line_endings_and_fixed_cases(eol, predictor, tmp_path):
    """A ``.smi`` of the fixed cases with Windows (and old Mac) line endings and blank lines."""
    lines, ids = [], []
    for k, (text, _, _) in enumerate(FIXED_CASES):
        if text is None or not text.strip() or "\x00" in text or "\ud800" in text:
            continue
        lines += [f"{text} case{k}".encode(), b""]
        ids.append(f"case{k}")
    src = tmp_path / "fixed.smi"
    src.write_bytes(eol.join(lines))
    summary = predict_file(predictor, src)
    ok = check_output(tmp_path / "fixed.predictions.csv", ids, len(ids), summary)
    assert ok == sum(ok for text, ok, _ in FIXED_CASES if text and text.strip() and "\x00" not in text
                     and "\ud800" not in text)


def test_cr_only_smi_keeps_every_molecule(predictor, tmp_path):
    """Regression (found by fuzzing): with ``\\r`` line endings the file was one record,
    ethanol, named "a\\rCCN b\\rCCC c"; the other molecules were silently lost."""
    src = tmp_path / "mac.smi"
    src.write_bytes(b"CCO a\rCCN b\r\rCCC c\r")
    summary = predict_file(predictor, src)
    frame = pd.read_csv(tmp_path / "mac.predictions.csv")
    assert frame["id"].tolist() == ["a", "b", "c"] and frame["smiles"].tolist() == ["CCO", "CCN", "CCC"]
    assert (summary.ok, summary.failed) == (3, 0)


def test_cr_only_sdf_keeps_every_record(predictor, tmp_path):
    """Regression: an SDF with ``\\r`` line endings was read as one record that RDKit could
    not read: one row with an error for two molecules."""
    text = "".join(Chem.MolToMolBlock(Chem.MolFromSmiles(s)) + "$$$$\n" for s in ("CCO", "CCN"))
    src = tmp_path / "mac.sdf"
    src.write_bytes(text.replace("\n", "\r").encode())
    summary = predict_file(predictor, src)
    assert check_output(tmp_path / "mac.predictions.csv", ["1", "2"], 2, summary) == 2


def test_carriage_return_in_an_id_stays_in_its_row(predictor, tmp_path):
    """Regression (found by fuzzing): an id or SMILES holding a lone ``\\r`` (a quoted CSV
    field) was written unquoted, and every CSV reader split the row in two."""
    src = tmp_path / "cr.csv"
    src.write_text('id,smiles\n"a\rb",CCO\nc,"C\rC"\n', newline="")
    summary = predict_file(predictor, src)
    out = tmp_path / "cr.predictions.csv"
    frame = pd.read_csv(out, dtype=str, keep_default_na=False)
    assert frame["id"].tolist() == ["a\rb", "c"]
    assert check_output(out, ["a\rb", "c"], 2, summary) == 1
    assert "whitespace inside the SMILES" in frame["error"][1]


def test_csv_without_a_smiles_column_is_a_file_error(predictor, tmp_path):
    src = tmp_path / "no_smiles.csv"
    src.write_text("name,structure\naspirin,CC(=O)Oc1ccccc1C(=O)O\n")
    with pytest.raises(InputFormatError) as info:
        predict_file(predictor, src)
    assert str(src) in str(info.value) and "no SMILES column" in str(info.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["no_smiles.csv"]  # no output file


def test_sdf_with_broken_records_among_good_ones(predictor, tmp_path):
    """A record RDKit cannot read and one it reads but cannot sanitize, between good ones:
    one row each, in order, with the reasons."""

    def block(mol: Chem.Mol, name: str) -> str:
        mol.SetProp("_Name", name)
        return Chem.MolToMolBlock(mol, kekulize=False) + "$$$$\n"

    broken = "broken\n  junk\n\n  2  1  0  0  0  0  0  0  0  0999 V2000\n    0.0 0.0 0.0 C   0  0\nM  END\n$$$$\n"
    text = (block(Chem.MolFromSmiles("CCO"), "ethanol") + broken
            + block(Chem.MolFromSmiles("CN(C)(C)(C)C", sanitize=False), "pentavalent")
            + block(Chem.MolFromSmiles("c1ccccc1O"), "phenol"))
    src = tmp_path / "mixed.sdf"
    src.write_text(text.replace("\n", "\r\n"), newline="")
    summary = predict_file(predictor, src)
    out = tmp_path / "mixed.predictions.csv"
    ids = ["ethanol", "broken", "pentavalent", "phenol"]
    assert check_output(out, ids, 4, summary) == 2
    frame = pd.read_csv(out)
    assert "RDKit cannot read the SDF record" in frame["error"][1]
    assert "Explicit valence for atom # 1 N, 5" in frame["error"][2]


def test_cli_with_the_bundled_model(real_smiles, tmp_path):
    """The real command, model loading included, on a file mixing every kind of input."""
    from molsepnorm.cli.predict import predict

    lines = [f"{s} real{k}" for k, s in enumerate(real_smiles[:20])]
    lines += [f"{text} case{k}" for k, (text, _, _) in enumerate(FIXED_CASES) if text and text.strip()
              and "\ud800" not in text]
    lines.insert(5, "")
    src = tmp_path / "mixed.smi"
    src.write_bytes("\r\n".join(lines).encode("utf-8"))
    result = CliRunner().invoke(predict, [str(src), "--threads", "1", "--no-progress"])
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(tmp_path / "mixed.predictions.csv")
    assert len(frame) == len(lines) - 1
    assert frame["id"].tolist() == [line.split()[-1] for line in lines if line]
    probabilities = frame["HIV_active"][frame["error"].isna()]  # the default model's output
    assert len(probabilities) >= 20 and ((probabilities > 0) & (probabilities < 1)).all()
    assert f"({len(lines) - 1} records)" in result.output
