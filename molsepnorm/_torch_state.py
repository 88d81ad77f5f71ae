"""Process-wide state a library call changes, given back to the caller as it found it.

A notebook calls ``train``, ``resume`` or ``pretrain`` among its own work, so what they set
for their length is restored when they return (or raise):

* torch's CPU threads (``train.threads`` / ``pretrain.threads``: ``torch.set_num_threads``);
* the global random generators (python, numpy, torch; CUDA's where the run started it)
  that a run seeds with its own ``seed``.

Both are process-wide: while a run holds them, other threads of the process see them (a
run in a background thread reseeds the generators the main thread draws from). The
default dtype is not touched: a molsepnorm model is float32 by construction.
"""
from __future__ import annotations

import contextlib
import random
from typing import Iterator, Optional

import numpy as np
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


@contextlib.contextmanager
def callers_random_state() -> Iterator[None]:
    """The global random generators as they were before the block, after it (a run seeds them).

    CUDA's generators are saved only where CUDA is already initialized (saving them would
    start it); where the run starts CUDA, they are left seeded with the caller's torch seed,
    as CUDA would have seeded them itself had the run not drawn from them."""
    python, numpy = random.getstate(), np.random.get_state()
    seed = torch.initial_seed()
    cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
    with torch.random.fork_rng(devices=list(range(torch.cuda.device_count())) if cuda else []):
        try:
            yield
        finally:
            random.setstate(python)
            np.random.set_state(numpy)
            if not cuda and torch.cuda.is_available() and torch.cuda.is_initialized():
                torch.cuda.manual_seed_all(seed)
