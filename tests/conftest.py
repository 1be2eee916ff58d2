"""Suite-wide guards, and a checkpoint the scripts' tests play."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

# What a test module calls to start a script from the launcher's server (tests.launcher).
LAUNCHING = ("run_script", "start_script", "run_patched", "launcher")


def pytest_collection_finish(session: pytest.Session) -> None:
    """Where a selected test will start a script from the launcher's server, start the
    server now: it imports torch and the rest while the first tests run. Not for a run
    that never uses it (the Ray set's new interpreters, mutmut's unit tests)."""
    from tests import launcher

    if any(
        item.get_closest_marker("ray") is None
        and any(name in vars(item.module) for name in LAUNCHING)
        for item in session.items
        if isinstance(item, pytest.Function)
    ):
        launcher.warm()


@pytest.fixture(autouse=True)
def sigint_handler_restored():
    """A test must leave the SIGINT handler as it found it: an ignored SIGINT is inherited
    by every train.py that later tests start, and their Ctrl-C would then do nothing."""
    before = signal.getsignal(signal.SIGINT)
    yield
    after = signal.getsignal(signal.SIGINT)
    assert after is before, f"SIGINT handler left as {after!r} (was {before!r})"


@pytest.fixture(scope="session")
def untrained_checkpoint(tmp_path_factory) -> Path:
    """A checkpoint of a fresh network for Pong's book pipeline, made without train.py."""
    from atari_speed.agent.networks import DQN
    from atari_speed.core.config import Preset
    from atari_speed.envs.pipeline import make_env, resolve_game, resolve_pipeline
    from atari_speed.run.checkpoint import Checkpoint, save_checkpoint

    pipeline, game = resolve_pipeline("book"), resolve_game("pong")
    env = make_env(pipeline, game)
    shape, actions = list(env.observation_space.shape), int(env.action_space.n)
    env.close()
    checkpoint = Checkpoint(
        game=game,
        pipeline=pipeline,
        preset=Preset().to_dict(),
        obs_shape=shape,
        actions=actions,
        dueling=False,
        frames=0,
        net=DQN(tuple(shape), actions).state_dict(),
    )
    path = tmp_path_factory.mktemp("untrained") / "checkpoint.pt"
    save_checkpoint(checkpoint, path)
    return path
