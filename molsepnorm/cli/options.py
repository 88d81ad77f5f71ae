"""Click options shared by the verbs that read a data set (prepare, train, evaluate, analyze)."""
from __future__ import annotations

from typing import Any, Callable, Optional

import click


def data_options(func: Callable) -> Callable:
    """``--dataset``, ``--data-root`` and the options of a user CSV."""
    options = [
        click.option("--dataset", "-d", required=True,
                     help="zinc-subset, zinc, molhiv, nci-tpsa, or a path to a CSV/TSV of SMILES and targets."),
        click.option("--data-root", type=click.Path(file_okay=False), default=None,
                     help="Folder holding raw data sets (default: $MOLSEPNORM_DATA, else ~/.cache/molsepnorm/data)."),
        click.option("--smiles-column", default=None, help="CSV: column holding the SMILES (default: smiles)."),
        click.option("--target-columns", default=None,
                     help="CSV: comma-separated target columns (default: every column but the SMILES and split columns)."),
        click.option("--split", "split", default=None,
                     help="CSV: random | scaffold | column:NAME (a column of train/val/test)."),
        click.option("--split-seed", type=int, default=None, help="CSV: seed of a random or scaffold split."),
        click.option("--vocab", type=click.Choice(["ogb", "zinc"]), default=None,
                     help="CSV: featurizer vocabulary (default ogb: any element)."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def checkpoint_data_options(func: Callable) -> Callable:
    """``--data-root`` and the CSV options of verbs that read a checkpoint's data set
    (evaluate, analyze); the split method is ``--split-by`` there, as ``--split`` names
    which split to read."""
    options = [
        click.option("--data-root", type=click.Path(file_okay=False), default=None,
                     help="Folder holding raw data sets (default: the training run's, $MOLSEPNORM_DATA, ...)."),
        click.option("--smiles-column", default=None, help="CSV: column holding the SMILES."),
        click.option("--target-columns", default=None, help="CSV: comma-separated target columns."),
        click.option("--split-by", "split_by", default=None, help="CSV: random | scaffold | column:NAME."),
        click.option("--split-seed", type=int, default=None, help="CSV: seed of a random or scaffold split."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def dataset_kwargs(
    smiles_column: Optional[str] = None,
    target_columns: Optional[str] = None,
    split: Optional[str] = None,
    split_seed: Optional[int] = None,
    vocab: Optional[str] = None,
) -> dict[str, Any]:
    """The keyword arguments of :func:`molsepnorm.load_dataset` given on the command line."""
    kwargs: dict[str, Any] = {}
    if smiles_column is not None:
        kwargs["smiles_column"] = smiles_column
    if target_columns is not None:
        kwargs["target_columns"] = [c.strip() for c in target_columns.split(",") if c.strip()]
    if split is not None:
        kwargs["split"] = split
    if split_seed is not None:
        kwargs["seed"] = split_seed
    if vocab is not None:
        kwargs["vocab"] = vocab
    return kwargs
