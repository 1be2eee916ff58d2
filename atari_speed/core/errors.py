"""Errors raised for bad user input or a failing machine, each one a single line that
names what to fix."""

from __future__ import annotations

import errno
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# errno values that mean the disk (or the user's quota on it) is full.
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


class ConfigError(ValueError):
    """A pipeline, preset or game name that cannot be used.

    The message names the file (or ``<dict>``), the field, the bad value and what is allowed,
    so the command-line entry points can print it as one line without a traceback.
    """


class WorkerError(RuntimeError):
    """An env worker process failed or died; the message names the worker and its error."""


class DiskFullError(OSError):
    """A write failed for want of space; the message names the directory. Whatever was
    being written was removed, and the files it would have replaced are intact."""


def disk_full_cause(err: BaseException) -> OSError | None:
    """The OSError saying "no space left" behind ``err``, if there is one.

    Writers wrap it: torch.save turns the write's ENOSPC into a RuntimeError ("unexpected
    pos") raised while the OSError is being handled, so the chain is searched too.
    """
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in DISK_FULL:
            return current
        if isinstance(current, DiskFullError):
            return current
        current = current.__cause__ or current.__context__
    return None


@contextmanager
def interrupt_as_exception() -> Iterator[None]:
    """SIGTERM behaves like Ctrl-C inside the block (a KeyboardInterrupt), so every way
    out runs the same cleanup: a run saves its checkpoint, a launcher stops its runs."""

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
