"""benchmarks/stall.py: points won and lost by a policy, where the game ended, the
discounted value of its play, and an agent's whole games."""

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

    def reset(self, seed: int | None = None):
        self.t = 0
        return self.t, {}

    def step(self, action: int):
        self.actions.append(action)
        self.t += 1
        reward = self.rewards[self.t - 1] if self.t <= len(self.rewards) else 0.0
        return self.t, reward, self.t == self.ends_at, False, {}


def test_points_won_and_lost_are_counted_apart_until_the_game_ends():
    game = ScriptedGame([2.0, -3.0, 0.0, 1.0, -1.0, 5.0], ends_at=5)
    # the sixth reward is after the game ended: not counted
    seen = []
    played = stall.play(game, lambda step, obs: seen.append(obs) or step % 3, steps=100, seed=0)
    assert (played.won, played.lost, played.ended) == (3.0, 4.0, 5)
    assert game.actions == [1, 2, 0, 1, 2], "the policy is asked at every step, 1-based"
    assert seen == [0, 1, 2, 3, 4], "and given the observation the last step (or reset) gave"


def test_a_game_still_going_at_the_step_limit_has_no_end():
    game = ScriptedGame([0.0] * 10, ends_at=None)
    played = stall.play(game, lambda step, obs: 0, steps=7, seed=0)
    assert (played.won, played.lost, played.ended) == (0.0, 0.0, None)
    assert len(game.actions) == 7


def test_an_unknown_game_is_one_line_naming_close_ones(capsys):
    assert stall.main(["--game", "double_dunkk", "--steps", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("stall.py: error: game 'double_dunkk': unknown Atari game")
    assert "double_dunk" in err and "\n" not in err


def test_the_value_is_the_mean_discounted_return_of_the_clipped_rewards():
    # sign(r): 1, -1, 0, 1 at gamma 0.5: returns from each step 0.625, -0.75, 0.5, 1
    assert stall.discounted_mean([2.0, -3.0, 0.0, 1.0], gamma=0.5) == (0.625 - 0.75 + 0.5 + 1) / 4
    # a point lost later is worth less than one lost now: what stalling buys a learner
    assert stall.discounted_mean([0.0] * 9 + [-1.0], 0.9) > stall.discounted_mean([-1.0], 0.9)
    assert stall.discounted_mean([], 0.9) == 0.0


class LivesGame:
    """A game of three lives, each ending (terminated) after two steps of -1, that reports
    the whole game's end as the pipeline does (``info["episode"]``)."""

    def __init__(self) -> None:
        self.resets = 0

    def reset(self, seed: int | None = None):
        self.resets += 1
        if seed is not None:
            self.t = 0
        return self.t, {}

    def step(self, action: int):
        self.t += 1
        life_lost = self.t % 2 == 0
        info = {"episode": {"r": -6.0}} if self.t == 6 else {}
        return self.t, -1.0, life_lost, False, info


def test_an_agents_row_plays_through_lost_lives_to_the_game_end():
    game = LivesGame()
    played = stall.play(stall.WholeGames(game), lambda step, obs: 0, steps=100, seed=0)
    assert (played.lost, played.ended) == (6.0, 6), "ended by the game, not its first life"
    assert game.resets == 3, "the seeded reset, then one after each of two lost lives"


def test_an_agent_gets_a_row_and_its_mean_q_and_a_checkpoint_of_another_game_one_line(
    untrained_checkpoint, capsys
):
    agent = ["--agent", str(untrained_checkpoint)]
    assert stall.main(["--game", "pong", "--steps", "40", *agent]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| agent ")]
    assert len(rows) == 1 and rows[0].startswith(f"| agent {untrained_checkpoint}, epsilon 0 |")
    assert rows[0].split("|")[4].strip() == "-", "a Pong game is not over in 40 steps"
    assert f"{untrained_checkpoint}: its network's mean max_a Q over those steps: " in out
    # every action random: no forward pass, so no Q to report (not a mean of nothing)
    assert stall.main(["--game", "pong", "--steps", "40", "--epsilon", "1", *agent]) == 0
    out = capsys.readouterr().out
    assert f"| agent {untrained_checkpoint}, epsilon 1 |" in out and "max_a Q" not in out
    assert stall.main(["--game", "breakout", *agent]) == 2
    err = capsys.readouterr().err
    assert err == f"stall.py: error: {untrained_checkpoint}: a checkpoint for pong, not breakout\n"
