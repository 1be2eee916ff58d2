"""Vector env backends: same results, whole-game statistics, failures named, no orphans."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import atari_speed.envs.subproc as subproc
import atari_speed.envs.vector as vector
from atari_speed import ConfigError, WorkerError, make_vector_env
from tests.scripts import ROOT


def run(env, steps, seed=0):
    """Step with random actions; return observations, rewards, dones and finished games."""
    rng = np.random.default_rng(seed)
    obs_log, rewards, dones, games = [], [], [], []
    for _ in range(steps):
        obs, reward, terminated, truncated, info = env.step(rng.integers(0, 4, env.num_envs))
        obs_log.append(obs.copy())
        rewards.append(reward.copy())
        dones.append(terminated | truncated)
        if "_episode" in info:
            for i in np.flatnonzero(info["_episode"]):
                ep = info["episode"]
                games.append((int(i), ep["r"][i], ep["l"][i], ep["frames"][i]))
    return np.array(obs_log), np.array(rewards), np.array(dones), games


def test_sync_and_subprocess_give_identical_results():
    results = []
    for backend in ("sync", "subprocess"):
        env = make_vector_env("book", "breakout", 3, backend=backend, seed=7, num_workers=2)
        assert env.observation_space.shape == (3, 4, 84, 84)
        results.append(run(env, 400))
        env.close()
    (obs_a, rew_a, done_a, games_a), (obs_b, rew_b, done_b, games_b) = results
    assert np.array_equal(obs_a, obs_b) and np.array_equal(rew_a, rew_b)
    assert np.array_equal(done_a, done_b) and games_a == games_b
    assert games_a, "400 random steps of Breakout finish at least one game"


@pytest.mark.parametrize("backend", ["sync", "subprocess", "ale"])
def test_backends_report_whole_games_across_lives(backend):
    # ALE cannot play the book's FireReset (tests/envs/test_ale.py): it runs the 84x84
    # pipeline it can, of the same shapes and clipping.
    pipeline = "maxpool84" if backend == "ale" else "book"
    env = make_vector_env(pipeline, "breakout", 2, backend=backend, seed=0)
    assert env.single_observation_space.shape == (4, 84, 84)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (2, 4, 84, 84) and obs.dtype == np.uint8
    life_ends = np.zeros(2, dtype=int)
    rng = np.random.default_rng(0)
    game = None
    for _ in range(3000):
        obs, reward, terminated, _truncated, info = env.step(rng.integers(0, 4, 2))
        assert set(np.unique(reward)) <= {-1.0, 0.0, 1.0}, "ClipReward clips"
        if terminated.any():
            assert info["_final_obs"][terminated].all()
            assert info["final_obs"].shape == obs.shape
        life_ends += terminated
        if "_episode" in info:
            i = int(np.flatnonzero(info["_episode"])[0])
            game = (
                life_ends[i],
                info["episode"]["r"][i],
                info["episode"]["l"][i],
                info["episode"]["frames"][i],
            )
            break
    env.close()
    assert game is not None
    ends, score, steps, frames = game
    assert ends == 5, "Breakout has 5 lives: each loss ends a training episode"
    assert score >= 0 and score == int(score)
    # Emulator frames: 4 per agent step, plus (on the wrapper backends) a NOOP and FIRE, 2
    # steps after each life loss and at the start; fewer if the game ends inside a skip.
    assert steps > 0 and 4 * steps - 4 <= frames <= 4 * steps + 16 * ends


def test_killed_worker_is_named_within_seconds_and_nothing_is_left_running():
    env = make_vector_env("book", "pong", 4, backend="subprocess", num_workers=2)
    env.reset(seed=0)
    # A death is seen through the worker's sentinel, at once; waiting out the answer
    # timeout instead would take 600 s, far past the generous bound below.
    env.timeout = 600.0
    victim = env.workers[1]
    os.kill(victim.pid, signal.SIGKILL)
    start = time.monotonic()
    with pytest.raises(
        WorkerError,
        match=r"env worker 1 \(pid \d+\) died during step with exit "
        r"code -9",
    ):
        env.step(np.zeros(4, dtype=np.int64))
    assert time.monotonic() - start < 120
    assert not any(p.is_alive() for p in env.workers)


def in_fresh_process(code: str) -> None:
    """Run ``code`` in a new interpreter and fail with its output if it fails.

    The two tests below patch the worker's step function and fork workers, which inherit
    the patch. Forking this pytest process is unsafe: after other tests it holds threads
    (OpenCV's and torch's pools) whose locks a forked child can never take, and the child
    then hangs at start. A fresh interpreter has none.
    """
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stdout + out.stderr


def test_worker_exception_is_raised_naming_the_worker():
    # Only worker 1 (envs 1..) fails: with both failing, which report arrives first is up
    # to the scheduler, and either would be a right answer.
    in_fresh_process(
        """
        import numpy as np, pytest
        import atari_speed.envs.subproc as subproc
        from atari_speed import WorkerError, make_vector_env

        step_envs = subproc.step_envs

        def broken(envs, buf, first):
            if first == 1:
                raise ValueError("emulator on fire")
            step_envs(envs, buf, first)

        subproc.step_envs = broken  # where the worker looks it up; forked workers inherit it
        env = make_vector_env(
            "book", "pong", 2, backend="subprocess", start_method="fork", num_workers=2
        )
        env.reset(seed=0)
        match = r"env worker 1 failed during step: ValueError: emulator on fire"
        with pytest.raises(WorkerError, match=match):
            env.step(np.zeros(2, dtype=np.int64))
        assert not any(p.is_alive() for p in env.workers)
        print("ok")
        """
    )


def test_hung_worker_times_out():
    in_fresh_process(
        """
        import time
        import numpy as np, pytest
        import atari_speed.envs.subproc as subproc
        from atari_speed import WorkerError, make_vector_env

        subproc.step_envs = lambda envs, buf, first: time.sleep(60)
        env = make_vector_env(
            "book", "pong", 2, backend="subprocess", start_method="fork", num_workers=2
        )
        env.reset(seed=0)  # under the default timeout: a loaded machine starts workers slowly
        env.timeout = 1.0  # the step sleeps 60 s, so only the timeout can end it
        with pytest.raises(WorkerError, match=r"gave no answer to step in 1 s"):
            env.step(np.zeros(2, dtype=np.int64))
        assert not any(p.is_alive() for p in env.workers)
        print("ok")
        """
    )


def test_subprocess_falls_back_to_sync_with_a_warning(monkeypatch):
    def no_shm(*args, **kwargs):
        raise OSError("no /dev/shm here")

    monkeypatch.setattr(subproc, "SharedMemory", no_shm)  # where the constructor finds it
    with pytest.warns(
        RuntimeWarning,
        match=r"could not start worker processes \(no /dev/shm "
        r"here\); falling back to the in-process sync",
    ):
        env = make_vector_env("book", "pong", 2, backend="subprocess")
    assert isinstance(env, vector.SyncVectorEnv)
    assert env.reset(seed=0)[0].shape == (2, 4, 84, 84)


def test_close_joins_every_worker():
    env = make_vector_env("fast", "pong", 2, backend="subprocess")
    env.reset(seed=0)
    env.close()
    assert all(p.exitcode == 0 for p in env.workers)


@pytest.mark.parametrize(
    ("stages", "message"),
    [
        ([{"wrapper": "WarpFrame"}], r"needs a FrameStack stage"),
        (
            [
                {"wrapper": "MaxAndSkip"},
                {"wrapper": "NoopReset"},
                {"wrapper": "WarpFrame"},
                {"wrapper": "FrameStack"},
            ],
            r"stage order MaxAndSkip -> NoopReset -> WarpFrame -> "
            r"FrameStack cannot be expressed",
        ),
        (
            [{"wrapper": "WarpFrame", "grayscale": False}, {"wrapper": "FrameStack"}],
            r"stage 1 \(WarpFrame\) grayscale=false is not supported",
        ),
    ],
)
def test_ale_backend_refuses_what_it_cannot_express(stages, message):
    with pytest.raises(ConfigError, match=message):
        make_vector_env({"name": "mine", "stages": stages}, "pong", 2, backend="ale")


def test_bad_backend_and_env_count():
    with pytest.raises(
        ConfigError,
        match=r"env backend 'threads': expected one of sync, "
        r"subprocess, ale",
    ):
        make_vector_env("book", "pong", 2, backend="threads")
    with pytest.raises(ConfigError, match=r"num_envs = 0: expected an integer >= 1"):
        make_vector_env("book", "pong", 0)


@pytest.mark.parametrize("backend", ["sync", "subprocess"])
def test_profile_times_each_stage_where_the_envs_run(backend):
    # two workers whatever the cores (one CPU would make one): the reports name both
    workers = {"num_workers": 2} if backend == "subprocess" else {}
    venv = make_vector_env("book", "pong", 2, backend=backend, seed=0, profile=True, **workers)
    try:
        for _ in range(10):
            venv.step(np.zeros(2, dtype=np.int64))
        if backend == "sync":
            # 10 steps x 2 envs, plus the seeded first reset of each (taps time resets too)
            assert venv.stage_timer.calls["WarpFrame"] == 22
            assert venv.worker_profiles() == {}
        else:
            assert venv.stage_timer is None
            reports = venv.worker_profiles()
            assert set(reports) == {"env worker 0", "env worker 1"}
            rows = {r["stage"]: r for r in reports["env worker 0"]["rows"]}
            assert rows["env step/WarpFrame"]["calls"] == 11
            assert rows["env step/emulator"]["calls"] >= 40  # + the reset's fire and no-op
            assert rows["wait for command"]["calls"] >= 10
    finally:
        venv.close()


GUARDLESS_SCRIPT = """
import numpy as np
import atari_speed

