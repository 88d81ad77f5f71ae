"""glibc's malloc for CPU training: large tensors from its heap, not from fresh ``mmap`` calls.

PyTorch's CPU tensors come from ``malloc``.  glibc serves a request above its mmap
threshold (adjusted at run time, at most 32 MiB on 64-bit Linux) with a fresh ``mmap``
and gives it back with ``munmap`` when freed, so every training step on batches of
large molecules faults in and zeroes the same memory again: an ogbg-molhiv batch of 256
random molecules pads to ~110 atoms, and one attention tensor ``(256, 8, 111, 111)``
float32 is 100 MiB, so the kernel's page faults rival the step's own work.  With mmap off
(``mallopt(M_MMAP_MAX, 0)``: every block from the heap) and the heap's top no longer
trimmed (``M_TRIM_THRESHOLD``: freed blocks stay with the process, reused by the next step
instead of faulted in again), the molhiv training step of Graphormer-slim is much faster,
at the price of a resident memory that stays at its peak while training.  On leaving, the
defaults come back and ``malloc_trim`` returns the free heap to the system.  ZINC's batches, whose tensors stay under the
threshold, change little.  Figures, with their command (``python scripts/benchmark.py
--parts train --cpu-malloc default`` against ``heap``), in ``docs/benchmarks.md``.

The same is had for any program, without this module, from glibc's environment:
``MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=4294967295`` (or ``GLIBC_TUNABLES``).  Elsewhere (macOS,
musl) :func:`heap_for_large_blocks` does nothing.
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import platform
from typing import Iterator, Optional

log = logging.getLogger(__name__)

_M_TRIM_THRESHOLD = -1  # mallopt parameters of <malloc.h>
_M_MMAP_MAX = -4
_GLIBC_DEFAULT_MMAP_MAX = 65536  # glibc's default number of mmapped blocks
_GLIBC_DEFAULT_TRIM_THRESHOLD = 128 * 1024
_NO_TRIM = 2**31 - 1  # mallopt takes an int: trim only above 2 GiB of free top


def _glibc() -> Optional[ctypes.CDLL]:
    """glibc, or None where the C library is another one."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt.argtypes, libc.mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
        libc.malloc_trim.argtypes, libc.malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
    except (OSError, AttributeError):
        return None
    return libc


def set_mmap_max(blocks: int) -> bool:
    """``mallopt(M_MMAP_MAX, blocks)``: 0 serves every block from the heap; glibc's default
    is 65,536.  Returns whether glibc took the setting (False on other C libraries)."""
    libc = _glibc()
    return bool(libc is not None and libc.mallopt(_M_MMAP_MAX, int(blocks)) == 1)


def _set_trim_threshold(nbytes: int) -> bool:
    """``mallopt(M_TRIM_THRESHOLD, nbytes)``: free top of the heap kept up to ``nbytes``."""
    libc = _glibc()
    return bool(libc is not None and libc.mallopt(_M_TRIM_THRESHOLD, int(nbytes)) == 1)


def _trim() -> None:
    """``malloc_trim(0)``: give the heap's free memory back to the system."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)


@contextlib.contextmanager
def heap_for_large_blocks(enabled: bool = True) -> Iterator[bool]:
    """Within the block, glibc serves large blocks from its heap (see the module docstring).

    Yields whether the setting is in force; on leaving, glibc's defaults come back and the
    heap's free memory is returned to the system.  Process-wide: it affects every thread of
    the process.  (Once set by ``mallopt``, glibc no longer moves its mmap and trim
    thresholds with the sizes it sees: the defaults it comes back to are the fixed ones.)
    """
    applied = enabled and set_mmap_max(0) and _set_trim_threshold(_NO_TRIM)
    if enabled and not applied:
        log.debug("malloc: not glibc, large CPU blocks stay with the C library's default")
    try:
        yield applied
    finally:
        if applied:
            set_mmap_max(_GLIBC_DEFAULT_MMAP_MAX)
            _set_trim_threshold(_GLIBC_DEFAULT_TRIM_THRESHOLD)
            _trim()
