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


def _every_pixel_value(shape: tuple[int, ...]) -> torch.Tensor:
    """Frames of ``shape`` in which each of the 256 uint8 values occurs."""
    n = int(torch.tensor(shape).prod())
    return (torch.arange(n) % 256).to(torch.uint8).reshape(shape)


@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("bf16", [False, True])
def test_frames_are_scaled_as_autocast_would_cast_fp32_frames(bf16, channels_last):
    """The frames reach the first conv in autocast's dtype directly; the network's output
    is bit for bit the one of frames scaled in fp32 and then cast by autocast."""
    torch.manual_seed(0)
    net = DQN((4, 84, 84), 6, network="nature", layer_norm=True)
    if channels_last:
        net.to(memory_format=torch.channels_last)
    x = _every_pixel_value((3, 4, 84, 84))
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        conv_in = x.float() / 255.0
        if channels_last:
            conv_in = conv_in.contiguous(memory_format=torch.channels_last)
        features = net.conv(conv_in)
        hidden = net.head[:-1](features)
        with torch.autocast("cpu", enabled=False):
            expected = net.head[-1](hidden.float())
        q = net(x)
    torch.testing.assert_close(q, expected, rtol=0, atol=0)


def test_float_frames_are_not_scaled_in_place():
    net = DQN((4, 42, 42), 6, network="small")
    x = _every_pixel_value((2, 4, 42, 42)).float()
    before = x.clone()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        net(x)
    net(x)
    assert torch.equal(x, before)


@pytest.mark.parametrize("bf16", [False, True])
def test_the_first_conv_gets_frames_in_autocasts_dtype(bf16):
    net = DQN((4, 42, 42), 6, network="small")
    seen = []
    net.conv[0].register_forward_pre_hook(lambda _m, args: seen.append(args[0].dtype))
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        net(_every_pixel_value((2, 4, 42, 42)))
    assert seen == [torch.bfloat16 if bf16 else torch.float32]


def test_a_network_with_quantiles_values_each_action_by_their_mean():
    torch.manual_seed(0)
    net = DQN((4, 42, 42), 6, network="small", layer_norm=True, quantiles=5)
    x = torch.randint(0, 255, (3, 4, 42, 42), dtype=torch.uint8)
    with torch.no_grad():
        per = net(x, True)
        q = net(x)
    assert per.shape == (3, 6, 5) and q.shape == (3, 6)
    torch.testing.assert_close(q, per.mean(dim=2), rtol=0, atol=0)
    assert not torch.allclose(per[..., 0], per[..., 1]), "five outputs per action, not one"
    with pytest.raises(ValueError, match="no quantiles"):
        DQN((4, 42, 42), 6, network="small")(x, True)
    with pytest.raises(ValueError, match="dueling head with quantiles"):
        DQN((4, 42, 42), 6, network="small", dueling=True, quantiles=5)