print("top of script")
env = atari_speed.make_vector_env("book", "pong", num_envs=2, backend="subprocess")
obs, _ = env.reset(seed=0)
for _ in range(3):
    obs, *_ = env.step(np.zeros(2, dtype=np.int64))
print("stepped", obs.shape)
env.close()
"""


def test_the_subprocess_backend_works_from_a_script_without_a_main_guard(tmp_path):
    # Spawned workers would import the script as their __main__ and run it again (every
    # worker failing at start); they are started without it. No emulator banner either.
    script = tmp_path / "quick.py"
    script.write_text(GUARDLESS_SCRIPT)
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["top of script", "stepped (2, 4, 84, 84)"]
    assert out.stderr == ""


@pytest.mark.parametrize("backend", ["sync", "subprocess", "ale"])
def test_a_partial_reset_restarts_only_the_envs_in_its_mask(backend):
    # the book's pipeline has EpisodicLife, whose reset after a lost life would go on
    pipeline = "maxpool84" if backend == "ale" else "book"
    options = {} if backend == "ale" else {"seed": 0, "num_workers": 2}
    env = make_vector_env(pipeline, "breakout", 2, backend=backend, **options)
    fresh = make_vector_env(pipeline, "breakout", 2, backend=backend, **options)
    try:
        first, _ = fresh.reset(seed=5)
        first = first.copy()
        env.reset(seed=3)
        obs, *_ = run(env, 60)
        before = obs[-1]
        assert not np.array_equal(before[1], first[1])  # 60 steps in, not a first frame
        obs, _ = env.reset(seed=5, options={"reset_mask": np.array([True, False])})
        # env 0 is at the start of a new game, seeded as a full reset seeds it; env 1 is
        # where it was, and plays on from there
        assert np.array_equal(obs[0], first[0])
        assert np.array_equal(obs[1], before[1])
        with pytest.raises(ValueError, match="reset_mask"):
            env.reset(options={"reset_mask": np.array([1, 0])})
    finally:
        env.close()
        fresh.close()
