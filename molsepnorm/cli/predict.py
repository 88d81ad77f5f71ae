"""``molsepnorm predict``, ``molsepnorm embed`` and ``molsepnorm models``.

A thin layer over :mod:`molsepnorm.predict`; nothing heavy (torch, RDKit) is imported at
module level, so ``molsepnorm --help`` stays fast.  Exit status: 0 when at least one
record was predicted, 1 when none was (or ``--strict`` met a bad record), 2 for unusable
arguments (a missing file or column, an unknown model, an output over the input).
"""
from __future__ import annotations

import sys
from typing import Any, Callable, Optional, Union

import click

from molsepnorm.cli.options import INPUT_FORMAT, device_option, model_option
from molsepnorm.predict.featurizing import AUTO_WORKERS_MIN_BYTES, MAX_ATOMS
from molsepnorm.predict.predictor import DEFAULT_BATCH_SIZE, DEFAULT_CHUNK_SIZE

#: torch threads when ``--threads`` is not given: the model's small matrices gain little
#: from more threads, which slow it down on a busy machine; a featurization worker on an
#: idle core gains more, and an ensemble's members run side by side on the CPUs that
#: torch's threads leave free (docs/benchmarks.md, "Results, 2 threads", "Predicting with
#: the default model" and "The members of an ensemble in threads").
DEFAULT_THREADS = 1


class _Workers(click.ParamType):
    """``--workers``: a number >= 0 or ``auto``
    (:func:`~molsepnorm.predict.featurizing.resolve_workers`)."""

    name = "N|auto"

    def convert(self, value: Any, param: Optional[click.Parameter], ctx: Optional[click.Context]) -> Any:
        if value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
            return value
        text = str(value).strip()
        if text.isdigit():
            return int(text)
        self.fail(f"{value!r} is not a number >= 0 or 'auto'", param, ctx)


WORKERS = _Workers()


