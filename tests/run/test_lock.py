"""One run per directory: a second trainer is refused, and a killed one leaves no stale lock."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from atari_speed.core.errors import ConfigError
from atari_speed.run.lock import RunDirLock
from tests.scripts import train_here

HOLD = """
import sys, time
from pathlib import Path
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
