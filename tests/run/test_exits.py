"""Every way out of a run ends the process: a full disk, an error in the loop or in a
thread. Each fault is injected into a fresh train.py process (``run_patched``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from atari_speed.run.checkpoint import load_checkpoint
from tests.run.test_training import TINY
from tests.scripts import assert_no_shm_left, error_lines, run_patched, shm_segments

ENOSPC_AFTER = """
import errno
def fail_after(calls, real):
    seen = [0]
    def fake(*args, **kwargs):
        seen[0] += 1
        if seen[0] > calls:
            if len(args) > 1 and hasattr(args[1], "write"):
                args[1].write(b"half a file")  # a write that got partway
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(*args, **kwargs)
    return fake
"""


def nenv(run_dir: Path, frames: int, *extra: str) -> list[str]:
    args = ["--preset", "pong-nenv", "--frames", str(frames), "--run-dir", str(run_dir)]
    return [*args, *TINY, *extra]


def leftovers(run_dir: Path) -> list[str]:
    return [p.name for p in run_dir.iterdir() if ".tmp" in p.name]


def test_a_full_disk_at_the_checkpoint_says_so_in_one_line_and_keeps_the_last_good_one(
    tmp_path,
):
    # The checkpoint at 150 frames is written; the one on the way out (300) finds no space.
    patch = ENOSPC_AFTER + "import torch\ntorch.save = fail_after(1, torch.save)\n"
    out = run_patched(patch, nenv(tmp_path, 300, "--set", "run.checkpoint_every=150"))
    assert out.returncode == 1, out.stderr
    assert error_lines(out.stderr) == [
        f"train.py: error: no space left on {tmp_path} while writing checkpoint.pt: free some "
        "space or give --run-dir on another disk (checkpoint.pt keeps its last good version)"
    ]
    assert leftovers(tmp_path) == []
    assert load_checkpoint(tmp_path / "checkpoint.pt").frames == 150
    assert json.loads((tmp_path / "summary.json").read_text())["frames"] == 300


def test_a_full_disk_under_tensorboard_ends_the_run_in_one_line(tmp_path):
    # TensorBoard writes from its own thread; its error surfaces at the next scalar.
    patch = ENOSPC_AFTER + (
        "from tensorboard.summary.writer import record_writer as r\n"
        "r.RecordWriter.write = fail_after(5, r.RecordWriter.write)\n"
    )
    out = run_patched(patch, nenv(tmp_path, 100_000), timeout=120)
    assert out.returncode == 1, out.stderr
    assert error_lines(out.stderr) == [
        f"train.py: error: no space left on {tmp_path}: free some space or give --run-dir on "
        "another disk (checkpoint.pt and summary.json keep their last good versions)"
    ]
    assert load_checkpoint(tmp_path / "checkpoint.pt").frames < 100_000
    assert leftovers(tmp_path) == []


def test_an_error_in_the_evaluation_thread_ends_the_run(tmp_path):
    patch = (
        "import atari_speed.run.evaluation as e\n"
        "def boom(*args, **kwargs):\n"
        "    raise RuntimeError('evaluation boom')\n"
        "e.play_side_by_side = boom\n"
    )
    extra = ("--set", "eval.every=200", "--set", "eval.episodes=1")
    out = run_patched(patch, nenv(tmp_path, 100_000, *extra), timeout=120)
    assert out.returncode == 1
    assert "RuntimeError: evaluation boom" in out.stderr
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
