"""The Q-network: a DQN CNN over stacked uint8 frames, and the device it runs on."""

from __future__ import annotations

import torch
from torch import nn

from atari_speed.core.config import NETWORKS, DQNConfig
from atari_speed.core.errors import ConfigError


def _torso(name: str, channels: int, layer_norm: bool) -> tuple[list[nn.Module], int]:
    """Conv layers and hidden width of each network kind."""
    if name == "nature":  # Mnih et al. 2015, 84x84 input
        convs = [(32, 8, 4), (64, 4, 2), (64, 3, 1)]
        hidden = 512
    elif name == "nips":  # Mnih et al. 2013, 84x84 input: ~2x cheaper per update on CPU
        convs = [(16, 8, 4), (32, 4, 2)]
        hidden = 256
    elif name == "small":  # the nips shape for 42x42 input: a 4x cheaper first layer
        convs = [(16, 4, 2), (32, 4, 2)]
        hidden = 256
    else:
        raise ValueError(f"unknown network {name!r}; one of {', '.join(NETWORKS)}")
    layers: list[nn.Module] = []
    for out, kernel, stride in convs:
        layers.append(nn.Conv2d(channels, out, kernel_size=kernel, stride=stride))
        if layer_norm:
            # Normalises each sample over (C, H, W), as LayerNorm would, whatever the frame
            # size; the learned scale and shift are per channel.
            layers.append(nn.GroupNorm(1, out))
        layers.append(nn.ReLU())
        channels = out
    return [*layers, nn.Flatten()], hidden


def _mlp(size: int, hidden: int, out: int, layer_norm: bool) -> nn.Sequential:
    norm = [nn.LayerNorm(hidden)] if layer_norm else []
    return nn.Sequential(nn.Linear(size, hidden), *norm, nn.ReLU(), nn.Linear(hidden, out))


class DQN(nn.Module):
    """A DQN CNN over uint8 frames scaled /255: ``network`` picks the conv torso (see
    ``NETWORKS``); with ``dueling`` the head splits into value and advantage streams; with
    ``layer_norm`` every hidden layer is normalised before its ReLU (PQN's recipe: it keeps
    TD learning stable without a target network). With ``quantiles`` (K > 0) the head
    gives K quantiles of the return per action, and ``forward`` their mean, the action's
    value: everything that acts or bootstraps reads values as from any other network, and
    only the learner asks for the quantiles (``per_quantile``)."""

    def __init__(
        self,
        in_shape: tuple[int, ...],
        actions: int,
        dueling: bool = False,
        network: str = "nature",
        layer_norm: bool = False,
        quantiles: int = 0,
    ) -> None:
        super().__init__()
        if quantiles and dueling:
            raise ValueError("a dueling head with quantiles is not built; one or the other")
        layers, hidden = _torso(network, in_shape[0], layer_norm)
        self.conv = nn.Sequential(*layers)
        with torch.no_grad():
            size = self.conv(torch.zeros(1, *in_shape)).shape[1]
        self.dueling = dueling
        self.actions, self.quantiles = actions, quantiles
        self.head = _mlp(size, hidden, actions * max(quantiles, 1), layer_norm)
        if dueling:
            self.value = _mlp(size, hidden, 1, layer_norm)

    def forward(self, x: torch.Tensor, per_quantile: bool = False) -> torch.Tensor:
        """Q values ``(B, actions)``; with ``per_quantile`` (a network with quantiles)
        the quantiles themselves, ``(B, actions, quantiles)``, the i-th learnt for the
        fraction (2i + 1) / (2 quantiles) of the returns (``quantile_huber_loss``)."""
        if self.conv[0].weight.is_contiguous(memory_format=torch.channels_last):
            # Frames in the weights' layout (run.channels_last): with NCHW frames oneDNN
            # reorders the float input at every conv, which takes back much of what the
            # layout buys (benchmarks/sgd_step.py --pqn measures both). Converting here
            # copies uint8, a quarter of the bytes of the float input.
            x = x.contiguous(memory_format=torch.channels_last)
        features = self.conv(_scaled(x))
        adv = _fp32_out(self.head, features)
        if self.quantiles:
            per = adv.view(len(adv), self.actions, self.quantiles)
            return per if per_quantile else per.mean(dim=2)
        if per_quantile:
            raise ValueError("per_quantile: this network has no quantiles (dqn.quantiles = 0)")
        if not self.dueling:
            return adv
        return _fp32_out(self.value, features) + adv - adv.mean(dim=1, keepdim=True)


def _scaled(frames: torch.Tensor) -> torch.Tensor:
    """uint8 frames as floats in [0, 1], in the dtype the first conv computes in: under
    autocast that is autocast's dtype, so the frames, an update's largest tensor, are not
    made fp32 and then cast again (on a CPU with AMX those two passes were a large part
    of a bf16 update: docs/roofline.md). The values are autocast's own: the integers
    0-255 are exact in bf16 and the division rounds once either way. A copy, so that a
    float input is never divided in place."""
    device = frames.device.type
    on = torch.is_autocast_enabled(device)
    dtype = torch.get_autocast_dtype(device) if on else torch.float32
    return frames.to(dtype, copy=True).div_(255.0)


def _fp32_out(mlp: nn.Sequential, features: torch.Tensor) -> torch.Tensor:
    """``mlp(features)`` with its output layer in fp32 even under bf16 autocast: bf16 keeps
    8 bits of mantissa, so Q values near 1 would be rounded to steps of ~0.004, the size of
    the differences between actions and of the TD errors late in training. The hidden
    layers keep autocast; the output layer is a small matmul."""
    hidden = mlp[:-1](features)
    with torch.autocast(hidden.device.type, enabled=False):
        return mlp[-1](hidden.float())


def pick_device(name: str) -> torch.device:
    """The torch device for ``run.device``: auto, cpu or cuda."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("[run] device = 'cuda', but torch sees no CUDA device; use auto or cpu")
    return torch.device(name)


def build_network(cfg: DQNConfig, obs_shape: tuple[int, ...], actions: int) -> DQN:
    """The preset's network (``dqn.network``, ``dueling``, ``layer_norm``, ``quantiles``)
    for these observations."""
    return DQN(
        obs_shape,
        actions,
        dueling=cfg.dueling,
        network=cfg.network,
        layer_norm=cfg.layer_norm,
        quantiles=cfg.quantiles,
    )
