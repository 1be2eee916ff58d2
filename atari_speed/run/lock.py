"""One run per directory: a second trainer on a run directory in use is refused.

Two trainers writing one directory would interleave their rows in scores.csv and their
checkpoints (``benchmarks/seeds.py --resume`` started twice makes exactly that). The lock
is an advisory ``flock`` on ``<run_dir>/.lock``: the kernel drops it when its holder
exits, however it exits (SIGKILL, a power cut's reboot), so a stale lock never has to be
cleaned up by hand. The file keeps the holder's pid, for the error to name.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from atari_speed.core.errors import ConfigError

try:
    import fcntl
except ImportError:  # Windows: no flock; runs there are not guarded (docs/reliability.md)
    fcntl = None  # type: ignore[assignment]

LOCK_FILE = ".lock"
# What flock raises where the filesystem has no locks to give (docs/reliability.md).
NO_FLOCK = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS}

# Descriptors of the locks this process holds. A forked child (a subprocess env worker)
# closes its copies at once: a worker outliving a killed trainer must not keep its lock.
_held: set[int] = set()


def _forget_in_child() -> None:
    for fd in _held:
        os.close(fd)  # the child's copy only: the parent's lock stands
    _held.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


class RunDirLock:
    """Held from ``acquire`` until ``release`` (or this process's end)."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / LOCK_FILE
        self.fd: int | None = None

    def acquire(self) -> RunDirLock:
        """Take the lock, or raise ConfigError naming the directory and its holder's pid."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if fcntl is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
                    raise ConfigError(
                        f"{self.path.parent}: in use by another run (pid {holder}); wait for "
                        "it to end, stop it (SIGTERM saves its checkpoint), or give another "
                        "--run-dir"
                    ) from None
                except OSError as err:
                    if err.errno not in NO_FLOCK:
                        raise
                    # NFS without lockd, some FUSE and SMB mounts: no lock to be had here
                    raise ConfigError(
                        f"{self.path.parent}: this filesystem cannot lock the run directory "
                        f"({errno.errorcode[err.errno]}: {err.strerror}); give a --run-dir on "
                        "a local disk"
                    ) from None
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        except BaseException:
            os.close(fd)  # refused or failed: neither the lock nor the descriptor is kept
            raise
        self.fd = fd
        _held.add(fd)
        return self

    def release(self) -> None:
        """Let the next run in; the file stays (removing it would race a new holder)."""
        if self.fd is not None:
            _held.discard(self.fd)
            os.close(self.fd)  # closing the last descriptor drops the flock
            self.fd = None
