"""PQN's learner: Q(lambda) targets over a whole rollout, then a few epochs of minibatch
SGD on it (Gallici et al. 2024, "Simplifying Deep Temporal Difference Learning").

No replay buffer and no target network: the targets come from the online network as it
is when the rollout ends, and LayerNorm in the network keeps that stable. RAdam, gradient
norm clipping and a linearly decaying learning rate, as the paper's Atari runs.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

from atari_speed.agent.learner import LossMeter
from atari_speed.agent.networks import DQN
from atari_speed.agent.optim import FUSED_DEVICES, make_optimizer
from atari_speed.agent.policy import greedy_and_values
from atari_speed.agent.rollout import RolloutStore, q_lambda_returns
from atari_speed.agent.schedules import RolloutSchedule
from atari_speed.core.config import DQNConfig, PQNConfig
from atari_speed.core.timing import Profiler

INFERENCE_BATCH = 1024  # observations per no-grad forward pass while computing targets


class QLambdaLearner:
    """``learn(rollout, progress, rng)``: targets, then ``epochs`` x ``minibatches``
    SGD updates (``RolloutSchedule``). ``bf16`` autocasts the network's passes (the loss
    stays fp32); ``channels_last`` keeps the conv weights channels-last; ``act_bf16``: the
    actor chooses actions under bf16 autocast, so the values it leaves in a rollout are
    bf16's, and the last row's are computed as it would."""

    def __init__(
        self,
        net: DQN,
        cfg: DQNConfig,
        pqn: PQNConfig,
        device: torch.device,
        bf16: bool = False,
        prof: Profiler | None = None,
        channels_last: bool = False,
        act_bf16: bool = False,
        compile: bool = False,
    ) -> None:
        self.cfg, self.pqn, self.device = cfg, pqn, device
        self.act_bf16 = act_bf16
        self.net = net.to(device)
        self.channels_last = channels_last
        if channels_last:
            # Same math, another memory layout (run.channels_last): the actor's forward
            # passes use this network too, so they get the layout as well.
            self.net.to(memory_format=torch.channels_last)
        self.optimizer = make_optimizer(
            self.net.parameters(),
            pqn.optimizer,
            cfg.learning_rate,
            cfg.adam_eps,
            fused=pqn.fused_optimizer and device.type in FUSED_DEVICES,
        )
        self.bf16 = bf16
        # The updates' forward pass; the actor, targets and evaluations use self.net as it
        # is. A compiled module shares the network's parameters, so the optimizer, the
        # checkpoints and the actor see every update either way.
        self.train_net: Callable[..., torch.Tensor] = (
            torch.compile(self.net) if compile else self.net
        )
        self.compile_pending = compile  # until the first compiled update has run
        if compile:
            # The CPU build of torch's compiler imports the C++ extension helper, which
            # warns of a missing CUDA runtime on every machine without one: noise here.
            logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
        self.prof = prof or Profiler()
        self.updates = 0
        self.losses = LossMeter(device)

    def autocast(self) -> Any:
        if not self.bf16:
            return nullcontext()
        return torch.autocast(self.device.type, dtype=torch.bfloat16)

    @torch.no_grad()
    def max_q(self, obs: np.ndarray) -> np.ndarray:
        """max_a Q(s, a) of a batch of observations ``(B, k, H, W)``, in chunks."""
        self.net.eval()
        out = []
        for start in range(0, len(obs), INFERENCE_BATCH):
            x = torch.from_numpy(obs[start : start + INFERENCE_BATCH]).to(self.device)
            with self.autocast():
                out.append(self.net(x).float().max(dim=1).values.cpu())
        self.net.train()
        return torch.cat(out).numpy() if out else np.zeros(0, np.float32)

    def targets(self, rollout: RolloutStore, lam: float | None = None) -> np.ndarray:
        """The rollout's Q(lambda) returns, ``(T, N)``, with ``lam`` (None: ``pqn.q_lambda``).

        Where the rollout holds the values its actor computed while choosing actions
        (n-env mode: the actor's network is this one, unchanged since the rollout began),
        they are max_a Q of rows 1..T-1 already, and only the observation after the last
        row needs a forward pass: that saves a no-grad pass over the whole rollout
        (docs/log/pong-fast.md has the profile). Otherwise (parallel and Ray actors act
        with weights a rollout old) every row is evaluated here.
        """
        steps, n, next_obs = rollout.steps, rollout.num_envs, rollout.next_obs
        acted = rollout.acted_values()
        if acted is not None:
            # in the actor's precision, as the rest of these values
            last = greedy_and_values(self.net, next_obs, self.device, self.act_bf16)[1]
            next_values = np.concatenate([acted, last[None]])
        else:
            values = self.max_q(
                np.concatenate([rollout.obs[1:].reshape(-1, *next_obs.shape[1:]), next_obs])
            )
            next_values = values.reshape(steps, n)
        final_values = np.zeros((steps, n), np.float32)
        if rollout.truncated.any():
            final_values[rollout.truncated] = self.max_q(rollout.final_obs[rollout.truncated])
        return q_lambda_returns(
            rollout.rewards,
            rollout.terminated,
            rollout.truncated,
            next_values,
            final_values,
            self.cfg.gamma,
            self.pqn.q_lambda if lam is None else lam,
        )

    def learn(
        self,
        rollout: RolloutStore,
        progress: float,
        rng: np.random.Generator,
        share: float = 1.0,
        eps: float | None = None,
        lam: float | None = None,
    ) -> None:
        """Train on a full rollout (``finish``ed: its ``next_obs`` set); ``progress`` (0..1,
        how far the learning rate has decayed: ``schedules.lr_factor``) sets it, ``share``
        the factor of the epochs x minibatches updates made (above 1: more epochs)
        (``schedules.update_share``), and ``eps`` the optimizer's epsilon
        (``schedules.adam_eps``; None: as it is), and ``lam`` the returns' lambda
        (``schedules.q_lambda``; None: ``pqn.q_lambda``)."""
        with self.prof.section("returns"):
            returns = torch.from_numpy(self.targets(rollout, lam).reshape(-1))
        for group in self.optimizer.param_groups:
            group["lr"] = self.cfg.learning_rate * max(1.0 - progress, 0.0)
            if eps is not None:
                group["eps"] = eps
        # The whole rollout crosses to the device once (a no-op on a CPU), not once per
        # minibatch: on a GPU, 64 small copies a rollout cost more than the updates.
        with self.prof.section("host-to-device copy"):
            obs = torch.from_numpy(rollout.obs.reshape(-1, *rollout.obs.shape[2:]))
            obs = obs.to(self.device)
            if self.channels_last:
                # once per rollout: the minibatches indexed from it keep the layout, so
                # the network's forward need not convert each one
                obs = obs.contiguous(memory_format=torch.channels_last)
            actions = torch.from_numpy(rollout.actions.reshape(-1)).to(self.device)
            returns = returns.to(self.device)
        schedule = RolloutSchedule.of(self.pqn, len(obs))
        for indices in schedule.minibatch_indices(rng, schedule.updates_at(share)):
            idx = torch.from_numpy(indices).to(self.device)
            self.step(*(rows(t, idx) for t in (obs, actions, returns)))

    def step(self, obs: torch.Tensor, actions: torch.Tensor, returns: torch.Tensor) -> None:
        """One SGD update towards fixed targets (on the device already, from ``learn``)."""
        obs, actions, returns = (t.to(self.device) for t in (obs, actions, returns))
        with self.prof.section("sgd step"):
            loss = self.gradients(obs, actions, returns)
            if self.pqn.max_grad_norm > 0:
                torch.nn.utils.clip_grad_norm_(self.net.parameters(), self.pqn.max_grad_norm)
            self.optimizer.step()
            self.losses.add(loss)
        self.updates += 1

    def gradients(
        self, obs: torch.Tensor, actions: torch.Tensor, returns: torch.Tensor
    ) -> torch.Tensor:
        """The loss, its gradients in the parameters' ``.grad``, through the compiled
        network where there is one. The first compiled update compiles its forward and
        backward passes; if that fails (no C++ compiler, an unsupported backend), the
        optimizer has not stepped, so the gradients are computed again uncompiled, and
        every later update's too."""
        if not self.compile_pending:
            return self._backward(self.train_net, obs, actions, returns)
        try:
            loss = self._backward(self.train_net, obs, actions, returns)
        except Exception as err:  # any compiler failure: go on without it
            first = (str(err).strip().splitlines() or [""])[0][:200]
            print(
                f"run.compile: torch.compile failed ({type(err).__name__}: {first}); "
                "training goes on uncompiled",
                file=sys.stderr,
                flush=True,
            )
            self.train_net = self.net
            loss = self._backward(self.net, obs, actions, returns)
        self.compile_pending = False
        return loss

    def _backward(
        self,
        net: Callable[..., torch.Tensor],
        obs: torch.Tensor,
        actions: torch.Tensor,
        returns: torch.Tensor,
    ) -> torch.Tensor:
        if self.cfg.quantiles:
            with self.autocast():
                per = net(obs, True)  # (B, actions, quantiles), fp32: the head's output
            taken = per.gather(1, actions.view(-1, 1, 1).expand(-1, 1, per.shape[2])).squeeze(1)
            loss = quantile_huber_loss(taken, returns)
        else:
            with self.autocast():
                q_all = net(obs)
            q = q_all.float().gather(1, actions.unsqueeze(1)).squeeze(1)
            loss = F.smooth_l1_loss(q, returns) if self.cfg.huber else F.mse_loss(q, returns)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        return loss

    def pop_loss(self) -> float | None:
        """Mean loss since the last call (one host sync, at log time only)."""
        return self.losses.pop()

    def state_dict(self) -> dict[str, Any]:
        return {
            "net": self.net.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "updates": self.updates,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.net.load_state_dict(state["net"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.updates = int(state["updates"])


def quantile_huber_loss(quantiles: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """QR-DQN's loss (Dabney et al. 2018, kappa 1) of ``quantiles`` ``(B, K)``, the i-th
    for the fraction tau_i = (2i + 1) / (2K), against one target return each, ``(B,)``:
    Huber's loss of each error, weighted tau_i where the target is above the quantile and
    1 - tau_i where below, so its minimum over many targets is near their tau_i-quantile
    (at it where the errors are beyond Huber's kappa; within it, an expectile). Averaged
    over quantiles and batch. PQN's target is a sampled Q(lambda) return, not a
    distribution, so the quantiles are those of the returns the rollouts draw."""
    k = quantiles.shape[1]
    tau = (torch.arange(k, device=quantiles.device, dtype=torch.float32) + 0.5) / k
    targets = targets.unsqueeze(1).expand_as(quantiles)
    huber = F.smooth_l1_loss(quantiles, targets, reduction="none")
    weight = torch.abs(tau - (targets < quantiles.detach()).float())
    return (weight * huber).mean()


def rows(tensor: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``tensor[index]`` for a 1-d ``index`` of rows, in ``tensor``'s memory layout, through
    index_select into a tensor laid out like it: on a CPU, advanced indexing takes a
    general path that gathers channels-last frames several times slower
    (docs/roofline.md)."""
    return torch.index_select(tensor, 0, index, out=torch.empty_like(tensor[: len(index)]))
