"""End to end: files of every format through ``predict_file`` / ``embed_file`` with the bundled model."""
from __future__ import annotations

import gzip
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from rdkit import Chem

from molsepnorm.errors import InvalidMoleculeError
from molsepnorm.predict import Predictor, embed_file, predict_file
from molsepnorm.chem.readers import Record

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "data" / "examples"
VALID = ["CC(=O)Oc1ccccc1C(=O)O", "CN1C=NC2=C1C(=O)N(C(=O)N2C)C", "CCO", "c1ccc2ccccc2c1", "[Na+].[Cl-]"]
INVALID = {"C1CC": "unclosed ring", "CN(C)(C)(C)C": "valence", "c1cccc1": "kekulize", "C[Xx]C": "parse error"}


@pytest.fixture(scope="module")
def predictor() -> Predictor:
    return Predictor.load("tpsa-nci-small")


def nci_smiles(n: int) -> list[str]:
    from rdkit import RDConfig

    path = Path(RDConfig.RDDataDir) / "NCI" / "first_5K.smi"
    return [line.split()[0] for line in path.read_text().splitlines()[:n]]


def test_mixed_file_one_row_per_record(predictor: Predictor, tmp_path: Path):
    lines, expected = [], []
    for i, smiles in enumerate(VALID + list(INVALID)):
        lines.append(f"{smiles} mol{i}")
        if i % 3 == 0:
            lines.append("")  # blank lines are not records
        expected.append((f"mol{i}", smiles))
    src = tmp_path / "mixed.smi"
    src.write_bytes(("\r\n".join(lines) + "\r\n").encode())  # Windows line endings
    summary = predict_file(predictor, src, preview_rows=3)
    frame = pd.read_csv(tmp_path / "mixed.predictions.csv")
    assert list(zip(frame["id"], frame["smiles"])) == expected
    assert (summary.ok, summary.failed) == (len(VALID), len(INVALID))
    for smiles, reason in INVALID.items():
        error = frame.loc[frame["smiles"] == smiles, "error"].item()
        assert reason in error.lower() or reason in error
    assert frame["tpsa"].notna().sum() == len(VALID)
    api = predictor.predict(VALID)["tpsa"].to_numpy()
    np.testing.assert_allclose(frame["tpsa"][: len(VALID)], api, rtol=1e-6, atol=1e-4)  # the CLI is the API
    assert len(summary.preview) == 3


def test_every_format_gives_the_same_predictions(predictor: Predictor, tmp_path: Path):
    names = [f"m{i}" for i in range(len(VALID))]
    (tmp_path / "a.smi").write_text("".join(f"{s} {n}\n" for s, n in zip(VALID, names)))
    pd.DataFrame({"name": names, "SMILES": VALID}).to_csv(tmp_path / "a.csv", index=False)
    pd.DataFrame({"ID": names, "smiles": VALID}).to_csv(tmp_path / "b.tsv", sep="\t", index=False)
    with gzip.open(tmp_path / "c.sdf.gz", "wt") as fh:
        for smiles, name in zip(VALID, names):
            mol = Chem.MolFromSmiles(smiles)
            mol.SetProp("_Name", name)
            fh.write(Chem.MolToMolBlock(mol) + "$$$$\n")
    results = {}
    for name in ("a.smi", "a.csv", "b.tsv", "c.sdf.gz"):
        predict_file(predictor, tmp_path / name, out=tmp_path / f"{name}.out.csv")
        results[name] = pd.read_csv(tmp_path / f"{name}.out.csv")
    for name, frame in results.items():
        assert frame["id"].tolist() == names, name
        np.testing.assert_allclose(frame["tpsa"], results["a.smi"]["tpsa"], atol=1e-4, err_msg=name)
    assert results["c.sdf.gz"]["smiles"][1] == "Cn1c(=O)c2c(ncn2C)n(C)c1=O"  # RDKit's SMILES for SDF


def test_example_files(predictor: Predictor, tmp_path: Path):
    for name in ("molecules.smi", "molecules.csv", "molecules.sdf"):
        summary = predict_file(predictor, EXAMPLES / name, out=tmp_path / f"{name}.csv")
        frame = pd.read_csv(tmp_path / f"{name}.csv")
        assert summary.ok >= 15 and summary.failed >= 3, name
        assert frame.loc[frame["id"] == "aspirin", "tpsa"].item() == pytest.approx(63.6, abs=8)


def test_streaming_reads_no_further_than_one_chunk(predictor: Predictor, tmp_path: Path, monkeypatch):
    pulled = []

    def records():
        for i, smiles in enumerate(nci_smiles(250)):
            pulled.append(i)
            yield Record(i + 1, i + 1, i + 1, smiles)

    seen = []
    for chunk in predictor.predict_records(records(), chunk_size=50):
        seen.append((len(chunk.records), len(pulled)))
    assert [n for n, _ in seen] == [50] * 5
    assert all(pulled_then <= (k + 1) * 50 for k, (_, pulled_then) in enumerate(seen))


