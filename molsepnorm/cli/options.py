"""The command line's one vocabulary of options, with choices read from the library.

Every verb spells a thing the same way:

* ``--model/-m CKPT|NAME``: a checkpoint file or a bundled model name (``molsepnorm models``);
* ``--dataset/-d``, ``--data-root``, and for a CSV or SDF ``--smiles-column`` (CSV),
  ``--target-columns``, ``--id-column``, ``--split-by random|scaffold|column:NAME``,
  ``--split-seed``, ``--vocab`` (an SDF's data fields are its columns);
* ``--split train|val|test|all``: which part of a data set a model is scored or embedded
  on (``evaluate``, ``analyze``).  Before this vocabulary, ``train`` and ``prepare`` took
  ``--split`` for the split method: that spelling still works there, with a note;
* ``--device``, ``--batch-size``, ``--threads``.

Choices are the library's own constants (:class:`LibraryChoice` reads them on first
use, so ``molsepnorm --help`` imports nothing heavy); defaults left at None mean "the
library's default".
"""
from __future__ import annotations

import importlib
from typing import Any, Callable, Optional, Sequence

import click

#: where ``--data-root`` defaults to, as :func:`molsepnorm.data.paths.resolve_data_root` resolves it
DATA_ROOT_DEFAULT = ("default: $MOLSEPNORM_DATA, else <cache root>/data, the cache root being $MOLSEPNORM_CACHE, "
                     "else $XDG_CACHE_HOME/molsepnorm, else ~/.cache/molsepnorm")


class LibraryChoice(click.Choice):
    """A :class:`click.Choice` whose values are a library constant, ``"module:NAME"``,
    imported when the option is first parsed or shown."""

    def __init__(self, ref: str) -> None:
        self._ref = ref
        self._values: Optional[tuple[str, ...]] = None
        super().__init__((), case_sensitive=True)

    @property  # type: ignore[override]
    def choices(self) -> Sequence[str]:
        if self._values is None:
            module, _, name = self._ref.partition(":")
            self._values = tuple(getattr(importlib.import_module(module), name))
        return self._values

    @choices.setter
    def choices(self, value: Sequence[str]) -> None:  # click's __init__ assigns; the library decides
        pass


DEVICE = LibraryChoice("molsepnorm.inference.device:DEVICES")
NORM = LibraryChoice("molsepnorm.nn.graphormer:NORMS")
VOCAB = LibraryChoice("molsepnorm.chem.featurize:VOCABS")
PART = LibraryChoice("molsepnorm.data.registry:PARTS")
INPUT_FORMAT = LibraryChoice("molsepnorm.formats:FORMATS")


def library_default(ref: str, parameter: str) -> Any:
    """The default of ``parameter`` of the library function ``"module:function"`` (the CLI
    shows and uses the library's own default instead of repeating it)."""
    import inspect

    module, _, name = ref.partition(":")
    return inspect.signature(getattr(importlib.import_module(module), name)).parameters[parameter].default


def apply(options: Sequence[Callable[[Callable], Callable]], func: Callable) -> Callable:
    for option in reversed(options):
        func = option(func)
    return func


def model_option(multiple: bool = False, required: bool = False, help_extra: str = "") -> Callable:
    """``--model/-m CKPT|NAME``: a checkpoint file or a bundled model name; one only unless
    ``multiple`` (given twice, it is refused: click would keep the last one silently)."""
    return click.option(
        "--model", "-m", "models" if multiple else "model", multiple=True, required=required,
        default=None, metavar="CKPT|NAME", callback=None if multiple else _one_model,
        help="A checkpoint file (best.pt / last.pt), a run directory (its best.pt) or a bundled model name (see "
             "`molsepnorm models`)." + help_extra)


