"""PQN's learner: its targets are the Q(lambda) returns of the rollout, it makes epochs x
minibatches updates per rollout, and it fits them, in fp32 and in bf16."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from atari_speed.agent.networks import DQN
from atari_speed.agent.pqn import QLambdaLearner
from atari_speed.agent.rollout import RolloutStore, q_lambda_returns
from atari_speed.core.config import DQNConfig, PQNConfig

SHAPE = (2, 36, 36)


def filled_rollout(
    envs: int = 4, steps: int = 8, seed: int = 0, next_value: int = 0
) -> RolloutStore:
    rng = np.random.default_rng(seed)
    rollout = RolloutStore(envs, steps, SHAPE)
    for _ in range(steps):
        rollout.put_obs(rng.integers(0, 255, (envs, *SHAPE), dtype=np.uint8))
        rollout.commit(
            rng.integers(0, 3, envs),
            rng.normal(size=envs).astype(np.float32),
            rng.random(envs) < 0.1,
            truncated=rng.random(envs) < 0.1,
            final_obs=rng.integers(0, 255, (envs, *SHAPE), dtype=np.uint8),
        )
    rollout.finish(np.full((envs, *SHAPE), next_value, np.uint8))
    return rollout


def learner(bf16: bool = False, channels_last: bool = False, **pqn) -> QLambdaLearner:
    torch.manual_seed(0)
    net = DQN(SHAPE, 3, network="nature", layer_norm=True)
    cfg = DQNConfig(algorithm="pqn", learning_rate=1e-3, gamma=0.9, layer_norm=True)
    return QLambdaLearner(
        net, cfg, PQNConfig(**pqn), torch.device("cpu"), bf16=bf16, channels_last=channels_last
    )


def test_targets_are_the_q_lambda_returns_of_the_online_network():
    rollout = filled_rollout(next_value=7)
    next_obs = np.full((4, *SHAPE), 7, np.uint8)
    pqn = learner(q_lambda=0.5)
    following = np.concatenate([rollout.obs[1:], next_obs[None]])
    next_values = pqn.max_q(following.reshape(-1, *SHAPE)).reshape(8, 4)
    final_values = pqn.max_q(rollout.final_obs.reshape(-1, *SHAPE)).reshape(8, 4)
    expected = q_lambda_returns(
        rollout.rewards,
        rollout.terminated,
        rollout.truncated,
        next_values,
        np.where(rollout.truncated, final_values, 0),
        0.9,
        0.5,
    )
    assert rollout.truncated.any() and rollout.terminated.any()
    assert pqn.targets(rollout) == pytest.approx(expected, abs=1e-5)


def test_targets_take_the_actors_values_and_evaluate_only_the_next_observation():
    rollout = filled_rollout(next_value=7)
    pqn = learner(q_lambda=0.5)
    recomputed = pqn.targets(rollout)
    for t in range(rollout.steps):  # what n-env mode's actor records as it chooses actions
        rollout.values[t] = pqn.max_q(rollout.obs[t])
    evaluated = []
    forward = pqn.net.forward
    pqn.net.forward = lambda x: evaluated.append(len(x)) or forward(x)
    assert pqn.targets(rollout) == pytest.approx(recomputed, abs=1e-5)
    assert sum(evaluated) == 4 + rollout.truncated.sum()  # next_obs and final observations
    rollout.values[3, 1] = np.nan  # one missing: every row is evaluated again
    evaluated.clear()
    assert pqn.targets(rollout) == pytest.approx(recomputed, abs=1e-5)
    assert sum(evaluated) == 8 * 4 + rollout.truncated.sum()


@pytest.mark.parametrize("bf16", [False, True])
def test_learn_makes_epochs_times_minibatches_updates_and_fits(bf16):
    rollout = filled_rollout()
    pqn = learner(bf16=bf16, epochs=3, minibatches=4, lr_decay=False)
    rng = np.random.default_rng(0)
    pqn.learn(rollout, 0.0, rng)
    assert pqn.updates == 12
    first = pqn.pop_loss()
    for _ in range(15):
        pqn.learn(rollout, 0.0, rng)
    assert pqn.pop_loss() < 0.5 * first


def test_learning_rate_decays_linearly_with_progress():
    pqn = learner(epochs=1, minibatches=1, lr_decay=True)
    pqn.learn(filled_rollout(), 0.75, np.random.default_rng(0))
    assert pqn.optimizer.param_groups[0]["lr"] == pytest.approx(0.25e-3)
    assert isinstance(pqn.optimizer, torch.optim.RAdam)


def test_channels_last_is_the_same_math_in_another_layout():
    rollout = filled_rollout()
    plain, last = learner(), learner(channels_last=True)
    conv = last.net.conv[0].weight
    assert conv.is_contiguous(memory_format=torch.channels_last) and not conv.is_contiguous()
    for pqn in (plain, last):
        pqn.learn(rollout, 0.0, np.random.default_rng(0))
    assert plain.updates == last.updates == 16
    moved = [
        (p - q).abs().max().item()
        for p, q in zip(plain.net.parameters(), learner().net.parameters(), strict=True)
    ]
    assert max(moved) > 1e-4  # the updates changed the weights ...
    for p, q in zip(plain.net.parameters(), last.net.parameters(), strict=True):
        assert torch.allclose(p, q, atol=1e-5)  # ... and alike in both layouts


class Table(torch.nn.Module):
    """max_a Q(s, a) = the observation's first pixel (action 1), 0 for action 0."""

    def __init__(self) -> None:
        super().__init__()
        self.unused = torch.nn.Parameter(torch.zeros(1))  # the optimizer needs one

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        v = x.reshape(len(x), -1)[:, 0].float()
        return torch.stack([torch.zeros_like(v), v], dim=1)


