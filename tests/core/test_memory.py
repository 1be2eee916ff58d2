"""keep_freed_memory: glibc's malloc serves a freed block of a few MiB again from the heap."""

from __future__ import annotations

import subprocess
import sys

import pytest

from atari_speed.core.memory import keep_freed_memory

# In a process of its own (the setting is the process's malloc's, for good): with the C
# library's malloc, allocate 8 MiB and free it, then four such blocks at once, freed
# together; print the bytes mmapped while the first was held and the free bytes the heap
# keeps at the end (glibc's mallinfo2).
PROBE = """
import ctypes, sys
from atari_speed.core.memory import keep_freed_memory

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, (ctypes.c_size_t,)
libc.free.argtypes = (ctypes.c_void_p,)
libc.mallinfo2.restype = MallInfo2
applied = keep_freed_memory() if sys.argv[1] == "keep" else False
block = libc.malloc(8 << 20)
mmapped = libc.mallinfo2().hblkhd
libc.free(block)
blocks = [libc.malloc(8 << 20) for _ in range(4)]
for block in blocks:
    libc.free(block)
print(applied, mmapped, libc.mallinfo2().fordblks)
"""


def probe(mode: str) -> tuple[bool, int, int]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, mode], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    applied, mmapped, kept = out.stdout.split()
    return applied == "True", int(mmapped), int(kept)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc: Linux only")
def test_a_freed_block_stays_in_the_heap_for_the_next_tensor():
    applied, mmapped, kept = probe("keep")
    assert applied
    assert mmapped < 8 << 20, "an 8 MiB block comes from the heap, not fresh pages"
    assert kept >= 32 << 20, "and freed blocks stay there"
    # glibc's default, for comparison: the first such block is fresh pages, and the heap
    # gives back what it holds free beyond twice the largest block freed so far
    applied, mmapped, kept = probe("default")
    assert not applied and mmapped >= 8 << 20 and kept < 32 << 20


def test_it_says_whether_it_applied():
    # True exactly where the process runs on glibc (whose own symbol it looks for)
    import ctypes

    try:
        ctypes.CDLL(None).gnu_get_libc_version  # noqa: B018
        glibc = sys.platform.startswith("linux")
    except (OSError, AttributeError):
        glibc = False
    assert keep_freed_memory() is glibc
