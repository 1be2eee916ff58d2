"""Evaluation beside training: games played side by side, each env one whole game."""

from __future__ import annotations

import copy
import threading

import gymnasium as gym
import numpy as np
import pytest
import torch

from atari_speed.agent.networks import DQN
from atari_speed.core.errors import ConfigError
from atari_speed.envs.pipeline import resolve_pipeline
from atari_speed.run.evaluation import (
    Cutoff,
    CutShort,
    KeptEnvs,
    evaluation_envs,
    new_game,
    play_every_start,
    play_merging,
    play_side_by_side,
    points_lost,
)


class ScriptedGame(gym.Env):
    """A game of ``length`` steps scoring ``score``; with ``life_at``, a life is lost
    (terminated without ``episode``) at that step and the game goes on after a reset."""

    observation_space = gym.spaces.Box(0, 255, (4, 2, 2), np.uint8)
    action_space = gym.spaces.Discrete(3)

    def __init__(self, length: int, score: float, life_at: int | None = None) -> None:
        self.length, self.score, self.life_at = length, score, life_at
        self.t, self.resets, self.actions = 0, 0, []

    def reset(self, *, seed=None, options=None):
        self.resets += 1
        return np.full((4, 2, 2), self.t % 256, np.uint8), {}

    def step(self, action):
        self.actions.append(int(action))
        self.t += 1
        obs = np.full((4, 2, 2), self.t % 256, np.uint8)  # a long game wraps, not overflows
        if self.t == self.length:
            return obs, 0.0, True, False, {"episode": {"r": self.score, "l": self.t}}
        return obs, 0.0, self.t == self.life_at, False, {}


class Always(torch.nn.Module):
    """Q values preferring ``action`` for every observation."""

    def __init__(self, action: int) -> None:
        super().__init__()
        self.action = action

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = torch.zeros(len(x), 3)
        q[:, self.action] = 1.0
        return q


def test_each_env_plays_one_whole_game_and_scores_come_in_env_order():
    envs = [ScriptedGame(5, 3.0), ScriptedGame(2, -1.0), ScriptedGame(9, 7.0, life_at=4)]
    rng = np.random.default_rng(0)
    scores = play_side_by_side(envs, Always(2), torch.device("cpu"), 0.0, rng)
    assert scores == [3.0, -1.0, 7.0]
    # each env stepped to its game's end and no further, greedy actions only
    assert [len(e.actions) for e in envs] == [5, 2, 9]
    assert all(set(e.actions) == {2} for e in envs)
    # the lost life reset the env and play went on: one reset at the start, one after it
    assert [e.resets for e in envs] == [1, 1, 2]


def test_stop_ends_play_with_only_the_games_finished():
    envs = [ScriptedGame(1, 4.0), ScriptedGame(10**6, 0.0)]
    stop = threading.Event()
    result: list[float] = []
    thread = threading.Thread(
        target=lambda: result.extend(
            play_side_by_side(
                envs, Always(0), torch.device("cpu"), 0.0, np.random.default_rng(0), stop
            )
        )
    )
    thread.start()
    while len(envs[1].actions) < 10:  # play is under way
        thread.join(timeout=0.01)
    stop.set()
    thread.join(timeout=60)
    assert not thread.is_alive() and result == [4.0]


def test_evaluations_start_once_the_smoothed_score_reaches_from_reward():
    from atari_speed.core.config import EvalConfig
    from atari_speed.run.evaluation import evaluating

    assert not evaluating(EvalConfig(every=0), 21.0)
    assert evaluating(EvalConfig(every=10), None), "-1000: from the first frame"
    gated = EvalConfig(every=10, from_reward=-15.0)
    assert not evaluating(gated, None) and not evaluating(gated, -15.5)
    assert evaluating(gated, -15.0) and evaluating(gated, 3.0)


def _evaluation(began: float | None, cpu: float) -> dict:
    return {"steps": 0, "reward": 0.0, "cpu_seconds": cpu, "run_cpu_seconds": began}


