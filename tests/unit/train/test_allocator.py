"""heap_for_large_blocks: glibc serves large blocks from its heap inside the block, mmaps them outside.

Checked in a fresh interpreter: once a process's heap has grown, glibc serves later
requests from its free space whatever the setting, so other tests in the same worker
could make the "outside" half pass or fail by chance.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import json
import platform
import subprocess
import sys

import pytest

_PROBE = r"""
import ctypes, ctypes.util, json, sys
import numpy as np
from molsepnorm.train.allocator import heap_for_large_blocks

class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                               "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
libc.mallinfo2.restype = MallInfo2

def mmapped_while_holding(nbytes):  # bytes glibc holds in mmapped blocks while a block of nbytes lives
    before = libc.mallinfo2().hblkhd
    block = np.ones(nbytes, dtype=np.uint8)  # NumPy's data buffer comes from malloc
    grown = libc.mallinfo2().hblkhd - before
    del block
    return int(grown)

size = 64 << 20  # above glibc's largest mmap threshold (32 MiB)
out = {"before": mmapped_while_holding(size)}
with heap_for_large_blocks(enabled=False) as applied:
    out["disabled"] = [applied, mmapped_while_holding(size)]
with heap_for_large_blocks() as applied:
    out["inside"] = [applied, mmapped_while_holding(size)]
    out["kept_inside"] = int(libc.mallinfo2().fordblks)  # the freed block stays in the heap
out["free_after"] = int(libc.mallinfo2().fordblks)  # given back on leaving
out["after"] = mmapped_while_holding(4 * size)  # larger than anything the heap held: glibc's default again
json.dump(out, sys.stdout)
"""


def _has_mallinfo2() -> bool:
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    return hasattr(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6"), "mallinfo2")


@pytest.mark.skipif(not _has_mallinfo2(), reason="glibc >= 2.33 (mallinfo2) only")
def test_large_blocks_come_from_the_heap_only_inside():
    done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    size = 64 << 20
    assert out["before"] >= size  # glibc's default: a fresh mmap
    assert out["disabled"] == [False, out["disabled"][1]] and out["disabled"][1] >= size  # nothing changed
    assert out["inside"] == [True, 0]  # from the heap
    assert out["kept_inside"] >= size  # freed, but kept for the next step: not trimmed
    assert out["free_after"] < size  # malloc_trim gave it back on leaving
    assert out["after"] >= 4 * size  # the default is back on leaving
