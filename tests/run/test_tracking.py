"""Game scores: smoothing, the best, and when the smoothed score first reached -15, 0 and
the stop reward."""

from __future__ import annotations

import pytest

from atari_speed.agent.actor import Game
from atari_speed.run.tracking import EMA_ALPHA, Scores


def test_smoothed_score_milestones_are_recorded_once_when_first_reached():
    scores = Scores(stop_reward=18.0)
    improved = [scores.add(Game(-21.0, 800), seconds=10.0, frames=800)]
    assert scores.smoothed == -21.0 and scores.reached == {}
    seconds = 10.0
    while scores.solved_at is None:
        seconds += 10.0
        improved.append(scores.add(Game(21.0, 900), seconds, int(seconds * 100)))
    assert all(improved) and scores.best_smoothed == scores.smoothed >= 18.0
    assert set(scores.reached) == {"-15", "0", "18"}
    assert scores.reached["18"] == scores.solved_at
    assert scores.reached["-15"][0] < scores.reached["0"][0] < scores.reached["18"][0]
    # The EMA: -21 then +21s, as the book smooths
    games = round((seconds - 10.0) / 10.0)
    assert scores.smoothed == pytest.approx(21 - 42 * EMA_ALPHA**games)
    first_zero = scores.reached["0"]
    assert not scores.add(Game(-21.0, 700), seconds + 10, 1)
    scores.add(Game(21.0, 700), seconds + 20, 2)
    assert scores.reached["0"] == first_zero, "recorded once"