def test_the_next_evaluation_waits_until_it_fits_the_share_with_those_before():
    from atari_speed.run.evaluation import eval_cpu_allows

    first = _evaluation(began=100.0, cpu=4.0)
    assert eval_cpu_allows([], 0.05, 0.0), "the first evaluation waits for nothing"
    # 4 CPU s spent and 4 more to come: 5% of 160 s of the run's CPU since the first began
    assert not eval_cpu_allows([first], 0.05, 259.0)
    assert eval_cpu_allows([first], 0.05, 260.0)
    # then 4 + 6 spent and 6 to come, again from the first one's start: 5% of 320 s
    second = _evaluation(began=260.0, cpu=6.0)
    assert not eval_cpu_allows([first, second], 0.05, 419.0)
    assert eval_cpu_allows([first, second], 0.05, 420.0)
    assert eval_cpu_allows([first], 1.0, 100.5), "1: no limit"
    assert eval_cpu_allows([_evaluation(None, 4.0)], 0.05, 0.0), "from before the field"


def test_the_evaluations_cpu_share_runs_from_the_first_one_that_says_when_it_began():
    from atari_speed.run.evaluation import eval_cpu_share

    assert eval_cpu_share([], 50.0) is None
    older = _evaluation(None, 9.0)  # a checkpoint's from before the field: not counted
    timed = [_evaluation(100.0, 3.0), _evaluation(150.0, 2.0)]
    assert eval_cpu_share([older, *timed], 200.0) == 0.05
    assert eval_cpu_share(timed, 100.0) is None, "no CPU since it began"


def test_the_final_evaluation_is_left_out_of_the_share_and_of_the_budget():
    from atari_speed.run.evaluation import eval_cpu_allows, eval_cpu_share

    timed = [_evaluation(100.0, 3.0), _evaluation(150.0, 2.0)]
    final = {**_evaluation(200.0, 30.0), "final": True}
    # 5 CPU s of games over the 100 s from the first to where the run's clocks stopped (the
    # final one's start); the 30 CPU s its games took are not the run's
    assert eval_cpu_share([*timed, final], 200.0) == 0.05
    assert eval_cpu_share([final], 300.0) is None, "a final one alone: no share"
    # a run resumed to go further budgets as if the final one had not played
    assert eval_cpu_allows([*timed, final], 0.05, 180.0) == eval_cpu_allows(timed, 0.05, 180.0)
    assert eval_cpu_allows([final], 0.05, 201.0), "nothing during the run: the first waits"


def test_eval_max_frames_ends_a_game_at_that_many_emulator_frames_scored_as_it_stands():
    from atari_speed.envs.pipeline import make_env

    # seeded, or made without a seed (eval.every_start's envs), a ROM name or a gym id
    for game, seed in (("pong", 3), ("pong", None), ("PongNoFrameskip-v4", None)):
        env = make_env("small", game, seed=seed, max_frames=400)
        try:
            new_game(env, {"noops": 5})  # a FIRE frame and 5 NOOP frames, then the steps
            steps = 0
            while steps < 1000:
                _, _, terminated, truncated, info = env.step(0)
                steps += 1
                if "episode" in info:
                    break
            assert truncated and not terminated, "the emulator's cap, not the game, ended it"
            # 400 frames: the start's no-ops and FIRE among them, then steps of 4 frames each
            assert info["episode"]["frames"] == 400 and steps == info["episode"]["l"]
            assert steps == 99  # (400 - 6) / 4 frames a step, the last one cut short
            assert -21 < info["episode"]["r"] <= 0, "a game in progress: a point or two lost"
        finally:
            env.close()


def small_pipeline(noop_max: int, sticky: float = 0.0) -> dict:
    """pong-fast's pipeline with ``noop_max`` and sticky actions as given."""
    pipeline = copy.deepcopy(resolve_pipeline("small"))
    for stage in pipeline["stages"]:
        if stage["wrapper"] == "NoopReset":
            stage["noop_max"] = noop_max
    pipeline["repeat_action_probability"] = sticky
    return pipeline


