"""heap_for_large_blocks: glibc serves large blocks from its heap inside the block, mmaps them outside."""
from __future__ import annotations

import ctypes
import ctypes.util
import platform

import numpy as np
import pytest

from molsepnorm.train.allocator import heap_for_large_blocks


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]


def _mmapped_bytes() -> int:
    """Bytes glibc holds in mmapped blocks right now (``mallinfo2().hblkhd``)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    libc.mallinfo2.restype = _MallInfo2
    return int(libc.mallinfo2().hblkhd)


def _mmapped_while_holding(nbytes: int) -> int:
    before = _mmapped_bytes()
    block = np.ones(nbytes, dtype=np.uint8)  # NumPy's data buffer comes from malloc
    grown = _mmapped_bytes() - before
    del block
    return grown


glibc_only = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc"
    or not hasattr(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6"), "mallinfo2"),
    reason="glibc >= 2.33 (mallinfo2) only")


@glibc_only
def test_large_blocks_come_from_the_heap_inside_and_are_mmapped_again_after():
    size = 64 << 20  # above glibc's largest mmap threshold (32 MiB)
    assert _mmapped_while_holding(size) >= size  # glibc's default: a fresh mmap
    with heap_for_large_blocks() as applied:
        assert applied is True
        assert _mmapped_while_holding(size) == 0  # from the heap
    assert _mmapped_while_holding(size) >= size  # default restored on leaving


@glibc_only
def test_disabled_changes_nothing():
    with heap_for_large_blocks(enabled=False) as applied:
        assert applied is False
        assert _mmapped_while_holding(64 << 20) >= 64 << 20
