"""The moving average of the weights that evaluations play (eval.average_steps)."""

from __future__ import annotations

import math

import pytest
import torch

from atari_speed.agent.averaging import WeightAverage


def fill(net: torch.nn.Module, value: float) -> torch.nn.Module:
    """Every weight of ``net`` set to ``value``: a network "trained" to known weights."""
    with torch.no_grad():
        for p in net.parameters():
            p.fill_(value)
    return net


def linear(value: float) -> torch.nn.Linear:
    return fill(torch.nn.Linear(3, 2), value)


def test_the_average_starts_at_the_weights_and_moves_by_the_agent_steps_elapsed():
    net = linear(1.0)
    average = WeightAverage(net, steps=1000, at=500)
    assert all(torch.equal(v, net.state_dict()[k]) for k, v in average.weights.items())
    fill(net, 3.0)
    average.update(net, 1500)  # one time constant later: the old weights count 1/e
    expected = 3.0 - 2.0 * math.exp(-1.0)
    for value in average.weights.values():
        assert torch.allclose(value, torch.full_like(value, expected))
    average.update(net, 1500)  # no agent steps elapsed: nothing moves
    for value in average.weights.values():
        assert torch.allclose(value, torch.full_like(value, expected))
    # two half steps make one whole: the average depends on agent steps, not on calls
    halves = WeightAverage(linear(1.0), steps=1000, at=500)
    halves.update(net, 1000)
    halves.update(net, 1500)
    for key, value in halves.weights.items():
        assert torch.allclose(value, average.weights[key])


def test_the_average_is_a_copy_that_training_does_not_move():
    net = linear(1.0)
    average = WeightAverage(net, steps=10, at=0)
    with torch.no_grad():
        for p in net.parameters():
            p.add_(5.0)
    assert all(torch.all(v == 1.0) for v in average.weights.values())


def test_the_averages_network_computes_with_the_averaged_weights():
    net = linear(1.0)
    average = WeightAverage(net, steps=1000, at=0)
    fill(net, 3.0)
    average.update(net, 1000)
    x = torch.ones(1, 3)
    value = 3.0 - 2.0 * math.exp(-1.0)  # each weight and bias: 3 inputs of 1, and a bias
    assert torch.allclose(average.net(x), torch.full((1, 2), 4 * value))
    assert not any(p.requires_grad for p in average.net.parameters())


def test_channels_last_weights_keep_their_layout():
    conv = torch.nn.Conv2d(4, 8, 3).to(memory_format=torch.channels_last)
    average = WeightAverage(conv, steps=100, at=0)
    average.update(conv, 50)
    assert average.weights["weight"].is_contiguous(memory_format=torch.channels_last)


def test_state_round_trip_and_a_foreign_average_is_refused():
    net = linear(2.0)
    average = WeightAverage(net, steps=100, at=0)
    average.update(linear(4.0), 70)
    restored = WeightAverage(linear(0.0), steps=100, at=0)
    restored.load_state_dict(average.state_dict())
    assert restored.at == 70
    for key, value in average.weights.items():
        assert torch.equal(restored.weights[key], value)
    with pytest.raises(ValueError, match="another network"):
        restored.load_state_dict(WeightAverage(torch.nn.Linear(3, 5), 100, 0).state_dict())
    with pytest.raises(ValueError, match="positive"):
        WeightAverage(net, steps=0, at=0)
