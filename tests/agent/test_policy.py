"""Choosing actions with a Q-network: greedy values, epsilon-greedy draws, whole games."""

from __future__ import annotations

import threading

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from atari_speed.agent.policy import act, epsilon_greedy, greedy_and_values, play_episodes

CPU = torch.device("cpu")


class Table(nn.Module):
    """Q-values looked up by an observation's first pixel: a network whose answers a test
    sets by hand."""

    def __init__(self, q: list[list[float]]) -> None:
        super().__init__()
        self.q = nn.Parameter(torch.tensor(q, dtype=torch.float32))
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return self.q[x.reshape(len(x), -1)[:, 0].long()]


def obs_of(*states: int) -> np.ndarray:
    return np.stack([np.full((1, 2, 2), s, np.uint8) for s in states])


def test_greedy_and_values_are_the_argmax_and_max_of_each_row():
    net = Table([[1.0, 5.0, 2.0], [-3.0, -4.0, -1.0], [7.0, 7.0, 0.0]])
    greedy, values = greedy_and_values(net, obs_of(0, 1, 2, 0), CPU)
    assert greedy.tolist() == [1, 2, 0, 1]  # a tie goes to the first maximal action
    assert values.tolist() == [5.0, -1.0, 7.0, 5.0]
    assert net.calls == 1, "one batched forward pass"


def test_greedy_and_values_in_bf16_are_the_networks_under_bf16_autocast():
    # 1 + 2**-10 is exact in fp32 and rounds to 1 in bf16 (8 bits of mantissa): the values
    # say which precision the forward pass ran in
    net = nn.Linear(2, 2, bias=False)
    with torch.no_grad():
        net.weight.copy_(torch.tensor([[1.0 + 2**-10, 0.0], [0.0, 1.0]]))
    obs = np.array([[1, 0], [0, 1]], np.uint8)
    tofloat = nn.Sequential(Float(), net)
    greedy, fp32 = greedy_and_values(tofloat, obs, CPU)
    assert fp32.tolist() == [1.0 + 2**-10, 1.0] and fp32.dtype == np.float32
    greedy_bf16, bf16 = greedy_and_values(tofloat, obs, CPU, bf16=True)
    assert bf16.tolist() == [1.0, 1.0] and bf16.dtype == np.float32
    assert greedy.tolist() == greedy_bf16.tolist() == [0, 1]
    _, values = act(tofloat, obs, 0.0, 2, np.random.default_rng(0), CPU, bf16=True)
    assert values.tolist() == [1.0, 1.0]


