"""Parallel mode on Ray. The batches and the refusals need no Ray; the runs are marked
``ray`` (``uv run --extra ray pytest -m ray``, which CI runs after the default suite):
a local Ray with 2 CPUs, 2 Ray actors, end to end, with an actor killed, and Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from atari_speed.agent.actor import Actor
from atari_speed.agent.networks import build_network
from atari_speed.agent.replay import ARRAYS, FrameReplay
from atari_speed.core.config import load_preset
from atari_speed.core.errors import ConfigError
from atari_speed.core.timing import Profiler
from atari_speed.envs.vector import make_vector_env
from atari_speed.run.checkpoint import load_checkpoint
from atari_speed.run.ray_engine import StepRecorder, write_batch
from tests.run.test_pqn import TINY as PQN_TINY
from tests.run.test_training import TINY, wait_until_training
from tests.scripts import run_patched, run_script, start_script

RAY_RUN = ["--preset", "pong-parallel", "--engine", "ray", "--set", "run.actors=2"]
RAY_RUN += ["--set", "run.envs=2", "--set", "dqn.train_every=4", *TINY]
PQN_RAY_RUN = [*PQN_TINY, "--engine", "ray", "--set", "run.actors=2", "--set", "run.envs=2"]


def test_a_batch_written_by_the_learner_equals_what_the_actor_writes_itself():
    # Same envs, seed and network: stepping into the replay, or into a recorder whose
    # batches the learner writes into its columns, must fill the same replay.
    preset = load_preset("pong-parallel")
    net = build_network(preset.dqn, (4, 84, 84), 6)

    def fill(sink_for_replay: bool) -> FrameReplay:
        venv = make_vector_env("book", "pong", 2, backend="sync")
        venv.reset(seed=5)
        replay = FrameReplay(600, 4, (1, 84, 84), 4, n_steps=3)
        recorder = StepRecorder(25, 2, (1, 84, 84))
        sink = replay if sink_for_replay else recorder
        cols = slice(2, 4)
        actor = Actor(
            venv, net, sink, cols, 5, np.random.default_rng(5), torch.device("cpu"), Profiler(False)
        )
        for _ in range(4):  # 100 steps: past games' ends (epsilon 1: random play)
            for _ in range(25):
                actor.step(1.0)
            if not sink_for_replay:
                assert write_batch(recorder.take(), replay, cols) == 50
        venv.close()
        return replay

    direct, batched = fill(True), fill(False)
    for name in ARRAYS:
        assert np.array_equal(getattr(direct, name), getattr(batched, name)), name
    assert direct.written[2:].min() == 100 and direct.written[:2].max() == 0


def test_the_ray_engine_without_ray_installed_is_one_line_naming_the_command(tmp_path):
    patch = "sys.modules['ray'] = None  # as if the extra were not installed"
    out = run_patched(patch, [*RAY_RUN, "--frames", "300", "--run-dir", str(tmp_path / "r")])
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "train.py: error: run.engine = 'ray' needs Ray, an optional extra: run `uv run "
        "--extra ray train.py ...` (or `uv sync --extra ray` once)"
    ]
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["run.engine='ray'", "run.mode='n-env'"], "engine = 'ray' with mode = 'n-env'"),
    ],
)
def test_what_the_ray_engine_does_not_run_is_refused(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_preset("pong-parallel", overrides)


# ---------------------------------------------------------------- with Ray


def summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def ray_processes() -> list[str]:
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "raylet" in line or "gcs_server" in line]


@pytest.mark.ray
def test_two_ray_actors_end_to_end(tmp_path):
    out = run_script("train.py", *RAY_RUN, "--frames", "600", "--run-dir", str(tmp_path))
    assert out.returncode == 0, out.stderr
    s = summary(tmp_path)
    assert s["mode"] == "parallel" and s["envs"] == 4 and s["choices"]["engine"] == "ray"
    data = load_checkpoint(tmp_path / "checkpoint.pt")
    assert data.frames == s["frames"] >= 600
    # The update-to-data ratio holds exactly: one update per 4 frames after the warm-up.
    assert data.learner["updates"] == (data.frames - 200) // 4
    assert (tmp_path / "replay.npz").is_file()
    assert all(gone(pid) for pid in s["choices"]["actor_pids"])
    assert ray_processes() == [], "the local Ray was stopped"


@pytest.mark.ray
def test_pqn_on_two_ray_actors_trains_on_whole_rollouts(tmp_path):
    """Each Ray actor sends its 2 envs' columns of a 16-step rollout; the learner trains
    epochs x minibatches on each whole rollout, at most one rollout behind the actors."""
    out = run_script("train.py", *PQN_RAY_RUN, "--frames", "640", "--run-dir", str(tmp_path))
    assert out.returncode == 0, out.stderr
    s = summary(tmp_path)
    assert s["mode"] == "parallel" and s["envs"] == 4 and s["choices"]["engine"] == "ray"
    data = load_checkpoint(tmp_path / "checkpoint.pt")
    rollout = 4 * 16
    assert data.frames == s["frames"] >= 640
    updates = data.learner["updates"]
    assert updates % 4 == 0  # 2 epochs x 2 minibatches a rollout, only whole rollouts
    # Actors play at most one rollout past the one the learner trains on: every frame
    # counted but the last two rollouts' was trained on.
    assert data.frames <= (updates // 4 + 2) * rollout
    assert not (tmp_path / "replay.npz").exists()  # PQN keeps no replay
    assert ray_processes() == []


@pytest.mark.ray
@pytest.mark.parametrize("args", [RAY_RUN, PQN_RAY_RUN], ids=["dqn", "pqn"])
def test_a_killed_ray_actor_is_restarted_and_the_run_completes(tmp_path, args):
    proc = start_script("train.py", *args, "--frames", "2000", "--run-dir", str(tmp_path))
    try:
        pids = wait_until_training(proc, tmp_path, frames=400)["choices"]["actor_pids"]
        os.kill(pids[1], signal.SIGKILL)
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, err
    assert "ray actor 1 died" in out and "restarted it (1 of 3)" in out
    s = summary(tmp_path)
    assert s["frames"] >= 2000 and s["choices"]["actor_restarts"] == 1
    if args is PQN_RAY_RUN:  # the learner kept training after the restart, not stalled
        updates = load_checkpoint(tmp_path / "checkpoint.pt").learner["updates"]
        assert updates // 4 >= s["frames"] // (4 * 16) - 2
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path)).Reload()
    assert [e.value for e in events.Scalars("ray/actor_restarts")] == [1.0]
    assert ray_processes() == []


@pytest.mark.ray
def test_ctrl_c_stops_the_ray_actors_and_the_local_ray(tmp_path):
    proc = start_script("train.py", *RAY_RUN, "--frames", "10000000", "--run-dir", str(tmp_path))
    try:
        pids = wait_until_training(proc, tmp_path, frames=300)["choices"]["actor_pids"]
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert "checkpoint.pt saved" in err
    time.sleep(2)
    assert all(gone(pid) for pid in pids)
    assert ray_processes() == []
