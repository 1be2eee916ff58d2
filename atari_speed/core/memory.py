"""The C library's malloc, told to keep what a training process frees for its next tensors.

Every minibatch allocates tensors of a few MiB (the gathered frames, their float copies,
the activations) and frees them. glibc's malloc serves blocks of that size from fresh
pages (mmap) once its adaptive threshold says so, and gives freed heap back to the system
(trim), so each update touches new pages and pays a page fault per 4 KiB of them. Keeping
the heap and serving such blocks from it makes the same allocations reuse memory already
mapped. The math is untouched; the process keeps its peak memory.
"""

from __future__ import annotations

import ctypes
import sys

M_TRIM_THRESHOLD = -1  # mallopt's parameter numbers (glibc's malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_MAX = 32 << 20  # the largest glibc accepts on 64-bit: larger blocks are mmapped
TRIM_THRESHOLD = (1 << 31) - 1  # the largest a C int holds: free heap is kept up to 2 GiB


def keep_freed_memory() -> bool:
    """Set glibc's malloc to keep freed heap and to serve blocks below 32 MiB from it, for
    this process from now on. False (and nothing changed) where the C library is not
    glibc or refuses a setting."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None)  # the C library this process already runs on
        mallopt, _ = libc.mallopt, libc.gnu_get_libc_version  # glibc's own symbol
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
