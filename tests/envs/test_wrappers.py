"""Each wrapper on the scripted fake env (exact edge cases) and on real Pong/Breakout."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from atari_speed.core.errors import ConfigError
from atari_speed.core.timing import StageTimer
from atari_speed.envs import wrappers as w
from atari_speed.envs.pipeline import make_emulator, make_env, resolve_pipeline
from tests.fakes import FakeAtari

px = FakeAtari.pixel


# ---------------------------------------------------------------- MaxAndSkip


def test_max_and_skip_pools_the_last_two_frames_and_sums_rewards():
    env = w.MaxAndSkip(FakeAtari(rewards={2: 1.0, 4: 2.0}), skip=4, max_pool=True)
    env.reset()
    obs, reward, terminated, _, _ = env.step(0)
    assert reward == 3.0 and not terminated
    assert env.unwrapped.t == 4
    assert (obs == max(px(3), px(4))).all()
    assert max(px(3), px(4)) != px(4)  # the fake makes pooling visible


def test_max_and_skip_without_pooling_returns_the_last_frame():
    env = w.MaxAndSkip(FakeAtari(), skip=4, max_pool=False)
    env.reset()
    obs, *_ = env.step(0)
    assert (obs == px(4)).all()


@pytest.mark.parametrize("end_frame", [5, 6, 7])
def test_max_and_skip_never_pools_a_frame_from_the_previous_step(end_frame):
    # Step 1 sees frames 1-4; the game ends on frame `end_frame` inside step 2.
    env = w.MaxAndSkip(FakeAtari(game_length=end_frame), skip=4, max_pool=True)
    env.reset()
    env.step(0)
    obs, _, terminated, _, _ = env.step(0)
    assert terminated and env.unwrapped.t == end_frame
    seen_this_step = [px(t) for t in range(5, end_frame + 1)]
    expected = max(seen_this_step[-2:])
    assert (obs == expected).all()


def test_max_and_skip_refuses_an_env_that_already_skips():
    with pytest.raises(ConfigError, match="already skips 4 frames"):
        w.MaxAndSkip(FakeAtari(frameskip=4), skip=4)


def test_max_and_skip_refuses_ale_v5_ids():
    with pytest.raises(ConfigError, match=r"ALE/Pong-v5 already skips 4 frames"):
        w.MaxAndSkip(make_emulator("ALE/Pong-v5"), skip=4)


# ---------------------------------------------------------------- EpisodicLife


def test_episodic_life_ends_the_training_episode_but_not_the_game():
    fake = FakeAtari(lives={0: 3, 5: 2}, game_length=12)
    env = w.EpisodicLife(fake)
    env.reset()
    results = [env.step(0) for _ in range(5)]
    assert [r[2] for r in results] == [False] * 4 + [True]
    obs, _ = env.reset()
    assert fake.resets == 1, "a life loss must not restart the game"
    assert fake.t == 6 and fake.actions[-1] == 0  # one NOOP played
    assert (obs == px(6)).all()
    for _ in range(6):
        *_, terminated, _, _ = env.step(0)
    assert terminated and fake.t == 12
    env.reset()
    assert fake.resets == 2, "the game is over: reset for real"
    assert len(fake.actions) == 12, "and no NOOP is played into the finished game first"


def test_episodic_life_resets_for_real_after_a_truncated_game():
    from gymnasium.wrappers import TimeLimit

    fake = FakeAtari(lives={0: 3})
    env = w.EpisodicLife(TimeLimit(fake, max_episode_steps=3))
    env.reset()
    results = [env.step(0) for _ in range(3)]
    assert [r[3] for r in results] == [False, False, True]
    env.reset()
    assert fake.resets == 2 and fake.actions == [0, 0, 0]


def test_episodic_life_ignores_lives_falling_to_zero_while_the_game_goes_on():
    # Some games show 0 lives for a few frames mid-game (Q*bert): not a life lost.
    fake = FakeAtari(lives={0: 2, 3: 0, 5: 2})
    env = w.EpisodicLife(fake)
    env.reset()
    assert [env.step(0)[2] for _ in range(6)] == [False] * 6


def test_episodic_life_two_resets_in_a_row_restart_the_game_once():
    fake = FakeAtari(lives={0: 3})
    env = w.EpisodicLife(fake)
    env.reset()
    env.reset()  # the game is not over: a NOOP, not a second real reset
    assert fake.resets == 1 and fake.actions == [0]


def test_episodic_life_resets_if_the_noop_after_a_life_loss_ends_the_game():
    fake = FakeAtari(lives={0: 2, 3: 1}, game_length=4)
    env = w.EpisodicLife(fake)
    env.reset()
    for _ in range(3):
        env.step(0)
    obs, _ = env.reset()  # the NOOP is frame 4, which ends the game
    assert fake.resets == 2 and fake.t == 0 and (obs == px(0)).all()


@pytest.mark.parametrize(
    ("meanings", "after"), [(("NOOP", "FIRE", "RIGHT"), 1), (("NOOP", "UP", "DOWN"), 0)]
)
def test_episodic_life_after_life_fire_plays_fire_where_the_game_has_it(meanings, after):
    fake = FakeAtari(lives={0: 3, 2: 2}, meanings=meanings)
    env = w.EpisodicLife(fake, after_life="fire")
    env.reset()
    assert [env.step(0)[2] for _ in range(2)] == [False, True]
    _, info = env.reset()
    assert fake.resets == 1 and fake.actions == [0, 0, after]
    assert info[w.GAME_GOES_ON] is True


# ---------------------------------------------------------------- FireReset


def test_fire_reset_presses_fire_then_action_2():
    fake = FakeAtari()
    obs, _ = w.FireReset(fake).reset()
    assert fake.actions == [1, 2] and (obs == px(2)).all()


def test_fire_reset_returns_a_fresh_observation_if_the_game_ends_while_firing():
    # FIRE on frame 1 ends the game the first time; after the second reset it does not,
    # because the fake only ends the game when FIRE is the action *on frame 1 of game 1*.
    fake = FakeAtari(end_game_on={1: 1})
    env = w.FireReset(fake)
    original_reset = fake.reset

    def reset_then_disarm(**kwargs):
        out = original_reset(**kwargs)
        if fake.resets > 1:
            fake.end_game_on = {}
        return out

    fake.reset = reset_then_disarm
    obs, _ = env.reset()
    assert fake.resets == 2
    assert fake.actions == [1, 1, 2]
    assert fake.t == 2 and (obs == px(2)).all(), "obs must come from the live, new game"


def test_fire_reset_does_nothing_in_a_game_without_fire():
    fake = FakeAtari(meanings=("NOOP", "UP", "DOWN"))
    w.FireReset(fake).reset()
    assert fake.actions == []


# ---------------------------------------------------------------- NoopReset


def test_noop_reset_plays_between_1_and_noop_max_noops():
    counts = set()
    for seed in range(40):
        fake = FakeAtari()
        w.NoopReset(fake, noop_max=5).reset(seed=seed)
        assert set(fake.actions) == {0}
        counts.add(len(fake.actions))
    assert counts == {1, 2, 3, 4, 5}


@pytest.mark.parametrize(
    ("meanings", "first", "counts"),
    [
        # ale-py's vector env: one FIRE frame, then max(0, U{0..noop_max-1} - 1) NOOPs
        (("NOOP", "FIRE", "RIGHT"), [1], {0, 1, 2}),
        (("NOOP", "UP", "DOWN"), [], {0, 1, 2, 3}),  # no FIRE: U{0..noop_max-1} NOOPs
    ],
)
def test_noop_reset_ale_style_starts_as_ale_pys_vector_env(meanings, first, counts):
    seen = set()
    for seed in range(60):
        fake = FakeAtari(meanings=meanings)
        w.NoopReset(fake, noop_max=4, style="ale").reset(seed=seed)
        assert fake.actions[: len(first)] == first and set(fake.actions[len(first) :]) <= {0}
        seen.add(len(fake.actions) - len(first))
    assert seen == counts


@pytest.mark.parametrize(
    ("meanings", "style", "first", "starts"),
    [
        (("NOOP", "FIRE", "RIGHT"), "ale", [1], {0: 0.5, 1: 0.25, 2: 0.25}),
        (("NOOP", "UP", "DOWN"), "ale", [], {0: 0.25, 1: 0.25, 2: 0.25, 3: 0.25}),
        (("NOOP", "FIRE", "RIGHT"), "classic", [], {1: 0.25, 2: 0.25, 3: 0.25, 4: 0.25}),
    ],
)
def test_noop_reset_lists_its_starts_and_plays_the_one_a_reset_chooses(
    meanings, style, first, starts
):
    # the starts a random reset draws, with how often (the draws of the test above)
    assert w.NoopReset(FakeAtari(meanings=meanings), noop_max=4, style=style).starts() == starts
    for noops in starts:
        for seed in range(5):  # whatever the env's random draw would have been
            fake = FakeAtari(meanings=meanings)
            env = w.NoopReset(fake, noop_max=4, style=style)
            env.reset(seed=seed, options={w.NOOPS: noops})
            assert fake.actions == [*first, *[0] * noops]
    with pytest.raises(ConfigError, match=r"options\['noops'\] = 9 is not a start"):
        w.NoopReset(FakeAtari(meanings=meanings), noop_max=4, style=style).reset(
            options={w.NOOPS: 9}
        )


def test_noop_reset_resets_again_when_a_noop_ends_the_game():
    fake = FakeAtari(game_length=2)
    env = w.NoopReset(fake, noop_max=30)
    for seed in range(10):
        obs, _ = env.reset(seed=seed)
        assert fake.t < 2, "the observation must be of a game that is still running"
        assert (obs == px(fake.t)).all()


@pytest.mark.parametrize("style", ["classic", "ale"])
def test_noop_reset_resets_again_when_the_time_limit_cuts_the_start(style):
    # truncated, not terminated: a start cut by the time limit is over all the same
    fake = FakeAtari()
    env = w.NoopReset(gym.wrappers.TimeLimit(fake, max_episode_steps=2), noop_max=30, style=style)
    cut = 0
    for seed in range(10):
        before = fake.resets
        obs, _ = env.reset(seed=seed)
        cut += fake.resets - before > 1
        assert fake.t < 2 and (obs == px(fake.t)).all(), "a game inside its time limit"
    assert cut > 0, "some starts must have been cut, or the test tests nothing"


def test_noop_reset_ale_style_resets_again_when_fire_ends_the_game():
    fake = FakeAtari(end_game_on={1: 1})  # FIRE on the first frame ends the game
    obs, _ = w.NoopReset(fake, noop_max=30, style="ale").reset(seed=0)
    assert fake.actions[0] == 1 and fake.resets == 2, "reset again after the FIRE"
    assert fake.t == len(fake.actions) - 1, "only the no-ops after that reset were played"
    assert (obs == px(fake.t)).all()


# ---------------------------------------------------------------- the rest


def test_clip_reward_is_the_sign():
    env = w.ClipReward(FakeAtari(rewards={1: 7.0, 2: -3.0, 3: 0.0}))
    env.reset()
    assert [env.step(0)[1] for _ in range(3)] == [1.0, -1.0, 0.0]


def test_warp_frame_shapes():
    fake = FakeAtari(shape=(210, 160, 3))
    gray = w.WarpFrame(fake, 84, 84, True, "opencv")
    rgb = w.WarpFrame(FakeAtari(shape=(210, 160, 3)), 64, 48, False, "numpy")
    assert gray.reset()[0].shape == (84, 84) and gray.observation_space.shape == (84, 84)
    assert rgb.reset()[0].shape == (48, 64, 3)


def test_frame_stack_is_channel_first_zero_padded_and_ordered():
    env = w.FrameStack(w.WarpFrame(FakeAtari(shape=(20, 20, 3)), 4, 4, True, "opencv"), k=3)
    obs, _ = env.reset()
    arr = np.asarray(obs)
    assert arr.shape == (3, 4, 4) == env.observation_space.shape and arr.dtype == np.uint8
    assert (arr[:2] == 0).all() and (arr[2] == px(0)).all()
    obs1, *_ = env.step(0)
    obs2, *_ = env.step(0)
    assert [int(np.asarray(obs2)[i, 0, 0]) for i in range(3)] == [px(0), px(1), px(2)]
    # No pixel copies per step: consecutive observations share their frame arrays.
    assert obs2.frames[0] is obs1.frames[1] and obs2.frames[1] is obs1.frames[2]
    assert (obs2.newest == px(2)).all()
    env.reset()
    assert (np.asarray(env.step(0)[0])[:2] == 0).all(), "reset must clear the old frames"


def test_frame_stack_of_rgb_frames():
    env = w.FrameStack(FakeAtari(shape=(6, 5, 3)), k=2)
    obs, _ = env.reset()
    assert np.asarray(obs).shape == (6, 6, 5) == env.observation_space.shape
    # It reads as a sequence of channels too (len and indexing, as ptan's code uses it).
    obs, *_ = env.step(0)
    assert len(obs) == 6 and (obs[4] == px(1)).all() and (obs[1] == px(0)).all()
    pair = obs[2:4]  # the last channel of the older frame, the first of the newer
    assert pair.shape == (2, 6, 5) and (pair[0] == px(0)).all() and (pair[1] == px(1)).all()


def test_game_recorder_reports_the_whole_game_across_lives_unclipped():
    fake = FakeAtari(lives={0: 2, 3: 1}, rewards={2: 5.0, 6: -3.0}, game_length=8)
    recorder = w.GameRecorder(fake)
    env = w.AgentStepCounter(w.ClipReward(w.EpisodicLife(recorder)), recorder)
    env.reset()
    infos, rewards = [], []
    for _ in range(20):
        _, reward, terminated, _truncated, info = env.step(0)
        rewards.append(reward)
        infos.append(info)
        if "episode" in info:
            break
        if terminated:
            env.reset()  # life loss: the training episode ends, the game plays on
    assert sum(1 for i in infos if "episode" in i) == 1
    assert infos[-1]["episode"] == {"r": 2.0, "l": 7, "frames": 8}  # 7 agent steps + 1 NOOP
    assert sorted(set(rewards)) == [-1.0, 0.0, 1.0]


# ---------------------------------------------------------------- real games


def test_each_wrapper_on_real_pong():
    emu = make_emulator("pong")
    env = w.MaxAndSkip(emu, skip=4)
    env.reset(seed=0)
    env.step(0)
    assert emu.ale.getEpisodeFrameNumber() == 4

    emu = make_emulator("pong")
    w.NoopReset(emu, noop_max=7).reset(seed=1)
    assert 1 <= emu.ale.getEpisodeFrameNumber() <= 7

    emu = make_emulator("pong")
    w.FireReset(emu).reset(seed=0)
    assert emu.ale.getEpisodeFrameNumber() == 2

    env = w.FrameStack(w.WarpFrame(make_emulator("pong"), 84, 84, True, "opencv"), k=4)
    obs, _ = env.reset(seed=0)
    assert np.asarray(obs).shape == (4, 84, 84)

    env = w.ClipReward(w.MaxAndSkip(make_emulator("pong"), skip=4))
    env.reset(seed=0)
    rewards = {env.step(int(a))[1] for a in np.random.default_rng(0).integers(0, 6, 300)}
    assert rewards <= {-1.0, 0.0, 1.0} and -1.0 in rewards


def _games(pipeline: dict, game: str, unseen: bool, monkeypatch, games: int, max_frames=None):
    """Every step's outcome over ``games`` whole games of random actions, with the frames
    a skip does not show played unseen (``GameRecorder.step_frames``) or stepped."""
    with monkeypatch.context() as patch:
        if not unseen:
            patch.setattr(w, "frame_stepper", lambda env: None)
        env = make_env(pipeline, game, seed=3, max_frames=max_frames)
    skip = env
    while not isinstance(skip, w.MaxAndSkip):
        skip = skip.env
    assert (skip._step_frames is not None) == unseen  # the path under test is the one taken
    recorder = env.recorder
    rng = np.random.default_rng(0)
    steps, ended = [], 0
    while ended < games:
        obs, reward, terminated, truncated, info = env.step(int(rng.integers(env.action_space.n)))
        frames = (recorder.frames, tuple(recorder.scored))  # what merged evaluations read
        steps.append((np.asarray(obs).tobytes(), reward, terminated, truncated, repr(info), frames))
        if terminated or truncated:
            ended += "episode" in info
            env.reset()
    env.close()
    return steps


@pytest.mark.parametrize(
    ("game", "sticky", "max_frames"),
    [("pong", 0.25, None), ("breakout", 0.0, None), ("breakout", 0.25, 201)],
)
def test_a_skip_without_max_pool_plays_its_hidden_frames_unseen_the_same_game(
    game, sticky, max_frames, monkeypatch
):
    # Lives, sticky actions drawn from the emulator's generator over several games, and
    # games that end on a hidden frame, lost or cut by the frame limit (201 is not a
    # multiple of the skip): the same observations, rewards, ends, infos and recorded
    # frames and scores step for step.
    pipeline = {**resolve_pipeline("small"), "repeat_action_probability": sticky}
    games = 1 if game == "pong" else 3
    hidden_ends = []
    step_frames = w.GameRecorder.step_frames

    def spied(recorder, action, frames):
        before = recorder.frames
        out = step_frames(recorder, action, frames)
        hidden_ends.append((out[2] or out[3]) and recorder.frames - before < frames)
        return out

    seen = _games(pipeline, game, False, monkeypatch, games, max_frames)
    monkeypatch.setattr(w.GameRecorder, "step_frames", spied)
    unseen = _games(pipeline, game, True, monkeypatch, games, max_frames)
    assert len(unseen) == len(seen)
    for step, (a, b) in enumerate(zip(seen, unseen, strict=True)):
        assert a == b, f"{game}: step {step} differs"
    if game == "breakout":
        assert any(hidden_ends), "a game that ends on a frame the skip does not show"
    if max_frames:
        assert any(truncated for _, _, _, truncated, _, _ in seen), "a game cut by the limit"


def test_a_skip_with_a_layer_that_changes_steps_below_it_steps_every_frame():
    class Nudged(gym.Wrapper):  # a step that is not the frame's own
        def step(self, action):
            return self.env.step(action)

    recorder = w.GameRecorder(make_emulator("pong"))
    assert recorder.plays_unseen and w.frame_stepper(w.NoopReset(recorder)) is not None
    assert w.frame_stepper(Nudged(recorder)) is None
    assert w.MaxAndSkip(Nudged(recorder), max_pool=False)._step_frames is None
    assert w.MaxAndSkip(recorder, max_pool=True)._step_frames is None
    # a gym.make id: its checker wrappers sit between the recorder and the emulator
    assert not w.GameRecorder(make_emulator("PongNoFrameskip-v4")).plays_unseen
    assert not w.GameRecorder(FakeAtari()).plays_unseen


def test_the_stage_timer_times_the_frames_a_skip_plays_unseen():
    timer = StageTimer()
    env = make_env("small", "pong", seed=0, tap=timer.tap)
    env.step(0)
    timer.reset()
    for _ in range(20):
        env.step(0)
    assert timer.calls["emulator"] == timer.calls["MaxAndSkip"] == 20
    assert 0 < timer.inclusive["emulator"] < timer.inclusive["MaxAndSkip"]


def test_episodic_life_on_real_breakout():
    emu = make_emulator("breakout")
    env = w.EpisodicLife(w.FireReset(w.MaxAndSkip(emu, skip=4)))
    env.reset(seed=0)
    lives = emu.ale.lives()
    for _ in range(2000):
        *_, terminated, _truncated, _ = env.step(0)  # never moves: loses lives fast
        if terminated:
            break
    assert terminated and not emu.ale.game_over()
    assert emu.ale.lives() == lives - 1


def test_frame_stack_space_is_uint8_from_0_to_255_and_its_padding_read_only():
    env = w.FrameStack(FakeAtari(shape=(6, 5, 3)), k=2)
    space = env.observation_space
    assert space.dtype == np.uint8 and space.low.min() == 0 and space.high.max() == 255
    obs, _ = env.reset()
    with pytest.raises(ValueError, match="read-only"):
        obs.frames[0][...] = 1  # the shared zero frame of every reset's padding
    assert np.asarray(obs, dtype=np.float32).dtype == np.float32
    assert np.asarray(obs, dtype=np.float32)[3:].max() == float(px(0))


@pytest.mark.parametrize("keep", [True, False])
def test_frame_stack_keeps_its_frames_across_a_lost_life_only_if_asked(keep):
    fake = FakeAtari(lives={0: 3, 2: 2}, game_length=6, shape=(6, 5, 3))
    env = w.FrameStack(w.EpisodicLife(fake), k=3, keep_across_lives=keep)
    env.reset()
    for _ in range(2):
        *_, lost, _, _ = env.step(0)
    assert lost
    obs, _ = env.reset()  # a NOOP into the same game: frame 3
    older = [px(1), px(2)] if keep else [0, 0]
    assert [int(f.max()) for f in obs.frames] == [*older, px(3)]
    for _ in range(3):
        env.step(0)
    obs, _ = env.reset()  # the game is over: a new game, an empty stack either way
    assert fake.resets == 2 and [int(f.max()) for f in obs.frames] == [0, 0, px(0)]


def test_a_stack_of_one_frame_is_that_frame():
    env = w.FrameStack(FakeAtari(shape=(6, 5, 3)), k=1)
    obs, _ = env.reset()
    obs, *_ = env.step(0)
    assert np.asarray(obs).shape == (3, 6, 5) and (np.asarray(obs) == px(1)).all()


def test_warp_frame_defaults_are_84x84_gray_uint8_and_rgb_keeps_3_channels():
    gray = w.WarpFrame(FakeAtari(shape=(210, 160, 3)))
    assert gray.observation_space.shape == (84, 84) and gray.observation_space.low.min() == 0
    assert gray.reset()[0].shape == (84, 84) and gray.reset()[0].dtype == np.uint8
    rgb = w.WarpFrame(FakeAtari(shape=(210, 160, 3)), grayscale=False)
    assert rgb.observation_space.shape == (84, 84, 3) == rgb.reset()[0].shape


def test_fire_reset_is_on_in_a_game_of_three_actions_whose_action_1_is_fire():
    fake = FakeAtari(meanings=("NOOP", "FIRE", "RIGHT"))
    env = w.FireReset(fake)
    env.reset()
    assert fake.actions == [1, 2]