def test_every_start_plays_each_once_weighted_as_drawn_and_the_same_each_time():
    torch.manual_seed(0)
    net = DQN((4, 42, 42), 6, network="small", layer_norm=True).eval()
    # Pong's ale-style start: one FIRE frame, then max(0, U{0..2} - 1) NOOPs: 0 twice in 3
    result = play_every_start(small_pipeline(3), "pong", net, max_frames=2000)
    assert result["noops"] == [0, 1] and result["weights"] == pytest.approx([2 / 3, 1 / 3])
    assert len(result["scores"]) == 2 and result["exact"]
    mean = 2 / 3 * result["scores"][0] + 1 / 3 * result["scores"][1]
    assert result["mean"] == pytest.approx(mean)
    # no sticky actions: a start's greedy game is one game, whatever the env's seed
    again = play_every_start(small_pipeline(3), "pong", net, max_frames=2000, seed=100)
    assert again["scores"] == result["scores"]
    sticky = play_every_start(small_pipeline(2, sticky=0.25), "pong", net, max_frames=400)
    assert not sticky["exact"]
    # a gym id's own sticky actions (a -v0 id's 0.25) count, whatever the pipeline says
    v0 = play_every_start(small_pipeline(2), "PongNoFrameskip-v0", net, max_frames=400)
    assert not v0["exact"]


def test_every_start_refuses_a_pipeline_without_noop_starts():
    pipeline = copy.deepcopy(resolve_pipeline("small"))
    pipeline["stages"] = [s for s in pipeline["stages"] if s["wrapper"] != "NoopReset"]
    net = DQN((4, 42, 42), 6, network="small", layer_norm=True).eval()
    with pytest.raises(ConfigError, match="no NoopReset stage"):
        play_every_start(pipeline, "pong", net, max_frames=400)


def test_games_that_meet_are_played_once_and_score_as_if_played_out():
    torch.manual_seed(0)
    net = DQN((4, 42, 42), 6, network="small", layer_norm=True).eval()
    pipeline, starts = small_pipeline(10), [{"noops": n} for n in range(9)]
    cpu, rng = torch.device("cpu"), np.random.default_rng(0)
    for max_frames in (1500, 3001):  # each cuts the games at another point of a rally
        envs = evaluation_envs(pipeline, "pong", len(starts), 0, max_frames)
        whole = play_side_by_side(envs, net, cpu, 0.0, rng, options=starts)
        played = sum(env.recorder.agent_steps for env in envs)
        envs = evaluation_envs(pipeline, "pong", len(starts), 0, max_frames)
        merged, steps = play_merging(envs, net, cpu, starts, max_frames)
        # the same score for every start, to the frame of each one's own cap ...
        assert merged == whole
        # ... from far fewer steps: starts a few NOOPs apart meet within steps
        assert steps < played / 2
    stop = threading.Event()
    stop.set()
    envs = evaluation_envs(pipeline, "pong", 2, 0, 400)
    assert play_merging(envs, net, cpu, starts[:2], 400, stop=stop)[0] == []


