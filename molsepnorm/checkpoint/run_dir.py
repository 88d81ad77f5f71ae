"""The run directory of one training run, and the summary table printed at its end.

Layout::

    RUN_DIR/
      config.yaml      resolved configuration (model / train / data): all that --resume needs
      split.json       the molecules of each split (indices into the full data set) + sizes
      metrics.jsonl    one JSON object per epoch (train loss, validation metrics, lr, speed)
      metrics.csv      the same rows as CSV
      train.log        the log
      best.pt          best-on-validation checkpoint (test metrics added at the end)
      last.pt          latest checkpoint, with optimizer / scheduler / RNG state, for --resume
      results.json     final validation and test metrics of the best checkpoint
      test_predictions.csv   each test molecule: id, SMILES, label, best.pt's prediction, error

Only rank 0 of a training run writes here; :mod:`molsepnorm.analysis` reads the metrics.
"""
from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence, Union

import numpy as np

from molsepnorm._atomic import atomic_write
from molsepnorm._json import jsonable
from molsepnorm.errors import MolsepnormError

PathLike = Union[str, os.PathLike]


class RunDirError(MolsepnormError, ValueError):
    """A run directory cannot be used (exists when starting, incomplete when resuming)."""


class RunDir:
    """Paths and writers of a run directory (see the module docstring)."""

    def __init__(self, path: PathLike) -> None:
        self.path = Path(path)

    config = property(lambda self: self.path / "config.yaml")
    split = property(lambda self: self.path / "split.json")
    metrics_jsonl = property(lambda self: self.path / "metrics.jsonl")
    metrics_csv = property(lambda self: self.path / "metrics.csv")
    log = property(lambda self: self.path / "train.log")
    best = property(lambda self: self.path / "best.pt")
    last = property(lambda self: self.path / "last.pt")
    results = property(lambda self: self.path / "results.json")
    test_predictions = property(lambda self: self.path / "test_predictions.csv")

    def create(self) -> None:
        """Make the directory for a new run; refuse one that already holds a run."""
        if self.last.exists() or self.metrics_jsonl.exists():
            raise RunDirError(
                f"{self.path} already holds a run; continue it (--resume {self.path}; in Python, "
                f"resume({str(self.path)!r})), or choose another run directory (--out; out=)"
            )
        self.path.mkdir(parents=True, exist_ok=True)

    def check_resumable(self) -> None:
        """Raise :class:`RunDirError` unless the directory has a config and a last checkpoint."""
        if not self.path.is_dir():
            raise RunDirError(f"cannot resume: run directory {self.path} does not exist")
        for needed in (self.config, self.last):
            if not needed.is_file():
                raise RunDirError(f"cannot resume {self.path}: {needed.name} is missing (was the run killed "
                                  "before training started?)")

    def remove_stale_temporaries(self) -> list[Path]:
        """Delete the ``*.tmp`` files a killed run left half-written; returns their paths.

        Every file of a run directory is written to ``<name>.tmp`` and renamed over
        ``<name>``, so a ``.tmp`` file is only ever a torn write, never the latest data.
        """
        stale = sorted(self.path.glob("*.tmp"))
        for path in stale:
            path.unlink(missing_ok=True)
        return stale

    # --- split ------------------------------------------------------------------------
    def write_split(self, split_indices: Mapping[str, np.ndarray], info: Optional[Mapping[str, Any]] = None) -> None:
        """The indices of each split, so the exact molecules of a run are on record."""
        payload = {"sizes": {k: int(len(v)) for k, v in split_indices.items()},
                   "indices": {k: np.asarray(v).astype(int).tolist() for k, v in split_indices.items()}}
        if info:
            payload["info"] = jsonable(dict(info))
        _write_text_atomic(self.split, json.dumps(payload))

    # --- metrics ----------------------------------------------------------------------
    def append_metrics(self, row: Mapping[str, Any]) -> None:
        """Append one epoch's row to ``metrics.jsonl`` and rewrite ``metrics.csv``."""
        with open(self.metrics_jsonl, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(jsonable(dict(row))) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        self._write_csv(self.read_metrics())

    def read_metrics(self) -> list[dict[str, Any]]:
        """The rows of ``metrics.jsonl`` (a torn last line, from a killed run, is ignored)."""
        if not self.metrics_jsonl.is_file():
            return []
        rows = []
        for line in self.metrics_jsonl.read_text(encoding="utf-8").splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return rows

    def truncate_metrics(self, last_epoch: int, key: str = "epoch") -> None:
        """Keep the rows whose ``key`` (the epoch; ``"step"`` for pretraining) is ``<= last_epoch``
        (on resume, drop rows written after the checkpoint)."""
        rows = [r for r in self.read_metrics() if int(r.get(key, 0)) <= last_epoch]
        _write_text_atomic(self.metrics_jsonl, "".join(json.dumps(r) + "\n" for r in rows))
        self._write_csv(rows)

    def _write_csv(self, rows: Sequence[Mapping[str, Any]]) -> None:
        keys: list[str] = []
        for row in rows:
            keys.extend(k for k in row if k not in keys)
        with atomic_write(self.metrics_csv, fixed_temporary=True, newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=keys)
            writer.writeheader()
            writer.writerows(rows)

    def write_results(self, results: Mapping[str, Any]) -> None:
        """``results.json``: the final metrics of the best checkpoint."""
        _write_text_atomic(self.results, json.dumps(jsonable(dict(results)), indent=2) + "\n")


def _write_text_atomic(path: Path, text: str) -> None:
    with atomic_write(path, fixed_temporary=True) as fh:
        fh.write(text)
