"""``nci-tpsa``: 4,999 NCI molecules with their topological polar surface area, from RDKit's wheel.

The file ``<rdkit.RDConfig.RDDataDir>/NCI/first_5k.tpsa.csv`` ships with every RDKit
install, so this data set never downloads.  Its first line is a ``#`` comment; every
other line is ``SMILES,TPSA`` without a header.  Lines are split at the *last* comma
(SMILES contain no commas) rather than read with a CSV reader's comment option, because
SMILES use ``#`` for triple bonds.

Regression on TPSA, featurized in the OGB vocabulary, seeded random split 80/10/10,
cached like a user CSV (keyed by the file's sha256).  The file repeats some molecules,
some of them with copies in two splits (counted in ``info["duplicates"]``; the figures are
in docs/reliability.md); the split is the benchmark's, on which every figure in docs/ was
measured, so it is kept, and loading does not warn about them as it does for a user's file.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from molsepnorm.data.cache import file_sha256
from molsepnorm.data.csv_dataset import load_table
from molsepnorm.data.registry import DatasetSplits, register_dataset
from molsepnorm.data.splits import DEFAULT_SIZES
from molsepnorm.errors import DatasetFormatError, DatasetNotFoundError


def tpsa_file() -> Path:
    """Path of RDKit's ``NCI/first_5k.tpsa.csv``."""
    from rdkit import RDConfig

    return Path(os.path.join(RDConfig.RDDataDir, "NCI", "first_5k.tpsa.csv"))


def read_tpsa_file(path: Path) -> tuple[pd.DataFrame, np.ndarray]:
    """``(table with string columns smiles, tpsa; line number of each row)``."""
    smiles: list[str] = []
    tpsa: list[str] = []
    lines: list[int] = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            text = line.strip()
            if not text or text.startswith("#"):
                continue
            head, comma, tail = text.rpartition(",")
            if not comma:
                raise DatasetFormatError(f"{path}, row {number}: expected 'SMILES,TPSA', got {text!r}")
            smiles.append(head)
            tpsa.append(tail)
            lines.append(number)
    return pd.DataFrame({"smiles": smiles, "tpsa": tpsa}), np.asarray(lines, dtype=np.int64)


@register_dataset("nci-tpsa", "nci")
def load_nci_tpsa(root: Path, seed: int = 0, sizes: Sequence[float] = DEFAULT_SIZES,
                  on_invalid: str = "skip", progress: Optional[bool] = None) -> DatasetSplits:
    """The 4,999 NCI molecules of RDKit's wheel, TPSA regression, random split (``seed``, ``sizes``)."""
    path = tpsa_file()
    if not path.is_file():
        raise DatasetNotFoundError(f"RDKit's NCI data file {path} is missing: is RDKit installed in full?")
    table, lines = read_tpsa_file(path)
    return load_table(table, name="nci-tpsa", source=path, content_sha256=file_sha256(path), lines=lines,
                      smiles_column="smiles", target_columns=["tpsa"], split="random", seed=seed, sizes=sizes,
                      vocab="ogb", task="regression", on_invalid=on_invalid, progress=progress,
                      warn_duplicates=False)
