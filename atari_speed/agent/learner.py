"""The Q-network and the learner every mode shares.

The learner owns the online net, the target net (ptan's ``TargetNet``), the optimizer and
the loss. It never forces a host/device sync per update: the loss stays on the device and
is read only when logged, and batches go host -> pinned memory -> device without blocking.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import ptan
import torch
from torch import nn
from torch.nn import functional as F

from atari_speed.core.config import NETWORKS, DQNConfig
from atari_speed.core.timing import Profiler


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
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        from atari_speed.core.errors import ConfigError

        raise ConfigError("[run] device = 'cuda', but torch sees no CUDA device; use auto or cpu")
    return torch.device(name)


class Learner:
    """One SGD update per ``step(batch)``: (double) DQN target, n-step bootstrap."""

    def __init__(
        self,
        net: DQN,
        cfg: DQNConfig,
        device: torch.device,
        channels_last: bool = False,
        amp: bool = False,
    ) -> None:
        self.cfg, self.device = cfg, device
        self.net = net.to(device)
        if channels_last:
            # Same math, different memory layout: oneDNN's convolutions run faster on it.
            self.net.to(memory_format=torch.channels_last)
        self.target = ptan.agent.TargetNet(self.net)
        # fused: the same Adam update in one kernel over all tensors; on the 2-core CPU the
        # per-tensor loop costs ~4 ms of a ~35 ms update (benchmarks/sgd_step.py).
        self.optimizer = torch.optim.Adam(
            self.net.parameters(), lr=cfg.learning_rate, eps=cfg.adam_eps, fused=True
        )
        self.bootstrap = cfg.gamma**cfg.n_steps
        # bf16 autocast of the forward passes, on CUDA only: bf16 keeps fp32's exponent
        # range, so no loss scaling is needed, and the loss itself is computed in fp32.
        # On a CPU without bf16 units it is far slower (docs/train_speed.md), so it is off;
        # so too on GPUs without bf16 (pre-Ampere).
        self.amp = amp and device.type == "cuda" and torch.cuda.is_bf16_supported()
        self.updates = 0
        self._loss_sum = torch.zeros((), device=device)
        self._loss_count = 0
        self._host: dict[str, torch.Tensor] = {}
        self._copied: Any = None  # CUDA event: the last copy out of the pinned buffers
        self.prof = Profiler()  # the run swaps in its own when profiling

    def to_device(self, batch: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
        """Copy a numpy batch to the device; through reused pinned buffers on CUDA."""
        keys = ("states", "next_states", "actions", "returns", "dones")
        if self.device.type != "cuda":
            return {k: torch.from_numpy(batch[k]) for k in keys}
        # The copy from a pinned buffer is queued, not done: before refilling the buffer
        # wait for the previous copy out of it (an event per buffer, not a device sync).
        done = self._copied
        if done is not None:
            done.synchronize()
        out = {}
        for k in keys:
            host = self._host.get(k)
            if host is None or host.shape != batch[k].shape:
                host = self._host[k] = torch.from_numpy(batch[k]).pin_memory()
            else:
                host.numpy()[...] = batch[k]
            out[k] = host.to(self.device, non_blocking=True)
        self._copied = torch.cuda.Event()
        self._copied.record()
        return out

    def loss(self, b: dict[str, torch.Tensor]) -> torch.Tensor:
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.amp):
            q_all = self.net(b["states"])
            with torch.no_grad():
                target_q = self.target.target_model(b["next_states"]).float()
                best = (
                    self.net(b["next_states"]).argmax(dim=1, keepdim=True)
                    if self.cfg.double
                    else None
                )
        q = q_all.float().gather(1, b["actions"].unsqueeze(1)).squeeze(1)
        with torch.no_grad():
            if best is not None:
                next_q = target_q.gather(1, best).squeeze(1)
            else:
                next_q = target_q.max(dim=1).values
            next_q = next_q.masked_fill(b["dones"], 0.0)
            target = b["returns"] + self.bootstrap * next_q
        if self.cfg.huber:
            return F.smooth_l1_loss(q, target)
        return F.mse_loss(q, target)

    def step(self, batch: dict[str, np.ndarray]) -> None:
        prof = self.prof
        with prof.section("host-to-device copy"):
            tensors = self.to_device(batch)
        with prof.section("sgd step"):
            loss = self.loss(tensors)
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.optimizer.step()
            self._loss_sum += loss.detach()
        self._loss_count += 1
        self.updates += 1
        if self.updates % self.cfg.target_sync == 0:
            with prof.section("target sync"):
                self.target.sync()

    def pop_loss(self) -> float | None:
        """Mean loss since the last call (one host sync, at log time only)."""
        if not self._loss_count:
            return None
        mean = float(self._loss_sum) / self._loss_count
        self._loss_sum.zero_()
        self._loss_count = 0
        return mean

    def state_dict(self) -> dict[str, Any]:
        return {
            "net": self.net.state_dict(),
            "target": self.target.target_model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "updates": self.updates,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.net.load_state_dict(state["net"])
        self.target.target_model.load_state_dict(state["target"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.updates = int(state["updates"])


@torch.no_grad()
def greedy_actions(net: nn.Module, obs: np.ndarray, device: torch.device) -> np.ndarray:
    """One batched forward pass for all envs' observations ``(N, k, H, W)`` uint8."""
    x = torch.from_numpy(obs).to(device, non_blocking=True)
    return net(x).argmax(dim=1).cpu().numpy()


def epsilon_greedy(
    greedy: np.ndarray, epsilon: float | np.ndarray, actions: int, rng: np.random.Generator
) -> np.ndarray:
    """Replace each greedy action by a random one with probability ``epsilon``."""
    explore = rng.random(len(greedy)) < epsilon
    return np.where(explore, rng.integers(0, actions, len(greedy)), greedy)


def select_actions(
    net: nn.Module,
    obs: np.ndarray,
    epsilon: float,
    actions: int,
    rng: np.random.Generator,
    device: torch.device,
) -> np.ndarray:
    """Epsilon-greedy actions for a batch of observations ``(N, k, H, W)``; while epsilon is
    1 (warm-up) every action is random, so the forward pass is skipped."""
    if epsilon >= 1.0:
        return rng.integers(0, actions, len(obs))
    return epsilon_greedy(greedy_actions(net, obs, device), epsilon, actions, rng)


def net_for(cfg: DQNConfig, obs_shape: tuple[int, ...], actions: int) -> DQN:
    """The preset's network for this observation shape and action count."""
    return DQN(obs_shape, actions, dueling=cfg.dueling, network=cfg.network)
