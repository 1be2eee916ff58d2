"""Parallel mode's pieces: weight publishing across memory layouts, actors' epsilon."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from atari_speed.agent.networks import DQN
from atari_speed.run.shared import VERSION, load_flat, publish


def test_published_weights_load_into_a_net_of_another_memory_layout():
    torch.manual_seed(0)
    learner_net = DQN((4, 84, 84), 6).to(memory_format=torch.channels_last)
    size = sum(p.numel() for p in learner_net.parameters())
    shared = SimpleNamespace(control=np.zeros(2, np.int64), weights=np.zeros(size, np.float32))
    publish(shared, learner_net)
    assert shared.control[VERSION] == 2, "even version: the write is complete"
    torch.manual_seed(1)
    actor_net = DQN((4, 84, 84), 6)
    load_flat(actor_net, torch.from_numpy(shared.weights))
    x = torch.randint(0, 255, (3, 4, 84, 84), dtype=torch.uint8)
    with torch.no_grad():
        assert torch.allclose(actor_net(x), learner_net(x), atol=1e-5)
    for a, b in zip(actor_net.parameters(), learner_net.parameters(), strict=True):
        assert torch.equal(a, b)


def actor_process(version: int, fixed: float | None, start_frames: int, frames: list[int]):
    """The state ActorProcess.epsilon reads, without starting a process."""
    from atari_speed.core.config import ExploreConfig

    explore = ExploreConfig(epsilon_start=1.0, epsilon_final=0.1, epsilon_steps=1000)
    return SimpleNamespace(
        version=version,
        fixed_epsilon=fixed,
        shared=SimpleNamespace(
            spec=SimpleNamespace(start_frames=start_frames), frames=np.array(frames)
        ),
        plan=SimpleNamespace(preset=SimpleNamespace(explore=explore)),
    )


def test_an_actor_process_follows_the_schedule_over_all_actors_frames_and_resumed_ones():
    from atari_speed.run.parallel import ActorProcess

    epsilon = ActorProcess.epsilon
    assert epsilon(actor_process(-1, None, 0, [0, 0])) == 1.0, "no weights yet: random"
    # 100 + 200 frames of this run's two actors: epsilon at 300 frames
    assert epsilon(actor_process(0, None, 0, [100, 200])) == pytest.approx(1.0 - 0.9 * 0.3)
    # after --resume at 500 frames the schedule goes on from there, not from 0
    assert epsilon(actor_process(3, None, 500, [100, 200])) == pytest.approx(1.0 - 0.9 * 0.8)
    assert epsilon(actor_process(3, None, 5000, [0, 0])) == pytest.approx(0.1)
    assert epsilon(actor_process(3, 0.25, 500, [100, 200])) == 0.25, "Ape-X's fixed epsilon"
