"""``molsepnorm evaluate``: metrics of a model on a part of a data set."""
from __future__ import annotations

import json
from typing import Any, Optional, Sequence

import click

from molsepnorm.cli.options import dataset_options, device_option, library_default, model_option, part_option

_EVALUATE = "molsepnorm.inference.evaluate:evaluate_checkpoint"


@click.command("evaluate")
@model_option(multiple=True, required=True, help_extra=" Several: an ensemble, scored on the mean of their "
                                                       "predictions, as predict averages them.")
@part_option(default=None, default_help="test; all of a --dataset file other than the model's own, unless --split-by "
                                        "is given: an external set is scored whole")
@dataset_options(required=False)
@click.option("--batch-size", type=click.IntRange(min=1), default=library_default(_EVALUATE, "batch_size"),
              show_default=True, help="Molecules per batch.")
@device_option(default=library_default(_EVALUATE, "device"))
@click.option("--threads", type=click.IntRange(min=1), default=None, help="CPU threads for torch.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, allow_dash=True), default=None,
              help="Also write the metrics as JSON to this file ('-' for stdout only).")
@click.option("--predictions", "predictions_path", type=click.Path(dir_okay=False), default=None,
              help="Also write every molecule's label and prediction to this CSV: index, id, smiles, and per "
                   "target <t>_true, <t>_pred, <t>_std (an ensemble), <t>_error (regression).")
@click.option("--applicability/--no-applicability", default=True, show_default=True,
              help="Check every molecule against the model's training data, as predict does (the warning column "
                   "of --predictions), and score the molecules with a warning and those without apart.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              help="Also draw the predictions against the labels to this figure (.png, .pdf, .svg): a parity "
                   "plot for regression, ROC, precision-recall and calibration curves for classification.")
def evaluate(models: tuple[str, ...], split: str, dataset: Optional[str], data_root: Optional[str],
             smiles_column: Optional[str], target_columns: Optional[str], id_column: Optional[str],
             split_by: Optional[str], split_seed: Optional[int], vocab: Optional[str], on_invalid: Optional[str],
             batch_size: int, device: str, json_path: Optional[str], predictions_path: Optional[str],
             applicability: bool, plot_path: Optional[str], threads: Optional[int]) -> None:
    """Score a model: MAE / RMSE / R² (regression) or ROC-AUC / PR-AUC / log loss (classification).

    Without --dataset, the data set the model was trained on, split as in training.

    \b
    Examples:
      molsepnorm evaluate --model runs/zinc/best.pt --split test --json test.json
      molsepnorm evaluate --model tpsa-nci-small --split test --plot parity.png
      molsepnorm evaluate -m runs/a/best.pt -m runs/b/best.pt --split test --predictions test.csv
    """
    from molsepnorm._json import jsonable
    from molsepnorm.cli.options import dataset_kwargs, set_threads
    from molsepnorm.errors import MolsepnormError
    from molsepnorm.inference.evaluate import evaluate_checkpoint
    from molsepnorm.inference.metrics import summary_table

    if plot_path is not None:
        from molsepnorm.analysis.plots import check_figure_path

        try:
            check_figure_path(plot_path)
        except ValueError as err:
            raise click.BadParameter(str(err), param_hint="--plot") from err
    options = dataset_kwargs(smiles_column, target_columns, split_by, split_seed, vocab, id_column=id_column,
                             on_invalid=on_invalid)
    set_threads(threads)
    try:
        report = evaluate_checkpoint(list(models), dataset=dataset, split=split, data_root=data_root,
                                     options=options or None, batch_size=batch_size, device=device,
                                     predictions=predictions_path is not None or plot_path is not None,
                                     applicability=applicability)
    except MolsepnormError as err:
        raise click.ClickException(str(err)) from err
    frame = report.pop("predictions", None)
    text = json.dumps(jsonable(report), indent=2)
    if json_path == "-":
        click.echo(text)
        _write_pictures(frame, report, models, predictions_path, plot_path)
        return
    split = report["split"]
    click.echo(f"{report['checkpoint']} on {report['dataset']} {split} ({report['num_molecules']:,} molecules)")
    rows = {split: report["metrics"]}
    if len(report["members"]) > 1:  # an ensemble: each member's own figures below its mean's
        rows = {f"{split} (ensemble)": report["metrics"]}
        rows.update((f"  member {i + 1}: {member}", metrics)
                    for i, (member, metrics) in enumerate(zip(report["members"], report["member_metrics"])))
    for name, metrics in report.get("metrics_by_warning", {}).items():  # do the warnings point at worse predictions?
        count = report["num_flagged"] if name == "warning" else report["num_molecules"] - report["num_flagged"]
        rows[f"  {'with an applicability warning' if name == 'warning' else 'no warning'} ({count:,})"] = metrics
    click.echo(summary_table(rows))
    if "spread" in report:
        click.echo(f"the members' spread against the error (Spearman; 1: a larger <target>_std always means a larger "
                   f"error, 0: it says nothing): {report['spread']['spearman']:.3f}")
    if len(report["target_names"]) > 1:
        for name in report["target_names"]:
            per = {k.split("/", 1)[0]: v for k, v in report["metrics"].items() if k.endswith("/" + name)}
            click.echo(f"  {name}: " + ", ".join(f"{k} {v:.4f}" for k, v in per.items()))
    if json_path is not None:
        from molsepnorm._atomic import atomic_write

        with atomic_write(json_path) as fh:
            fh.write(text + "\n")
        click.echo(f"metrics written to {json_path}")
    for path in _write_pictures(frame, report, models, predictions_path, plot_path):  # after the figures are on screen
        click.echo(f"wrote {path}")


def _write_pictures(frame: Any, report: dict[str, Any], models: Sequence[str], predictions_path: Optional[str],
                    plot_path: Optional[str]) -> list[str]:
    """Write ``--predictions`` and ``--plot`` from the report's per-molecule table; the paths
    written. ``models``: the ``--model`` values, which title the plot (one name, a bundled
    ensemble's included, or "an ensemble of N models")."""
    written = []
    if predictions_path is not None:
        from molsepnorm.inference.evaluate import write_evaluation_csv

        write_evaluation_csv(frame, predictions_path)
        written.append(predictions_path)
    if plot_path is not None:
        from molsepnorm.analysis.plots import plot_evaluation, save_figure
        from molsepnorm.inference.evaluate import flagged_rows

        names, members = report["target_names"], report["members"]
        model = models[0] if len(models) == 1 else f"an ensemble of {len(members)} models"
        spread = [f"{t}_std" for t in names]
        fig = plot_evaluation(frame[[f"{t}_true" for t in names]].to_numpy(),
                              frame[[f"{t}_pred" for t in names]].to_numpy(), report["task"], names,
                              title=f"{model} on {report['dataset']} {report['split']}",
                              flagged=flagged_rows(frame),
                              spread=frame[spread].to_numpy() if set(spread) <= set(frame.columns) else None)
        written.append(str(save_figure(fig, plot_path)))
    return written
