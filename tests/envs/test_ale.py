"""The ale backend plays each pipeline it accepts as the other backends do, and refuses,
naming the stage, each it cannot."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest

from atari_speed import make_vector_env, resolve_pipeline
from atari_speed.core.errors import ConfigError
from atari_speed.envs.ale import PLAYED, ale_options, ale_start_differs
from atari_speed.envs.wrappers import FIRE, NOOP

SHIPPED = sorted(p.stem for p in (Path(__file__).parents[2] / "wrappers").glob("*.toml"))
ON_ALE = [name for name in SHIPPED if ale_start_differs(resolve_pipeline(name)) is None]


@pytest.mark.parametrize(
    ("pipeline", "refusal"),
    [
        (
            "book",
            r"pipeline 'book' on the ale backend: stage 3 \(FireReset\): ALE cannot press FIRE "
            r"and action 2 after its no-ops; drop it for NoopReset style = \"ale\"",
        ),
        ("fast", r"stage 3 \(FireReset\)"),
        (
            "classic",
            r"pipeline 'classic' on the ale backend: stage 1 \(NoopReset\) style='classic': "
            r"ALE starts a game with one FIRE frame, then its no-ops; set style = \"ale\"",
        ),
    ],
)
def test_a_shipped_pipeline_ale_cannot_play_is_refused_naming_the_stage(pipeline, refusal):
    with pytest.raises(ConfigError, match=refusal):
        make_vector_env(pipeline, "pong", 1, backend="ale")
    assert pipeline not in ON_ALE  # so auto never puts it there


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        (
            lambda stages: stages[-1].update(keep_across_lives=False),
            r"stage 6 \(FrameStack\) keep_across_lives=false: ALE's stack goes on across a "
            r"lost life; set keep_across_lives = true",
        ),
        (
            lambda stages: stages.insert(1, stages.pop(2)),
            r"stage 2 \(EpisodicLife\) before MaxAndSkip",
        ),
        (
            lambda stages: stages.insert(3, {"wrapper": "FireReset"}),
            r"stage 4 \(FireReset\): ALE cannot press FIRE",
        ),
    ],
)
def test_a_stage_ale_would_play_otherwise_is_refused(change, refusal):
    pipeline = copy.deepcopy(resolve_pipeline("small-maxpool"))
    change(pipeline["stages"])
    with pytest.raises(ConfigError, match=refusal):
        ale_options(resolve_pipeline(pipeline))


def test_lives_without_a_frame_skip_map_to_one_frame_a_step():
    # EpisodicLife's place is checked against MaxAndSkip's only where there is one
    pipeline = copy.deepcopy(resolve_pipeline("small-maxpool"))
    pipeline["stages"] = [s for s in pipeline["stages"] if s["wrapper"] != "MaxAndSkip"]
    options = ale_options(resolve_pipeline(pipeline))
    assert options["frameskip"] == 1 and options["life_loss_info"] is True


def test_pong_fast_runs_on_ale_with_the_options_it_always_had():
    # pong-fast's results were trained on the ale backend with these options; `small`
    # changed so that the other backends play that game too, not the other way round.
    assert ON_ALE == [
        "maxpool84",
        "maxpool84-sticky",
        "small",
        "small-maxpool",
        "small-maxpool-sticky",
    ]
    assert ale_options(resolve_pipeline("small")) == {
        "noop_max": 30,
        "frameskip": 4,
        "maxpool": False,
        "life_loss_info": True,
        "use_fire_reset": True,
        "img_width": 42,
        "img_height": 42,
        "grayscale": True,
        "stack_num": 4,
        "clip": True,
    }


def deterministic(name: str) -> dict:
    """The pipeline with a start that does not depend on a random draw, which the two
    backends take from different generators: noop_max 1 (no no-ops; ALE's FIRE frame
    stays), and no sticky actions (the emulator's own generator, seeded differently)."""
    pipeline = copy.deepcopy(resolve_pipeline(name))
    for stage in pipeline["stages"]:
        if stage["wrapper"] == "NoopReset":
            stage["noop_max"] = 1
    pipeline["repeat_action_probability"] = 0.0
    return pipeline


@pytest.mark.parametrize(
    ("name", "game", "after_life"),
    [*((name, "breakout", FIRE) for name in ON_ALE), ("small", "ms_pacman", NOOP)],
)
def test_ale_plays_each_pipeline_auto_may_put_there_as_the_sync_backend(name, game, after_life):
    # The same observations at a game's start and after every lost life, with the same
    # actions. The one difference, documented in ale.py: the step EpisodicLife's reset plays
    # unseen after a lost life (FIRE in Breakout, NOOP in Ms. Pac-Man, which has no FIRE)
    # is on ale the env's next step, played in place of the agent's and reported as played.
    pipeline = deterministic(name)
    sync, ale = (make_vector_env(pipeline, game, 1, backend=b) for b in ("sync", "ale"))
    obs_sync, _ = sync.reset(seed=0)
    obs_ale, _ = ale.reset(seed=0)
    assert np.array_equal(obs_sync, obs_ale), "a game's first observation"
    actions = ale.single_action_space.n
    rng = np.random.default_rng(0)
    lives_lost = games = 0
    for step in range(1500):
        action = rng.integers(0, actions, 1)
        obs_sync, r_sync, end_sync, cut_sync, info_sync = sync.step(action)
        obs_ale, r_ale, end_ale, cut_ale, info_ale = ale.step(action)
        at = f"{name}, {game}, step {step}"
        assert (r_sync, end_sync, cut_sync) == (r_ale, end_ale, cut_ale), at
        assert PLAYED not in info_ale, at
        if "_episode" in info_sync:  # a finished game, and the next one's first observation
            assert info_sync["episode"]["r"][0] == info_ale["episode"]["r"][0], at
            games += 1
        elif end_sync[0]:
            assert np.array_equal(info_sync["final_obs"][0], obs_ale[0]), at
            other = (after_life + 1) % actions  # not what the env must play
            obs_ale, r_after, end_after, _, info_after = ale.step(np.array([other]))
            assert info_after[PLAYED].tolist() == [after_life], at
            assert r_after[0] == 0 and not end_after[0], at
            lives_lost += 1
        assert np.array_equal(obs_sync, obs_ale), at
        if games == 1 and lives_lost >= 2:
            break
    sync.close()
    ale.close()
    assert games >= 1 and lives_lost >= 2, (games, lives_lost)
