"""The one learner interface every loop calls, and the one place DQN's or PQN's is chosen.

A loop hands the learner what its actors filled: DQN's replay, from which ``Learner``
samples one batch per call, or PQN's full rollout, on which ``QLambdaLearner`` makes
``pqn.epochs`` x ``pqn.minibatches`` updates. How often a loop calls ``learn`` is the
algorithm's update schedule (``agent/schedules.py``).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import torch

from atari_speed.agent.learner import Learner
from atari_speed.agent.networks import DQN
from atari_speed.agent.pqn import QLambdaLearner
from atari_speed.core.config import Preset
from atari_speed.core.timing import Profiler


class Learning(Protocol):
    """What the loops, evaluations and checkpoints use of a learner."""

    net: DQN  # the online network: n-env actors act with it, evaluations copy it
    updates: int  # SGD updates made so far, resumed ones included

    def learn(
        self,
        source: Any,
        progress: float,
        rng: np.random.Generator,
        share: float = 1.0,
        eps: float | None = None,
        lam: float | None = None,
    ) -> None:
        """Learn from ``source`` (DQN: the replay; PQN: a full rollout), drawing samples
        from ``rng``; ``progress`` (0..1) sets a decaying learning rate, ``share`` the
        factor of a rollout's epochs x minibatches updates PQN makes, ``eps`` PQN's
        Adam epsilon (None: as it is), ``lam`` the lambda of PQN's returns (None:
        ``pqn.q_lambda``)."""

    def pop_loss(self) -> float | None:
        """Mean loss since the last call (one host sync, at log time only)."""

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


def make_learner(
    preset: Preset,
    net: DQN,
    device: torch.device,
    bf16: bool = False,
    prof: Profiler | None = None,
    act_bf16: bool = False,
) -> Learner | QLambdaLearner:
    """The preset's learner (``dqn.algorithm``) over ``net``, on ``device``; ``bf16``
    autocasts its forward passes, ``prof`` times its phases, ``act_bf16`` says PQN's actor
    chooses in bf16 (``Plan.act_bf16``)."""
    dqn, channels_last = preset.dqn, preset.run.channels_last
    if dqn.algorithm == "pqn":
        return QLambdaLearner(
            net,
            dqn,
            preset.pqn,
            device,
            bf16=bf16,
            prof=prof,
            channels_last=channels_last,
            act_bf16=act_bf16,
            compile=preset.run.compile,
        )
    return Learner(net, dqn, device, channels_last=channels_last, bf16=bf16, prof=prof)
