"""atari-fast on a game other than Pong: --game picks it (or names close ones), the run
trains on it with its pipeline and logs the game's own score, and play.py plays what it
saved."""

from __future__ import annotations

import csv
import json
import math

from atari_speed.core.config import load_preset
from tests.scripts import play_here, run_script, train_here


def test_an_unknown_game_is_one_line_naming_close_games():
    result = run_script("train.py", "--preset", "atari-fast", "--game", "breakuot", fresh=True)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "train.py: error: game 'breakuot': unknown Atari game; did you mean breakout?"
    ]


def test_atari_fast_spends_10m_emulator_frames_and_has_no_solved_score():
    preset = load_preset("atari-fast")
    assert preset.run.steps * 4 == 10_000_000
    assert math.isinf(preset.run.stop_reward) and preset.run.stop_reward > 0
    assert (preset.dqn.algorithm, preset.env.pipeline) == ("pqn", "small-maxpool")


def test_atari_84_is_atari_fast_at_84x84_with_natures_network():
    # docs/atari.md compares the two as differing in frames, network and the precision the
    # envs act in only: a value changed in one preset and not the other would make that
    # comparison wrong
    fast = load_preset("atari-fast").to_dict()
    big = load_preset("atari-84").to_dict()
    assert (big["env"]["pipeline"], big["dqn"]["network"]) == ("maxpool84", "nature")
    assert big["run"]["act_bf16"] and not fast["run"]["act_bf16"]
    big["env"]["pipeline"], big["dqn"]["network"] = fast["env"]["pipeline"], fast["dqn"]["network"]
    big["run"]["act_bf16"] = False
    big["name"] = fast["name"]
    assert big == fast


def test_game_flag_trains_that_game_and_play_scores_it(tmp_path):
    run_dir = tmp_path / "run"
    trained = train_here(
        *("--preset", "atari-fast", "--game", "SpaceInvaders", "--mode", "n-env"),
        *("--envs", "4", "--frames", "4096", "--run-dir", str(run_dir)),
        *("--set", "env.backend='sync'", "--set", "run.precision='fp32'"),
        # one SGD step a rollout, not 32: the subject is the game, not the learner
        *("--set", "pqn.epochs=1", "--set", "pqn.minibatches=1"),
    )
    assert trained.returncode == 0, trained.stderr[-2000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["preset"]["env"]["game"] == "SpaceInvaders"
    assert summary["pipeline"]["name"] == "small-maxpool"
    # The logged score is the game's: Space Invaders pays 5 to 30 points an invader (a
    # random game scores about 150), where the learner's clipped rewards add up to the
    # number of hits.
    with (run_dir / "scores.csv").open() as log:
        scores = [float(row["score"]) for row in csv.DictReader(log)]
    assert scores and all(score % 5 == 0 for score in scores)
    assert sum(scores) / len(scores) > 50
    played = play_here(
        str(run_dir), "--episodes", "1", "--no-window", "--json", "--max-seconds", "20"
    )
    assert played.returncode == 0, played.stderr[-2000:]
    result = json.loads(played.stdout)
    assert result["game"] == "space_invaders", result
