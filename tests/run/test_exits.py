"""Every way out of a run ends it: a full disk, an error in the loop or in a thread. The
faults in the loop's own process are injected into ``train_main`` in this process (the
process would end when the run leaves nothing running but daemon threads: checked); the
parallel learner's, whose subject is a process tree, into a fresh train.py
(``run_patched``)."""

from __future__ import annotations

import errno
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from atari_speed.run.checkpoint import load_checkpoint
from tests.run.test_training import TINY
from tests.scripts import assert_no_shm_left, error_lines, run_patched, shm_segments, train_here


def fail_after(calls: int, real: Callable) -> Callable:
    """``real`` for its first ``calls`` calls, then a full disk (after writing part of the
    file, where the call has one)."""
    seen = [0]

    def fake(*args, **kwargs):
        seen[0] += 1
        if seen[0] > calls:
            if len(args) > 1 and hasattr(args[1], "write"):
                args[1].write(b"half a file")  # a write that got partway
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(*args, **kwargs)

    return fake


def nenv(run_dir: Path, frames: int, *extra: str) -> list[str]:
    args = ["--preset", "pong-nenv", "--frames", str(frames), "--run-dir", str(run_dir)]
    return [*args, *TINY, *extra]


def leftovers(run_dir: Path) -> list[str]:
    return [p.name for p in run_dir.iterdir() if ".tmp" in p.name]


@pytest.fixture
def nothing_left_running():
    """After the test, no thread the run started would keep a process alive (a non-daemon
    thread, which Python waits for at exit) and no child process is left."""
    import multiprocessing

    before = set(threading.enumerate())
    yield
    left = [t.name for t in threading.enumerate() if t not in before and not t.daemon]
    assert left == [], f"threads that would keep train.py alive: {left}"
    assert multiprocessing.active_children() == []


def test_a_full_disk_at_the_checkpoint_says_so_in_one_line_and_keeps_the_last_good_one(
    tmp_path, monkeypatch, nothing_left_running
):
    # The checkpoint at 150 frames is written; the one on the way out (300) finds no space.
    monkeypatch.setattr(torch, "save", fail_after(1, torch.save))
    out = train_here(*nenv(tmp_path, 300, "--set", "run.checkpoint_every=150"))
    assert out.returncode == 1, out.stderr
    assert error_lines(out.stderr) == [
        f"train.py: error: no space left on {tmp_path} while writing checkpoint.pt: free some "
        "space or give --run-dir on another disk (checkpoint.pt keeps its last good version)"
    ]
    assert leftovers(tmp_path) == []
    assert load_checkpoint(tmp_path / "checkpoint.pt").frames == 150
    assert json.loads((tmp_path / "summary.json").read_text())["steps"] == 300


def test_a_full_disk_under_tensorboard_ends_the_run_in_one_line(
    tmp_path, monkeypatch, nothing_left_running
):
    # TensorBoard writes from its own thread; its error surfaces at the next scalar.
    from tensorboard.summary.writer import record_writer

    writer = record_writer.RecordWriter
    monkeypatch.setattr(writer, "write", fail_after(5, writer.write))
    out = train_here(*nenv(tmp_path, 100_000))
    assert out.returncode == 1, out.stderr
    assert error_lines(out.stderr) == [
        f"train.py: error: no space left on {tmp_path}: free some space or give --run-dir on "
        "another disk (checkpoint.pt and summary.json keep their last good versions)"
    ]
    assert load_checkpoint(tmp_path / "checkpoint.pt").frames < 100_000
    assert leftovers(tmp_path) == []


def test_an_error_in_the_evaluation_thread_ends_the_run(
    tmp_path, monkeypatch, nothing_left_running
):
    import atari_speed.run.evaluation as evaluation

    def boom(*args, **kwargs):
        raise RuntimeError("evaluation boom")

    monkeypatch.setattr(evaluation, "play_side_by_side", boom)
    extra = ("--set", "eval.every=200", "--set", "eval.episodes=1")
    # Raised out of main, as the script would (Python prints it and exits 1).
    with pytest.raises(RuntimeError, match="evaluation boom"):
        train_here(*nenv(tmp_path, 100_000, *extra))
    assert 200 <= load_checkpoint(tmp_path / "checkpoint.pt").frames < 100_000


@pytest.mark.parametrize("algorithm", ["dqn", "pqn"])
def test_an_error_in_the_parallel_learner_stops_the_actors_and_frees_shared_memory(
    tmp_path, algorithm
):
    patch = (
        "from atari_speed.run.session import Run\n"
        "from atari_speed.agent.pqn import QLambdaLearner\n"
        "def boom(*args, **kwargs):\n"
        "    raise RuntimeError('learner boom')\n"
        + ("Run.learn = boom\n" if algorithm == "dqn" else "QLambdaLearner.learn = boom\n")
    )
    preset = "pong-parallel" if algorithm == "dqn" else "pong-pqn"
    args = ["--preset", preset, "--mode", "parallel", "--frames", "100000"]
    args += ["--run-dir", str(tmp_path), "--set", "run.actors=2", "--set", "run.envs=2"]
    if algorithm == "pqn":
        args += ["--set", "pqn.rollout=8", "--set", "pqn.minibatches=2"]
    else:
        args += TINY
    before = shm_segments()
    out = run_patched(patch, args, timeout=120)
    assert out.returncode == 1
    assert "RuntimeError: learner boom" in out.stderr
    assert_no_shm_left(before, out.stderr)
    s = json.loads((tmp_path / "summary.json").read_text())
    for pid in s["choices"]["actor_pids"]:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert load_checkpoint(tmp_path / "checkpoint.pt").frames > 0
    if algorithm == "dqn":  # the replay is saved on this way out too
        assert (tmp_path / "replay.npz").is_file()
