"""``molsepnorm analyze`` and ``molsepnorm plot``: embedding analysis and training curves.

A thin layer over :mod:`molsepnorm.analysis`; nothing heavy is imported at module level.
"""
from __future__ import annotations

from typing import Optional, Sequence

import click

from molsepnorm.cli.options import dataset_options, device_option, library_default, model_option, part_option

_ANALYZE = "molsepnorm.analysis.api:analyze_checkpoints"


@click.command("analyze")
@model_option(multiple=True, required=True, help_extra=" Repeat to overlay models (e.g. SepNorm and ShareNorm).")
@click.option("--label", "labels", multiple=True,
              help="Name of each model in the plots and JSON, one per --model, in order "
                   "(default: 'SepNorm (<run directory>)' ...).")
@part_option()
@click.option("--out", "-o", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Folder for analysis.json, spectrum.png and summary.png.")
@dataset_options(required=False)
@click.option("--batch-size", type=click.IntRange(min=1), default=library_default(_ANALYZE, "batch_size"),
              show_default=True, help="Molecules per batch.")
@device_option(default=library_default(_ANALYZE, "device"))
@click.option("--max-points", type=click.IntRange(min=2), default=library_default(_ANALYZE, "uniformity_max_points"),
              show_default=True,
              help="Uniformity over all pairs up to this many molecules, else over a seeded random subset of "
                   "this size.")
@click.option("--threads", type=click.IntRange(min=1), default=None, help="CPU threads for torch.")
def analyze(models: Sequence[str], labels: Sequence[str], split: str, out_dir: str, dataset: Optional[str],
            data_root: Optional[str], smiles_column: Optional[str], target_columns: Optional[str],
            id_column: Optional[str], split_by: Optional[str], split_seed: Optional[int], vocab: Optional[str],
            on_invalid: Optional[str], batch_size: int, device: str, max_points: int, threads: Optional[int]) -> None:
    """Graph-token embeddings of one or more models: spectrum, effective rank, uniformity.

    For each model, the graph-token embeddings (after the final norm) of every molecule of
    the split; then the singular values of the centered embedding matrix (dimensional
    collapse: how fast they decay), its effective rank (Roy & Vetterli 2007) and the
    uniformity of the L2-normalized embeddings, log E exp(-2 ||x - y||^2) over all pairs
    (Wang & Isola 2020; lower = more uniform).  Writes OUT/analysis.json (numbers,
    definitions, spectra) and OUT/spectrum.png, OUT/summary.png (models overlaid).

    \b
    Example:
      molsepnorm analyze --model runs/sep/best.pt --model runs/share/best.pt \\
          --dataset zinc-subset --split test --out analysis/
    """
    from molsepnorm.cli.options import dataset_kwargs, set_threads
    from molsepnorm.errors import MolsepnormError

    if labels and len(labels) != len(models):
        raise click.UsageError(f"{len(labels)} --label for {len(models)} --model: give one per model, or none")
    set_threads(threads)
    from molsepnorm.analysis.api import analyze_checkpoints

    options = dataset_kwargs(smiles_column, target_columns, split_by, split_seed, vocab, id_column=id_column,
                             on_invalid=on_invalid)
    try:
        result = analyze_checkpoints(list(models), dataset=dataset, split=split, labels=list(labels) or None,
                                     data_root=data_root, options=options or None, batch_size=batch_size,
                                     device=device, uniformity_max_points=max_points)
    except (MolsepnormError, FileNotFoundError) as err:
        raise click.ClickException(str(err)) from err
    written = result.save(out_dir)
    dataset_name = result.info.get("dataset")
    click.echo(f"graph-token embeddings on {dataset_name} {split}")
    click.echo(result.table())
    for path in written.values():
        click.echo(f"wrote {path}")


@click.command("plot")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False))
@click.option("--out", "-o", "out_path", default="curves.png", show_default=True, type=click.Path(dir_okay=False),
              help="PNG file to write.")
@click.option("--metric", "metrics", multiple=True,
              help="metrics.jsonl key to plot, repeatable (default: train_loss, the validation metric of model "
                   "selection, lr).")
@click.option("--label", "labels", multiple=True, help="Name of each run, one per RUN_DIR, in order.")
@click.option("--x", "x_axis", type=click.Choice(["epoch", "step"]), default="epoch", show_default=True,
              help="Horizontal axis.")
@click.option("--logy", is_flag=True, help="Log scale on the loss and metric panels.")
@click.option("--title", default=None, help="Figure title.")
@click.option("--dpi", type=click.IntRange(min=30), default=110, show_default=True)
def plot(run_dirs: Sequence[str], out_path: str, metrics: Sequence[str], labels: Sequence[str], x_axis: str,
         logy: bool, title: Optional[str], dpi: int) -> None:
    """Training and validation curves of run directories, overlaid, as a PNG.

    Reads each RUN_DIR/metrics.jsonl (a run still in progress is plotted as far as it got);
    one panel per metric, one line per run, the best epoch of model selection starred.

    \b
    Example:
      molsepnorm plot runs/compare/sep-seed0 runs/compare/share-seed0 --out curves.png
    """
    if labels and len(labels) != len(run_dirs):
        raise click.UsageError(f"{len(labels)} --label for {len(run_dirs)} run directories: one per run, or none")
    from molsepnorm.analysis.api import plot_runs
    from molsepnorm.analysis.plots import save_figure

    try:
        fig = plot_runs(list(run_dirs), metrics=list(metrics) or None, labels=list(labels) or None, x=x_axis,
                        logy=logy, title=title)
    except (ValueError, FileNotFoundError) as err:
        raise click.ClickException(str(err)) from err
    path = save_figure(fig, out_path, dpi=dpi)
    click.echo(f"wrote {path}")