def _one_model(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> Optional[str]:
    if len(values) > 1:
        raise click.BadParameter(f"given {len(values)} times ({', '.join(values)}): this command reads one model "
                                 f"(`molsepnorm {ctx.info_name}` does not average an ensemble)", ctx, param)
    return values[0] if values else None


def _split_alias(ctx: click.Context, param: click.Parameter, value: Optional[str]) -> Optional[str]:
    if value is not None:
        click.echo("molsepnorm: --split METHOD is now spelled --split-by METHOD (--split names a part of a data "
                   "set, as in evaluate and analyze); this spelling still works for now.", err=True)
    return value


def dataset_options(required: bool, deprecated_split: bool = False) -> Callable[[Callable], Callable]:
    """``--dataset`` and the options of a data set: where it is, and how to read and split a CSV / SDF."""
    options = [
        click.option("--dataset", "-d", required=required, default=None,
                     help="zinc-subset, zinc, molhiv, nci-tpsa, moses (unlabelled), a CSV/TSV (.csv, .tsv, .tab) of "
                          "SMILES and targets, an SDF (.sdf, .sd, .mol) whose data fields hold the targets, or a "
                          "file of SMILES (.smi, .smiles, .ism, .can, .txt: unlabelled, for analyze and prepare); "
                          "any of them optionally .gz."),
        click.option("--data-root", type=click.Path(file_okay=False), default=None,
                     help=f"Folder holding raw data sets ({DATA_ROOT_DEFAULT})."),
        click.option("--smiles-column", default=None,
                     help="CSV: column holding the SMILES (default: the column named smiles, else the first whose "
                          "name contains 'smiles')."),
        click.option("--target-columns", default=None,
                     help="CSV: comma-separated target columns (default: every column but SMILES, id and split); "
                          "SDF: comma-separated data fields (required); '' for none: the molecules alone."),
        click.option("--id-column", default=None,
                     help="CSV: column of molecule ids (default: a column named id or name, if any); SDF: data field of "
                          "the ids (default: the title line, else the record number)."),
        click.option("--split-by", "split_by", default=None,
                     help="CSV/SDF: how to split: random (default: 80/10/10, seed 0) | scaffold | column:NAME (a "
                          "column or data field of train/val/test)."),
        click.option("--split-seed", type=int, default=None, help="CSV/SDF: seed of a random or scaffold split."),
        click.option("--vocab", type=VOCAB, default=None,
                     help="CSV/SDF: featurizer vocabulary (default ogb: any element)."),
        click.option("--on-invalid", type=LibraryChoice("molsepnorm.data.labelled:ON_INVALID"), default=None,
                     help="CSV/SDF: a row whose molecule cannot be read (or lies outside --vocab): error (default: "
                          "stop, naming every such row) or skip (leave it out; the rows are listed in the log and "
                          "in the data set's skipped list)."),
    ]
    if deprecated_split:
        options.append(click.option("--split", "split_alias", default=None, hidden=True, callback=_split_alias,
                                    expose_value=True))
    return lambda func: apply(options, func)


def part_option(default: Optional[str] = "test", default_help: Optional[str] = None) -> Callable:
    """``--split``: which part of the data set (``default_help``: what a default of None means)."""
    return click.option("--split", type=PART, default=default, show_default=default_help is None,
                        help="Which part of the data set: train, val, test or all"
                             + (f" (default: {default_help})." if default_help else "."))


def device_option(default: Optional[str] = None, training: bool = False) -> Callable:
    """``--device``; ``training``: the command trains, under bf16 autocast on CUDA by default
    (the config's ``precision``); inference runs in float32 on every device."""
    precision = "bf16 autocast unless the config sets precision: fp32" if training else "float32"
    return click.option("--device", type=DEVICE, default=default, show_default=default is not None,
                        help=f"cpu, cuda ({precision}) or auto (cuda when available).")


def dataset_kwargs(
    smiles_column: Optional[str] = None,
    target_columns: Optional[str] = None,
    split_by: Optional[str] = None,
    split_seed: Optional[int] = None,
    vocab: Optional[str] = None,
    split_alias: Optional[str] = None,
    id_column: Optional[str] = None,
    on_invalid: Optional[str] = None,
) -> dict[str, Any]:
    """The keyword arguments of :func:`molsepnorm.load_dataset` given on the command line."""
    kwargs: dict[str, Any] = {}
    if smiles_column is not None:
        kwargs["smiles_column"] = smiles_column
    if target_columns is not None:
        kwargs["target_columns"] = [c.strip() for c in target_columns.split(",") if c.strip()]
    if split_by is not None and split_alias is not None and split_by != split_alias:
        raise click.UsageError(f"--split-by {split_by} and --split {split_alias} disagree: give --split-by only")
    if (split_by or split_alias) is not None:
        kwargs["split"] = split_by or split_alias
    if split_seed is not None:
        kwargs["seed"] = split_seed
    if vocab is not None:
        kwargs["vocab"] = vocab
    if id_column is not None:
        kwargs["id_column"] = id_column
    if on_invalid is not None:
        kwargs["on_invalid"] = on_invalid
    return kwargs


def set_threads(threads: Optional[int]) -> None:
    """``--threads``: torch's intra-op threads for this process (None: leave as is)."""
    if threads is not None:
        import torch

        torch.set_num_threads(threads)
