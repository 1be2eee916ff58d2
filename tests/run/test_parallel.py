"""Parallel mode's pieces: weight publishing across memory layouts."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
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
