"""Named numpy arrays laid out in one flat buffer: a bytearray or a SharedMemory block.

Allocating every array of a component in one block, once, is what lets worker processes
share observations, replay frames and weights while pipes carry only small commands.
``attach`` opens, in a worker, a block the parent created; ``create`` makes a named one.
"""

from __future__ import annotations

from multiprocessing.shared_memory import SharedMemory
from typing import Any

import numpy as np

Layout = list[tuple[str, tuple[int, ...], str]]  # (name, shape, dtype)


def _aligned(nbytes: int) -> int:
    return (nbytes + 63) // 64 * 64  # 64-byte (cache line) aligned arrays


def layout_nbytes(layout: Layout) -> int:
    return sum(
        _aligned(int(np.prod(shape)) * np.dtype(dtype).itemsize) for _, shape, dtype in layout
    )


def arrays_over(buffer: Any, layout: Layout) -> dict[str, np.ndarray]:
    """View each array of ``layout`` over ``buffer``, in order."""
    arrays, offset = {}, 0
    for name, shape, dtype in layout:
        arrays[name] = np.ndarray(shape, dtype=dtype, buffer=buffer, offset=offset)
        offset += _aligned(int(np.prod(shape)) * np.dtype(dtype).itemsize)
    return arrays


def create(name: str, size: int) -> SharedMemory:
    """A new block called ``name``, unlinking first one of that name that was left behind.
    The caller vouches that no live process owns the name (a run holds its directory's
    lock): a block outlives a process killed with its resource tracker (``kill -9`` of a
    process group), and only the next owner of the name can know it is garbage."""
    try:
        return SharedMemory(name=name, create=True, size=size)
    except FileExistsError:
        # Attached the ordinary way: registered with the tracker, as unlink unregisters it.
        stale = SharedMemory(name=name)
        stale.close()
        stale.unlink()  # a process that still maps it keeps its pages; the name is free
        return SharedMemory(name=name, create=True, size=size)


def attach(name: str) -> SharedMemory:
    """Attach to the parent's block without letting this process's exit unlink it."""
    try:
        return SharedMemory(name=name, track=False)  # Python >= 3.13
    except TypeError:
        # Older Pythons register every attachment with the resource tracker, which then
        # unlinks the parent's block (with a warning) when the worker exits.
        from multiprocessing import resource_tracker

        register = resource_tracker.register
        resource_tracker.register = lambda *args, **kwargs: None
        try:
            return SharedMemory(name=name)
        finally:
            resource_tracker.register = register
