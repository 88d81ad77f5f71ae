"""The ``molsepnorm`` command: a thin click layer over the Python API."""
from __future__ import annotations

import atexit
import gc
import warnings
from typing import Any, Optional

import click

from molsepnorm.version import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", "-V", prog_name="molsepnorm")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """molsepnorm: molecular property prediction with a SepNorm Graphormer.

    Graphormer (Ying et al., 2021) whose normalization layers are SepNorm (Chen et al.,
    NeurIPS 2023): the graph token is normalized by its own norm, the atom tokens by
    another (a LayerNorm each by default; the paper's BatchNorm for the graph token with
    train --cls-norm batch).
    """
    _freeze_gc_at_exit()
    _plain_warnings(ctx)
    _stop_cleanly_on_signals(ctx)


def _stop_cleanly_on_signals(ctx: click.Context) -> None:
    """Until the command ends, SIGTERM (``kill``, a batch system's time limit) and SIGINT
    (Ctrl-C) end it as an exception would: an output being written is removed, not left as a
    half-written temporary file, a note says why the command stopped, and the exit status is
    128 + the signal's number, as a shell reports it (143, 130).  Without this, SIGTERM
    killed the process at once, silently, and Ctrl-C printed click's "Aborted!" with status
    1.  While a training or pretraining loop runs, it first finishes its step and writes
    ``last.pt`` (:mod:`molsepnorm._stop`); the same signal again stops at once.  A handler
    someone else installed is left alone."""
    import signal
    import threading

    from molsepnorm import _stop  # here, not in the handler: an import there can meet an import in progress

    if threading.current_thread() is not threading.main_thread():
        return
    defaults = {signal.SIGTERM: (signal.SIG_DFL, "SIGTERM"), signal.SIGINT: (signal.default_int_handler, "Ctrl-C")}
    for signum, (default, name) in defaults.items():
        if signal.getsignal(signum) is not default:
            continue

        def stop(number: int, frame: Any, name: str = name) -> None:
            if _stop.ask(number):
                click.echo(f"molsepnorm: {name}: finishing this step and writing last.pt, then stopping "
                           f"({name} again stops at once)", err=True)
                return
            click.echo(f"molsepnorm: stopped by {name}; nothing half-written is left (a training run resumes from "
                       "its last.pt with --resume)", err=True)
            raise SystemExit(128 + number)

        signal.signal(signum, stop)
        ctx.call_on_close(lambda signum=signum, default=default: signal.signal(signum, default))


def _plain_warnings(ctx: click.Context) -> None:
    """Show every warning of the command as one line on stderr, ``Warning: <message>`` (a
    :class:`UserWarning`; other kinds by their class name), until the command ends.

    Python's own format adds the file and source line the warning was attributed to: the
    library attributes its warnings (rows left out of a data set, a checkpoint's note) to
    its caller, which in a notebook is the user's line and here is click's internals."""
    previous = warnings.showwarning

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: Any = None, line: Optional[str] = None) -> None:
        label = "Warning" if issubclass(category, UserWarning) else category.__name__
        click.echo(f"{label}: {message}", err=True)

    warnings.showwarning = show
    ctx.call_on_close(lambda: setattr(warnings, "showwarning", previous))


def _freeze_gc_at_exit() -> None:
    """Register :func:`gc.freeze` to run at exit, once per process (registering again
    replaces the earlier registration).

    When the interpreter shuts down, its last garbage collections walk every object that
    PyTorch, PyTorch Geometric and ``torch._dynamo`` created at import: about 0.6 s of
    every command (docs/benchmarks.md), for nothing, as the process ends. A frozen
    collector skips them; memory is still freed by reference counting, and buffered files
    are flushed as before (their owners close them; ``logging`` flushes at exit)."""
    atexit.unregister(gc.freeze)
    atexit.register(gc.freeze)


from molsepnorm.cli.analyze import analyze, plot  # noqa: E402
from molsepnorm.cli.evaluate import evaluate  # noqa: E402
from molsepnorm.cli.predict import embed, models, predict  # noqa: E402
from molsepnorm.cli.prepare import prepare  # noqa: E402
from molsepnorm.cli.pretrain import pretrain  # noqa: E402
from molsepnorm.cli.train import train  # noqa: E402

cli.add_command(predict)
cli.add_command(embed)
cli.add_command(models)
cli.add_command(prepare)
cli.add_command(train)
cli.add_command(pretrain)
cli.add_command(evaluate)
cli.add_command(analyze)
cli.add_command(plot)


def main() -> None:  # pragma: no cover - console entry point
    cli()


if __name__ == "__main__":  # pragma: no cover
    main()
