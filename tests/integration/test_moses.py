"""``load_dataset("moses")`` and ``moses_smiles`` on the real staged copy, and the download
path against a local HTTP server (the real published files, and a damaged one)."""
from __future__ import annotations

import csv
import functools
import gzip
import hashlib
import http.server
import itertools
import shutil
import threading
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest
import torch

from molsepnorm.data import load_dataset
from molsepnorm.data.collate import GraphCollator
from molsepnorm.data.lazy import LazyGraphs, SmilesColumn
from molsepnorm.data.moses import FILES, PART_OF_SPLIT, moses_smiles, read_split
from molsepnorm.errors import DatasetFormatError, DatasetNotFoundError, InvalidMoleculeError, MolsepnormError


def first_rows(path: Path, n: int) -> list[str]:
    """The first ``n`` SMILES of a MOSES file, read independently with the csv module."""
    with gzip.open(path, "rt", encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        return [row["SMILES"] for row in itertools.islice(reader, n)]


def test_moses_limit_reads_the_staged_files(data_root: Path, assert_data_root_untouched) -> None:
    splits = load_dataset("moses", root=data_root, limit=40)
    assert splits.sizes == {"train": 40, "val": 40, "test": 40}
    assert splits.task == "unlabelled" and not splits.labelled
    assert splits.target_names == [] and splits.metric is None and splits.cache_dir is None
    with pytest.raises(MolsepnormError, match="unlabelled"):
        splits.higher_is_better
    for part, split in PART_OF_SPLIT.items():  # val is MOSES's test, test its scaffold test set
        expected = first_rows(data_root / "moses" / FILES[split].name, 40)
        assert list(splits[part].smiles) == expected
        assert [splits.smiles[i] for i in splits.split_indices[part]] == expected
    assert np.array_equal(np.concatenate([splits.split_indices[p] for p in ("train", "val", "test")]), np.arange(120))

    graph = splits.train[3]  # featurized on access, with the Graphormer encodings and no target
    n = int(graph.num_nodes)
    assert graph.smiles == splits.train.smiles[3] and graph.x.shape == (n, 9)
    assert graph.spd.numel() == n * n and getattr(graph, "y", None) is None
    batch = GraphCollator(multi_hop_max_dist=3)([splits.val[i] for i in range(8)])
    assert batch.y is None and batch.num_graphs == 8
    assert torch.equal(batch.num_nodes, torch.tensor([int(splits.val[i].num_nodes) for i in range(8)]))


def test_moses_full_split_sizes_are_the_published_counts(data_root: Path) -> None:
    splits = load_dataset("moses", root=data_root)
    assert splits.sizes == {part: FILES[split].rows for part, split in PART_OF_SPLIT.items()}
    last = first_rows(data_root / "moses" / "test_scaffolds.csv.gz", FILES["test_scaffolds"].rows)[-1]
    assert splits.test.smiles[-1] == last and splits.test.smiles.line(len(splits.test) - 1) == 176_226
    assert splits.info["smiles_mib"] < 150  # compact: no Python string per molecule


def test_moses_smiles_streams_a_split_in_file_order(data_root: Path) -> None:
    stream = moses_smiles("test_scaffolds", root=data_root)
    assert isinstance(stream, Iterator)
    head = list(itertools.islice(stream, 500))
    assert head == first_rows(data_root / "moses" / "test_scaffolds.csv.gz", 500)
    assert list(moses_smiles("train", root=data_root, limit=3)) == first_rows(data_root / "moses" / "train.csv.gz", 3)
    with pytest.raises(ValueError, match="test_scaffolds"):
        next(moses_smiles("val", root=data_root))
    with pytest.raises(ValueError, match="positive integer"):
        next(moses_smiles("test", root=data_root, limit=0))


def test_moses_bad_rows_are_named_with_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "train.csv.gz"
    path.write_bytes(gzip.compress(b"SMILES\r\nCCO\r\nC1CC\r\nc1ccccc1\r\n"))
    graphs = LazyGraphs(read_split(path))
    assert list(graphs.smiles) == ["CCO", "C1CC", "c1ccccc1"]
    assert int(graphs[2].num_nodes) == 6
    with pytest.raises(InvalidMoleculeError, match=rf"{path}, row 3: invalid molecule 'C1CC'.*unclosed ring"):
        graphs[1]
    with pytest.raises(InvalidMoleculeError, match="row 3"):
        graphs[-2]

    path.write_bytes(gzip.compress(b"SMILES\nCCO\n\nCCN\n"))
    with pytest.raises(DatasetFormatError, match=rf"{path}, row 3: blank line"):
        read_split(path)
    with pytest.raises(DatasetFormatError, match="row 3: blank line"):
        SmilesColumn.from_lines(b"CCO\nCCN\n\n", str(path), first_line=1)
    path.write_bytes(gzip.compress(b"SMILES,SPLIT\nCCO,train\n"))
    with pytest.raises(DatasetFormatError, match=r"row 1: expected the header 'SMILES'"):
        read_split(path)


class _QuietFiles(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def serve(tmp_path: Path):
    """``serve(folder)`` -> the URL of a local HTTP server of that folder (stopped after the test)."""
    servers = []

    def start(folder: Path) -> str:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietFiles, directory=str(folder)))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_port}/moses/dataset/data/"

    yield start
    for server in servers:
        server.shutdown()


