"""The named data sets on the real staged data: zinc-subset, molhiv, nci-tpsa, and their failures.

Processed caches go to ``MOLSEPNORM_CACHE`` and are shared across tests and runs; the
first molhiv build takes about half a minute on two cores.
"""
from __future__ import annotations

import functools
import gzip
import http.server
import json
import os
import pickle
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from rdkit import Chem

from molsepnorm.data import load_dataset
from molsepnorm.data.cache import COMPLETE, build_once, cache_dir_for, is_complete, remove_cache
from molsepnorm.data.nci import read_tpsa_file, tpsa_file
from molsepnorm.errors import DatasetFormatError, DatasetNotFoundError

ENCODED = ("x", "edge_index", "edge_attr", "y", "degree", "spd", "path_next", "num_nodes")


def check_graph(data, feature_columns: int | None) -> None:
    for key in ENCODED:
        assert getattr(data, key, None) is not None, f"graph lacks {key}"
    n = int(data.num_nodes)
    assert data.x.shape[0] == n and (feature_columns is None or data.x.shape[1] == feature_columns)
    assert data.x.dtype == torch.long and data.edge_attr.dtype == torch.long
    assert data.y.dtype == torch.float32 and data.y.shape == (1, 1)
    assert data.degree.shape == (n,) and data.spd.dtype == torch.int16
    assert data.spd.numel() == n * n and data.path_next.numel() == n * n
    spd = data.spd.view(n, n)
    assert torch.all(spd.diagonal() == 0)
    src, dst = data.edge_index
    assert torch.all(spd[src, dst] == 1)  # every bond is one hop
    assert torch.equal(data.degree, torch.bincount(dst, minlength=n))


# --------------------------------------------------------------------------- zinc-subset


@pytest.fixture(scope="module")
def zinc(data_root: Path):
    return load_dataset("zinc-subset", root=data_root)


def test_zinc_subset(zinc, data_root: Path, assert_data_root_untouched) -> None:
    assert zinc.sizes == {"train": 10_000, "val": 1_000, "test": 1_000}
    assert zinc.task == "regression" and zinc.metric == "mae" and zinc.vocab == "zinc"
    assert zinc.source == data_root / "ZINC" / "raw"
    assert zinc.cache_dir.parent.parent == Path(os.environ["MOLSEPNORM_CACHE"])
    assert data_root not in zinc.cache_dir.parents
    assert np.array_equal(zinc.split_indices["val"], np.arange(10_000, 11_000))
    for split in ("train", "val", "test"):
        for i in (0, 1, len(zinc[split]) - 1):
            check_graph(zinc[split][i], feature_columns=1)
    assert abs(float(zinc.train[0].y) - 0.835036) < 1e-5  # first official train target (README)
    assert (zinc.cache_dir / "raw" / "train.pickle").is_symlink()


@pytest.mark.parametrize("split", ["val", "test"])
def test_zinc_subset_graphs_equal_the_raw_molecules(zinc, data_root: Path, split: str) -> None:
    raw = data_root / "ZINC" / "raw"
    with open(raw / f"{split}.pickle", "rb") as handle:
        mols = pickle.load(handle)
    index = [int(x) for x in (raw / f"{split}.index").read_text()[:-1].split(",")]
    for k in (0, 17, 500, len(index) - 1):
        mol, data = mols[index[k]], zinc[split][k]
        adj = mol["bond_type"].long()
        assert torch.equal(data.x.view(-1), mol["atom_type"].long())
        assert torch.equal(data.edge_index, adj.nonzero().t())
        assert torch.equal(data.edge_attr, adj[adj.nonzero(as_tuple=True)])
        assert torch.equal(data.y, mol["logP_SA_cycle_normalized"].float().view(1, 1))


def test_zinc_subset_second_load_hits_the_cache(zinc, data_root: Path, assert_data_root_untouched) -> None:
    processed = zinc.cache_dir / "subset" / "processed" / "train.pt"
    stamp = processed.stat().st_mtime_ns
    start = time.perf_counter()
    again = load_dataset("zinc-subset", root=data_root)
    assert time.perf_counter() - start < 10
    assert again.cache_dir == zinc.cache_dir and processed.stat().st_mtime_ns == stamp
    assert torch.equal(again.train[5].spd, zinc.train[5].spd)


