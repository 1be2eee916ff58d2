"""Per-stage timing of a wrapper pipeline.

``StageTimer.tap`` is passed to ``make_env(..., tap=timer.tap)``: the builder puts a thin
timing wrapper above the emulator and above each stage. Each tap measures the time spent
below it (inclusive); a stage's own time is its tap minus the tap beneath, so the stage
shares add up exactly to the time of the whole step.
"""

from __future__ import annotations

import time
from collections.abc import Callable
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

    def through_frames(self, below: Callable[..., Any]) -> Callable[..., Any]:
        """A frame skip's frames played below this tap (``envs.wrappers.frame_stepper``),
        timed and counted as one call: a skip without max-pool makes one call below it an
        agent step, where every other layer's call is an emulator frame."""

        def step_frames(action: Any, frames: int) -> Any:
            start = time.perf_counter()
            out = below(action, frames)
            self.timer.add(self.label, time.perf_counter() - start)
            return out

        return step_frames


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


# ---------------------------------------------------------------- whole-process profile


class _Section:
    """``with profiler.section(label):`` adds the block's seconds to ``label``."""

    __slots__ = ("label", "profiler", "start")

    def __init__(self, profiler: Profiler, label: str) -> None:
        self.profiler, self.label, self.start = profiler, label, 0.0

    def __enter__(self) -> None:
        self.profiler.open.append(self.label)
        self.start = time.perf_counter()

    def __exit__(self, *exc: Any) -> None:
        p = self.profiler
        try:
            if p.sync is not None:
                p.sync()  # CUDA runs ahead of Python: charge the GPU work to this section
        finally:
            elapsed = time.perf_counter() - self.start
            p.open.pop()
        p.seconds[self.label] += elapsed
        p.calls[self.label] += 1
        if p.open:  # nested: the enclosing section keeps only its own (exclusive) time
            p.seconds[p.open[-1]] -= elapsed


class _Off:
    """The section of a disabled profiler: two empty method calls, no clock read."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


_OFF = _Off()
UNTIMED = "untimed (loop overhead)"


class Profiler:
    """Seconds and calls per named section of one process, against its wall time.

    A section nested in another is charged to itself only, so every row is exclusive
    time and no second is counted twice. ``split(label, timer)`` replaces a section's row by the
    exclusive times of the pipeline stages timed inside it (``StageTimer``), plus what is
    left of it. ``rows()`` adds an ``untimed`` row, so a table always sums to the wall
    time; a small untimed share is what shows that the sections cover the loop.
    """

    def __init__(self, enabled: bool = False, sync: Any = None) -> None:
        self.enabled = enabled
        self.sync = sync
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self._sections: dict[str, _Section] = {}
        self._splits: dict[str, StageTimer] = {}
        self.open: list[str] = []  # labels of the sections being timed, outermost first
        self.started = time.perf_counter()
        self.stopped: float | None = None

    def section(self, label: str) -> _Section | _Off:
        if not self.enabled:
            return _OFF
        found = self._sections.get(label)
        if found is None:
            self.seconds[label], self.calls[label] = 0.0, 0
            found = self._sections[label] = _Section(self, label)
        return found

    def split(self, label: str, timer: StageTimer) -> None:
        self._splits[label] = timer

    def restart(self) -> None:
        """Start the wall clock now (after setup) with every section at zero."""
        self.started, self.stopped = time.perf_counter(), None
        for label in self.seconds:
            self.seconds[label], self.calls[label] = 0.0, 0
        for timer in self._splits.values():
            timer.reset()

    def stop(self) -> None:
        self.stopped = time.perf_counter()

    @property
    def wall(self) -> float:
        return (self.stopped or time.perf_counter()) - self.started

    def rows(self) -> list[dict[str, Any]]:
        """``stage, calls, seconds, share, us_per_call`` rows summing to the wall time."""
        raw: list[tuple[str, int, float]] = []
        for label, seconds in self.seconds.items():
            timer = self._splits.get(label)
            if timer is None:
                raw.append((label, self.calls[label], seconds))
                continue
            own = timer.exclusive()
            for stage, stage_seconds in own.items():
                raw.append((f"{label}/{stage}", timer.calls[stage], stage_seconds))
            rest = seconds - sum(own.values())
            raw.append((f"{label}/rest", self.calls[label], rest))
        wall = self.wall
        raw.append((UNTIMED, 0, wall - sum(seconds for _, _, seconds in raw)))
        return [
            {
                "stage": stage,
                "calls": calls,
                "seconds": round(seconds, 4),
                "share": round(seconds / wall, 4) if wall > 0 else 0.0,
                "us_per_call": round(seconds / calls * 1e6, 1) if calls else None,
            }
            for stage, calls, seconds in raw
        ]

    def report(self) -> dict[str, Any]:
        return {"wall_seconds": round(self.wall, 4), "rows": self.rows()}


def format_profile(processes: dict[str, dict[str, Any]]) -> str:
    """Markdown tables, one per process, rows largest first, each summing to its wall."""
    out = []
    for name, report in processes.items():
        out.append(f"\n{name}: wall {report['wall_seconds']:.2f} s")
        out.append("| stage | calls | seconds | share | us/call |")
        out.append("|---|---:|---:|---:|---:|")
        for row in sorted(report["rows"], key=lambda r: -r["seconds"]):
            per_call = "" if row["us_per_call"] is None else f"{row['us_per_call']:,.1f}"
            out.append(
                f"| {row['stage']} | {row['calls']:,} | {row['seconds']:.3f} | "
                f"{row['share']:.1%} | {per_call} |"
            )
    return "\n".join(out)
