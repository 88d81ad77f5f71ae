"""``molsepnorm train``: train a Graphormer (SepNorm or ShareNorm) and write a run directory.

A thin layer over :mod:`molsepnorm.train`: flags become dotted overrides of the YAML
preset, the library does the rest.  Nothing heavy is imported at module level, so
``molsepnorm --help`` stays fast.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from molsepnorm.checkpoint.bundled import CLASSIFICATION_ENCODERS, DEFAULT_ENCODERS
from molsepnorm.cli.options import NORM, LibraryChoice, dataset_options, device_option
from molsepnorm.cli.runs import refuse_changes_on_resume, spawn


class _Patience(click.ParamType):
    """``--patience``: a positive number of epochs, ``auto`` or ``off``."""

    name = "N|auto|off"

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        from molsepnorm.train.config import PATIENCE_OFF

        text = str(value).strip().lower()
        if text in ("auto", PATIENCE_OFF):
            return text
        try:
            number = int(text)
        except ValueError:
            number = 0
        if number < 1:
            self.fail(f"{value!r} is not a positive integer, 'auto' or '{PATIENCE_OFF}'", param, ctx)
        return number


PATIENCE = _Patience()

# flag name -> dotted config key (flags left at None do not override the preset)
_OVERRIDES = {
    "dataset": "data.dataset",
    "data_root": "data.data_root",
    "norm": "model.norm",
    "cls_norm": "model.cls_norm",
    "epochs": "train.epochs",
    "max_steps": "train.max_steps",
    "batch_size": "train.batch_size",
    "lr": "train.lr",
    "seed": "train.seed",
    "device": "train.device",
    "num_workers": "train.num_workers",
    "patience": "train.patience",
    "monitor": "train.monitor",
    "average_best": "train.average_best",
    "companion": "train.companion",
    "companion_weight": "train.companion_weight",
    "monitor_blend": "train.monitor_blend",
    "ema": "train.ema_decay",
    "threads": "train.threads",
    "cpu_malloc": "train.cpu_malloc",
    "batching": "train.batching",
    "checkpoint_every": "train.checkpoint_every_steps",
    "checkpoint_seconds": "train.checkpoint_every_seconds",
    "on_nonfinite": "train.on_nonfinite",
    "init": "train.init",
    "freeze_encoder": "train.freeze_encoder",
    "train_fraction": "data.train_fraction",
    "train_fraction_seed": "data.train_fraction_seed",
}
_CSV_FLAGS = ("smiles_column", "target_columns", "split_by", "split_seed", "vocab", "split_alias", "id_column",
              "on_invalid")


@click.command("train")
@dataset_options(required=False, deprecated_split=True)
@click.option("--norm", type=NORM, default=None,
              help="SepNorm (the graph token and the atoms normalized by separate norms) or ShareNorm (one "
                   "LayerNorm for all tokens).")
@click.option("--cls-norm", type=LibraryChoice("molsepnorm.nn.norm:NORM_KINDS"), default=None,
              help="SepNorm's graph-token norm: layer (default), batch (the paper's BatchNorm across the batch), "
                   "batchrenorm, rms, none.")
@click.option("--config", "-c", "config_path", type=click.Path(dir_okay=False), default=None,
              help="YAML preset with model:/train:/data: sections, e.g. configs/zinc-slim.yaml. Flags override it.")
@click.option("--epochs", type=click.IntRange(min=1), default=None,
              help="Epochs to train (default: auto, 50, up to 100 on a data set of a few hundred molecules).")
@click.option("--max-steps", type=click.IntRange(min=1), default=None,
              help="Stop after this many optimizer steps (the schedule decays over them).")
@click.option("--batch-size", type=click.IntRange(min=1), default=None,
              help="Molecules per batch (per process under DDP; default: auto, 64 for regression on 500 to "
                   "1,999 training molecules, else 32).")
@click.option("--lr", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Peak learning rate (default: auto, 1e-3 for regression, 5e-4 for "
                   "classification).")
@click.option("--seed", type=int, default=None, help="Random seed (weights, batches, dropout).")
@click.option("--out", "-o", type=click.Path(file_okay=False), default=None,
              help="Run directory to create (default: runs/<data set>-<norm>-seed<N>-<time>).")
@device_option(training=True)
@click.option("--resume", type=click.Path(file_okay=False), default=None,
              help="Continue the interrupted run in this directory from its last.pt (with --dataset: where its "
                   "data file now is, checked to be the same content).")
@click.option("--nproc", type=click.IntRange(min=1), default=None,
              help="Train on N local processes with DDP (runs torchrun; gloo on CPU, NCCL on GPUs). --batch-size is "
                   "per process; when the batches do not divide evenly, the first ones are repeated so "
                   "that every process takes the same number of steps.")
@click.option("--batching", type=LibraryChoice("molsepnorm.config:BATCHINGS"), default=None,
              help="bucket: batches of similar-size molecules, less padding (default); random: shuffled batches.")
@click.option("--patience", type=PATIENCE, default=None,
              help="Early stopping: stop after N epochs without a better validation metric; auto (default): "
                   "30% of the epochs, at least 10, and not before the second half of the run; off: train all epochs.")
@click.option("--monitor", type=LibraryChoice("molsepnorm.train.config:MONITORS"), default=None,
              help="The validation metric that picks best.pt and drives early stopping (default auto: the data "
                   "set's; logloss selects as chemprop does).")
@click.option("--average-best", type=click.IntRange(min=1), default=None, metavar="K",
              help="best.pt averages the weights of the K epochs with the best validation metric (a checkpoint "
                   "soup); 1: the best epoch's weights. Default: 5 for classification, 1 for regression.")
@click.option("--companion", type=LibraryChoice("molsepnorm.train.config:COMPANIONS"), default=None,
              help="Blend the Graphormer with a linear model on substructure counts, fitted on the training "
                   "molecules (ECFP-like for classification, a group-contribution model for "
                   "regression): fingerprint, none, or auto (default: fingerprint).")
@click.option("--companion-weight", type=click.FloatRange(min=0, max=1, min_open=True), default=None,
              metavar="W", help="The blend's weight on the fingerprint model (default: 0.5 for classification; "
                                "for regression chosen per target on the validation split, 0 when it does not help).")
@click.option("--monitor-blend/--no-monitor-blend", default=None,
              help="Regression with a companion: fit it before the first epoch and pick best.pt and stop early by "
                   "the validation metric of the blend, its weights chosen every epoch (default); with "
                   "--no-monitor-blend by the Graphormer's own, the companion fitted after the last epoch.")
@click.option("--ema", type=click.FloatRange(min=0, max=1, min_open=True, max_open=True), default=None,
              metavar="DECAY", help="Evaluate and save a moving average of the weights with this decay, e.g. 0.999.")
@click.option("--checkpoint-every", type=click.IntRange(min=1), default=None,
              help="Also write last.pt every N steps within an epoch.")
@click.option("--checkpoint-seconds", type=click.FloatRange(min=0), default=None,
              help="At an epoch's end, write last.pt only once S seconds of training have passed since the previous "
                   "write (default 30; the last epoch always writes it); 0: every epoch.")
@click.option("--on-nonfinite", type=LibraryChoice("molsepnorm.config:NONFINITE"), default=None,
              help="A NaN/infinite loss or gradient: stop naming the step and batch (default), or skip the batch.")
@click.option("--init", default=None, metavar="CKPT|NAME",
              help="Fine-tune: start from this checkpoint's encoder (molsepnorm pretrain's encoder.pt or last.pt, a "
                   "best.pt, a bundled model name); its architecture replaces the config's, the head is new unless "
                   "the task and targets match. Default auto: the bundled encoder of the data's vocabulary ("
                   + ", ".join(f"{name} for {vocab}" for vocab, name in DEFAULT_ENCODERS.items())
                   + "; for classification "
                   + ", ".join(f"{name} for {vocab}" for vocab, name in CLASSIFICATION_ENCODERS.items())
                   + ") unless the model options ask for another architecture; none: train from scratch.")
@click.option("--train-fraction", type=click.FloatRange(min=0, max=1, min_open=True), default=None,
              metavar="F", help="Train on a random fraction F of the training split (validation and test as they "
                                "are): few labels, learning curves.")
@click.option("--train-fraction-seed", type=click.IntRange(min=0), default=None, metavar="N",
              help="The seed that draws --train-fraction's molecules (default 0, whatever --seed is): another "
                   "N, another subset.")
@click.option("--freeze-encoder/--no-freeze-encoder", default=None,
              help="Train the head only (a linear probe): the encoder's weights stay as they are.")
@click.option("--num-workers", type=click.IntRange(min=0), default=None, help="DataLoader worker processes.")
@click.option("--threads", type=click.IntRange(min=1), default=None, help="CPU threads (torch.set_num_threads).")
@click.option("--cpu-malloc", type=LibraryChoice("molsepnorm.config:CPU_MALLOC"), default=None,
              help="CPU: 'heap' (default) keeps large tensors in glibc's heap (faster on big molecules, "
                   "more resident memory); 'default' leaves glibc's malloc as it is.")
@click.option("--progress/--no-progress", default=None, help="Progress bar (default: on).")
@click.pass_context
def train(ctx: click.Context, **flags: Any) -> None:
    """Train a Graphormer; evaluate on validation each epoch; test the best checkpoint.

    \b
    Examples:
      molsepnorm train --dataset zinc-subset --norm sep --config configs/zinc-slim.yaml --epochs 10
      molsepnorm train --dataset my.csv --target-columns logS --split-by scaffold --out runs/logs
      molsepnorm train --resume runs/logs          # after an interruption
      torchrun --nproc_per_node=2 -m molsepnorm train --config configs/tiny.yaml --out runs/ddp

    The run directory holds config.yaml, split.json, metrics.jsonl / metrics.csv,
    train.log, best.pt, last.pt and results.json.
    """
    from molsepnorm.errors import MolsepnormError

    nproc = flags.pop("nproc")
    if nproc is not None and nproc > 1 and "WORLD_SIZE" not in os.environ:
        ctx.exit(spawn(ctx, nproc, module="molsepnorm.cli.train"))
    try:
        if flags["resume"] is not None:
            result = _resume(ctx, flags)
        else:
            result = _train(flags)
    except MolsepnormError as err:
        raise click.ClickException(str(err)) from err
    if int(os.environ.get("RANK", "0")) == 0:
        _print_summary(result)


def _train(flags: dict[str, Any]) -> Any:
    from molsepnorm.cli.options import dataset_kwargs
    from molsepnorm.train.api import train as run_training
    from molsepnorm.train.config import load_experiment_config

    overrides: dict[str, Any] = {key: flags[name] for name, key in _OVERRIDES.items()}
    overrides["train.progress"] = flags["progress"]
    csv = dataset_kwargs(*(flags[name] for name in _CSV_FLAGS))
    overrides.update({f"data.{key}": value for key, value in csv.items()})
    config = load_experiment_config(flags["config_path"], overrides)
    return run_training(config, out=flags["out"])


def _resume(ctx: click.Context, flags: dict[str, Any]) -> Any:
    from molsepnorm.train.api import resume

    refuse_changes_on_resume(ctx, {k: v for k, v in flags.items() if k != "dataset"}, renames={"split_alias": "split"},
                             also=", --dataset (the run's file, moved)")
    return resume(flags["resume"], device=flags["device"], data_root=flags["data_root"], progress=flags["progress"],
                  dataset=flags["dataset"])


def _print_summary(result: Any) -> None:
    from molsepnorm.inference.metrics import summary_table
    from molsepnorm.train.blend import MIN_VALIDATION_GAIN, format_weights
    from molsepnorm.train.companion import feature_name

    click.echo(summary_table({"val": result.val, "test": result.test}))
    best = f"best epoch {result.best_epoch}" if result.best_epoch is not None else "no best epoch"
    if result.averaged_epochs:
        best += f" (best.pt averages epochs {', '.join(map(str, result.averaged_epochs))})"
    where = f"; run directory {result.run_dir}" if result.run_dir is not None else ""
    click.echo(f"{best} of {result.epochs} ({result.steps} steps, stopped: {result.stopped}, "
               f"{result.seconds:.0f} s){where}")
    if result.best_epoch is None:
        click.echo("no best.pt: no epoch gave a finite validation score (the warnings above say why); last.pt "
                   "holds the last weights")
    elif result.companion:
        scores, metric = result.companion["scores"], result.monitor or next(iter(result.val), None)
        weights, novel = result.companion["weights"], result.companion.get("weights_novel")
        kind = f"{result.companion['kind']} model"
        if "radius" in result.companion and result.companion["counts"] == "raw":
            kind += f" on {feature_name(result.companion['radius'], result.companion.get('properties', False))}"
        if metric is not None and not any(weights.values()) and not any((novel or {}).values()):
            click.echo(f"best.pt is the Graphormer alone: a {kind} did not lower validation {metric} by "
                       f"{MIN_VALIDATION_GAIN:.0%} (Graphormer {scores['graphormer']['val'][metric]:.4f}, {kind} "
                       f"{scores['fingerprint']['val'][metric]:.4f})")
        elif metric is not None:
            click.echo(f"best.pt blends the Graphormer with a {kind} (weight {format_weights(weights, novel)}); "
                       f"validation {metric}: Graphormer {scores['graphormer']['val'][metric]:.4f}, {kind} "
                       f"{scores['fingerprint']['val'][metric]:.4f}, blend {result.val[metric]:.4f}")
    if result.run_dir is not None and (Path(result.run_dir) / "test_predictions.csv").is_file():
        run = Path(result.run_dir)
        click.echo(f"each test molecule's prediction: {run / 'test_predictions.csv'}; as a picture: molsepnorm "
                   f"evaluate -m {run / 'best.pt'} --plot test.png")


if __name__ == "__main__":  # ``python -m molsepnorm.cli.train``: what --nproc runs under torchrun
    import sys

    from molsepnorm.cli.main import cli

    # through the group, so that each process stops on SIGTERM / Ctrl-C as `molsepnorm train` does
    cli.main(args=["train", *sys.argv[1:]], prog_name="molsepnorm")
