"""A stop asked for by a signal, taken by a training loop at its next step boundary.

The command line stops a command on SIGTERM or Ctrl-C (``molsepnorm.cli.main``).  While a
training or pretraining loop runs, stopping at once would lose the steps since its last
``last.pt``; instead the signal handler asks (:func:`ask`), the loop finishes the step it
is in, writes ``last.pt`` and ends the command (:func:`stop_now`).  A second signal, or a
signal outside a loop, stops at once.  Without the command line's handler (a notebook)
nothing asks, and a loop never stops this way.
"""
from __future__ import annotations

import contextlib
import signal
from typing import Iterator, NoReturn, Optional

_loops = 0
_asked: Optional[int] = None


@contextlib.contextmanager
def step_boundaries() -> Iterator[None]:
    """While this is entered, a signal handler's :func:`ask` defers the stop to the loop."""
    global _loops, _asked
    _loops += 1
    try:
        yield
    finally:
        _loops -= 1
        if not _loops:
            _asked = None


def ask(signum: int) -> bool:
    """From a signal handler: True when a loop will stop at its next step boundary (the
    handler returns); False when nothing can (no loop runs, or it was asked already)."""
    global _asked
    if _loops and _asked is None:
        _asked = signum
        return True
    return False


def asked() -> Optional[int]:
    """The signal a loop was asked to stop by, or None."""
    return _asked


def stop_now(signum: Optional[int] = None) -> NoReturn:
    """End the command as the signal would have: status 128 + its number (143, 130)."""
    raise SystemExit(128 + int(signum if signum is not None else _asked or signal.SIGTERM))
