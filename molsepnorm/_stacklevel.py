"""The ``stacklevel`` that attributes a warning to the user's line, not to the package's."""
from __future__ import annotations

import os
import sys

_PACKAGE = os.path.dirname(os.path.abspath(__file__))


def outside_package_stacklevel(skip_torch: bool = False) -> int:
    """``stacklevel`` for ``warnings.warn`` called from the caller of this function that
    points at the first frame outside molsepnorm (and, with ``skip_torch``, outside torch:
    a norm deep inside a model is called from ``Module._call_impl``), so the warning names
    the user's line."""
    inside = [_PACKAGE + os.sep]
    if skip_torch:
        import torch

        inside.append(os.path.dirname(torch.__file__) + os.sep)
    level, frame = 1, sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(tuple(inside)):
        frame, level = frame.f_back, level + 1
    return level
