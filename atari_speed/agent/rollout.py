"""PQN's rollout: N envs x T steps, kept whole, and its Q(lambda) returns.

``RolloutStore`` takes the actor's writes exactly as the replay does (``put_obs`` then
``commit``), so the one ``Actor`` fills either. Unlike the replay it keeps whole stacked
observations: a rollout is small (128 envs x 32 steps of 4x42x42 uint8 frames is
29 MB) and is dropped after the learner's epochs on it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from atari_speed.core.shm import Layout, arrays_over, layout_nbytes


class RolloutStore:
    """``steps`` rows of ``num_envs`` transitions: observation, action, reward, how the
    episode ended, and a truncated episode's final observation; and ``next_obs``, the
    observation after the last row, that the last step bootstraps from.

    With ``buffer`` (a shared-memory block of ``nbytes``), the arrays live there: parallel
    mode's actor processes each fill their own columns of one rollout the learner reads.
    The rows written (``t``) are this object's own count, so each process keeps its own.
    """

    def __init__(
        self, num_envs: int, steps: int, obs_shape: tuple[int, ...], buffer: Any = None
    ) -> None:
        self.num_envs, self.steps = num_envs, steps
        layout = self.layout(num_envs, steps, obs_shape)
        if buffer is None:
            buffer = bytearray(layout_nbytes(layout))  # zeroed
        arrays = arrays_over(buffer, layout)
        self.obs, self.final_obs = arrays["obs"], arrays["final_obs"]  # final: where truncated
        self.next_obs = arrays["next_obs"]
        self.actions, self.rewards = arrays["actions"], arrays["rewards"]
        self.terminated, self.truncated = arrays["terminated"], arrays["truncated"]
        # max_a Q(obs[t], a) as the acting network computed it while choosing row t's
        # actions (NaN where it did not: random warm-up steps). This process's own array,
        # not in the shared layout: only where the actor and the learner are one process
        # and one network (n-env mode) are these the learner's values, and only there can
        # the targets take them instead of a second forward pass over the rollout.
        self.values = np.full((steps, num_envs), np.nan, np.float32)
        self.t = 0  # rows written

    @staticmethod
    def layout(num_envs: int, steps: int, obs_shape: tuple[int, ...]) -> Layout:
        grid = (steps, num_envs)
        return [
            ("obs", (*grid, *obs_shape), "uint8"),
            ("final_obs", (*grid, *obs_shape), "uint8"),
            ("next_obs", (num_envs, *obs_shape), "uint8"),
            ("actions", grid, "int64"),
            ("rewards", grid, "float32"),
            ("terminated", grid, "bool"),
            ("truncated", grid, "bool"),
        ]

    @classmethod
    def nbytes(cls, num_envs: int, steps: int, obs_shape: tuple[int, ...]) -> int:
        return layout_nbytes(cls.layout(num_envs, steps, obs_shape))

    @property
    def full(self) -> bool:
        return self.t == self.steps

    def clear(self) -> None:
        self.t = 0
        self.values.fill(np.nan)

    def put_obs(
        self, obs: np.ndarray, cols: slice = slice(None), values: np.ndarray | None = None
    ) -> None:
        """Row ``t``'s observations and, if the actor computed them, their max_a Q."""
        if self.full:
            raise ValueError("the rollout is full: learn on it, then clear() it")
        self.obs[self.t, cols] = obs
        if values is not None:
            self.values[self.t, cols] = values

    def acted_values(self) -> np.ndarray | None:
        """max_a Q of rows 1..T-1's observations as the actor computed them, ``(T-1, N)``, or
        None if any is missing (a parallel learner's view of a shared rollout has none)."""
        following = self.values[1:]
        return None if not self.full or np.isnan(following).any() else following

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

    def finish(self, next_obs: np.ndarray, cols: slice = slice(None)) -> None:
        """Record the observation after the last row (what the last step bootstraps from)."""
        if not self.full:
            raise ValueError(f"the rollout has {self.t} of {self.steps} rows: fill it first")
        self.next_obs[cols] = next_obs

    def send(self) -> dict[str, np.ndarray]:
        """The finished rollout as arrays to send elsewhere (a Ray actor's to the learner):
        a truncated episode's final observation only where there is one. Views of this
        store's arrays (Ray copies them as the call returns): send before refilling."""
        names = ("obs", "next_obs", "actions", "rewards", "terminated", "truncated")
        return {
            **{name: getattr(self, name) for name in names},
            "finals": self.final_obs[self.truncated],
        }

    def put_columns(self, sent: dict[str, np.ndarray], cols: slice) -> None:
        """Write a rollout ``send`` made into columns ``cols``. The store counts as full after
        it: its caller writes every column before learning on it."""
        for name in ("obs", "actions", "rewards", "terminated", "truncated"):
            getattr(self, name)[:, cols] = sent[name]
        self.next_obs[cols] = sent["next_obs"]
        self.final_obs[:, cols][sent["truncated"]] = sent["finals"]  # a view: writes through
        self.t = self.steps


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
