"""The progress bar of predict / embed over a file."""
from __future__ import annotations

from pathlib import Path

from molsepnorm.chem.readers import RecordReader
from molsepnorm.predict.pipeline import RunSummary, _Progress


def test_the_progress_bar_counts_the_bytes_of_the_molecules_done_not_of_those_read_ahead(tmp_path: Path):
    path = tmp_path / "m.smi"
    path.write_text("CCO\n" * 100_000)  # 400 kB: the reader's buffer reads well ahead of the first records
    with RecordReader(path) as reader, _Progress(reader, enabled=True) as bar:
        records = iter(reader)
        read = [next(records) for _ in range(20_000)]
        summary = RunSummary(output="-", ok=10_000)  # half of what was read is predicted
        bar.update(summary)
        assert bar.bar.n == reader.bytes_read // 2 < reader.bytes_read
        summary.ok = len(read)
        bar.update(summary)
        assert bar.bar.n == reader.bytes_read