def test_chunk_size_does_not_change_the_output(predictor: Predictor, tmp_path: Path):
    src = tmp_path / "nci.smi"
    src.write_text("\n".join(nci_smiles(300)) + "\nnot_a_smiles\n")
    predict_file(predictor, src, out=tmp_path / "one.csv", chunk_size=10_000)
    predict_file(predictor, src, out=tmp_path / "many.csv", chunk_size=7)
    one, many = pd.read_csv(tmp_path / "one.csv"), pd.read_csv(tmp_path / "many.csv")
    assert one["id"].tolist() == many["id"].tolist() == list(range(1, 302))
    np.testing.assert_allclose(one["tpsa"], many["tpsa"], atol=1e-4, equal_nan=True)


def test_strict_names_file_row_and_reason_and_leaves_no_output(predictor: Predictor, tmp_path: Path):
    src = tmp_path / "s.smi"
    src.write_text("CCO\n\nCCN\nC1CC bad\nCCC\n")
    with pytest.raises(InvalidMoleculeError) as info:
        predict_file(predictor, src, strict=True)
    assert info.value.row == 4 and info.value.source == str(src)
    assert f"{src}, row 4" in str(info.value) and "unclosed ring" in str(info.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.smi"]


def test_failure_mid_run_leaves_no_partial_output(predictor: Predictor, tmp_path: Path, monkeypatch):
    src = tmp_path / "m.smi"
    src.write_text("\n".join(nci_smiles(60)))
    original = Predictor._run_chunk
    calls = []

    def dying(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise MemoryError("simulated")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Predictor, "_run_chunk", dying)
    with pytest.raises(MemoryError):
        predict_file(predictor, src, chunk_size=20)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.smi"]


def wait_for_partial_output(folder: Path, proc: subprocess.Popen, timeout: float) -> None:
    """Return once ``proc`` is writing rows into a temporary ``.part`` file in ``folder``."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        parts = [p for p in folder.iterdir() if p.name.endswith(".part")]
        if parts and parts[0].stat().st_size > 0:
            return
        assert proc.poll() is None, "finished before it could be stopped"
        time.sleep(0.05)
    pytest.fail("no partial output appeared")


def test_killed_process_leaves_no_file_posing_as_output(tmp_path: Path):
    src = tmp_path / "big.smi"
    src.write_text("\n".join(nci_smiles(4000) * 3))
    out = tmp_path / "big.predictions.csv"
    code = ("import sys, torch; torch.set_num_threads(1); from molsepnorm.cli.predict import predict; "
            "predict(sys.argv[1:])")
    proc = subprocess.Popen([sys.executable, "-c", code, str(src), "--chunk-size", "300", "--threads", "1",
                             "--no-progress"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_partial_output(tmp_path, proc, 60)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not out.exists()
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != "big.smi"]
    assert leftovers and all(name.startswith(".big.predictions.csv.") and name.endswith(".part")
                             for name in leftovers)


@pytest.mark.parametrize("signum, status, name", [(signal.SIGTERM, 143, "SIGTERM"), (signal.SIGINT, 130, "Ctrl-C")])
def test_sigterm_or_ctrl_c_stops_predict_with_a_note_and_removes_its_partial_output(tmp_path: Path, signum, status,
                                                                                     name):
    """``kill`` (SIGTERM: a batch system's time limit) and Ctrl-C end the command as an
    exception would: the temporary output is removed, a note says why, and the status is
    128 + the signal's number.  SIGKILL, above, cannot be caught; SIGTERM left the same
    half-written file, silently, and Ctrl-C printed "Aborted!" with status 1."""
    src = tmp_path / "big.smi"
    src.write_text("\n".join(nci_smiles(4000) * 3))
    proc = subprocess.Popen([sys.executable, "-m", "molsepnorm", "predict", str(src), "--chunk-size", "300",
                             "--threads", "1", "--workers", "0", "--no-progress", "--model", "tpsa-nci-small"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_partial_output(tmp_path, proc, 120)
        proc.send_signal(signum)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == status and f"stopped by {name}; nothing half-written is left" in stderr, stderr[-3000:]
    assert "Traceback" not in stderr and sorted(p.name for p in tmp_path.iterdir()) == ["big.smi"]


def test_embed_file(predictor: Predictor, tmp_path: Path):
    src = tmp_path / "e.smi"
    src.write_text("CCO a\nC1CC b\nc1ccccc1 c\n")
    summary = embed_file(predictor, src)
    assert (summary.ok, summary.failed) == (2, 1)
    with np.load(tmp_path / "e.embeddings.npz") as npz:
        emb = npz["embeddings"]
        assert emb.shape == (3, predictor.embedding_dim)
        np.testing.assert_allclose(emb[[0, 2]], predictor.embed(["CCO", "c1ccccc1"]), atol=1e-6)
        assert npz["ids"].tolist() == ["a", "b", "c"] and npz["smiles"].tolist() == ["CCO", "C1CC", "c1ccccc1"]


ORPHAN = r"""
import sys, time
from molsepnorm.predict.featurizing import featurized_chunks
from molsepnorm.chem.readers import Record

if __name__ == "__main__":  # spawned workers import this file too
    records = (Record(i + 1, i + 1, str(i + 1), "CCO") for i in range(10_000))
    chunks = featurized_chunks(records, "ogb", 50, workers=1)
    next(chunks)  # the worker is up and has featurized a chunk
    print("ready", flush=True)
    time.sleep(600)
"""


def _descendants(pid: int) -> set[int]:
    """Live (not zombie) processes below ``pid``, from /proc."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process table from /proc")
def test_featurizing_workers_end_when_their_parent_is_killed(tmp_path: Path):
    """SIGKILL (or the out-of-memory killer) leaves no time to shut the pool down; the
    workers notice their parent is gone and end instead of waiting for work forever."""
    script = tmp_path / "orphan.py"
    script.write_text(ORPHAN)
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout.readline().strip() == "ready"
        workers = _descendants(parent.pid)
        assert workers  # the featurizing worker (and multiprocessing's resource tracker)
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and workers & _descendants(1) - {parent.pid}:
        time.sleep(0.2)
    left = {pid for pid in workers if Path(f"/proc/{pid}/stat").exists()
            and Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"}
    for pid in left:  # leave no orphan behind, even when failing
        os.kill(pid, signal.SIGKILL)
    assert not left, f"worker processes outlived their killed parent: {sorted(left)}"


INTERRUPTED = r"""
import time
from molsepnorm.predict.featurizing import featurized_chunks
from molsepnorm.chem.readers import Record

if __name__ == "__main__":  # spawned workers import this file too
    records = (Record(i + 1, i + 1, str(i + 1), "CCO") for i in range(10_000))
    chunks = featurized_chunks(records, "ogb", 50, workers=1)
    next(chunks)
    try:
        print("ready", flush=True)
        time.sleep(600)
    except KeyboardInterrupt:
        chunks.close()
        print("stopped", flush=True)
"""


def test_ctrl_c_is_handled_by_the_parent_not_by_featurizing_workers(tmp_path: Path):
    """Ctrl-C reaches every process of the terminal's group.  The parent stops the command
    (and shuts its pool down); a worker printed its own ``KeyboardInterrupt`` traceback as
    well, after the parent's note that the command had stopped cleanly."""
    script = tmp_path / "interrupted.py"
    script.write_text(INTERRUPTED)
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True,  # a group of its own, as a terminal's job
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(1)  # the worker is idle, waiting for work (inside a task it would return the interrupt)
        os.killpg(proc.pid, signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0 and stdout.strip() == "stopped"
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr


def test_worker_processes_give_the_same_output(predictor: Predictor, tmp_path: Path):
    src = tmp_path / "w.smi"
    src.write_text("\n".join(nci_smiles(60) + ["C1CC", "", "CCO last"]) + "\n")
    predict_file(predictor, src, out=tmp_path / "inline.csv", chunk_size=25)
    summary = predict_file(predictor, src, out=tmp_path / "workers.csv", chunk_size=25, workers=1)
    assert (summary.ok, summary.failed) == (61, 1)
    assert (tmp_path / "inline.csv").read_bytes() == (tmp_path / "workers.csv").read_bytes()


def test_worker_processes_give_the_same_output_for_an_sdf_and_for_mols(predictor: Predictor, tmp_path: Path):
    """SDF records are read unsanitized; a Mol sent to a worker process loses what tells so
    (its property cache), and the worker featurized it unsanitized: other numbers, Kekulé
    SMILES and a 'misc hybridization' warning on every row.  Now the record says so."""
    from rdkit import Chem, RDConfig

    sdf = Path(RDConfig.RDDataDir) / "NCI" / "first_200.props.sdf"
    predict_file(predictor, sdf, out=tmp_path / "inline.csv", chunk_size=40)
    summary = predict_file(predictor, sdf, out=tmp_path / "workers.csv", chunk_size=40, workers=1)
    inline = (tmp_path / "inline.csv").read_text()
    assert summary.ok == 200 and inline == (tmp_path / "workers.csv").read_text()
    assert summary.warned < 10  # as inline: not a 'misc hybridization' warning on every row
    from molsepnorm.predict.featurizing import featurize_records, featurized_chunks
    from molsepnorm.predict.predictor import to_records

    for items in ([m for m in Chem.SDMolSupplier(str(sdf))][:30],  # sanitized Mols from the API
                  [m for m in Chem.SDMolSupplier(str(sdf), sanitize=False)][:30]):  # and unsanitized ones
        records = to_records(items, None)
        inline_graphs = [f.graph for f in featurize_records(records, "ogb")]
        worker_graphs = [f.graph for _, items in featurized_chunks(records, "ogb", 10, workers=1) for f in items]
        assert len(inline_graphs) == len(worker_graphs) == 30
        for a, b in zip(inline_graphs, worker_graphs):
            assert a.smiles == b.smiles and np.array_equal(a.x, b.x) and np.array_equal(a.edge_attr, b.edge_attr)
