"""The batch's per-step buffers, the one routine that steps envs into them, the base class
of the vector backends, and the ``sync`` backend that steps in this process.

``step_envs`` is the single stepping routine: ``SyncVectorEnv`` calls it here, the
subprocess backend's workers (``atari_speed.envs.subproc``) call it on their slice of
the shared buffers. The vector API all backends follow is described in
``atari_speed.envs.vector``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from atari_speed.core.shm import Layout, arrays_over, layout_nbytes
from atari_speed.core.timing import StageTimer
from atari_speed.envs.wrappers import GAME_SCORE, NEW_GAME, StackedFrames


@dataclass
class StepBuffers:
    """Every per-step array of N envs. Allocated once; in shared memory for subprocesses."""

    obs: np.ndarray
    final_obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    game_over: np.ndarray
    game_reward: np.ndarray  # the game's unclipped score so far; its final one at game_over
    game_steps: np.ndarray
    game_frames: np.ndarray

    @staticmethod
    def layout(num_envs: int, obs_shape: tuple[int, ...]) -> Layout:
        n = (num_envs,)
        return [
            ("obs", n + obs_shape, "uint8"),
            ("final_obs", n + obs_shape, "uint8"),
            ("actions", n, "int64"),
            ("rewards", n, "float32"),
            ("terminated", n, "bool"),
            ("truncated", n, "bool"),
            ("game_over", n, "bool"),
            ("game_reward", n, "float64"),
            ("game_steps", n, "int64"),
            ("game_frames", n, "int64"),
        ]

    @classmethod
    def nbytes(cls, num_envs: int, obs_shape: tuple[int, ...]) -> int:
        return layout_nbytes(cls.layout(num_envs, obs_shape))

    @classmethod
    def over(cls, buffer: Any, num_envs: int, obs_shape: tuple[int, ...]) -> StepBuffers:
        """View the arrays over ``buffer`` (a bytearray or a SharedMemory's ``buf``)."""
        return cls(**arrays_over(buffer, cls.layout(num_envs, obs_shape)))

    def release(self) -> None:
        """Drop the views so the shared-memory block can be closed."""
        for f in fields(self):
            setattr(self, f.name, None)


def _write(dst: np.ndarray, obs: Any) -> None:
    if isinstance(obs, StackedFrames):
        obs.write_into(dst)
    else:
        dst[...] = obs


def reset_envs(
    envs: Sequence[gym.Env],
    buf: StepBuffers,
    first: int,
    seeds: Sequence,
    only: Sequence[bool] | None = None,
) -> None:
    """Reset envs ``first..first+len(envs)-1`` of the batch into ``buf``; with ``only``
    (one flag per env of the slice), just those flagged, the others left as they are."""
    for j, env in enumerate(envs):
        if only is not None and not only[j]:
            continue
        obs, _ = env.reset(seed=seeds[j], options={NEW_GAME: True})
        _write(buf.obs[first + j], obs)
        buf.game_over[first + j] = False
        buf.game_reward[first + j] = 0


def reset_mask(options: dict | None, num_envs: int) -> np.ndarray | None:
    """gymnasium's ``options["reset_mask"]``: a bool array, one flag per env, of the envs a
    ``reset`` resets (the others keep their games and observations); None: all of them."""
    if options is None or "reset_mask" not in options:
        return None
    mask = options["reset_mask"]
    if not isinstance(mask, np.ndarray) or mask.dtype != np.bool_ or mask.shape != (num_envs,):
        raise ValueError(f"reset_mask must be a bool numpy array of shape ({num_envs},)")
    return mask


def step_envs(envs: Sequence[gym.Env], buf: StepBuffers, first: int) -> None:
    """Step envs ``first..`` with ``buf.actions``, autoresetting those whose episode ends.

    The one stepping routine: the sync backend calls it in-process, subprocess workers
    call it on their slice of the shared buffers.
    """
    for j, env in enumerate(envs):
        i = first + j
        obs, reward, terminated, truncated, info = env.step(int(buf.actions[i]))
        buf.rewards[i], buf.terminated[i], buf.truncated[i] = reward, terminated, truncated
        game = info.get("episode")
        buf.game_over[i] = game is not None
        buf.game_reward[i] = info.get(GAME_SCORE, 0.0)
        if game is not None:
            buf.game_reward[i], buf.game_steps[i], buf.game_frames[i] = (
                game["r"],
                game["l"],
                game["frames"],
            )
        if terminated or truncated:
            _write(buf.final_obs[i], obs)
            obs, reset_info = env.reset()
            if game is None:  # a life lost: EpisodicLife's reset played a step of the game
                buf.game_reward[i] = reset_info.get(GAME_SCORE, 0.0)
        _write(buf.obs[i], obs)


class VectorEnv(gym.vector.VectorEnv):
    """What the three backends share: spaces, buffers, and the ``infos`` they report."""

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}  # noqa: RUF012
    # Set by every backend's constructor:
    # with profiling on, the in-process envs' stage taps (sync backend), else None;
    stage_timer: StageTimer | None
    # the resolved pipeline the envs run (None for a SyncVectorEnv given no pipeline);
    pipeline: dict[str, Any] | None
    # the backend asked for (make_vector_env's ``backend``: "subprocess" also where it
    # fell back to a SyncVectorEnv).
    backend: str

    def worker_profiles(self) -> dict[str, dict[str, Any]]:
        """Profile reports of env worker processes, by name (subprocess backend); {} when
        there are none to be had."""
        return {}

    def _setup(self, num_envs: int, obs_space: gym.spaces.Box, num_actions: int) -> None:
        self.num_envs = num_envs
        self.single_observation_space = obs_space
        self.single_action_space = gym.spaces.Discrete(num_actions)
        self.observation_space = gym.vector.utils.batch_space(obs_space, num_envs)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, num_envs)

    def _infos(self, buf: StepBuffers) -> dict[str, Any]:
        ended = buf.terminated | buf.truncated
        infos: dict[str, Any] = {}
        if ended.any():
            infos["final_obs"], infos["_final_obs"] = buf.final_obs, ended
        if buf.game_over.any():
            infos["episode"] = {
                "r": buf.game_reward.copy(),
                "l": buf.game_steps.copy(),
                "frames": buf.game_frames.copy(),
            }
            infos["_episode"] = buf.game_over.copy()
        return infos

    def _seeds(self, seed: int | None) -> list[int | None]:
        return [None if seed is None else seed + i for i in range(self.num_envs)]


class SyncVectorEnv(VectorEnv):
    """The envs stepped one after another in this process."""

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        *,
        pipeline: dict[str, Any] | None = None,
        backend: str = "sync",
        stage_timer: StageTimer | None = None,
    ) -> None:
        """``stage_timer``: the StageTimer whose taps the envs ``env_fns`` build report to
        (profiling), else None."""
        self.pipeline = pipeline
        self.backend = backend
        self.stage_timer = stage_timer
        self.envs = [fn() for fn in env_fns]
        first = self.envs[0]
        self._setup(len(self.envs), first.observation_space, int(first.action_space.n))
        shape = first.observation_space.shape
        self.buf = StepBuffers.over(
            bytearray(StepBuffers.nbytes(self.num_envs, shape)), self.num_envs, shape
        )

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        reset_envs(self.envs, self.buf, 0, self._seeds(seed), reset_mask(options, self.num_envs))
        return self.buf.obs, {}

    def step(self, actions: np.ndarray):
        self.buf.actions[:] = actions
        step_envs(self.envs, self.buf, 0)
        b = self.buf
        return b.obs, b.rewards, b.terminated, b.truncated, self._infos(b)

    def close_extras(self, **kwargs: Any) -> None:
        for env in self.envs:
            env.close()
