"""Process-wide state a library call changes, given back to the caller as it found it.

A notebook calls ``train``, ``pretrain`` or ``Predictor.load`` among its own work, so what
they set for their length is restored when they return (or raise):

* torch's CPU threads (``train.threads`` / ``pretrain.threads``: ``torch.set_num_threads``);
* the global random generators (python, numpy, torch, CUDA) that a run seeds with its
  own ``seed``, or that building a model to load weights into advances;
* torch's default dtype: a molsepnorm model and its batches are float32 (bf16 only under
  autocast), whatever ``torch.set_default_dtype`` the caller chose.
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
def float32_default() -> Iterator[None]:
    """``torch.set_default_dtype(torch.float32)`` inside the block, the caller's after."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


@contextlib.contextmanager
def callers_random_state() -> Iterator[None]:
    """The global random generators as they were before the block, after it (a run seeds them)."""
    python, numpy = random.getstate(), np.random.get_state()
    cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
    with torch.random.fork_rng(devices=list(range(torch.cuda.device_count())) if cuda else []):
        try:
            yield
        finally:
            random.setstate(python)
            np.random.set_state(numpy)


@contextlib.contextmanager
def library_call() -> Iterator[None]:
    """A whole run (``train``, ``resume``, ``pretrain``): the caller's random state and
    default dtype are theirs again afterwards, and the run computes in float32."""
    with callers_random_state(), float32_default():
        yield