class Float(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.float()


def test_epsilon_greedy():
    rng = np.random.default_rng(0)
    greedy = np.full(10_000, 3)
    assert (epsilon_greedy(greedy, 0.0, 6, rng) == 3).all()
    random = epsilon_greedy(greedy, 1.0, 6, rng)
    assert set(random.tolist()) == set(range(6))
    share = (epsilon_greedy(greedy, 0.3, 6, rng) != 3).mean()
    assert share == pytest.approx(0.3 * 5 / 6, abs=0.02)


def test_epsilon_greedy_takes_one_epsilon_per_env():
    rng = np.random.default_rng(1)
    greedy = np.full(4000, 2)
    eps = np.repeat([0.0, 1.0], 2000)  # parallel actors' fixed epsilons, one per env
    chosen = epsilon_greedy(greedy, eps, 5, rng)
    assert (chosen[:2000] == 2).all()
    assert (chosen[2000:] != 2).mean() == pytest.approx(4 / 5, abs=0.03)


def test_act_is_greedy_at_epsilon_zero_and_returns_the_values():
    net = Table([[0.0, 1.0], [3.0, 2.0]])
    actions, values = act(net, obs_of(0, 1, 1), 0.0, 2, np.random.default_rng(0), CPU)
    assert actions.tolist() == [1, 0, 0] and values.tolist() == [1.0, 3.0, 3.0]


def test_act_at_epsilon_one_is_random_without_a_forward_pass():
    net = Table([[0.0, 1.0, 0.0, 0.0]])
    rng, same = np.random.default_rng(5), np.random.default_rng(5)
    actions, values = act(net, obs_of(*[0] * 400), 1.0, 4, rng, CPU)
    assert values is None and net.calls == 0
    assert actions.tolist() == same.integers(0, 4, 400).tolist()
    assert set(actions.tolist()) == {0, 1, 2, 3}


def test_act_takes_each_envs_epsilon_and_asks_the_network_unless_all_are_one():
    net = Table([[0.0, 1.0, 0.0, 0.0]])
    eps = np.repeat([0.0, 1.0], 400)  # explore.env_spread's ends, clipped at 1
    actions, values = act(net, obs_of(*[0] * 800), eps, 4, np.random.default_rng(2), CPU)
    assert net.calls == 1 and values.tolist() == [1.0] * 800
    assert (actions[:400] == 1).all() and set(actions[400:].tolist()) == {0, 1, 2, 3}
    _, values = act(net, obs_of(0, 0), np.array([1.0, 1.0]), 4, np.random.default_rng(2), CPU)
    assert values is None and net.calls == 1


def test_act_just_below_one_still_asks_the_network():
    net = Table([[0.0, 1.0]])
    _, values = act(net, obs_of(0, 0), 0.999, 2, np.random.default_rng(0), CPU)
    assert net.calls == 1 and values.tolist() == [1.0, 1.0]


class ScriptedEnv(gym.Env):
    """Games of the given lengths in agent steps; the last step of each ends it and puts
    the game's ``episode`` record in its info, as the pipeline's recorder does."""

    action_space = gym.spaces.Discrete(2)

    def __init__(self, lengths: list[int]) -> None:
        self.lengths, self.game, self.t = lengths, 0, 0
        self.resets, self.actions = 0, []

    def reset(self, *, seed=None, options=None):
        self.resets += 1
        self.t = 0
        return np.zeros((1, 2, 2), np.uint8), {}

    def step(self, action):
        self.actions.append(int(action))
        self.t += 1
        over = self.t == self.lengths[self.game]
        info = {"episode": {"r": float(self.game), "l": self.t}} if over else {}
        self.game += over
        return np.zeros((1, 2, 2), np.uint8), 0.0, over, False, info


def scripted_games(lengths: list[int]) -> ScriptedEnv:
    return ScriptedEnv(lengths)


def test_play_episodes_returns_whole_games_and_resets_between_them():
    env = scripted_games([3, 2, 4])
    net = Table([[0.0, 3.0]] * 256)  # greedy action 1, worth 3: the action, not the value
    steps = []
    rng = np.random.default_rng(0)
    games = play_episodes(env, net, CPU, 2, 0.0, rng, on_step=lambda: not steps.append(1))
    assert [(g["r"], g["l"]) for g in games] == [(0.0, 3), (1.0, 2)]
    assert env.resets == 3 and env.actions == [1] * 5  # greedy: action 1 every step
    assert len(steps) == 1 + 5  # after the first reset and after every step


def test_play_episodes_can_say_when_each_point_came():
    class Points(ScriptedEnv):
        def step(self, action):  # +1 at the game's 2nd step, -1 at its 5th
            obs, _, over, trunc, info = super().step(action)
            return obs, {2: 1.0, 5: -1.0}.get(self.t, 0.0), over, trunc, info

    net = Table([[0.0, 1.0]] * 256)
    rng = np.random.default_rng(0)
    games = play_episodes(Points([6, 5]), net, CPU, 2, 0.0, rng, points=True)
    assert [g["points"] for g in games] == [[2, -3], [2, -3]]  # counted afresh each game
    assert "points" not in play_episodes(Points([6]), net, CPU, 1, 0.0, rng)[0]


def test_play_episodes_ends_early_on_stop_or_when_on_step_says_so():
    stop = threading.Event()
    stop.set()
    env = scripted_games([3, 3])
    net = Table([[0.0, 1.0]] * 256)
    assert play_episodes(env, net, CPU, 2, 0.0, np.random.default_rng(0), stop=stop) == []
    assert env.actions == []
    env = scripted_games([3, 3])
    calls = iter([True, True, False])
    rng = np.random.default_rng(0)
    out = play_episodes(env, net, CPU, 2, 0.0, rng, on_step=lambda: next(calls))
    assert out == [] and len(env.actions) == 2  # the game in progress is not returned


def test_play_episodes_asks_the_network_on_the_given_device():
    class Recorder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.devices: list[torch.device] = []

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.devices.append(x.device)
            return torch.tensor([[0.0, 1.0]])

    net, meta = Recorder(), torch.device("meta")  # a device no default would pick
    play_episodes(scripted_games([2]), net, meta, 1, 0.0, np.random.default_rng(0))
    assert net.devices == [meta, meta]
