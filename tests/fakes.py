"""A scripted stand-in for ale_py's AtariEnv, for fast and exact wrapper tests."""

from __future__ import annotations

import contextlib
from typing import Any

import gymnasium as gym
import numpy as np
import torch


class _Lives:
    def __init__(self, env: FakeAtari) -> None:
        self.env = env

    def lives(self) -> int:
        return self.env.lives_now


class FakeAtari(gym.Env):
    """Frame t of a game shows the value ``pixel(t)`` everywhere; everything is scripted.

    ``game_length``: the frame on which the game ends (1-based). ``lives``: frame -> lives
    from that frame on. ``rewards``: frame -> reward. ``actions`` logs every action taken,
    ``resets`` counts real resets.
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012

    def __init__(
        self,
        game_length: int = 1000,
        lives: dict[int, int] | None = None,
        rewards: dict[int, float] | None = None,
        meanings: tuple[str, ...] = ("NOOP", "FIRE", "RIGHT", "LEFT"),
        shape: tuple[int, ...] = (6, 5, 3),
        frameskip: int = 1,
        end_game_on: dict[int, int] | None = None,
    ) -> None:
        self.game_length = game_length
        self.lives_script = lives or {}
        self.rewards = rewards or {}
        self.meanings = list(meanings)
        self.observation_space = gym.spaces.Box(0, 255, shape=shape, dtype=np.uint8)
        self.action_space = gym.spaces.Discrete(len(meanings))
        self._frameskip = frameskip
        self.end_game_on = end_game_on or {}  # action -> game frame: that action ends it
        self.ale = _Lives(self)
        self.actions: list[int] = []
        self.resets = 0
        self.t = 0
        self.lives_now = 0

    @staticmethod
    def pixel(t: int) -> int:
        # Alternating high/low values, so a max over two frames differs from either one.
        # Odd frames bright, even frames dark, all distinct (t < 128): a max over two
        # consecutive frames differs from the newer one half the time.
        return (t % 2) * 128 + t % 128

    def frame(self) -> np.ndarray:
        return np.full(self.observation_space.shape, self.pixel(self.t), dtype=np.uint8)

    def get_action_meanings(self) -> list[str]:
        return self.meanings

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.resets += 1
        self.t = 0
        self.lives_now = self.lives_script.get(0, 0)
        return self.frame(), {}

    def step(self, action: int):
        self.actions.append(int(action))
        self.t += 1
        for start in sorted(self.lives_script):
            if self.t >= start:
                self.lives_now = self.lives_script[start]
        ended = self.t >= self.game_length or self.end_game_on.get(int(action)) == self.t
        return self.frame(), self.rewards.get(self.t, 0.0), ended, False, {}


class Table(torch.nn.Module):
    """Q(s, a) = q[s, a], s the observation's first pixel: a network set by hand."""

    def __init__(self, q: list[list[float]]) -> None:
        super().__init__()
        self.q = torch.nn.Parameter(torch.tensor(q, dtype=torch.float32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.q[x.reshape(len(x), -1)[:, 0].long()]


def record_autocast(monkeypatch: Any) -> list[tuple[str, object]]:
    """Replace ``torch.autocast`` with a no-op that logs each call's device type and dtype
    (``"default"`` where none is given); returns the log."""
    asked: list[tuple[str, object]] = []

    def autocast(device_type: str, dtype: object = "default", enabled: bool = True):
        asked.append((device_type, dtype))
        return contextlib.nullcontext()

    monkeypatch.setattr(torch, "autocast", autocast)
    return asked
