"""Per-stage timing of a wrapper pipeline.

``StageTimer.tap`` is passed to ``make_env(..., tap=timer.tap)``: the builder puts a thin
timing wrapper above the emulator and above each stage. Each tap measures the time spent
below it (inclusive); a stage's own time is its tap minus the tap beneath, so the stage
shares add up exactly to the time of the whole step.
"""

from __future__ import annotations

import time
from typing import Any, SupportsFloat

import gymnasium as gym


class _Tap(gym.Wrapper):
    def __init__(self, env: gym.Env, timer: StageTimer, label: str) -> None:
        super().__init__(env)
        self.timer, self.label = timer, label

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        start = time.perf_counter()
        out = self.env.step(action)
        self.timer.add(self.label, time.perf_counter() - start)
        return out

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        start = time.perf_counter()
        out = self.env.reset(**kwargs)
        self.timer.add(self.label, time.perf_counter() - start)
        return out


class StageTimer:
    """Collects inclusive seconds and calls per tapped layer, bottom layer first."""

    def __init__(self) -> None:
        self.inclusive: dict[str, float] = {}
        self.calls: dict[str, int] = {}

    def tap(self, env: gym.Env, label: str) -> gym.Env:
        self.inclusive.setdefault(label, 0.0)
        self.calls.setdefault(label, 0)
        return _Tap(env, self, label)

    def add(self, label: str, seconds: float) -> None:
        self.inclusive[label] += seconds
        self.calls[label] += 1

    def reset(self) -> None:
        for label in self.inclusive:
            self.inclusive[label], self.calls[label] = 0.0, 0

    def exclusive(self) -> dict[str, float]:
        """Seconds spent in each layer itself (its tap minus the tap below it)."""
        out, below = {}, 0.0
        for label, seconds in self.inclusive.items():
            out[label] = seconds - below
            below = seconds
        return out

    def shares(self) -> dict[str, float]:
        """Each layer's fraction of the total stepping time (they sum to 1)."""
        own = self.exclusive()
        total = sum(own.values()) or 1.0
        return {label: seconds / total for label, seconds in own.items()}
