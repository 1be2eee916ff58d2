"""N envs stepped together, through one interface with three execution backends.

- ``sync``: the envs stepped in this process, one after another;
- ``subprocess``: envs split over worker processes; every array (actions, observations,
  rewards, flags, episode statistics) lives in one shared-memory block allocated once, and
  the pipes carry only one-word commands. ``sync`` runs the very same ``step_envs``
  function in-process, so it is the serial mode of ``subprocess``;
- ``ale``: ale-py's native C++ ``AtariVectorEnv``, with the pipeline's stages mapped onto
  its options (a stage it cannot express is refused by name).

All three follow gymnasium's vector API with ``SAME_STEP`` autoreset: when env i's episode
ends, ``obs[i]`` is already the first observation of the next one, the last observation
of the ended one is ``infos["final_obs"][i]`` (valid where ``infos["_final_obs"][i]``), and
when a whole *game* ends (not just a life) ``infos["episode"]`` holds its unclipped score
``r``, agent steps ``l`` and emulator ``frames``, valid where ``infos["_episode"][i]``.

The arrays returned by ``reset`` and ``step`` are the env's own buffers, overwritten by the
next call: copy what you keep. That is what lets the subprocess backend move no pixels
through pipes.

This module picks and builds a backend (``make_vector_env``); they live in
``atari_speed.envs.stepping`` (the base class, ``step_envs`` and ``sync``),
``atari_speed.envs.subproc`` and ``atari_speed.envs.ale``.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from atari_speed.core.errors import ConfigError
from atari_speed.core.shm import attach
from atari_speed.core.timing import StageTimer
from atari_speed.envs.ale import AleVectorEnv, ale_options, ale_start_differs
from atari_speed.envs.pipeline import make_env, resolve_game, resolve_pipeline
from atari_speed.envs.stepping import SyncVectorEnv, VectorEnv
from atari_speed.envs.subproc import SubprocessVectorEnv, quiet_children

__all__ = [
    "VECTOR_BACKENDS",
    "AleVectorEnv",
    "PipelineArg",
    "SubprocessVectorEnv",
    "SyncVectorEnv",
    "VectorEnv",
    "ale_options",
    "ale_start_differs",
    "make_vector_env",
    "quiet_children",
]

# The old private name of atari_speed.core.shm.attach, for atari_speed/run/parallel.py
# until it imports attach from there.
_attach = attach

PipelineArg = str | Path | Mapping[str, Any]

VECTOR_BACKENDS = ("sync", "subprocess", "ale")


def make_vector_env(
    pipeline: PipelineArg,
    game: str,
    num_envs: int,
    backend: str = "sync",
    seed: int | None = None,
    profile: bool = False,
    **options: Any,
) -> VectorEnv:
    """Build ``num_envs`` envs of one pipeline and game on an execution backend.

    ``options`` go to the backend: ``num_workers``, ``timeout``, ``start_method`` for
    ``subprocess``; ``num_threads`` for ``ale``. If worker processes cannot be started
    here (some notebooks and sandboxes), ``subprocess`` falls back to ``sync`` with a
    warning. ``seed`` seeds env i with ``seed + i`` at the first reset. ``profile`` times
    every pipeline stage: in this process (``stage_timer``) or in the env workers
    (``worker_profiles()``); ale's native stages cannot be timed one by one.
    """
    if backend not in VECTOR_BACKENDS:
        raise ConfigError(f"env backend {backend!r}: expected one of {', '.join(VECTOR_BACKENDS)}")
    if not isinstance(num_envs, int) or num_envs < 1:
        raise ConfigError(f"num_envs = {num_envs!r}: expected an integer >= 1")
    resolved = resolve_pipeline(pipeline)
    resolve_game(game)
    timer = StageTimer() if profile and backend != "ale" else None
    tap = None if timer is None else timer.tap
    env_fns = [lambda: make_env(resolved, game, tap=tap)] * num_envs
    if backend == "ale":
        env: VectorEnv = AleVectorEnv(resolved, game, num_envs, **options)
    elif backend == "subprocess":
        try:
            env = SubprocessVectorEnv(resolved, game, num_envs, profile=profile, **options)
        except (OSError, EOFError) as err:
            warnings.warn(
                f"subprocess env backend could not start worker processes ({err}); "
                "falling back to the in-process sync backend",
                RuntimeWarning,
                stacklevel=2,
            )
            env = SyncVectorEnv(env_fns, pipeline=resolved, backend=backend, stage_timer=timer)
    else:
        env = SyncVectorEnv(env_fns, pipeline=resolved, backend=backend, stage_timer=timer)
    if seed is not None:
        env.reset(seed=seed)
        env.action_space.seed(seed)
    return env
