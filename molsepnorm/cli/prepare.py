"""``molsepnorm prepare``: featurize a data set, compute its encodings once, cache it."""
from __future__ import annotations

import time
from typing import Optional

import click

from molsepnorm.cli.options import dataset_kwargs, dataset_options


@click.command("prepare")
@dataset_options(required=True, deprecated_split=True)
@click.option("--batch-size", type=int, default=256, show_default=True,
              help="Batch size at which to report the padding of plain vs size-bucketed batches.")
def prepare(dataset: str, data_root: Optional[str], smiles_column: Optional[str], target_columns: Optional[str],
            id_column: Optional[str], split_by: Optional[str], split_seed: Optional[int], vocab: Optional[str],
            split_alias: Optional[str], on_invalid: Optional[str], batch_size: int) -> None:
    """Build (or reuse) the processed cache of a data set and print its splits.

    The same cache is what `train`, `evaluate` and `analyze` read, so preparing once
    ahead of time takes the featurization out of the first training run.
    """
    from molsepnorm.data import load_dataset
    from molsepnorm.data.columns import num_atoms
    from molsepnorm.data.sampler import padding_report
    from molsepnorm.errors import MolsepnormError

    start = time.perf_counter()
    try:
        splits = load_dataset(dataset, root=data_root,
                              **dataset_kwargs(smiles_column, target_columns, split_by, split_seed, vocab, split_alias,
                                               id_column, on_invalid))
    except MolsepnormError as err:
        raise click.ClickException(str(err)) from err
    seconds = time.perf_counter() - start
    click.echo(f"{splits.name}: {splits.task}, targets {', '.join(splits.target_names) or 'none'}; "
               f"vocabulary {splits.vocab}")
    click.echo(f"  train {len(splits.train):,}  val {len(splits.val):,}  test {len(splits.test):,}"
               f"  (ready in {seconds:.1f} s)")
    if splits.cache_dir is None:  # moses: featurized when read; sizing it would featurize it all
        click.echo(f"  nothing to prepare: its graphs are featurized when read, never cached\n  source: {splits.source}")
        return
    sizes = num_atoms(splits.train).tolist()
    report = padding_report(sizes, batch_size=batch_size)
    click.echo(f"  atoms per molecule (train): mean {sum(sizes) / max(1, len(sizes)):.1f}, max {max(sizes, default=0)}")
    click.echo(f"  padding at {batch_size} molecules/batch: plain shuffle {report['plain_padding']:.1%}, "
               f"size-bucketed {report['bucketed_padding']:.1%} "
               f"({report['bucketed_mean_batch']:.0f} molecules/batch on average)")
    click.echo(f"  source: {splits.source}")
    click.echo(f"  cache:  {splits.cache_dir}")
