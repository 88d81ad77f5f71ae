"""``molsepnorm pretrain``: self-supervised pretraining of the Graphormer encoder on unlabelled molecules.

A thin layer over :mod:`molsepnorm.pretrain`: flags become dotted overrides of the YAML
preset, the library does the rest.
"""
from __future__ import annotations

import os
from typing import Any

import click

from molsepnorm.cli.options import DATA_ROOT_DEFAULT, NORM, VOCAB, LibraryChoice, device_option
from molsepnorm.cli.runs import refuse_changes_on_resume, spawn

_OVERRIDES = {
    "corpus": "corpus.corpus",
    "data_root": "corpus.data_root",
    "smiles_column": "corpus.smiles_column",
    "vocab": "corpus.vocab",
    "limit": "corpus.limit",
    "chunk_size": "corpus.chunk_size",
    "norm": "model.norm",
    "cls_norm": "model.cls_norm",
    "objective": "pretrain.objective",
    "augment": "pretrain.augment",
    "mask_rate": "pretrain.mask_rate",
    "mask_targets": "pretrain.mask_targets",
    "atom_loss": "pretrain.atom_loss",
    "atom_head": "pretrain.atom_head",
    "temperature": "pretrain.temperature",
    "motif_weight": "pretrain.motif_weight",
    "motif_environments": "pretrain.motif_environments",
    "motif_scale": "pretrain.motif_scale",
    "descriptor_weight": "pretrain.descriptor_weight",
    "max_steps": "pretrain.max_steps",
    "time_budget": "pretrain.time_budget",
    "batch_size": "pretrain.batch_size",
    "lr": "pretrain.lr",
    "seed": "pretrain.seed",
    "device": "pretrain.device",
    "num_workers": "pretrain.num_workers",
    "threads": "pretrain.threads",
    "log_every": "pretrain.log_every",
    "checkpoint_every": "pretrain.checkpoint_every_steps",
    "on_nonfinite": "pretrain.on_nonfinite",
    "progress": "pretrain.progress",
}


@click.command("pretrain")
@click.option("--corpus", "-d", default=None, metavar="NAME|FILE",
              help="Unlabelled molecules: moses (1.58M drug-like SMILES), molhiv (its training split), nci "
                   "(RDKit's 4,999), or a .smi / .csv / .tsv / .sdf file (optionally .gz).")
@click.option("--data-root", type=click.Path(file_okay=False), default=None,
              help=f"Folder holding the named corpora ({DATA_ROOT_DEFAULT}).")
@click.option("--smiles-column", default=None, help="CSV / TSV: column of the SMILES (default: one named like smiles).")
@click.option("--vocab", type=VOCAB, default=None, help="Featurizer vocabulary (default ogb: any element).")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Read only the first N molecules.")
@click.option("--chunk-size", type=click.IntRange(min=1), default=None,
              help="Molecules featurized together; batches are shuffled within a chunk (default 4096).")
@click.option("--config", "-c", "config_path", type=click.Path(dir_okay=False), default=None,
              help="YAML preset with model:/pretrain:/corpus: sections, or a training preset (its model: is used), "
                   "e.g. configs/tiny.yaml. Flags override it.")
@click.option("--norm", type=NORM, default=None, help="SepNorm or ShareNorm in the encoder.")
@click.option("--cls-norm", type=LibraryChoice("molsepnorm.nn.norm:NORM_KINDS"), default=None,
              help="SepNorm's graph-token norm (default layer; batch: the paper's).")
@click.option("--objective", type=LibraryChoice("molsepnorm.pretrain.config:OBJECTIVES"), default=None,
              help="masked (default): predict masked atoms (Hu et al. 2020); contrastive: InfoNCE between two views "
                   "of the graph token (SimCSE / GraphCL); both: their sum.")
@click.option("--mask-rate", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=None,
              help="Fraction of each molecule's atoms masked (default 0.15).")
@click.option("--mask-targets", type=LibraryChoice("molsepnorm.pretrain.config:MASK_TARGETS"), default=None,
              help="What the atom head predicts: every feature column (all, default), the element only (type), or "
                   "every column plus the atom's hashed environment with its bonded neighbours (context, GROVER).")
@click.option("--atom-loss", type=LibraryChoice("molsepnorm.pretrain.config:ATOM_LOSSES"), default=None,
              help="Atoms the atom head is scored on: all (default: the visible ones reconstructed too, so the final "
                   "atom states keep their own chemistry) or masked (Hu et al. 2020).")
@click.option("--atom-head", type=LibraryChoice("molsepnorm.pretrain.config:ATOM_HEADS"), default=None,
              help="Between the final atom states and the masked-atom logits: linear (default) or mlp (a small "
                   "decoder, dropped after pretraining).")
@click.option("--augment", default=None, metavar="KINDS",
              help="Comma-separated differences between the two contrastive views: mask (default), drop_nodes, "
                   "dropout (the model's dropout only, SimCSE).")
@click.option("--temperature", type=click.FloatRange(min=0, min_open=True), default=None,
              help="InfoNCE temperature (default 0.1).")
@click.option("--motif-weight", type=click.FloatRange(min=0), default=None,
              help="Weight of the functional-group count loss on the readout (GROVER's motifs, RDKit's 85 "
                   "fragment patterns), added to the objective (default 1; 0: off).")