def test_full_zinc_on_the_subset_layout_is_a_clear_error(data_root: Path, assert_data_root_untouched) -> None:
    with pytest.raises(DatasetFormatError) as info:
        load_dataset("zinc", root=data_root)
    message = str(info.value)
    assert "hold only the ZINC subset" in message and "None placeholders" in message
    assert "molecules.zip" in message and "dropbox.com" in message and "zinc-subset" in message


# --------------------------------------------------------------------------- molhiv


@pytest.fixture(scope="module")
def molhiv(data_root: Path):
    return load_dataset("molhiv", root=data_root)


def test_molhiv(molhiv, data_root: Path, assert_data_root_untouched) -> None:
    assert molhiv.sizes == {"train": 32_901, "val": 4_113, "test": 4_113}
    assert molhiv.task == "binary" and molhiv.metric == "rocauc" and molhiv.vocab == "ogb"
    assert molhiv.target_names == ["HIV_active"] and molhiv.source == data_root / "ogbg_molhiv"
    assert data_root not in molhiv.cache_dir.parents
    indices = molhiv.split_indices
    assert sum(len(v) for v in indices.values()) == 41_127
    assert len(np.unique(np.concatenate(list(indices.values())))) == 41_127
    for split in ("train", "val", "test"):
        for i in (0, 123, len(molhiv[split]) - 1):
            check_graph(molhiv[split][i], feature_columns=9)
    positives = {s: int(sum(float(d.y) for d in molhiv[s])) for s in ("val", "test")}
    assert positives == {"val": 81, "test": 130}  # README: 1,232 / 81 / 130
    assert len(molhiv.smiles) == 41_127  # indexed by OGB graph id, like split_indices
    for k in (0, 7, 4_000):
        graph_id = int(indices["test"][k])
        mol = Chem.MolFromSmiles(molhiv.smiles[graph_id])
        assert mol.GetNumAtoms() == int(molhiv.test[k].num_nodes)


def test_molhiv_evaluator(molhiv) -> None:
    y_true = np.array([[0], [1], [0], [1]], dtype=np.float32)
    y_pred = np.array([[0.1], [0.9], [0.8], [0.7]], dtype=np.float32)
    assert molhiv.evaluator.eval({"y_true": y_true, "y_pred": y_pred}) == {"rocauc": pytest.approx(0.75)}


def test_molhiv_second_load_hits_the_cache(molhiv, data_root: Path, assert_data_root_untouched) -> None:
    processed = molhiv.cache_dir / "ogbg_molhiv" / "processed" / "geometric_data_processed.pt"
    stamp = processed.stat().st_mtime_ns
    start = time.perf_counter()
    again = load_dataset("ogbg-molhiv", root=data_root)
    assert time.perf_counter() - start < 15
    assert again.cache_dir == molhiv.cache_dir and processed.stat().st_mtime_ns == stamp


def test_molhiv_missing_without_download(tmp_path: Path) -> None:
    with pytest.raises(DatasetNotFoundError) as info:
        load_dataset("molhiv", root=tmp_path, download=False)
    message = str(info.value)
    assert str(tmp_path / "ogbg_molhiv") in message and "RELEASE_v1.txt" in message and "raw/edge.csv.gz" in message
    assert "hiv.zip" in message
    assert list(tmp_path.iterdir()) == []


def test_missing_data_in_a_read_only_root(tmp_path: Path) -> None:
    """A read-only data root (mode 555, honoured even when running as root) is never written."""
    root = tmp_path / "readonly"
    root.mkdir()
    root.chmod(0o555)
    try:
        with pytest.raises(DatasetNotFoundError, match=r"ogbg_molhiv is missing .* is not writable.*hiv.zip"):
            load_dataset("molhiv", root=root)
        with pytest.raises(DatasetNotFoundError, match=r"ZINC/raw .* is not writable.*molecules.zip"):
            load_dataset("zinc-subset", root=root)
        assert list(root.iterdir()) == []
    finally:
        root.chmod(0o755)


