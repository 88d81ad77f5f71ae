"""Train / val / test splits: seeded random, seeded balanced scaffold, and a user's column.

All functions return ``{"train", "val", "test"}`` -> sorted int64 index arrays that are
disjoint and together cover ``range(n)``.

Sizes are fractions ``(train, val, test)`` summing to 1; :func:`split_counts` turns them
into counts with ``val = round(f_val * n)``, ``test = round(f_test * n)`` and train the
rest, so 4,999 molecules at 80/10/10 give 3,999 / 500 / 500.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np
from rdkit import Chem
from rdkit.Chem.Scaffolds import MurckoScaffold

from molsepnorm.errors import DatasetFormatError

Sizes = tuple[float, float, float]
Split = dict[str, np.ndarray]
DEFAULT_SIZES: Sizes = (0.8, 0.1, 0.1)


def check_sizes(sizes: Sequence[float]) -> Sizes:
    """Validate ``(train, val, test)`` fractions: three numbers >= 0 that sum to 1."""
    values = tuple(float(s) for s in sizes)
    if len(values) != 3 or any(not math.isfinite(v) or v < 0 for v in values):
        raise ValueError(f"sizes must be three fractions (train, val, test) >= 0, got {tuple(sizes)}")
    if abs(sum(values) - 1.0) > 1e-6:
        raise ValueError(f"sizes must sum to 1, got {tuple(sizes)} (sum {sum(values):g})")
    return values  # type: ignore[return-value]


def split_counts(n: int, sizes: Sequence[float] = DEFAULT_SIZES) -> tuple[int, int, int]:
    """Target counts ``(train, val, test)`` for ``n`` molecules."""
    _, f_val, f_test = check_sizes(sizes)
    n_val = int(round(f_val * n))
    n_test = min(int(round(f_test * n)), n - n_val)
    return n - n_val - n_test, n_val, n_test


def _as_split(train: Sequence[int], val: Sequence[int], test: Sequence[int]) -> Split:
    return {name: np.sort(np.asarray(idx, dtype=np.int64)) for name, idx in
            (("train", train), ("val", val), ("test", test))}


def random_split(n: int, sizes: Sequence[float] = DEFAULT_SIZES, seed: int = 0) -> Split:
    """A seeded random permutation cut into :func:`split_counts` pieces."""
    n_train, n_val, _ = split_counts(n, sizes)
    perm = np.random.default_rng(seed).permutation(n)
    return _as_split(perm[:n_train], perm[n_train:n_train + n_val], perm[n_train + n_val:])


def murcko_scaffold(mol: Chem.Mol) -> str:
    """Bemis–Murcko scaffold SMILES of a molecule (``""`` for an acyclic one)."""
    return MurckoScaffold.MurckoScaffoldSmiles(mol=mol, includeChirality=False)


def scaffold_split(scaffolds: Sequence[str], sizes: Sequence[float] = DEFAULT_SIZES, seed: int = 0) -> Split:
    """Seeded balanced scaffold split: molecules sharing a scaffold never straddle splits.

    Molecules are grouped by scaffold (all acyclic molecules share the scaffold ``""``).
    Groups larger than half the val or the test target size are placed first, so that
    they land in train while it has room; the remaining groups follow.  Each of the two
    lists is shuffled with ``seed``.  Groups are then assigned greedily: to train if it
    stays within its target count, else to val if it stays within its count, else to
    test.  Because groups are never cut, val and test sizes are approximate; test takes
    what is left over.
    """
    n = len(scaffolds)
    n_train, n_val, n_test = split_counts(n, sizes)
    groups: dict[str, list[int]] = {}
    for index, scaffold in enumerate(scaffolds):
        groups.setdefault(scaffold, []).append(index)
    sets = list(groups.values())
    big = [s for s in sets if len(s) > n_val / 2 or len(s) > n_test / 2]
    small = [s for s in sets if not (len(s) > n_val / 2 or len(s) > n_test / 2)]
    rng = np.random.default_rng(seed)
    ordered = [big[i] for i in rng.permutation(len(big))] + [small[i] for i in rng.permutation(len(small))]
    train: list[int] = []
    val: list[int] = []
    test: list[int] = []
    for group in ordered:
        if len(train) + len(group) <= n_train:
            train.extend(group)
        elif len(val) + len(group) <= n_val:
            val.extend(group)
        else:
            test.extend(group)
    return _as_split(train, val, test)


def column_split(labels: Sequence[object], rows: Optional[Sequence[int]] = None, column: str = "split",
                 source: str = "") -> Split:
    """Split by a column of labels ``train`` / ``val`` / ``valid`` / ``validation`` / ``test``.

    Labels are matched case-insensitively after stripping whitespace.

    Args:
        labels: one label per molecule.
        rows: the file row (line) of each molecule, for error messages (default 1-based
            positions).
        column: the column's name, for error messages.
        source: the file's name, for error messages.

    Raises:
        DatasetFormatError: listing every row whose label is not a split name.
    """
    from molsepnorm.data.registry import normalize_split_name

    rows = list(rows) if rows is not None else list(range(1, len(labels) + 1))
    parts: dict[str, list[int]] = {"train": [], "val": [], "test": []}
    bad: list[str] = []
    for index, (label, row) in enumerate(zip(labels, rows)):
        name = normalize_split_name(str(label)) if label is not None else None
        if name is None:
            bad.append(f"  row {row}: {label!r}")
        else:
            parts[name].append(index)
    if bad:
        where = f"{source}: " if source else ""
        shown = "\n".join(bad[:50]) + (f"\n  ... and {len(bad) - 50} more" if len(bad) > 50 else "")
        raise DatasetFormatError(
            f"{where}{len(bad)} row(s) of split column {column!r} hold something other than "
            f"train / val / valid / validation / test (case-insensitive):\n{shown}")
    return _as_split(parts["train"], parts["val"], parts["test"])
