"""Games with lives and FIRE on every backend: a lost life ends the learning episode and
is followed by FIRE, and the game's unclipped score is what a finished game reports."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from atari_speed import make_vector_env, resolve_pipeline
from atari_speed.envs.ale import after_life_action
from atari_speed.envs.pipeline import quiet_ale
from atari_speed.envs.wrappers import FIRE, NOOP


def action_set(game: str) -> list:
    ale_py = quiet_ale()
    ale = ale_py.ALEInterface()
    ale.loadROM(ale_py.roms.get_rom_path(game))
    return list(ale.getMinimalActionSet())


@pytest.mark.parametrize("backend", ["sync", "ale"])
def test_breakout_played_with_noops_only_still_loses_every_life(backend):
    # Breakout holds the ball after a lost life until FIRE: an agent that never presses it
    # would stall the game until its 108,000-frame limit. The pipeline backends press FIRE
    # in EpisodicLife's reset; ALE fires only at a game's start, so its backend presses it
    # in the agent's place.
    env = make_vector_env("small-maxpool", "breakout", 2, backend=backend, seed=0)
    life_ends = np.zeros(2, dtype=int)
    finished: dict[int, int] = {}
    for _ in range(1000):
        _, _, terminated, truncated, info = env.step(np.zeros(2, dtype=np.int64))
        assert not truncated.any()
        life_ends += terminated
        for i in np.flatnonzero(info.get("_episode", [])):
            finished.setdefault(int(i), int(life_ends[i]))
        if len(finished) == 2:
            break
    env.close()
    assert finished == {0: 5, 1: 5}, "each env plays its 5 lives to the game's end"


@pytest.mark.parametrize("backend", ["sync", "ale"])
def test_a_finished_game_reports_its_unclipped_score(backend):
    # Space Invaders pays 5 to 30 points an invader: the agent learns from +1, the game's
    # score (what runs log, judge "solved" by and keep best.pt for) is the points.
    env = make_vector_env("small-maxpool", "space_invaders", 2, backend=backend, seed=3)
    rng = np.random.default_rng(3)
    hits = np.zeros(2)
    game = None
    for _ in range(3000):
        _, reward, _, _, info = env.step(rng.integers(0, 6, 2))
        assert set(np.unique(reward)) <= {-1.0, 0.0, 1.0}, "the agent's rewards are clipped"
        hits += reward > 0
        if "_episode" in info:
            i = int(np.flatnonzero(info["_episode"])[0])
            game = (hits[i], info["episode"]["r"][i])
            break
    env.close()
    assert game is not None, "random play finishes a game of Space Invaders"
    scoring_steps, score = game
    assert scoring_steps > 0 and score >= 5 * scoring_steps and score % 5 == 0


@pytest.mark.parametrize(
    ("pipeline", "game", "played"),
    [
        ("small-maxpool", "breakout", FIRE),
        ("small", "pong", FIRE),  # no lives: never a lost life to fire after
        ("small-maxpool", "ms_pacman", NOOP),  # action 1 is UP: no FIRE to press
        ({"stages": [{"wrapper": "EpisodicLife"}]}, "breakout", NOOP),  # after_life = "noop"
        ({"stages": [{"wrapper": "FireReset"}]}, "breakout", None),  # lives don't end
    ],
)
def test_ale_plays_after_a_lost_life_what_the_pipeline_would(pipeline, game, played):
    assert after_life_action(resolve_pipeline(pipeline), action_set(game)) == played


@pytest.mark.parametrize("plain_name", ["small-maxpool", "maxpool84"])  # atari-fast, atari-84
def test_each_sticky_pipeline_differs_from_its_presets_only_in_sticky_actions(plain_name):
    plain, sticky = resolve_pipeline(plain_name), resolve_pipeline(f"{plain_name}-sticky")
    assert sticky["stages"] == plain["stages"]
    assert (plain["repeat_action_probability"], sticky["repeat_action_probability"]) == (0, 0.25)


def test_small_maxpool_plays_the_very_game_of_the_ale_backend_on_the_sync_backend():
    # atari-fast trains on the ale backend and play.py plays the Python pipeline: they must
    # be one env, or an agent loses in play.py what it learned (docs/atari.md: Breakout,
    # 18.7 greedy on ale, 9.4 from the classic starts). With noop_max = 1 both start
    # without no-ops (ALE draws its count from its own generator), so every observation,
    # reward and end must agree, across lost lives and finished games.
    pipeline = copy.deepcopy(resolve_pipeline("small-maxpool"))
    pipeline["stages"][0]["noop_max"] = 1
    sync, ale = (make_vector_env(pipeline, "breakout", 1, backend=b) for b in ("sync", "ale"))
    obs_sync, _ = sync.reset(seed=0)
    obs_ale, _ = ale.reset(seed=0)
    assert np.array_equal(obs_sync, obs_ale), "the game starts alike: one FIRE frame"
    rng = np.random.default_rng(0)
    lives_lost = games = 0
    for _ in range(1000):
        action = rng.integers(0, 4, 1)
        obs_sync, r_sync, end_sync, cut_sync, info_sync = sync.step(action)
        obs_ale, r_ale, end_ale, cut_ale, info_ale = ale.step(action)
        assert (r_sync, end_sync, cut_sync) == (r_ale, end_ale, cut_ale)
        if "_episode" in info_sync:  # a finished game, and the next one's start
            assert info_sync["episode"]["r"][0] == info_ale["episode"]["r"][0]
            games += 1
        elif end_sync[0]:
            # A lost life: the pipeline plays FIRE inside its reset, the ale backend in
            # place of the agent's next action; the states after it must be the same.
            assert np.array_equal(info_sync["final_obs"][0], obs_ale[0])
            obs_ale, r_fire, end_fire, _, _ = ale.step(action)
            assert r_fire[0] == 0 and not end_fire[0]
            lives_lost += 1
        assert np.array_equal(obs_sync, obs_ale), (lives_lost, games)
    sync.close()
    ale.close()
    assert lives_lost >= 10 and games >= 2
