"""What ``molsepnorm train`` and ``molsepnorm pretrain`` share: a run on several processes
(``--nproc N`` runs the same command under torchrun) and ``--resume`` (the run's own
``config.yaml``: only the device, the data root and the progress bar may change)."""
from __future__ import annotations

import subprocess
from typing import Any, Mapping, Optional

import click

#: The flags ``--resume`` accepts besides itself (and ``--nproc``).
RESUME_FLAGS = frozenset({"resume", "device", "data_root", "progress", "nproc"})


def spawn(ctx: click.Context, nproc: int, module: str) -> int:
    """Run this very command (``python -m <module>`` with the options given) on ``nproc``
    processes with torchrun, echoing the command line to stderr; its exit status."""
    from molsepnorm.train.distributed import spawn_command

    command = spawn_command(nproc, argv_from_context(ctx, skip=("nproc",)), module=module)
    click.echo(f"molsepnorm: {' '.join(command)}", err=True)
    return subprocess.call(command)


def refuse_changes_on_resume(ctx: click.Context, flags: Mapping[str, Any],
                             renames: Optional[Mapping[str, str]] = None, also: str = "") -> None:
    """Raise :class:`click.UsageError` naming every flag given on the command line besides
    :data:`RESUME_FLAGS`: a resumed run keeps its configuration.  ``renames`` maps a
    parameter name to its flag where they differ (``{"config_path": "config"}`` is known);
    ``also``: the command's own flags a resume takes, for the message."""
    given = [name for name, value in flags.items()
             if value is not None and name not in RESUME_FLAGS
             and ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE]
    if given:
        spelled = {"config_path": "config", **(renames or {})}
        names = ", ".join("--" + spelled.get(n, n).replace("_", "-") for n in given)
        raise click.UsageError(f"--resume continues a run with its own config.yaml; {names} cannot be changed "
                               f"(only --device, --data-root{also} and --progress may be given)")


def argv_from_context(ctx: click.Context, skip: tuple[str, ...] = ()) -> list[str]:
    """The options given to this command (not their defaults), as command-line arguments."""
    argv: list[str] = []
    for param in ctx.command.params:
        name = param.name
        if not isinstance(param, click.Option) or name in skip or name is None:
            continue
        if ctx.get_parameter_source(name) is click.core.ParameterSource.DEFAULT:
            continue
        value = ctx.params.get(name)
        if value is None:
            continue
        if param.is_flag and param.secondary_opts:
            argv.append(param.opts[0] if value else param.secondary_opts[0])
        elif param.is_flag:
            if value:
                argv.append(param.opts[0])
        else:
            argv.extend([_long_name(param), str(value)])
    return argv


def _long_name(param: click.Option) -> str:
    return next((o for o in param.opts if o.startswith("--")), param.opts[0])
