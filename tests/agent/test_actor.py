"""The one actor: batched actions, transitions into its own replay columns, games out."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from atari_speed.agent.actor import Actor, Game
from atari_speed.agent.replay import FrameReplay
from atari_speed.agent.rollout import RolloutStore
from atari_speed.core.timing import Profiler


class ScriptedVectorEnv:
    """Two envs with SAME_STEP autoreset and 2-frame stacks of 1x1 frames. Env e's frame t
    of an episode shows 10 * (e + 1) + t. Env 0's episodes are truncated after 3 steps,
    env 1's terminate after 4 (a whole game: reported in ``infos["episode"]``)."""

    num_envs = 2
    single_action_space = gym.spaces.Discrete(3)
    stage_timer = None

    def __init__(self) -> None:
        self.t = np.zeros(2, np.int64)
        self.actions: list[np.ndarray] = []
        self.resets: list[np.ndarray | None] = []  # each reset's mask (None: all envs)

    def _obs(self, t: np.ndarray) -> np.ndarray:
        newest = 10 * np.arange(1, 3) + t
        older = np.where(t > 0, newest - 1, 0)
        return np.stack([older, newest], axis=1).astype(np.uint8).reshape(2, 2, 1, 1)

    def reset(
        self, seed: int | None = None, options: dict | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        self.resets.append(None if options is None else options["reset_mask"].copy())
        if options is None:
            self.t[:] = 0
        else:
            self.t[options["reset_mask"]] = 0
        return self._obs(self.t), {}

    def step(self, actions: np.ndarray):
        self.actions.append(actions.copy())
        self.t += 1
        truncated = np.array([self.t[0] == 3, False])
        terminated = np.array([False, self.t[1] == 4])
        ended = truncated | terminated
        infos: dict[str, Any] = {}
        if ended.any():
            infos["final_obs"], infos["_final_obs"] = self._obs(self.t), ended
        if terminated[1]:
            infos["episode"] = {"r": np.array([0.0, 5.0]), "l": np.array([0, 4])}
            infos["_episode"] = np.array([False, True])
        self.t[ended] = 0
        return self._obs(self.t), np.ones(2, np.float32), terminated, truncated, infos

    def worker_profiles(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        pass


class TinyQ(torch.nn.Module):
    """Q-values from a 2-frame observation of 1x1 frames."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(2, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x.float().flatten(1))


def always_two() -> TinyQ:
    """A TinyQ whose greedy action is always 2."""
    net = TinyQ()
    with torch.no_grad():
        net.linear.weight.zero_()
        net.linear.bias[:] = torch.tensor([0.0, 0.0, 1.0])
    return net


def scripted_actor(seed: int = 0) -> tuple[Actor, ScriptedVectorEnv, FrameReplay]:
    """An actor of ``always_two`` over a ``ScriptedVectorEnv``, into a small replay."""
    replay, venv = FrameReplay(100, 2, (1, 1, 1), 2), ScriptedVectorEnv()
    rng, cpu = np.random.default_rng(seed), torch.device("cpu")
    return Actor(venv, always_two(), replay, slice(None), 0, rng, cpu, Profiler()), venv, replay


def test_actor_writes_its_columns_and_reports_games():
    gamma = 0.5
    replay = FrameReplay(200, 4, (1, 1, 1), 2, n_steps=1, gamma=gamma)
    venv = ScriptedVectorEnv()
    actor = Actor(
        venv,
        TinyQ(),
        replay,
        slice(2, 4),
        0,
        np.random.default_rng(0),
        torch.device("cpu"),
        Profiler(),
    )
    games = [actor.step(epsilon=0.5) for _ in range(12)]
    assert games[3] == [Game(5.0, 4)] and games[7] == [Game(5.0, 4)]
    assert sum(len(g) for g in games) == 3
    # Columns 0-1 belong to someone else; env 0 wrote 4 tail rows (truncations at steps 3,
    # 6, 9, 12) beside its 12 transitions.
    assert replay.written.tolist() == [0, 0, 16, 12]
    batch = replay.sample(500, np.random.default_rng(0))
    assert set(batch.env.tolist()) == {2, 3}
    for b in range(500):
        newest, nxt = int(batch.states[b, -1, 0, 0]), int(batch.next_states[b, -1, 0, 0])
        if newest in (13, 24):
            pytest.fail(f"state {newest} is an episode's final observation, no transition")
        if newest == 12:  # the truncated step: bootstraps from the final observation
            assert nxt == 13 and batch.discounts[b] == pytest.approx(gamma)
        elif newest == 23:  # the terminated step: no bootstrap
            assert batch.discounts[b] == 0.0
        else:
            assert nxt == newest + 1 and batch.discounts[b] == pytest.approx(gamma)


def test_greedy_actor_acts_with_the_network_and_random_one_without():
    replay = FrameReplay(100, 2, (1, 1, 1), 2)
    venv = ScriptedVectorEnv()
    net = always_two()
    actor = Actor(
        venv, net, replay, slice(None), 0, np.random.default_rng(0), torch.device("cpu"), Profiler()
    )
    for _ in range(5):
        actor.step(epsilon=0.0)
    assert all((a == 2).all() for a in venv.actions)
    for _ in range(50):
        actor.step(epsilon=1.0)
    assert {int(a) for step in venv.actions[5:] for a in step} == {0, 1, 2}


def test_actor_keeps_the_values_it_chose_by_in_a_rollout():
    rollout = RolloutStore(2, 6, (2, 1, 1))
    venv = ScriptedVectorEnv()
    net, rng = TinyQ(), np.random.default_rng(0)
    actor = Actor(venv, net, rollout, slice(None), 0, rng, torch.device("cpu"), Profiler())
    seen = []
    for t in range(6):
        seen.append(actor.obs.copy())
        actor.step(epsilon=1.0 if t == 0 else 0.3)  # warm-up: no forward pass, no values
    assert np.isnan(rollout.values[0]).all()
    with torch.no_grad():
        expected = [net(torch.from_numpy(obs)).max(dim=1).values.numpy() for obs in seen[1:]]
    assert rollout.values[1:] == pytest.approx(np.stack(expected))
    assert rollout.acted_values() == pytest.approx(np.stack(expected))


@pytest.mark.parametrize("bf16", [False, True])
def test_an_actor_in_bf16_chooses_under_bf16_autocast_and_keeps_those_values(bf16):
    rollout = RolloutStore(2, 3, (2, 1, 1))
    net, rng = TinyQ(), np.random.default_rng(0)
    dtypes: list[torch.dtype] = []
    net.linear.register_forward_hook(lambda _, __, out: dtypes.append(out.dtype))
    actor = Actor(
        ScriptedVectorEnv(),
        net,
        rollout,
        slice(None),
        0,
        rng,
        torch.device("cpu"),
        Profiler(),
        bf16,
    )
    seen = []
    for _ in range(3):
        seen.append(actor.obs.copy())
        actor.step(epsilon=0.0)
    assert dtypes == [torch.bfloat16 if bf16 else torch.float32] * 3
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        expected = [net(torch.from_numpy(obs)).float().max(dim=1).values.numpy() for obs in seen]
    assert rollout.values.tolist() == np.stack(expected).tolist()


def test_an_actor_acting_with_another_network_leaves_its_values_out_of_the_rollout():
    # pqn.act_with_average: the average acts, and its max_a Q are not the learner's targets
    rollout = RolloutStore(2, 4, (2, 1, 1))
    venv = ScriptedVectorEnv()
    own, other = TinyQ(), always_two()
    with torch.no_grad():
        own.linear.weight.zero_()
        own.linear.bias[:] = torch.tensor([1.0, 0.0, 0.0])  # greedy action 0
    rng, cpu = np.random.default_rng(0), torch.device("cpu")
    actor = Actor(venv, own, rollout, slice(None), 0, rng, cpu, Profiler())
    actor.step(epsilon=0.0)
    actor.act_with(other)
    actor.step(epsilon=0.0)
    actor.act_with(None)  # back to its own network
    actor.step(epsilon=0.0)
    assert [int(a[0]) for a in venv.actions] == [0, 2, 0]
    assert not np.isnan(rollout.values[0]).any() and not np.isnan(rollout.values[2]).any()
    assert np.isnan(rollout.values[1]).all()


class Recorder:
    """A sink that keeps what it was given."""

    def __init__(self) -> None:
        self.commits: list[tuple[np.ndarray, np.ndarray]] = []

    def put_obs(self, obs, cols=slice(None), values=None) -> None:
        pass

    def commit(self, actions, rewards, terminated, *, truncated=None, final_obs=None, cols=None):
        self.commits.append((np.array(actions), np.array(terminated)))


def test_the_step_the_ale_backend_plays_after_a_lost_life_is_recorded_as_played():
    # After a lost life in Breakout the ale backend presses FIRE in place of the agent's
    # action (EpisodicLife's after_life = "fire"): the transition must say FIRE, or the
    # agent learns that its action launched the ball.
    from atari_speed import make_vector_env
    from atari_speed.envs.wrappers import FIRE

    venv = make_vector_env("small-maxpool", "breakout", 2, backend="ale")
    sink = Recorder()
    actor = Actor(
        venv, TinyQ(), sink, slice(None), 0, np.random.default_rng(0), torch.device("cpu"),
        Profiler(),
    )  # fmt: skip
    games = []
    while len(games) < 2:
        games += actor.step(epsilon=1.0)  # random actions: FIRE only 1 time in 4
    actor.close()
    after_loss = [
        sink.commits[t + 1][0][e]
        for t in range(len(sink.commits) - 1)
        for e in range(2)
        if sink.commits[t][1][e]  # a lost life, or a game's end (then a new game's step)
    ]
    assert len(after_loss) >= 8
    lives_lost = len(after_loss) - len(games)
    assert sum(a == FIRE for a in after_loss) >= lives_lost, after_loss


def test_spread_plays_apart_unrecorded_and_leaves_the_games_it_began_unscored():
    replay = FrameReplay(100, 2, (1, 1, 1), 2)
    venv = ScriptedVectorEnv()
    net = always_two()
    rng = np.random.default_rng(3)
    randoms = np.random.default_rng(3).integers(0, 41, 2)  # the spread's first draw
    actor = Actor(venv, net, replay, slice(None), 0, rng, torch.device("cpu"), Profiler())
    actor.spread(most=40, epsilon=0.0)
    spread = np.stack(venv.actions)
    assert len(spread) == randoms.max() > 0
    # env i's first randoms[i] actions are random (three actions: some are not 2), then
    # the network's (always 2)
    for env in range(2):
        assert (spread[: randoms[env], env] != 2).any()
        assert (spread[randoms[env] :, env] == 2).all()
    assert replay.written.tolist() == [0, 0]  # nothing recorded
    # env 1's games last 4 steps: the one in progress when the spread ended is not scored,
    # the next one is
    games = [actor.step(epsilon=0.0) for _ in range(8)]
    scored = [t for t, g in enumerate(games) if g]
    assert len(scored) == 1 and games[scored[0]] == [Game(5.0, 4)]
    assert scored[0] >= 4  # a whole game of the network's after the unscored one
    actor.spread(most=0, epsilon=0.0)  # off: nothing played, scoring unchanged
    assert len(venv.actions) == len(spread) + 8


def test_the_actor_counts_each_envs_steps_into_its_game_and_realign_restores_them():
    actor, venv, replay = scripted_actor()
    for _ in range(6):
        actor.step(epsilon=0.0)
    # env 0's episodes are truncated every 3 steps but its game goes on; env 1's games
    # last 4 steps, so 2 steps into its second
    assert actor.phases.tolist() == [6, 2]
    written = replay.written.tolist()
    # a restart (as --resume's) brings env i back to phases[i] steps into a new game:
    # 3 steps played, env 1 reset at the start, env 0 after one step
    venv.reset()
    venv.actions.clear()
    batches: list[int] = []
    actor.net.register_forward_hook(lambda _m, args, _out: batches.append(len(args[0])))
    steps: list[None] = []
    actor.realign(np.array([2, 3]), epsilon=0.0, on_step=lambda: steps.append(None))
    assert len(venv.actions) == len(steps) == 3 and replay.written.tolist() == written
    # env 0 waits a step for its game to begin, playing NOOP there, and the network
    # chooses only for the envs in their game
    assert [a.tolist() for a in venv.actions] == [[0, 2], [2, 2], [2, 2]]
    assert batches == [1, 2, 2]
    assert [None if m is None else m.tolist() for m in venv.resets[-2:]] == [
        [False, True],
        [True, False],
    ]
    assert venv.t.tolist() == [2, 3] and actor.phases.tolist() == [2, 3]
    # the game in progress joins the replay to what follows: it ends next step, unscored
    assert actor.step(epsilon=0.0) == []
    assert actor.phases.tolist() == [3, 0]
    # a phase longer than env 1's 4-step game: that game ends during the realignment, and
    # env 1 is then 2 steps into the next one
    actor.realign(np.array([2, 6]), epsilon=0.0)
    assert venv.t.tolist() == [2, 2] and actor.phases.tolist() == [2, 2]


def test_realign_scores_no_game_in_flight_only_the_games_after_it():
    actor, venv, _ = scripted_actor()
    for _ in range(6):
        actor.step(epsilon=0.0)
    assert actor.phases.tolist() == [6, 2]
    # env 1, brought back two steps into a game, ends it two steps later: unscored, as a
    # game that ends within its phase (6 steps of a 4-step game) is
    for phases in ([6, 2], [0, 6]):
        venv.reset()
        actor.realign(np.array(phases), epsilon=0.0)
        assert [g for _ in range(2) for g in actor.step(epsilon=0.0)] == []
        # the games after it are the network's own, scored as they are
        assert [g for _ in range(4) for g in actor.step(epsilon=0.0)] == [Game(5.0, 4)]


def test_a_spread_counts_the_steps_it_plays_into_each_envs_game():
    actor, venv, _ = scripted_actor(seed=3)
    actor.spread(most=40, epsilon=0.0)
    played = len(venv.actions)
    # env 0's game never ends (its episodes are truncations); env 1's last 4 steps each
    assert actor.phases.tolist() == [played, played % 4]


def test_new_games_drops_the_games_in_progress_and_scores_the_next_whole():
    actor, venv, _ = scripted_actor()
    for _ in range(2):
        assert actor.step(epsilon=0.0) == []
    actor.new_games()
    assert venv.resets[-1].tolist() == [True, True] and venv.t.tolist() == [0, 0]
    assert actor.phases.tolist() == [0, 0]
    # env 1's game in progress would have ended 2 steps on; its new one ends 4 steps on,
    # scored: a whole game of the network's
    games = [actor.step(epsilon=0.0) for _ in range(4)]
    assert games == [[], [], [], [Game(5.0, 4)]]


def test_new_games_after_a_spread_scores_the_games_it_begins():
    actor, _, _ = scripted_actor(seed=3)
    actor.spread(most=40, epsilon=0.0)  # the games in progress: unscored
    actor.new_games()
    games = [actor.step(epsilon=0.0) for _ in range(4)]
    assert games[-1] == [Game(5.0, 4)]
