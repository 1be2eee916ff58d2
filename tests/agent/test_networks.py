"""The Q-network's output under bf16 autocast."""

from __future__ import annotations

import pytest
import torch

from atari_speed.agent.networks import DQN


@pytest.mark.parametrize("dueling", [False, True])
def test_q_values_stay_fp32_under_bf16_autocast(dueling):
    torch.manual_seed(0)
    net = DQN((4, 42, 42), 6, dueling=dueling, network="small", layer_norm=True)
    x = torch.randint(0, 255, (8, 4, 42, 42), dtype=torch.uint8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        q = net(x)
        hidden = net.head[:-1](net.conv(x.float() / 255.0))
    assert q.dtype == torch.float32
    assert hidden.dtype == torch.bfloat16, "the hidden layers keep autocast"
    # the output layer ran in fp32 on the bf16 hidden activations: not rounded to bf16
    head = net.head[-1](hidden.float())
    if not dueling:
        torch.testing.assert_close(q, head, rtol=0, atol=0)
    assert not torch.equal(q, q.to(torch.bfloat16).float())
    # and without autocast the network is plain fp32, as before
    assert net(x).dtype == torch.float32
