"""Conversion of run records and analysis figures to plain JSON types."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping

import numpy as np


def jsonable(value: Any) -> Any:
    """Plain JSON types (dicts, lists, numbers, strings); non-finite floats become None
    (JSON has no NaN), numpy arrays lists, paths strings."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else None
    if isinstance(value, Path):
        return str(value)
    return value
