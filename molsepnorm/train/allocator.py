"""glibc's malloc for CPU training: large tensors from its heap, not from fresh ``mmap`` calls.

PyTorch's CPU tensors come from ``malloc``.  glibc serves a request above its mmap
threshold (adjusted at run time, at most 32 MiB on 64-bit Linux) with a fresh ``mmap``
and gives it back with ``munmap`` when freed, so every training step on batches of
large molecules faults in and zeroes the same memory again: an ogbg-molhiv batch of 256
random molecules pads to ~110 atoms, and one attention tensor ``(256, 8, 111, 111)``
float32 is 100 MiB (``time`` of the benchmark's training part: 89 s in the kernel
against 92 s in user code).  With mmap off (``mallopt(M_MMAP_MAX, 0)``: every block from
the heap, reused once freed), on this project's 2-core CPU, 1 thread (``python
scripts/benchmark.py --parts train --cpu-malloc default`` against ``heap``): the molhiv
training step of Graphormer-slim went from 21.6 to 39.6 graphs/s, while the benchmark's peak resident memory grew from 7.3 to
9.8 GiB (freed blocks stay with the process).  ZINC's batches, whose tensors stay under
the threshold, change little (244 → 265 graphs/s, within this machine's noise).

The same is had for any program, without this module, from glibc's environment:
``MALLOC_MMAP_MAX_=0`` (or ``GLIBC_TUNABLES=glibc.malloc.mmap_max=0``).  Elsewhere (macOS,
musl) :func:`heap_for_large_blocks` does nothing.
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import platform
from typing import Callable, Iterator, Optional

log = logging.getLogger(__name__)

_M_MMAP_MAX = -4  # mallopt parameter of <malloc.h>
_GLIBC_DEFAULT_MMAP_MAX = 65536  # glibc's default number of mmapped blocks


def _mallopt() -> Optional[Callable[[int, int], int]]:
    """glibc's ``mallopt``, or None where the C library is another one."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return None
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return mallopt


def set_mmap_max(blocks: int) -> bool:
    """``mallopt(M_MMAP_MAX, blocks)``: 0 serves every block from the heap; glibc's default
    is 65,536.  Returns whether glibc took the setting (False on other C libraries)."""
    mallopt = _mallopt()
    return bool(mallopt is not None and mallopt(_M_MMAP_MAX, int(blocks)) == 1)


@contextlib.contextmanager
def heap_for_large_blocks(enabled: bool = True) -> Iterator[bool]:
    """Within the block, glibc serves large blocks from its heap (see the module docstring).

    Yields whether the setting is in force; on leaving, glibc's default comes back (the
    heap keeps what it grew to).  Process-wide: it affects every thread of the process.
    """
    applied = enabled and set_mmap_max(0)
    if enabled and not applied:
        log.debug("malloc: not glibc, large CPU blocks stay with the C library's default")
    try:
        yield applied
    finally:
        if applied:
            set_mmap_max(_GLIBC_DEFAULT_MMAP_MAX)
