"""The one learner interface: the preset picks DQN's or PQN's learner, and a loop hands
either what its actors filled."""

from __future__ import annotations

import numpy as np
import torch

from atari_speed.agent.learner import Learner
from atari_speed.agent.learning import make_learner
from atari_speed.agent.networks import build_network
from atari_speed.agent.pqn import QLambdaLearner
from atari_speed.app.auto import fake_batch
from atari_speed.core.config import load_preset

SHAPE = (4, 42, 42)
CPU = torch.device("cpu")


def learner_of(name: str) -> Learner | QLambdaLearner:
    preset = load_preset(name).replace("dqn", network="small")
    return make_learner(preset, build_network(preset.dqn, SHAPE, 6), CPU)


def test_the_preset_picks_the_learner():
    assert type(learner_of("pong-nenv")) is Learner
    pqn = learner_of("pong-fast")  # channels-last
    assert type(pqn) is QLambdaLearner and pqn.channels_last


class CountingReplay:
    """Hands out one fixed batch and remembers each sample asked for."""

    def __init__(self) -> None:
        self.batch = fake_batch(8, SHAPE, 6)
        self.asked: list[tuple[int, np.random.Generator]] = []

    def sample(self, batch_size, rng, out=None):
        self.asked.append((batch_size, rng))
        return self.batch


def test_dqn_learns_one_update_per_call_on_a_batch_of_its_batch_size():
    learner, replay, rng = learner_of("pong-nenv"), CountingReplay(), np.random.default_rng(0)
    learner.learn(replay, 0.5, rng)
    learner.learn(replay, 0.5, rng)
    assert learner.updates == 2
    assert replay.asked == [(load_preset("pong-nenv").dqn.batch_size, rng)] * 2
    assert learner.pop_loss() is not None
