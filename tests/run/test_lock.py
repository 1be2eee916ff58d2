"""One run per directory: a second trainer is refused, and a killed one leaves no stale lock."""

from __future__ import annotations

import errno
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from atari_speed.core.errors import ConfigError
from atari_speed.run import lock as lock_module
from atari_speed.run.lock import RunDirLock
from tests.scripts import train_here

HOLD = """
import sys, time
from pathlib import Path
from atari_speed.run import lock as lock_module
from atari_speed.run.lock import RunDirLock
RunDirLock(Path(sys.argv[1])).acquire()
print("held", flush=True)
time.sleep(120)
"""


def test_a_directory_in_use_is_refused_naming_the_holder_until_it_is_killed(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        refused = rf"{tmp_path}: in use by another run \(pid {holder.pid}\)"
        with pytest.raises(ConfigError, match=refused):
            RunDirLock(tmp_path).acquire()
        # SIGKILL: no code of the holder's runs on the way out, and the lock goes with it
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
    finally:
        holder.kill()
        holder.wait(timeout=10)
    lock = RunDirLock(tmp_path).acquire()
    assert (tmp_path / ".lock").read_text() == f"{os.getpid()}\n"
    with pytest.raises(ConfigError, match=rf"\(pid {os.getpid()}\)"):
        RunDirLock(tmp_path).acquire()  # held by this process now, through another descriptor
    lock.release()
    RunDirLock(tmp_path).acquire().release()  # released: the next one gets it


def test_train_on_a_directory_in_use_stops_in_one_line_before_writing(tmp_path: Path):
    (tmp_path / "scores.csv").write_text("seconds,frames,score,smoothed\n1.0,100,-21,-21\n")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    lock = RunDirLock(tmp_path).acquire()
    try:
        out = train_here("--preset", "pong-nenv", "--frames", "600", "--run-dir", str(tmp_path))
    finally:
        lock.release()
    assert out.returncode == 2
    assert out.stderr == (
        f"train.py: error: {tmp_path}: in use by another run (pid {os.getpid()}); wait for it "
        "to end, stop it (SIGTERM saves its checkpoint), or give another --run-dir\n"
    )
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before | {
        ".lock": f"{os.getpid()}\n".encode()
    }


def _sleep_once_started(started) -> None:
    started.set()  # the fork's hooks have run by the time the target does
    time.sleep(60)


def test_a_forked_child_does_not_keep_the_lock_of_its_parent(tmp_path):
    # a subprocess env worker outliving its trainer must not hold the run directory
    fork = mp.get_context("fork")
    lock = RunDirLock(tmp_path).acquire()
    started = fork.Event()
    child = fork.Process(target=_sleep_once_started, args=(started,))
    child.start()
    try:
        assert started.wait(timeout=30)
        lock.release()
        RunDirLock(tmp_path).acquire().release()  # refused if the child kept a copy
    finally:
        child.kill()
        child.join(timeout=10)


@pytest.mark.parametrize(
    ("code", "name"),
    [(errno.ENOLCK, "ENOLCK"), (errno.EOPNOTSUPP, "ENOTSUP"), (errno.ENOSYS, "ENOSYS")],
)
def test_a_filesystem_without_flock_is_refused_in_one_line(tmp_path, monkeypatch, code, name):
    # NFS without lockd answers ENOLCK, some FUSE and SMB mounts EOPNOTSUPP (ENOTSUP)
    def no_locks(fd, operation):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(lock_module.fcntl, "flock", no_locks)
    opened = []
    real_open = os.open
    monkeypatch.setattr(
        lock_module.os, "open", lambda *a: opened.append(real_open(*a)) or opened[-1]
    )
    with pytest.raises(ConfigError) as refused:
        RunDirLock(tmp_path).acquire()
    assert str(refused.value) == (
        f"{tmp_path}: this filesystem cannot lock the run directory ({name}: "
        f"{os.strerror(code)}); give a --run-dir on a local disk"
    )
    with pytest.raises(OSError, match="Bad file descriptor"):
        os.fstat(opened[0])  # the descriptor is not kept


def test_another_flock_failure_is_not_taken_for_a_missing_lock(tmp_path, monkeypatch):
    def broken(fd, operation):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(lock_module.fcntl, "flock", broken)
    with pytest.raises(OSError, match="Input/output error"):
        RunDirLock(tmp_path).acquire()