def _input_options(func: Callable) -> Callable:
    options = [
        click.argument("input_path", metavar="INPUT", type=click.Path(exists=True, dir_okay=False, allow_dash=True)),
        click.option("--format", "fmt", type=INPUT_FORMAT, default=None,
                     help="Input format (default: from the suffix, .gz allowed; smi for '-')."),
        click.option("--smiles-column", default=None,
                     help="CSV/TSV: column of the SMILES (default: the first column named like 'smiles')."),
        click.option("--id-column", default=None,
                     help="CSV/TSV: column of the ids (default: 'id' or 'name' if present); SDF: a data field "
                          "(default: the title line)."),
        click.option("--batch-size", type=click.IntRange(min=1), default=DEFAULT_BATCH_SIZE, show_default=True,
                     help="Molecules per batch at most (batches are cut by size, too)."),
        click.option("--chunk-size", type=click.IntRange(min=1), default=DEFAULT_CHUNK_SIZE, show_default=True,
                     help="Records read, featurized and written at a time (bounds memory)."),
        click.option("--threads", type=click.IntRange(min=1), default=None,
                     help=f"CPU threads for torch in each model (default {DEFAULT_THREADS}: a featurization "
                          "worker, see --workers, gains more than a second thread, and the members of an "
                          "ensemble (predict) run side by side on the CPUs these threads leave free)."),
        click.option("--workers", type=WORKERS, default="auto", show_default=True,
                     help="Featurize in N worker processes while the model runs (0: in this process); "
                          f"auto: one for a file of {AUTO_WORKERS_MIN_BYTES // 1024} KiB or more when two or "
                          "more CPUs are usable, else none."),
        click.option("--max-atoms", type=click.IntRange(min=1), default=MAX_ATOMS, show_default=True,
                     help="Largest molecule read (heavy atoms); larger ones get a row with the reason."),
        click.option("--applicability/--no-applicability", default=True, show_default=True,
                     help="Check every molecule against the model's training data (predict: the warning "
                          "column; embed: the warnings array)."),
        device_option(default="cpu"),
        click.option("--strict", is_flag=True,
                     help="Stop at the first record that cannot be read or featurized (and write no output)."),
        click.option("--progress/--no-progress", default=None,
                     help="Progress bar on stderr (default: when stderr is a terminal)."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _load_predictor(models: tuple[str, ...], device: str, batch_size: int, threads: Optional[int],
                    max_atoms: int, applicability: bool) -> Any:
    from molsepnorm.inference.device import inference_process_settings
    from molsepnorm.predict import Predictor

    inference_process_settings(threads or DEFAULT_THREADS)  # this command owns the process
    return Predictor.load(*models, device=device, batch_size=batch_size, max_atoms=max_atoms,
                          applicability=applicability)


def _run(action: Callable[[], Any]) -> Any:
    """Run ``action``; argument problems exit 2, data problems exit 1, each with one message."""
    from molsepnorm.errors import InvalidMoleculeError, MolsepnormError
    from molsepnorm.checkpoint import CheckpointError, UnknownModelError
    from molsepnorm.chem.readers import InputFormatError
    from molsepnorm.predict.writer import OutputPathError

    try:
        return action()
    except (InputFormatError, OutputPathError, UnknownModelError, CheckpointError, FileNotFoundError) as err:
        raise click.UsageError(str(err)) from err
    except InvalidMoleculeError as err:
        raise click.ClickException(f"{err} (--strict: stopped, no output written)") from err
    except MolsepnormError as err:
        raise click.ClickException(str(err)) from err


def _finish(summary: Any, input_path: str) -> None:
    click.echo(summary.line(), err=True)
    if summary.ok == 0:
        what = "no record in the input" if summary.total == 0 else "no record could be predicted"
        source = "standard input" if input_path == "-" else input_path
        click.echo(f"Error: {source}: {what}", err=True)
        sys.exit(1)


@click.command("predict")
@model_option(multiple=True, help_extra=" Several: an ensemble (mean + <target>_std). Default: the default "
                                         "bundled model.")
@click.option("--out", "-o", default=None,
              help="Output CSV (default: <input stem>.predictions.csv beside the input; '-': stdout); a .tsv "
                   "name writes tabs, a .gz one compresses.")
@click.option("--preview", type=click.IntRange(min=0), default=20, show_default=True,
              help="Rows of the result printed on the terminal when writing a file (0: none).")
@_input_options
def predict(input_path: str, models: tuple[str, ...], out: Optional[str], preview: int, fmt: Optional[str],
            smiles_column: Optional[str], id_column: Optional[str], batch_size: int, chunk_size: int,
            threads: Optional[int], workers: Union[int, str], max_atoms: int, applicability: bool, device: str, strict: bool,
            progress: Optional[bool]) -> None:
    """Predict the properties of every molecule of INPUT (.smi, .csv, .tsv, .sdf, .gz, or - for stdin).

    Writes one CSV row per input record, in input order: id, smiles, one column per
    target (a probability for classification), <target>_std for an ensemble, error
    (why a record could not be predicted; empty when it was) and warning (why a molecule
    lies outside the model's training data: an atom feature or bond it never saw, more
    atoms than any training molecule, or a low similarity to all of them; empty when it
    does not).

    \b
    Examples:
      molsepnorm predict data/examples/molecules.smi
      molsepnorm predict library.sdf.gz --model runs/hiv/best.pt --out hiv.csv
      molsepnorm predict mols.csv --smiles-column SMILES -m a/best.pt -m b/best.pt
      cat mols.smi | molsepnorm predict - --out -
    """
    from molsepnorm.predict.pipeline import predict_file

    def action() -> Any:
        predictor = _load_predictor(models, device, batch_size, threads, max_atoms, applicability)
        to_stdout = out == "-" or (out is None and input_path == "-")
        return predict_file(predictor, input_path, out=out, fmt=fmt, smiles_column=smiles_column,
                            id_column=id_column, strict=strict, chunk_size=chunk_size,
                            progress=_progress(progress), preview_rows=0 if to_stdout else preview,
                            workers=workers)

    summary = _run(action)
    if summary.preview is not None and len(summary.preview):
        click.echo(_preview_text(summary.preview, summary.total))
    _finish(summary, input_path)


@click.command("embed")
@model_option(help_extra=" Default: the default bundled model (an ensemble's first member: "
                         "embeddings come from one model).")
@click.option("--out", "-o", default=None,
              help="Output .npz (default: <input stem>.embeddings.npz beside the input).")
@_input_options
def embed(input_path: str, model: Optional[str], out: Optional[str], fmt: Optional[str],
          smiles_column: Optional[str], id_column: Optional[str], batch_size: int, chunk_size: int,
          threads: Optional[int], workers: Union[int, str], max_atoms: int, applicability: bool, device: str, strict: bool,
          progress: Optional[bool]) -> None:
    """Graph-token embeddings (after the final norm) of every molecule of INPUT, as an .npz.

    The archive holds, one row per input record: embeddings (float32, NaN rows for
    records that failed), ids, smiles, errors ('' when ok), warnings (why a molecule lies
    outside the model's training data, '' when it does not), ok; and the model's name.
    Read it with numpy.load(path).
    """
    from molsepnorm.checkpoint.bundled import default_embedding_model
    from molsepnorm.predict.pipeline import embed_file

    def action() -> Any:
        predictor = _load_predictor((model or str(default_embedding_model()),), device, batch_size, threads,
                                    max_atoms, applicability)
        return embed_file(predictor, input_path, out=out, fmt=fmt, smiles_column=smiles_column,
                          id_column=id_column, strict=strict, chunk_size=chunk_size, progress=_progress(progress),
                          workers=workers)

    _finish(_run(action), input_path)


@click.command("models")
@click.option("--json", "as_json", is_flag=True, help="Print the listing as JSON.")
def models(as_json: bool) -> None:
    """List the models bundled with molsepnorm: models usable offline as --model NAME, and
    pretrained encoders to fine-tune with molsepnorm train --init NAME."""
    import json

    from molsepnorm.checkpoint.bundled import bundled_models, model_listing

    listing = [_run(lambda m=m: model_listing(m)) for m in bundled_models()]
    if as_json:
        click.echo(json.dumps(listing, indent=2))
        return
    import shutil
    import textwrap
    from pathlib import Path

    width = min(100, shutil.get_terminal_size((100, 24)).columns)
    for entry in listing:
        click.echo(f"{entry['name']}{'  (default)' if entry['default'] else ''}")
        click.echo(textwrap.fill(entry["summary"], width, initial_indent="  ", subsequent_indent="  "))
        if entry["kind"] == "encoder":  # no head, so no metrics: how to use it instead
            click.echo(f"  pretrained encoder ({entry['steps']:,} steps on {entry['dataset']}); fine-tune it with:\n"
                       f"    molsepnorm train --init {entry['name']}")
        else:
            click.echo(f"  task {entry['task']}, targets {', '.join(entry['targets'])}; trained on {entry['dataset']}")
            for split, values in entry["metrics"].items():
                figures = ", ".join(f"{k} {v:.4g}" for k, v in values.items() if isinstance(v, (int, float)))
                click.echo(f"  {split}: {figures}")
        click.echo(f"  {entry['architecture']}; {entry['size_bytes'] / 1024:.0f} KiB")
        if len(entry["checkpoints"]) > 1:  # what embed, analyze and train --init take instead of the name
            names = [Path(c).stem for c in entry["checkpoints"]]
            click.echo(f"  members (each a --model of its own): {', '.join(names)}")
        click.echo(f"  model card: {entry['card']}")


def _progress(flag: Optional[bool]) -> bool:
    return sys.stderr.isatty() if flag is None else flag


def _preview_text(frame: Any, total: int) -> str:
    """A plain fixed-width table: text left-aligned, numbers right-aligned, long cells cut."""
    import pandas as pd

    def cell(value: Any, last: bool) -> str:
        if value is None or (isinstance(value, float) and value != value):
            return ""
        text = f"{value:.6g}" if isinstance(value, float) else str(value)
        return text if last or len(text) <= 60 else text[:57] + "..."

    columns = list(frame.columns)
    numeric = [pd.api.types.is_float_dtype(frame[c]) for c in columns]
    rows = [[cell(v, j == len(columns) - 1) for j, v in enumerate(row)] for row in frame.itertuples(index=False)]
    widths = [max([len(c)] + [len(r[j]) for r in rows]) for j, c in enumerate(columns)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) if num else c.ljust(w) for c, w, num in zip(cells, widths, numeric)).rstrip()

    lines = [line(columns)] + [line(r) for r in rows]
    more = total - len(frame)
    if more > 0:
        lines.append(f"... {more} more row(s) in the output file")
    return "\n".join(lines)