@click.option("--motif-scale", type=LibraryChoice("molsepnorm.pretrain.config:MOTIF_SCALES"), default=None,
              help="The scale the readout predicts motif counts on: log (log(1 + count), default) or linear.")
@click.option("--motif-environments", type=click.IntRange(min=0), default=None,
              help="Also count the molecule's atom environments (ECFP radius 0 and 1) hashed into this many "
                   "buckets among the readout's targets (default 0: off).")
@click.option("--descriptor-weight", type=click.FloatRange(min=0), default=None,
              help="Weight of the regression of RDKit's 2D descriptors from the readout (ChemBERTa-2's "
                   "multitask regression; no logP, MR or TPSA among them), added to the objective (default 0: off).")
@click.option("--max-steps", type=click.IntRange(min=1), default=None,
              help="Optimizer steps (the learning rate decays over them).")
@click.option("--time-budget", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Minutes of training (summed over resumes); with --max-steps, whichever comes first.")
@click.option("--batch-size", type=click.IntRange(min=1), default=None, help="Molecules per batch (per process).")
@click.option("--lr", type=click.FloatRange(min=0, min_open=True), default=None, help="Peak learning rate.")
@click.option("--seed", type=int, default=None, help="Random seed (weights, batch order, masks, dropout).")
@click.option("--out", "-o", type=click.Path(file_okay=False), default=None,
              help="Run directory to create (default: runs/pretrain-<corpus>-<objective>-seed<N>-<time>).")
@device_option(training=True)
@click.option("--resume", type=click.Path(file_okay=False), default=None,
              help="Continue the interrupted run in this directory from its last.pt.")
@click.option("--nproc", type=click.IntRange(min=1), default=None,
              help="Pretrain on N local processes with DDP (runs torchrun). --batch-size is per process.")
@click.option("--num-workers", type=click.IntRange(min=0), default=None,
              help="Processes featurizing the next chunk while this one trains (default 0).")
@click.option("--threads", type=click.IntRange(min=1), default=None, help="CPU threads (torch.set_num_threads).")
@click.option("--log-every", type=click.IntRange(min=1), default=None, help="Steps per row of metrics.jsonl.")
@click.option("--checkpoint-every", type=click.IntRange(min=1), default=None,
              help="Write last.pt every N steps (default 500).")
@click.option("--on-nonfinite", type=LibraryChoice("molsepnorm.config:NONFINITE"), default=None,
              help="A NaN/infinite loss or gradient: stop naming the step and records (default), or skip the batch "
                   "(at most pretrain.max_skipped_batches in a row).")
@click.option("--progress/--no-progress", default=None, help="Progress bar (default: on).")
@click.pass_context
def pretrain(ctx: click.Context, **flags: Any) -> None:
    """Pretrain the Graphormer encoder on unlabelled molecules (no targets needed).

    \b
    Examples:
      molsepnorm pretrain --corpus moses --config configs/pretrain/moses.yaml --out runs/pre
      molsepnorm pretrain --corpus my.smi --objective masked --max-steps 2000 --out runs/pre
      molsepnorm pretrain --resume runs/pre          # after an interruption
      molsepnorm train --init runs/pre/encoder.pt --dataset nci-tpsa --out runs/ft

    The run directory holds config.yaml, metrics.jsonl / metrics.csv, train.log,
    last.pt (resumable; also usable with --init) and, at the end, encoder.pt and results.json.
    """
    from molsepnorm.errors import MolsepnormError

    nproc = flags.pop("nproc")
    if nproc is not None and nproc > 1 and "WORLD_SIZE" not in os.environ:
        ctx.exit(spawn(ctx, nproc, module="molsepnorm.cli.pretrain"))
    try:
        result = _resume(ctx, flags) if flags["resume"] is not None else _pretrain(flags)
    except MolsepnormError as err:
        raise click.ClickException(str(err)) from err
    if int(os.environ.get("RANK", "0")) == 0:
        click.echo(f"{result.steps} steps ({result.stopped}), {result.molecules:,} molecules, {result.seconds:.0f} s"
                   + (f"; {result.invalid:,} left out" if result.invalid else "")
                   + (f"; encoder {result.encoder}" if result.encoder else ""))


def _pretrain(flags: dict[str, Any]) -> Any:
    from molsepnorm.pretrain.api import pretrain as run_pretraining
    from molsepnorm.pretrain.config import load_pretrain_config

    overrides = {key: flags[name] for name, key in _OVERRIDES.items()}  # --augment's "mask,drop": split there
    config = load_pretrain_config(flags["config_path"], overrides)
    return run_pretraining(config, out=flags["out"])


def _resume(ctx: click.Context, flags: dict[str, Any]) -> Any:
    from molsepnorm.pretrain.api import resume

    refuse_changes_on_resume(ctx, flags)
    return resume(flags["resume"], device=flags["device"], data_root=flags["data_root"], progress=flags["progress"])


if __name__ == "__main__":  # ``python -m molsepnorm.cli.pretrain``: what --nproc runs under torchrun
    import sys

    from molsepnorm.cli.main import cli

    # through the group, so that each process stops on SIGTERM / Ctrl-C as `molsepnorm pretrain` does
    cli.main(args=["pretrain", *sys.argv[1:]], prog_name="molsepnorm")