def test_missing_moses_is_downloaded_and_verified(tmp_path: Path, data_root: Path, serve) -> None:
    """The real download code fetches the published files (served from the staged copy)."""
    served = tmp_path / "served" / "moses" / "dataset" / "data"
    served.mkdir(parents=True)
    for spec in FILES.values():
        shutil.copyfile(data_root / "moses" / spec.name, served / spec.name)
    url = serve(tmp_path / "served")
    root = tmp_path / "root"
    root.mkdir()
    splits = load_dataset("moses", root=root, limit=25, url=url)
    assert [p.name for p in root.iterdir()] == ["moses"]  # no scratch folder or .part file left
    assert sorted(p.name for p in (root / "moses").iterdir()) == sorted(f.name for f in FILES.values())
    for spec in FILES.values():
        assert hashlib.sha256((root / "moses" / spec.name).read_bytes()).hexdigest() == spec.sha256
    assert list(splits.val.smiles) == first_rows(data_root / "moses" / "test.csv.gz", 25)


def test_a_download_that_fails_its_checksum_leaves_nothing(tmp_path: Path, serve) -> None:
    served = tmp_path / "served" / "moses" / "dataset" / "data"
    served.mkdir(parents=True)
    for spec in FILES.values():  # right names, wrong content
        (served / spec.name).write_bytes(gzip.compress(b"SMILES\nCCO\n"))
    url = serve(tmp_path / "served")
    root = tmp_path / "root"
    root.mkdir()
    with pytest.raises(DatasetNotFoundError, match=r"downloading it failed.*train\.csv\.gz: got \d+ bytes with "
                                                   r"sha256 [0-9a-f]{64}, expected 10,238,967 bytes"):
        load_dataset("moses", root=root, url=url)
    assert list(root.iterdir()) == []


def test_moses_without_files_and_downloads_off_says_where_to_get_them(tmp_path: Path) -> None:
    with pytest.raises(DatasetNotFoundError, match=r"MOSES not found.*download=False.*media\.githubusercontent\.com/"
                                                   r"media/molecularsets/moses/master/moses/dataset/data/.*molsets"):
        load_dataset("moses", root=tmp_path, download=False)


def test_training_on_moses_is_refused_with_the_reason(tmp_path: Path, data_root: Path) -> None:
    from click.testing import CliRunner

    from molsepnorm.cli.train import train

    result = CliRunner().invoke(train, ["--dataset", "moses", "--data-root", str(data_root), "--epochs", "1",
                                        "--out", str(tmp_path / "run")])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "'moses' is unlabelled (it has no targets)" in result.output


def test_prepare_moses_has_nothing_to_cache(data_root: Path) -> None:
    from click.testing import CliRunner

    from molsepnorm.cli.prepare import prepare

    result = CliRunner().invoke(prepare, ["--dataset", "moses", "--data-root", str(data_root)])
    assert result.exit_code == 0, result.output
    assert "moses: unlabelled, targets none" in result.output and "train 1,584,663" in result.output
    assert "nothing to prepare: its graphs are featurized when read" in result.output
