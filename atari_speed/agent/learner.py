"""The learner every mode shares: one SGD update of a (double, n-step) DQN per batch.

The learner owns the online net, the target net (ptan's ``TargetNet``), the optimizer and
the loss. It never forces a host/device sync per update: the loss stays on the device and
is read only when logged, and batches go host -> pinned memory -> device without blocking.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import ptan
import torch
from torch.nn import functional as F

from atari_speed.agent.networks import DQN
from atari_speed.agent.replay import Batch
from atari_speed.core.config import DQNConfig
from atari_speed.core.timing import Profiler

TENSORS = ("states", "next_states", "actions", "returns", "discounts")  # Batch's arrays


class Replay(Protocol):
    """What ``Learner.learn`` samples from: ``FrameReplay``, or ptan's buffer in baseline
    mode."""

    def sample(self, batch_size: int, rng: np.random.Generator, out: Batch | None = None) -> Batch:
        """``batch_size`` transitions drawn with ``rng``, into ``out`` where it fits."""


class LossMeter:
    """Sums losses on the device and reads them back only when asked: no host/device sync
    per update."""

    def __init__(self, device: torch.device) -> None:
        self._sum = torch.zeros((), device=device)
        self._count = 0

    def add(self, loss: torch.Tensor) -> None:
        self._sum += loss.detach()
        self._count += 1

    def pop(self) -> float | None:
        """Mean loss since the last call (one host sync, at log time only)."""
        if not self._count:
            return None
        mean = float(self._sum) / self._count
        self._sum.zero_()
        self._count = 0
        return mean


class Learner:
    """One SGD update per ``learn(replay, ...)`` (a batch sampled from it) or
    ``step(batch)``: (double) DQN target, n-step bootstrap."""

    def __init__(
        self,
        net: DQN,
        cfg: DQNConfig,
        device: torch.device,
        channels_last: bool = False,
        bf16: bool = False,
        prof: Profiler | None = None,
    ) -> None:
        self.cfg, self.device = cfg, device
        self.net = net.to(device)
        if channels_last:
            # Same math, different memory layout: oneDNN's convolutions run faster on it.
            self.net.to(memory_format=torch.channels_last)
        self.target = ptan.agent.TargetNet(self.net)
        # fused: the same Adam update in one kernel over all tensors; on a CPU the
        # per-tensor loop is a visible part of a small network's update
        # (benchmarks/sgd_step.py times it).
        self.optimizer = torch.optim.Adam(
            self.net.parameters(), lr=cfg.learning_rate, eps=cfg.adam_eps, fused=True
        )
        # bf16 autocast of the forward passes: bf16 keeps fp32's exponent range, so no loss
        # scaling is needed, and the loss itself is computed in fp32. Whether it pays
        # depends on the hardware (run.precision; auto measures it).
        self.amp = bf16
        self.updates = 0
        self.losses = LossMeter(device)
        self._host: dict[str, torch.Tensor] = {}
        self._copied: Any = None  # CUDA event: the last copy out of the pinned buffers
        self._batch: Batch | None = None  # reused between samples
        self.prof = prof or Profiler()  # the run's, to time the update's phases

    def to_device(self, batch: Batch) -> dict[str, torch.Tensor]:
        """Copy a sampled batch to the device; through reused pinned buffers on CUDA."""
        arrays = {k: getattr(batch, k) for k in TENSORS}
        if self.device.type != "cuda":
            return {k: torch.from_numpy(v) for k, v in arrays.items()}
        # The copy from a pinned buffer is queued, not done: before refilling the buffer
        # wait for the previous copy out of it (an event per buffer, not a device sync).
        done = self._copied
        if done is not None:
            done.synchronize()
        out = {}
        for k, array in arrays.items():
            host = self._host.get(k)
            if host is None or host.shape != array.shape:
                host = self._host[k] = torch.from_numpy(array).pin_memory()
            else:
                host.numpy()[...] = array
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
            target = b["returns"] + b["discounts"] * next_q  # 0 where the episode terminated
        if self.cfg.huber:
            return F.smooth_l1_loss(q, target)
        return F.mse_loss(q, target)

    def learn(
        self,
        replay: Replay,
        progress: float,
        rng: np.random.Generator,
        share: float = 1.0,
        eps: float | None = None,
        lam: float | None = None,
    ) -> None:
        """One SGD update on ``dqn.batch_size`` transitions sampled from ``replay`` with
        ``rng``. ``progress`` is the run's (0..1); DQN's learning rate does not decay, and
        its update schedule is ``UpdateSchedule``'s alone (``share``, ``eps`` and ``lam``
        are PQN's)."""
        with self.prof.section("replay sample"):
            self._batch = replay.sample(self.cfg.batch_size, rng, self._batch)
        self.step(self._batch)

    def step(self, batch: Batch) -> None:
        prof = self.prof
        with prof.section("host-to-device copy"):
            tensors = self.to_device(batch)
        with prof.section("sgd step"):
            loss = self.loss(tensors)
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.optimizer.step()
            self.losses.add(loss)
        self.updates += 1
        if self.updates % self.cfg.target_sync == 0:
            with prof.section("target sync"):
                self.target.sync()

    def pop_loss(self) -> float | None:
        """Mean loss since the last call (one host sync, at log time only)."""
        return self.losses.pop()

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