def test_targets_when_the_last_row_terminates_one_env_and_truncates_another():
    # gamma 0.9, lambda 0.5. Row 0: every env goes on into an observation worth 10. Row 1
    # (the last): env 0 terminates, env 1 is truncated (final observation worth 50), env 2
    # goes on into the observation after the rollout, worth 30 (as are the new episodes
    # envs 0 and 1 start there, which must not be bootstrapped from).
    store = RolloutStore(3, 2, (1, 1, 1))
    store.put_obs(np.zeros((3, 1, 1, 1), np.uint8))
    store.commit(np.zeros(3), np.ones(3), np.zeros(3, bool))
    store.put_obs(np.full((3, 1, 1, 1), 10, np.uint8))
    store.commit(
        np.zeros(3),
        np.full(3, 2.0),
        np.array([True, False, False]),
        truncated=np.array([False, True, False]),
        final_obs=np.full((3, 1, 1, 1), 50, np.uint8),
    )
    store.finish(np.full((3, 1, 1, 1), 30, np.uint8))
    pqn = QLambdaLearner(
        Table(),
        DQNConfig(algorithm="pqn", gamma=0.9),
        PQNConfig(q_lambda=0.5),
        torch.device("cpu"),
    )
    last = [2.0, 2 + 0.9 * 50, 2 + 0.9 * 30]
    first = [1 + 0.9 * (0.5 * g + 0.5 * 10) for g in last]
    assert pqn.targets(store) == pytest.approx(np.array([first, last]))


def test_a_learner_restored_from_its_state_goes_on_exactly_as_the_original():
    rollout = filled_rollout()
    original = learner(epochs=1, minibatches=2, lr_decay=False)
    original.learn(rollout, 0.0, np.random.default_rng(0))
    state = copy.deepcopy(original.state_dict())  # as read from disk: no shared tensors
    assert set(state) == {"net", "optimizer", "updates"} and state["updates"] == 2
    restored = learner(epochs=1, minibatches=2, lr_decay=False)
    torch.manual_seed(5)
    restored.net.head[-1].bias.data.normal_()  # not the original's weights until loaded
    restored.load_state_dict(state)
    for pqn in (original, restored):
        pqn.learn(rollout, 0.0, np.random.default_rng(1))
    for (name, p), q in zip(
        original.net.state_dict().items(), restored.net.state_dict().values(), strict=True
    ):
        assert torch.equal(p, q), name
    assert restored.updates == 4
    assert restored.optimizer.state_dict()["state"][0]["step"] == 4  # RAdam's state came too