def test_molhiv_missing_and_host_unreachable_fails_fast(tmp_path: Path, monkeypatch) -> None:
    # The real reachability check, pointed at a closed local port instead of snap.stanford.edu.
    monkeypatch.setattr("molsepnorm.data.molhiv.download_url_and_name", lambda: ("http://127.0.0.1:9/hiv.zip", "hiv"))
    start = time.perf_counter()
    with pytest.raises(DatasetNotFoundError, match=r"cannot be reached \(no network\?\)"):
        load_dataset("molhiv", root=tmp_path)
    assert time.perf_counter() - start < 10
    assert list(tmp_path.iterdir()) == []


def test_molhiv_failed_download_leaves_nothing(tmp_path: Path, monkeypatch) -> None:
    """A host that answers but has no file: ogb's real downloader fails, nothing is left behind."""

    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_error(404)

        def log_message(self, *args) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}/hiv.zip"
    monkeypatch.setattr("molsepnorm.data.molhiv.download_url_and_name", lambda: (url, "hiv"))
    try:
        with pytest.raises(DatasetNotFoundError, match=r"downloading it failed.*404"):
            load_dataset("molhiv", root=tmp_path)
    finally:
        server.shutdown()
    assert list(tmp_path.iterdir()) == []


def _tiny_ogb_hiv_zip(folder: Path, data_root: Path) -> tuple[Path, list[str]]:
    """``hiv.zip`` in OGB's layout holding 12 real molecules (OGB's own smiles2graph)."""
    import pandas as pd
    from ogb.utils import smiles2graph

    table, _ = read_tpsa_file(tpsa_file())
    smiles = table["smiles"].iloc[:12].tolist()
    graphs = [smiles2graph(s) for s in smiles]
    frames = {  # OGB stores each bond once: smiles2graph lists i->j then j->i
        "raw/node-feat.csv.gz": np.concatenate([g["node_feat"] for g in graphs]),
        "raw/edge.csv.gz": np.concatenate([g["edge_index"][:, ::2].T for g in graphs]),
        "raw/edge-feat.csv.gz": np.concatenate([g["edge_feat"][::2] for g in graphs]),
        "raw/num-node-list.csv.gz": np.array([[g["num_nodes"]] for g in graphs]),
        "raw/num-edge-list.csv.gz": np.array([[g["edge_index"].shape[1] // 2] for g in graphs]),
        "raw/graph-label.csv.gz": np.array([[i % 2] for i in range(12)]),
        "split/scaffold/train.csv.gz": np.arange(8)[:, None],
        "split/scaffold/valid.csv.gz": np.arange(8, 10)[:, None],
        "split/scaffold/test.csv.gz": np.arange(10, 12)[:, None],
    }
    archive = folder / "hiv.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for name, values in frames.items():
            zf.writestr(f"hiv/{name}", gzip.compress(pd.DataFrame(values).to_csv(header=False, index=False).encode()))
        zf.writestr("hiv/RELEASE_v1.txt", (data_root / "ogbg_molhiv" / "RELEASE_v1.txt").read_bytes())
        mapping = pd.DataFrame({"HIV_active": [i % 2 for i in range(12)], "smiles": smiles, "mol_id": ""})
        zf.writestr("hiv/mapping/mol.csv.gz", gzip.compress(mapping.to_csv(index=False).encode()))
    return archive, smiles


def test_missing_molhiv_is_downloaded_by_ogb_into_an_empty_writable_root(tmp_path: Path, data_root: Path,
                                                                         monkeypatch) -> None:
    """OGB's own downloader against a local server serving a 12-molecule hiv.zip."""
    served = tmp_path / "served"
    served.mkdir()
    _, smiles = _tiny_ogb_hiv_zip(served, data_root)
    handler = functools.partial(_QuietFiles, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}/hiv.zip"
    monkeypatch.setattr("molsepnorm.data.molhiv.download_url_and_name", lambda: (url, "hiv"))
    root = tmp_path / "root"
    root.mkdir()
    try:
        splits = load_dataset("molhiv", root=root)
    finally:
        server.shutdown()
    try:
        assert splits.sizes == {"train": 8, "val": 2, "test": 2}
        assert [p.name for p in root.iterdir()] == ["ogbg_molhiv"]  # no zip, no scratch folder left
        assert not (root / "ogbg_molhiv" / "processed").exists()  # processed only in the cache
        assert splits.smiles == smiles
        assert [float(d.y) for d in splits.test] == [0.0, 1.0]
        check_graph(splits.val[1], feature_columns=9)
    finally:
        remove_cache(splits.cache_dir)


class _QuietFiles(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def test_molhiv_partial_folder_is_never_downloaded_into(tmp_path: Path, data_root: Path) -> None:
    partial = tmp_path / "ogbg_molhiv"
    (partial / "raw").mkdir(parents=True)
    for name in ("edge.csv.gz", "node-feat.csv.gz", "edge-feat.csv.gz"):
        (partial / "raw" / name).symlink_to(data_root / "ogbg_molhiv" / "raw" / name)
    before = sorted(p.name for p in partial.rglob("*"))
    with pytest.raises(DatasetNotFoundError) as info:  # no RELEASE_v1.txt: ogb would prompt on input()
        load_dataset("molhiv", root=tmp_path)
    message = str(info.value)
    assert "holds part of ogbg-molhiv" in message and "Nothing is downloaded" in message
    missing = message.split("missing: ")[1].split(". Nothing")[0].split(", ")
    assert missing == ["RELEASE_v1.txt", "raw/num-node-list.csv.gz", "raw/num-edge-list.csv.gz",
                       "raw/graph-label.csv.gz", "split/scaffold/train.csv.gz", "split/scaffold/valid.csv.gz",
                       "split/scaffold/test.csv.gz"]
    assert sorted(p.name for p in partial.rglob("*")) == before


def test_zinc_missing_or_partial(tmp_path: Path, data_root: Path) -> None:
    with pytest.raises(DatasetNotFoundError, match=r"missing from .*ZINC/raw .*download=False.*molecules.zip"):
        load_dataset("zinc-subset", root=tmp_path, download=False)
    raw = tmp_path / "ZINC" / "raw"
    raw.mkdir(parents=True)
    (raw / "train.pickle").symlink_to(data_root / "ZINC" / "raw" / "train.pickle")
    with pytest.raises(DatasetNotFoundError) as info:
        load_dataset("zinc-subset", root=tmp_path)
    message = str(info.value)
    assert "holds part of ZINC's raw files" in message
    assert "val.pickle, test.pickle, train.index, val.index, test.index" in message
    assert [p.name for p in raw.iterdir()] == ["train.pickle"]


def test_unknown_names_and_options(data_root: Path) -> None:
    with pytest.raises(DatasetNotFoundError, match=r"unknown data set 'molhvi'. Did you mean 'molhiv'"):
        load_dataset("molhvi", root=data_root)
    with pytest.raises(DatasetNotFoundError, match=r"Known data sets: molhiv, moses, nci-tpsa, zinc, zinc-subset"):
        load_dataset("qm9", root=data_root)
    with pytest.raises(TypeError, match=r"'zinc-subset' does not take option\(s\) seed; it accepts: download, prog"):
        load_dataset("zinc-subset", root=data_root, seed=1)


# --------------------------------------------------------------------------- nci-tpsa


def test_nci_tpsa() -> None:
    table, lines = read_tpsa_file(tpsa_file())
    assert len(table) == 4_999 and lines[0] == 2  # line 1 is a comment
    with pytest.warns(UserWarning, match=r"8 row\(s\) left out") as caught:
        splits = load_dataset("nci-tpsa", progress=False)
    assert not [w for w in caught if "appear more than once" in str(w.message)]
    # 8 of 4,999 SMILES are rejected by today's RDKit (hypervalent Al, Be, Si, P, N, O):
    # recorded, never silently dropped.
    assert len(splits.skipped) == 8 and all("valence" in s.reason for s in splits.skipped)
    assert [s.row for s in splits.skipped] == [2099, 2899, 3228, 3371, 4510, 4597, 4598, 4782]
    assert splits.sizes == {"train": 3_993, "val": 499, "test": 499}
    assert splits.task == "regression" and splits.target_names == ["tpsa"] and splits.metric == "mae"
    # the file repeats molecules; the benchmark's split is kept, counted, and not warned about
    if "canonical" in json.loads((splits.cache_dir / "meta.json").read_text()):  # a cache built since they count
        assert splits.info["duplicates"] == {"molecules": 88, "rows": 187, "across_splits": 33}
    tpsa = table["tpsa"].astype(float).to_numpy()
    for split in ("train", "val", "test"):
        got = torch.cat([d.y for d in splits[split]]).view(-1).numpy()
        assert np.allclose(got, tpsa[splits.split_indices[split]], atol=1e-4)
        assert [d.smiles for d in splits[split]][:20] == table["smiles"].iloc[splits.split_indices[split][:20]].tolist()
    check_graph(splits.train[0], feature_columns=9)
    with pytest.warns(UserWarning, match=r"8 row\(s\) left out"):  # every load says so, not just the first
        other = load_dataset("nci-tpsa", seed=1, progress=False)
    assert other.cache_dir == splits.cache_dir
    assert not np.array_equal(other.split_indices["test"], splits.split_indices["test"])


def test_train_fraction_keeps_a_seeded_subset_of_train_only(data_root: Path) -> None:
    with pytest.warns(UserWarning):
        splits = load_dataset("nci-tpsa", progress=False)
    few = splits.with_train_fraction(0.1)
    assert len(few.train) == 399 and few.info["train_fraction"] == {"fraction": 0.1, "seed": 0, "kept": 399,
                                                                    "of": 3_993}
    assert few.val is splits.val and few.test is splits.test
    kept = few.split_indices["train"]
    assert set(kept) <= set(splits.split_indices["train"]) and list(kept) == sorted(kept, key=list(
        splits.split_indices["train"]).index)  # the original order
    position = list(splits.split_indices["train"]).index(kept[5])
    assert torch.equal(few.train[5].y, splits.train[position].y) and few.train[5].smiles == splits.train[position].smiles
    assert np.array_equal(splits.with_train_fraction(0.1).split_indices["train"], kept)  # seeded
    assert not np.array_equal(splits.with_train_fraction(0.1, seed=1).split_indices["train"], kept)
    assert splits.with_train_fraction(1.0) is splits
    assert len(splits.with_train_fraction(1e-6).train) == 1
    with pytest.raises(ValueError, match="train_fraction must be in"):
        splits.with_train_fraction(0)


def test_to_frame_is_the_split_data_set_as_a_table_in_file_order(data_root: Path) -> None:
    table, _ = read_tpsa_file(tpsa_file())
    with pytest.warns(UserWarning):
        splits = load_dataset("nci-tpsa", progress=False)
    frame = splits.to_frame()
    assert list(frame.columns) == ["smiles", "tpsa", "split"] and len(frame) == 4_991  # 4,999 less the 8 skipped
    assert list(frame.index) == sorted(frame.index) and not set(frame.index) & {s.row - 2 for s in splits.skipped}
    assert frame["split"].value_counts().to_dict() == {"train": 3_993, "val": 499, "test": 499}
    for part in ("train", "val", "test"):
        assert frame.index[frame["split"] == part].tolist() == sorted(splits.split_indices[part].tolist())
    assert frame["smiles"].tolist() == table["smiles"].iloc[frame.index].tolist()
    np.testing.assert_allclose(frame["tpsa"], table["tpsa"].astype(float).iloc[frame.index], atol=1e-4)
    few = splits.with_train_fraction(0.1).to_frame()  # the training rows left out are not in it
    assert (few["split"] == "train").sum() == 399 and len(few) == 399 + 499 + 499
    assert few.loc[few.index[few["split"] == "test"]].equals(frame.loc[frame.index[frame["split"] == "test"]])


# --------------------------------------------------------------------------- cache safety


def test_crashed_build_leaves_no_complete_cache() -> None:
    key = f"test-crash-{os.getpid()}-{time.time_ns()}"

    def crash(tmp: Path) -> dict:
        (tmp / "data.pt").write_bytes(b"half written")
        raise RuntimeError("killed mid-build")

    with pytest.raises(RuntimeError, match="killed mid-build"):
        build_once(key, crash, "a crashing build")
    final = cache_dir_for(key)
    assert not final.exists() and not list(final.parent.glob(f".{key}.building-*"))

    final.mkdir()  # what a hard kill of an old version could leave: files, no marker
    (final / "data.pt").write_bytes(b"stale")
    built = build_once(key, lambda tmp: (tmp / "data.pt").write_bytes(b"good") and None, "a good build")
    assert is_complete(built) and (built / "data.pt").read_bytes() == b"good"
    assert json.loads((built / COMPLETE).read_text())["key"] == key
    remove_cache(built)


_RACER = """
import sys, time
from pathlib import Path
from molsepnorm.data.cache import build_once
key, counter, start_at = sys.argv[1], Path(sys.argv[2]), float(sys.argv[3])

def build(tmp):
    with open(counter, "a") as handle:
        handle.write("built\\n")
    time.sleep(1.5)  # a slow build: the other process arrives while it runs
    (tmp / "data.pt").write_text("payload")

time.sleep(max(0.0, start_at - time.time()))
print(build_once(key, build, "a raced build"))
"""


def test_two_processes_build_one_cache(tmp_path: Path) -> None:
    key = f"test-race-{os.getpid()}-{time.time_ns()}"
    counter = tmp_path / "builds.txt"
    start_at = time.time() + 2.0  # both interpreters are up by then
    procs = [subprocess.Popen([sys.executable, "-c", _RACER, key, str(counter), str(start_at)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        outputs.append(out.strip())
    assert counter.read_text().splitlines() == ["built"], "the cache was built twice"
    assert outputs[0] == outputs[1] == str(cache_dir_for(key))
    assert is_complete(cache_dir_for(key)) and (cache_dir_for(key) / "data.pt").read_text() == "payload"
    remove_cache(cache_dir_for(key))


_WORKER = """
import json, logging, sys
notes = []
class Keep(logging.Handler):
    def emit(self, record):
        notes.append(record.getMessage())
logging.getLogger("molsepnorm.data").addHandler(Keep())
logging.getLogger("molsepnorm.data").setLevel(logging.INFO)
from molsepnorm.data import load_dataset
splits = load_dataset(sys.argv[1], progress=False)
print(json.dumps({"builds": sum(n.startswith("building") for n in notes), "cache": str(splits.cache_dir),
                  "train": splits.split_indices["train"].tolist()}))
"""


@pytest.mark.slow
def test_two_processes_load_one_new_csv(tmp_path: Path) -> None:
    """End to end: two interpreters featurize the same new CSV at once; one builds, both load it."""
    table, _ = read_tpsa_file(tpsa_file())
    path = tmp_path / "race.csv"
    rows = table.iloc[:300]
    offset = time.time_ns() % 1_000_000 / 1000.0  # new content each run, so the cache is built fresh
    path.write_text("smiles,tpsa\n" + "".join(f"{s},{float(t) + offset}\n" for s, t in zip(rows.smiles, rows.tpsa)))
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER, str(path)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert sum(r["builds"] for r in results) == 1
    assert results[0]["cache"] == results[1]["cache"] and results[0]["train"] == results[1]["train"]
    assert is_complete(Path(results[0]["cache"]))
    remove_cache(Path(results[0]["cache"]))


# ---------------------------------------------------- evaluate's per-molecule table on both


def test_evaluate_warns_molhiv_graphs_as_predict_warns_their_smiles(molhiv) -> None:
    """OGB's graphs keep no SMILES: evaluate takes each from the data set, so its warnings
    (similarity included) are predict's; the table's rows are the split's molecules."""
    import pandas as pd

    from molsepnorm.checkpoint import Checkpoint, distinct_domains, resolve_models
    from molsepnorm.inference.evaluate import applicability_warnings, evaluation_frame
    from molsepnorm.predict import Predictor

    assert not hasattr(molhiv.test[0], "smiles")
    domains = distinct_domains([Checkpoint.load(p) for p in resolve_models("hiv-activity")])
    graphs = [molhiv.test[i] for i in range(300)]
    smiles = molhiv.smiles_of("test")[:300]
    ours = applicability_warnings(domains, graphs, smiles, molhiv.vocab)
    frame = Predictor.load("hiv-activity").predict(smiles)
    # OGB featurized a few SMILES that today's RDKit refuses (hypervalent Al, DESIGN.md): predict gives
    # them an error row, evaluate still scores OGB's graph and checks it
    readable = frame["error"].isna().to_numpy()
    assert 0 < (~readable).sum() < 5 and all(ours[i] for i in np.flatnonzero(~readable))
    assert [w for w, ok in zip(ours, readable) if ok] == [None if pd.isna(w) else w  # a missing value: none
                                                           for w in frame["warning"][readable]]
    assert sum(bool(w) for w in ours) > 2
    import dataclasses

    strict = dataclasses.replace(domains[0], tanimoto_threshold=1.01)  # every molecule is compared, none reaches it
    assert all("Tanimoto" in w for w in applicability_warnings([strict], graphs[:20], smiles[:20], molhiv.vocab))
    y = np.array([[float(g.y)] for g in molhiv.test])
    frame = evaluation_frame(molhiv, "all", np.concatenate([np.full((len(molhiv.train) + len(molhiv.val), 1), np.nan), y]),
                             np.zeros((41_127, 1)), "binary")
    test_rows = frame[frame["split"] == "test"]
    assert test_rows["index"].tolist() == molhiv.split_indices["test"].tolist()
    assert test_rows["smiles"].tolist() == [molhiv.smiles[i] for i in molhiv.split_indices["test"]]
    assert test_rows["HIV_active_true"].to_numpy() == pytest.approx(y[:, 0])
    assert list(frame.columns) == ["split", "index", "smiles", "HIV_active_true", "HIV_active_pred"]


def test_a_zinc_graph_is_compared_by_similarity_through_its_rebuilt_molecule(zinc) -> None:
    """ZINC keeps no SMILES: the molecule for the fingerprint is rebuilt from the graph."""
    from molsepnorm.checkpoint import ApplicabilityDomain
    from molsepnorm.inference.evaluate import applicability_warnings

    assert zinc.smiles is None and zinc.smiles_of("test") is None
    strict = ApplicabilityDomain.from_graphs([zinc.train[i] for i in range(200)], "zinc", tanimoto_threshold=1.01)
    warned = applicability_warnings([strict], [zinc.test[i] for i in range(20)], None, "zinc")
    assert all("nearest training molecule Tanimoto" in w for w in warned)  # every molecule was compared


def test_a_pretrained_encoder_is_analyzed_on_its_corpus_and_refused_by_evaluate(molhiv, data_root: Path) -> None:
    """molhiv-encoder records its corpus reader's options, which molhiv's loader does not take."""
    from molsepnorm.checkpoint import Checkpoint, checkpoint_data, resolve_model
    from molsepnorm.errors import MolsepnormError
    from molsepnorm.inference import evaluate_checkpoint

    encoder = Checkpoint.load(resolve_model("molhiv-encoder"))
    assert encoder.data.dataset == "molhiv" and encoder.data.options  # {"limit": None}: pretrain's
    graphs, splits = checkpoint_data(encoder, None, "test", data_root=data_root, targets=False)
    assert len(graphs) == 4_113 and splits.indices("test").tolist() == molhiv.split_indices["test"].tolist()
    with pytest.raises(MolsepnormError, match="a pretrained encoder has no trained head"):
        evaluate_checkpoint("molhiv-encoder", data_root=data_root)
