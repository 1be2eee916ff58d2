"""benchmarks/stall.py: points won and lost by a held action, and where the game ended."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("stall", ROOT / "benchmarks/stall.py")
stall = importlib.util.module_from_spec(spec)
spec.loader.exec_module(stall)


class ScriptedGame:
    """An env whose rewards, and the step it ends at, are given."""

    def __init__(self, rewards: list[float], ends_at: int | None) -> None:
        self.rewards, self.ends_at, self.actions = rewards, ends_at, []

    def reset(self, seed: int) -> None:
        self.t = 0

    def step(self, action: int):
        self.actions.append(action)
        self.t += 1
        reward = self.rewards[self.t - 1] if self.t <= len(self.rewards) else 0.0
        return None, reward, self.t == self.ends_at, False, {}


def test_points_won_and_lost_are_counted_apart_until_the_game_ends():
    game = ScriptedGame([2.0, -3.0, 0.0, 1.0, -1.0, 5.0], ends_at=5)
    # the sixth reward is after the game ended: not counted
    assert stall.play(game, lambda step: step % 3, steps=100, seed=0) == (3.0, 4.0, 5)
    assert game.actions == [1, 2, 0, 1, 2], "the policy is asked at every step, 1-based"


def test_a_game_still_going_at_the_step_limit_has_no_end():
    game = ScriptedGame([0.0] * 10, ends_at=None)
    assert stall.play(game, lambda step: 0, steps=7, seed=0) == (0.0, 0.0, None)
    assert len(game.actions) == 7


def test_an_unknown_game_is_one_line_naming_close_ones(capsys):
    assert stall.main(["--game", "double_dunkk", "--steps", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("stall.py: error: game 'double_dunkk': unknown Atari game")
    assert "double_dunk" in err and "\n" not in err
