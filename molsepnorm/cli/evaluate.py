"""``molsepnorm evaluate``: metrics of a checkpoint on a split of a data set."""
from __future__ import annotations

import json
from typing import Any, Optional

import click

from molsepnorm.cli.options import checkpoint_data_options


@click.command("evaluate")
@click.option("--model", "-m", "model_path", required=True, type=click.Path(dir_okay=False),
              help="Checkpoint file (best.pt or last.pt of a run directory).")
@click.option("--dataset", "-d", default=None,
              help="Data set name or CSV (default: the one the model was trained on, with its split).")
@click.option("--split", type=click.Choice(["train", "val", "test", "all"]), default="test", show_default=True,
              help="Which split to score.")
@checkpoint_data_options
@click.option("--batch-size", type=click.IntRange(min=1), default=128, show_default=True, help="Molecules per batch.")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="cpu", show_default=True)
@click.option("--json", "json_path", type=click.Path(dir_okay=False, allow_dash=True), default=None,
              help="Also write the metrics as JSON to this file ('-' for stdout only).")
def evaluate(model_path: str, dataset: Optional[str], split: str, data_root: Optional[str],
             smiles_column: Optional[str], target_columns: Optional[str], split_by: Optional[str],
             split_seed: Optional[int], batch_size: int, device: str, json_path: Optional[str]) -> None:
    """Score a checkpoint: MAE / RMSE / R² (regression) or ROC-AUC / PR-AUC (classification).

    \b
    Example:
      molsepnorm evaluate --model runs/zinc/best.pt --split test --json test.json
    """
    from molsepnorm.cli.options import dataset_kwargs
    from molsepnorm.errors import MolsepnormError
    from molsepnorm.train.api import evaluate_checkpoint
    from molsepnorm.train.run_dir import summary_table

    csv = dataset_kwargs(smiles_column, target_columns, split_by, split_seed)
    try:
        report = evaluate_checkpoint(model_path, dataset=dataset, split=split, data_root=data_root,
                                     options=csv or None, batch_size=batch_size, device=device)
    except MolsepnormError as err:
        raise click.ClickException(str(err)) from err
    text = json.dumps(_finite(report), indent=2)
    if json_path == "-":
        click.echo(text)
        return
    click.echo(f"{report['checkpoint']} on {report['dataset']} {split} ({report['num_molecules']:,} molecules)")
    click.echo(summary_table({split: report["metrics"]}))
    if len(report["target_names"]) > 1:
        for name in report["target_names"]:
            per = {k.split("/", 1)[0]: v for k, v in report["metrics"].items() if k.endswith("/" + name)}
            click.echo(f"  {name}: " + ", ".join(f"{k} {v:.4f}" for k, v in per.items()))
    if json_path is not None:
        with open(json_path, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
        click.echo(f"metrics written to {json_path}")


def _finite(value: Any) -> Any:
    """JSON has no NaN: non-finite numbers become null."""
    import math

    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
