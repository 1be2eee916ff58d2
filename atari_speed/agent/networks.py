"""The Q-network: a DQN CNN over stacked uint8 frames, and the device it runs on."""

from __future__ import annotations

import torch
from torch import nn

from atari_speed.core.config import NETWORKS, DQNConfig
from atari_speed.core.errors import ConfigError


def _torso(name: str, channels: int) -> tuple[list[nn.Module], int]:
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
        layers += [nn.Conv2d(channels, out, kernel_size=kernel, stride=stride), nn.ReLU()]
        channels = out
    return [*layers, nn.Flatten()], hidden


class DQN(nn.Module):
    """A DQN CNN over uint8 frames scaled /255: ``network`` picks the conv torso (see
    ``NETWORKS``); with ``dueling`` the head splits into value and advantage streams."""

    def __init__(
        self,
        in_shape: tuple[int, ...],
        actions: int,
        dueling: bool = False,
        network: str = "nature",
    ) -> None:
        super().__init__()
        layers, hidden = _torso(network, in_shape[0])
        self.conv = nn.Sequential(*layers)
        with torch.no_grad():
            size = self.conv(torch.zeros(1, *in_shape)).shape[1]
        self.dueling = dueling
        self.head = nn.Sequential(nn.Linear(size, hidden), nn.ReLU(), nn.Linear(hidden, actions))
        if dueling:
            self.value = nn.Sequential(nn.Linear(size, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = self.conv(x.float() / 255.0)
        adv = self.head(features)
        if not self.dueling:
            return adv
        return self.value(features) + adv - adv.mean(dim=1, keepdim=True)


def pick_device(name: str) -> torch.device:
    """The torch device for ``run.device``: auto, cpu or cuda."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("[run] device = 'cuda', but torch sees no CUDA device; use auto or cpu")
    return torch.device(name)


def build_network(cfg: DQNConfig, obs_shape: tuple[int, ...], actions: int) -> DQN:
    """The preset's network (``dqn.network``, ``dqn.dueling``) for these observations."""
    return DQN(obs_shape, actions, dueling=cfg.dueling, network=cfg.network)
