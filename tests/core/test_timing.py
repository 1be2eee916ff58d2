"""Profiler: exclusive section times, stage splits, rows that sum to the wall time."""

from __future__ import annotations

import gymnasium as gym
import pytest

from atari_speed.core import timing
from atari_speed.core.timing import UNTIMED, Profiler, StageTimer, format_profile
from atari_speed.envs.pipeline import make_env


def rows_by_stage(prof: Profiler) -> dict[str, dict]:
    return {row["stage"]: row for row in prof.rows()}


class FakeClock:
    """``time.perf_counter`` that moves only when a test says so."""

    def __init__(self) -> None:
        self.now = 100.0

    def perf_counter(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(timing, "time", fake)
    return fake


def test_nested_sections_are_charged_once(clock):
    prof = Profiler(enabled=True)
    prof.restart()
    for _ in range(3):
        clock.advance(0.002)  # loop overhead, outside every section
        with prof.section("outer"):
            clock.advance(0.01)
            with prof.section("inner"):
                clock.advance(0.05)
    clock.advance(0.004)
    prof.stop()
    clock.advance(7.0)  # after stop: not part of the wall time
    rows = rows_by_stage(prof)
    assert rows["outer"]["calls"] == 3 and rows["inner"]["calls"] == 3
    # outer keeps only its own time; charged inclusively it would hold inner's too
    assert rows["outer"]["seconds"] == pytest.approx(0.03)
    assert rows["inner"]["seconds"] == pytest.approx(0.15)
    assert prof.wall == pytest.approx(0.19)
    assert rows[UNTIMED]["seconds"] == pytest.approx(0.01)  # 3 x 2 ms + 4 ms, and only that
    assert rows[UNTIMED]["share"] == pytest.approx(0.01 / 0.19, abs=1e-4)
    assert rows["inner"]["us_per_call"] == pytest.approx(50_000.0)
    assert rows[UNTIMED]["us_per_call"] is None


def test_restart_zeroes_the_sections_and_starts_the_wall_clock_again(clock):
    prof = Profiler(enabled=True)
    with prof.section("setup"):
        clock.advance(5.0)
    prof.restart()
    with prof.section("work"):
        clock.advance(1.0)
    rows = rows_by_stage(prof)
    assert rows["setup"]["seconds"] == 0.0 and rows["setup"]["calls"] == 0
    assert prof.wall == pytest.approx(1.0) and rows[UNTIMED]["seconds"] == pytest.approx(0.0)


def test_split_rows_are_each_stages_own_time_and_the_rest(clock):
    class Layer(gym.Wrapper):
        """A stage whose step takes ``cost`` seconds of its own."""

        def __init__(self, env: gym.Env, cost: float) -> None:
            super().__init__(env)
            self.cost = cost

        def step(self, action):
            clock.advance(self.cost)
            return self.env.step(action)

    class Emulator(gym.Env):
        observation_space = gym.spaces.Discrete(1)
        action_space = gym.spaces.Discrete(1)

        def step(self, action):
            clock.advance(0.003)
            return 0, 0.0, False, False, {}

    stages = StageTimer()
    env = stages.tap(Emulator(), "emulator")
    env = stages.tap(Layer(env, 0.002), "skip")
    env = stages.tap(Layer(env, 0.001), "stack")
    prof = Profiler(enabled=True)
    prof.split("env step", stages)
    prof.restart()
    for _ in range(4):
        with prof.section("env step"):
            env.step(0)
            clock.advance(0.0005)  # inside the section, outside every stage: the rest
        clock.advance(0.0002)
    prof.stop()
    rows = rows_by_stage(prof)
    assert rows["env step/emulator"]["seconds"] == pytest.approx(0.012)
    assert rows["env step/skip"]["seconds"] == pytest.approx(0.008)
    assert rows["env step/stack"]["seconds"] == pytest.approx(0.004)
    assert rows["env step/rest"]["seconds"] == pytest.approx(0.002)
    assert rows[UNTIMED]["seconds"] == pytest.approx(0.0008)
    assert "env step" not in rows, "a split section's row is replaced by its stages"
    assert stages.exclusive() == pytest.approx({"emulator": 0.012, "skip": 0.008, "stack": 0.004})
    assert all(rows[f"env step/{s}"]["calls"] == 4 for s in ("emulator", "skip", "stack", "rest"))


def test_disabled_profiler_records_nothing():
    prof = Profiler(enabled=False)
    with prof.section("anything"):
        pass
    assert prof.seconds == {} and [r["stage"] for r in prof.rows()] == [UNTIMED]


def test_split_gives_each_pipeline_stage_its_own_row():
    stages = StageTimer()
    env = make_env("book", "pong", seed=0, tap=stages.tap)
    prof = Profiler(enabled=True)
    prof.split("env step", stages)
    prof.restart()
    for _ in range(50):
        with prof.section("env step"):
            env.step(0)
    prof.stop()
    rows = rows_by_stage(prof)
    for stage in ("emulator", "MaxAndSkip", "WarpFrame", "FrameStack"):
        assert rows[f"env step/{stage}"]["seconds"] > 0
    assert rows["env step/emulator"]["calls"] == 200  # 4 emulator frames per agent step
    assert rows["env step/WarpFrame"]["calls"] == 50
    assert rows["env step/rest"]["calls"] == 50 and rows["env step/rest"]["seconds"] >= 0
    # Exclusive times never exceed the wall (the fake-clock tests above check the exact
    # split; a real clock can only bound it). Rows are rounded to 0.1 ms each.
    env_total = sum(r["seconds"] for s, r in rows.items() if s.startswith("env step/"))
    assert env_total <= prof.wall + 1e-3 and rows[UNTIMED]["seconds"] >= -1e-3
    table = format_profile({"main": prof.report()})
    assert "| env step/emulator | 200 |" in table