class Track(gym.Env):
    """A deterministic game whose state is a position, one emulator frame a step: a start
    of n NOOPs begins at position ``ahead`` x n after ``late`` x n frames, so starts meet at
    one position after different frame counts. Position p scores +1 where p % 4 == 0 and
    -1 where p % 9 == 0; the game ends at position ``end``, or is cut at ``max_frames``. It
    is its own recorder and emulator, as far as ``play_merging`` reads them."""

    observation_space = gym.spaces.Box(0, 255, (4, 2, 2), np.uint8)
    action_space = gym.spaces.Discrete(3)

    def __init__(self, end: int, max_frames: int, ahead: int, late: int) -> None:
        self.end, self.max_frames, self.ahead, self.late = end, max_frames, ahead, late
        self.recorder = self.ale = self

    def getRAM(self) -> np.ndarray:
        return np.array([self.p % 256, self.p // 256], np.uint8)

    def reset(self, *, seed=None, options=None):
        n = (options or {}).get("noops", 0)
        self.p, self.frames = self.ahead * n, self.late * n
        self.reward, self.scored, self.agent_steps = 0.0, [], 0
        return np.full((4, 2, 2), self.p % 256, np.uint8), {}

    def step(self, action):
        self.p, self.frames, self.agent_steps = self.p + 1, self.frames + 1, self.agent_steps + 1
        reward = float((self.p % 4 == 0) - (self.p % 9 == 0))
        if reward:
            self.reward += reward
            self.scored.append((self.frames, self.reward))
        over, cut = self.p >= self.end, self.frames >= self.max_frames
        info = {"episode": {"r": self.reward}} if over or cut else {}
        obs = np.full((4, 2, 2), self.p % 256, np.uint8)
        return obs, reward, over, cut and not over, info


@pytest.mark.parametrize(
    "ahead, late",
    # a start further on has played fewer frames to get there, so a game goes on as one
    # that was at its state first; or more, so the game that was there first goes on as it
    [(3, 1), (1, 3)],
)
def test_a_merged_game_is_cut_at_its_own_frames_not_at_the_game_it_goes_on_as(ahead, late):
    starts = [{"noops": n} for n in range(10)]
    cpu, rng = torch.device("cpu"), np.random.default_rng(0)
    # caps that cut every start, some of them, none
    for max_frames in (50, 90, 1000):
        whole = play_side_by_side(
            [Track(100, max_frames, ahead, late) for _ in starts],
            Always(0),
            cpu,
            0.0,
            rng,
            options=starts,
        )
        assert len(set(whole)) >= 3, "the starts' scores differ: the test can tell them apart"
        # one env a start, or fewer playing the starts in turn
        for count in (len(starts), 3, 1):
            envs = [Track(100, max_frames, ahead, late) for _ in range(count)]
            merged, steps = play_merging(envs, Always(0), cpu, starts, max_frames)
            assert merged == whole, (max_frames, count)
            # the starts' paths are one: played about once, where a game met at fewer
            # frames is still playing (one env: a game over can go on as no later start)
            assert count == 1 or steps < 100 + 3 * len(starts), count


def test_points_lost_are_the_falls_of_the_score_between_two_frames():
    scored = [(10, 1.0), (20, 0.0), (30, -2.0), (40, -1.0), (50, -3.0)]
    assert points_lost(scored) == 5.0
    assert points_lost(scored, after=30) == 2.0
    assert points_lost(scored, after=10, upto=30) == 3.0
    assert points_lost(scored, upto=15) == 0.0
    with pytest.raises(CutShort) as cut:
        Cutoff(target=5.0, max_score=10.0).check([0.5, 0.5], [6.0, 3.0], played=7)
    assert (cut.value.at_most, cut.value.played) == (4.5, 7)
    Cutoff(target=4.5, max_score=10.0).check([0.5, 0.5], [6.0, 3.0], played=7)  # can still


@pytest.mark.parametrize("ahead, late", [(3, 1), (1, 3)])
def test_a_cut_evaluation_stops_only_when_its_mean_can_no_longer_reach_the_target(ahead, late):
    # Track's games end at position 100, so a start's positive rewards add up to at most 25.
    # Each start's own points lost, to its own cap, follow from the games played out; the
    # bound falls to the mean of (25 - those) once every game is over. A cut that missed
    # the points a start lost as the game it goes on as would stay above it.
    starts = [{"noops": n} for n in range(10)]
    weights = [1 / len(starts)] * len(starts)
    cpu, rng = torch.device("cpu"), np.random.default_rng(0)
    for max_frames in (50, 90, 1000):
        tracks = [Track(100, max_frames, ahead, late) for _ in starts]
        whole = play_side_by_side(tracks, Always(0), cpu, 0.0, rng, options=starts)
        mean = float(np.mean(whole))
        floor = float(np.mean([25 - points_lost(t.scored) for t in tracks]))
        assert floor > mean + 0.5, "the test tells the bound from the mean"
        for target, cut in ((floor + 0.01, True), (floor - 0.01, False), (mean, False)):
            for count in (len(starts), 3, 1):
                envs = [Track(100, max_frames, ahead, late) for _ in range(count)]
                cutoff = Cutoff(target=target, max_score=25.0)
                if not cut:
                    merged = play_merging(
                        envs, Always(0), cpu, starts, max_frames, cutoff=cutoff, weights=weights
                    )[0]
                    assert merged == whole, (max_frames, target, count)
                    continue
                with pytest.raises(CutShort) as stopped:
                    play_merging(
                        envs, Always(0), cpu, starts, max_frames, cutoff=cutoff, weights=weights
                    )
                assert mean <= stopped.value.at_most < target, (max_frames, count)
        # side by side, a game over counts at its score: the bound ends at the mean
        for target, cut in ((mean + 0.01, True), (mean, False)):
            envs = [Track(100, max_frames, ahead, late) for _ in starts]
            cutoff = Cutoff(target=target, max_score=25.0)
            if cut:
                with pytest.raises(CutShort) as stopped:
                    play_side_by_side(envs, Always(0), cpu, 0.0, rng, options=starts, cutoff=cutoff)
                assert mean <= stopped.value.at_most < target
            else:
                played = play_side_by_side(
                    envs, Always(0), cpu, 0.0, rng, options=starts, cutoff=cutoff
                )
                assert played == whole


def test_an_every_start_evaluation_that_cannot_reach_the_target_stops_early():
    # An untrained network loses Pong's points from every start: 21 less the points lost
    # falls below 18 within a few of them, long before the games end.
    torch.manual_seed(0)
    net = DQN((4, 42, 42), 6, network="small", layer_norm=True).eval()
    whole = play_every_start(small_pipeline(3), "pong", net, max_frames=3000)
    assert whole["at_most"] is None and whole["mean"] < 18
    cut = play_every_start(
        small_pipeline(3), "pong", net, max_frames=3000, cutoff=Cutoff(18.0, 21.0)
    )
    assert cut["scores"] == [] and np.isnan(cut["mean"])
    assert whole["mean"] <= cut["at_most"] < 18.0
    assert cut["played"] < whole["played"] / 2
    # a target the mean reaches: played out, the same games
    low = play_every_start(
        small_pipeline(3), "pong", net, max_frames=3000, cutoff=Cutoff(-21.0, 21.0)
    )
    assert low["scores"] == whole["scores"] and low["at_most"] is None


def _counting(monkeypatch, name: str) -> list:
    """Each call of run.evaluation's function ``name`` from here on, by its arguments."""
    from atari_speed.run import evaluation as evaluation_module

    calls, real = [], getattr(evaluation_module, name)

    def counted(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(evaluation_module, name, counted)
    return calls


def test_kept_envs_are_made_once_and_play_what_new_envs_play(monkeypatch):
    # A run's every-start evaluations play again on the envs the first made: the same games
    # (each a new game, whatever the env played before), no ROM loaded after the first.
    torch.manual_seed(0)
    net = DQN((4, 42, 42), 6, network="small", layer_norm=True).eval()
    new = play_every_start(small_pipeline(3), "pong", net, max_frames=2000)
    made, probed = _counting(monkeypatch, "evaluation_envs"), _counting(monkeypatch, "probe_starts")
    kept = KeptEnvs()
    first = play_every_start(small_pipeline(3), "pong", net, max_frames=2000, kept=kept)
    envs = list(kept.envs)
    second = play_every_start(small_pipeline(3), "pong", net, max_frames=2000, kept=kept)
    assert first["scores"] == second["scores"] == new["scores"]
    assert first["mean"] == second["mean"] == new["mean"]
    assert len(made) == 1 and len(probed) == 1, "made and probed by the first only"
    assert len(envs) == 2 and all(a is b for a, b in zip(kept.envs, envs, strict=True))
    with pytest.raises(ValueError, match="kept envs were made for"):
        kept.exact_envs(small_pipeline(3), "pong", 2, max_frames=400)  # not what it made
    closed = []
    for env in envs:
        env.close = lambda env=env, close=env.close: (closed.append(env), close())
    kept.close()
    assert kept.envs == [] and len(closed) == 2
    # sticky actions: each evaluation seeds envs of its own and closes them
    sticky = KeptEnvs()
    for _ in range(2):
        play_every_start(small_pipeline(2, sticky=0.25), "pong", net, max_frames=200, kept=sticky)
    assert sticky.envs == [] and len(made) == 3


def _every_start_plan():
    """pong-nenv's plan with every-start evaluations of 600-frame games, and a network."""
    from atari_speed.agent.networks import build_network
    from atari_speed.core.config import load_preset
    from atari_speed.run.plan import make_plan

    overrides = [
        "run.envs=1", "eval.every_start=true", "eval.epsilon=0.0", "eval.max_frames=600",
        "env.pipeline='small'",
    ]  # fmt: skip
    plan = make_plan(load_preset("pong-nenv", overrides))
    return plan, build_network(plan.preset.dqn, plan.obs_shape, plan.actions)


def test_an_evaluation_plays_on_one_torch_thread_and_leaves_trainings_alone(monkeypatch):
    # A team of torch's threads of the evaluation's own would spin beside training's on
    # the same cores, uncounted; and training's own thread count must not change.
    from atari_speed.run import evaluation as evaluation_module
    from atari_speed.run.evaluation import PER_THREAD_THREADS, Evaluation

    if not PER_THREAD_THREADS:
        pytest.skip("torch's thread count is the process's here: evaluations keep it")
    plan, net = _every_start_plan()
    seen = []

    def play_merging(envs, net, device, options, max_frames, stop=None, **cut):
        seen.append((torch.get_num_threads(), envs))
        return [0.0] * len(options), 0

    monkeypatch.setattr(evaluation_module, "play_merging", play_merging)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    kept = KeptEnvs()
    try:
        for _ in range(2):
            Evaluation(plan, net.state_dict(), frames=10, kept=kept).wait()
        assert torch.get_num_threads() == 2, "training's threads as they were"
    finally:
        torch.set_num_threads(before)
        kept.close()
    assert [threads for threads, _ in seen] == [1, 1]
    assert seen[0][1] is seen[1][1], "the second evaluation played the first's envs"


def test_every_start_evaluation_scores_each_start_weighted_as_a_reset_draws_it(monkeypatch):
    from atari_speed.run import evaluation as evaluation_module
    from atari_speed.run.evaluation import MERGING_ENVS, Evaluation, every_start

    plan, net = _every_start_plan()
    given = []

    def play_merging(envs, net, device, options, max_frames, stop=None, **cut):
        given.append((len(envs), options, max_frames))
        return [float(i) for i in range(len(options))], 0  # each start's game scores apart

    monkeypatch.setattr(evaluation_module, "play_merging", play_merging)
    evaluation = Evaluation(plan, net.state_dict(), frames=10)
    evaluation.wait()
    starts = every_start(plan.pipeline, "pong")
    assert given == [(MERGING_ENVS, [{"noops": n} for n in starts], 600)], "each start, its own"
    assert evaluation.scores == list(range(29))
    weighted = float(np.dot(list(starts.values()), range(29)))
    assert evaluation.result() == pytest.approx(weighted), "weighted as a reset draws them"
    assert weighted != pytest.approx(14.0), "start 0 is drawn twice as often: not the plain mean"


def _state_after(env: gym.Env, steps: int, options: dict) -> bytes:
    """The emulator's RAM and the observation after a new game (``new_game``) started as
    ``options`` say and ``steps`` of a fixed action sequence."""
    obs = new_game(env, options)
    for t in range(steps):
        obs = env.step(2 + t // 8 % 2)[0]  # the paddle up, then down
    return env.unwrapped.ale.getRAM().tobytes() + np.asarray(obs).tobytes()


@pytest.mark.parametrize("game_name", ["pong", "breakout"])
def test_a_new_game_starts_as_its_options_say_whatever_the_env_did_before(game_name):
    # A seeded env is made and reset once; EpisodicLife takes a second reset of a game that
    # is not over for one after a lost life and goes on with it, options unread. An
    # evaluation's games are new games, each the start it was given, and an env that
    # played a game before (KeptEnvs) plays the same one: ALE's reset leaves the RAM as
    # the last game left it, and the game's own start must clear it.
    pipeline, start = small_pipeline(30), {"noops": 6}
    a, b = evaluation_envs(pipeline, game_name, 2, 0)
    (c,) = evaluation_envs(pipeline, game_name, 1, None)  # neither seeded nor reset
    try:
        game = _state_after(a, 60, start)
        assert _state_after(b, 60, start) == game, "another seed, the same game"
        assert _state_after(c, 60, start) == game, "no seed, the same game"
        assert _state_after(a, 60, start) == game, "the env's second game, the same"
        assert _state_after(a, 60, {"noops": 9}) != game, "another start, another game"
    finally:
        for env in (a, b, c):
            env.close()


@pytest.mark.parametrize(
    "overrides, match",
    [
        (["eval.epsilon=0.05"], r"\[eval\] every_start = true with epsilon = 0.05"),
        (
            ["eval.epsilon=0.0", "env.pipeline='small-maxpool-sticky'"],
            r"eval.every_start = true with pipeline 'small-maxpool-sticky': its sticky actions",
        ),
        (
            ["eval.epsilon=0.0", "env.pipeline={stages=[{wrapper='WarpFrame'}]}"],
            r"eval.every_start = true with pipeline 'inline': its pipeline has no NoopReset",
        ),
    ],
)
def test_every_start_refuses_what_it_cannot_play_exactly(overrides, match):
    from atari_speed.core.config import load_preset
    from atari_speed.run.plan import make_plan

    with pytest.raises(ConfigError, match=match):
        make_plan(load_preset("pong-nenv", ["run.envs=1", "eval.every_start=true", *overrides]))
