"""PQN's rollout: N envs x T steps, kept whole, and its Q(lambda) returns.

``RolloutStore`` takes the actor's writes exactly as the replay does (``put_obs`` then
``commit``), so the one ``Actor`` fills either. Unlike the replay it keeps whole stacked
observations: a rollout is small (16 envs x 64 steps of 4x42x42 frames: 7 MB) and is
dropped after the learner's epochs on it.
"""

from __future__ import annotations

import numpy as np


class RolloutStore:
    """``steps`` rows of ``num_envs`` transitions: observation, action, reward, how the
    episode ended, and a truncated episode's final observation."""

    def __init__(self, num_envs: int, steps: int, obs_shape: tuple[int, ...]) -> None:
        self.num_envs, self.steps = num_envs, steps
        grid = (steps, num_envs)
        self.obs = np.zeros((*grid, *obs_shape), np.uint8)
        self.final_obs = np.zeros((*grid, *obs_shape), np.uint8)  # where truncated
        self.actions = np.zeros(grid, np.int64)
        self.rewards = np.zeros(grid, np.float32)
        self.terminated = np.zeros(grid, bool)
        self.truncated = np.zeros(grid, bool)
        self.t = 0  # rows written

    @property
    def full(self) -> bool:
        return self.t == self.steps

    def clear(self) -> None:
        self.t = 0

    def put_obs(self, obs: np.ndarray, cols: slice = slice(None)) -> None:
        if self.full:
            raise ValueError("the rollout is full: learn on it, then clear() it")
        self.obs[self.t, cols] = obs

    def commit(
        self,
        actions: np.ndarray,
        rewards: np.ndarray,
        terminated: np.ndarray,
        *,
        truncated: np.ndarray | None = None,
        final_obs: np.ndarray | None = None,
        cols: slice = slice(None),
    ) -> None:
        t = self.t
        self.actions[t, cols] = actions
        self.rewards[t, cols] = rewards
        self.terminated[t, cols] = terminated
        truncated = np.zeros_like(terminated) if truncated is None else truncated & ~terminated
        if final_obs is None:  # nothing to bootstrap from: as the replay does, terminate
            self.terminated[t, cols] |= truncated
            truncated = np.zeros_like(truncated)
        self.truncated[t, cols] = truncated
        if truncated.any():
            self.final_obs[t, cols][truncated] = np.asarray(final_obs)[truncated]
        self.t += 1


def q_lambda_returns(
    rewards: np.ndarray,
    terminated: np.ndarray,
    truncated: np.ndarray,
    next_values: np.ndarray,
    final_values: np.ndarray,
    gamma: float,
    lam: float,
) -> np.ndarray:
    """Peng's Q(lambda) returns of a rollout, computed backwards; all arrays ``(T, N)``.

    ``next_values[t]`` is max_a Q(s_{t+1}, a) (the last row: of the observation after the
    rollout); ``final_values[t]`` the same of a truncated episode's final observation.

    G_t = r_t + gamma * (0                                     if terminated at t,
                         final_values[t]                       if truncated at t,
                         next_values[t]                        if t is the last step,
                         lam * G_{t+1} + (1 - lam) * next_values[t]   otherwise).

    At an episode's end the next step's return belongs to another episode and is cut, with
    the bootstrap, not only the bootstrap.
    """
    steps = len(rewards)
    returns = np.zeros_like(rewards, dtype=np.float32)
    following = next_values[-1]  # G_T: the last step bootstraps fully
    for t in reversed(range(steps)):
        mixed = next_values[t] if t == steps - 1 else lam * following + (1 - lam) * next_values[t]
        ahead = np.where(truncated[t], final_values[t], mixed)
        returns[t] = rewards[t] + gamma * np.where(terminated[t], 0.0, ahead)
        following = returns[t]
    return returns
