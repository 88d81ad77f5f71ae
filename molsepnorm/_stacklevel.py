"""The ``stacklevel`` that attributes a warning to the user's line, not to the package's."""
from __future__ import annotations

import contextlib
import os
import sys

_PACKAGE = os.path.dirname(os.path.abspath(__file__))


def outside_package_stacklevel(skip_torch: bool = False, outermost_module: bool = False) -> int:
    """``stacklevel`` for ``warnings.warn`` called from the caller of this function that
    points at the first frame outside molsepnorm (and, with ``skip_torch``, outside torch:
    a norm deep inside a model is called from ``Module._call_impl``), so the warning names
    the user's line.

    With ``outermost_module`` it points above the outermost ``nn.Module`` call instead (the
    line that called the whole model, wherever the model's code lives: a transformers
    layer calling its norm is not the user's line), then outside molsepnorm and torch.
    """
    inside: list[str] = [_PACKAGE + os.sep, os.path.abspath(contextlib.__file__)]  # a decorating context manager
    if skip_torch or outermost_module:
        import torch

        inside.append(os.path.dirname(torch.__file__) + os.sep)
    frames = []
    frame = sys._getframe(1)
    while frame is not None:
        frames.append(os.path.abspath(frame.f_code.co_filename))
        frame = frame.f_back
    start = 0
    if outermost_module:
        import torch.nn.modules.module as module_py

        calls = [i for i, name in enumerate(frames) if name == os.path.abspath(module_py.__file__)]
        start = calls[-1] if calls else 0
    level = start + 1
    while level - 1 < len(frames) and frames[level - 1].startswith(tuple(inside)):
        level += 1
    return level
