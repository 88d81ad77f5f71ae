"""torch's CPU threads for the length of a run, then as they were.

``train.threads`` / ``pretrain.threads`` set ``torch.set_num_threads``, a process-wide
setting; a notebook that trains with ``threads: 1`` would otherwise keep one thread for
everything after.
"""
from __future__ import annotations

import contextlib
from typing import Iterator, Optional

import torch


@contextlib.contextmanager
def torch_threads(threads: Optional[int]) -> Iterator[None]:
    """``torch.set_num_threads(threads)`` inside the block (None: leave as is), restored after."""
    if not threads:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)
