"""atari-speed: train DQN agents on Atari as fast as the machine allows.

Public API for notebooks and ablation scripts::

    import atari_speed
    env = atari_speed.make_env("book", "pong", seed=0)
    venv = atari_speed.make_vector_env("fast", "pong", num_envs=4, backend="subprocess")
"""

# first: it sets how OpenMP threads wait, which must be set before anything loads torch
from atari_speed.core import openmp  # noqa: F401
from atari_speed.core.errors import ConfigError, WorkerError
from atari_speed.envs.pipeline import make_env, resolve_game, resolve_pipeline
from atari_speed.envs.vector import VECTOR_BACKENDS, make_vector_env

__all__ = [
    "VECTOR_BACKENDS",
    "ConfigError",
    "WorkerError",
    "make_env",
    "make_vector_env",
    "resolve_game",
    "resolve_pipeline",
]
