"""RAdam's update made in one fused pass: PQN's optimizer without RAdam's many passes.

RAdam (Liu et al., "On the Variance of the Adaptive Learning Rate and Beyond") is Adam
with a rectified step: for its first steps, while the variance of the adaptive rate is
not yet defined, a plain step of the bias-corrected momentum; after them, Adam's step
scaled by a rectification factor ``r_t``. In real arithmetic that rectified step is
exactly Adam's with the learning rate ``lr * r_t`` and epsilon ``eps / sqrt(1 - beta2^t)``
(RAdam adds epsilon to the root of the second moment before its bias correction, Adam
after). ``FusedRAdam`` makes each rectified step so, through torch's fused Adam kernel: one
pass over the weights, gradients and moments where torch's foreach RAdam makes a pass per
operation, which on a CPU are a visible part of a small network's update
(docs/roofline.md). It rounds differently from torch's RAdam (the same step to within
float32 rounding: tests/agent/test_optim.py), so a run with it is another draw than one
with torch's (``pqn.fused_optimizer``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch

# Where torch's fused Adam kernel runs; elsewhere the learner keeps torch's RAdam.
FUSED_DEVICES = ("cpu", "cuda")


def rectification(step: int, beta2: float) -> float | None:
    """RAdam's factor r_t at ``step`` (from 1), or None while the step is not rectified:
    while rho_t, the length of the approximated simple moving average, is at most 5
    (RAdam's threshold: the first five steps at beta2 0.999)."""
    rho_inf = 2.0 / (1.0 - beta2) - 1.0
    rho_t = rho_inf - 2.0 * step * beta2**step / (1.0 - beta2**step)
    if rho_t <= 5.0:
        return None
    return math.sqrt(
        (rho_t - 4.0) * (rho_t - 2.0) * rho_inf / ((rho_inf - 4.0) * (rho_inf - 2.0) * rho_t)
    )


def make_optimizer(
    params: Iterable[torch.Tensor], kind: str, lr: float, eps: float, fused: bool
) -> torch.optim.Optimizer:
    """PQN's optimizer (``pqn.optimizer``: radam | adam): with ``fused``
    (``pqn.fused_optimizer``, on a device in ``FUSED_DEVICES``) through torch's fused Adam
    kernel, else torch's own, foreach."""
    if fused:
        return (FusedRAdam if kind == "radam" else FusedAdam)(params, lr=lr, eps=eps)
    # foreach: the same arithmetic over all tensors at once, torch's default only on
    # CUDA; on a CPU it saves the per-tensor loop's overhead, a visible part of a small
    # network's update (benchmarks/sgd_step.py --pqn times both).
    return (ForeachRAdam if kind == "radam" else ForeachAdam)(params, lr=lr, eps=eps, foreach=True)


# What a fused step has no code for; a loaded state that asks for one is refused.
UNSUPPORTED = {"weight_decay": 0.0, "amsgrad": False, "maximize": False, "capturable": False}


def _refuse_unsupported(state_dict: dict[str, Any], name: str) -> None:
    for group in state_dict["param_groups"]:
        for key, plain in UNSUPPORTED.items():
            if group.get(key, plain) != plain:
                raise ValueError(f"{name} cannot go on from a state with {key} = {group[key]}")


class KeepsItsKernel(torch.optim.Optimizer):
    """An optimizer that goes on with the kernel it was made with (``foreach``, ``fused``)
    when it loads a state saved by another: torch's ``load_state_dict`` takes the saved
    groups' settings, flags included, so a fused state loaded by a foreach optimizer
    would step fused, and the reverse. Each weight's ``step`` moves to where this kernel
    reads it: a fused kernel on the weight's device, a foreach step on the host (it reads
    the count as a number: on a GPU, a sync for each)."""

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        fused = bool(self.defaults.get("fused"))
        for group in self.param_groups:
            for flag in ("foreach", "fused"):
                if flag in self.defaults:
                    group[flag] = self.defaults[flag]
                else:  # a flag this kind of optimizer does not have
                    group.pop(flag, None)
            for p in group["params"]:
                state = self.state.get(p)
                if state:
                    device = p.device if fused else torch.device("cpu")
                    state["step"] = torch.tensor(
                        float(state["step"]), dtype=torch.float32, device=device
                    )


class ForeachAdam(KeepsItsKernel, torch.optim.Adam):
    """torch's Adam, foreach (``make_optimizer``), kept so across a fused one's state."""


class ForeachRAdam(KeepsItsKernel, torch.optim.RAdam):
    """torch's RAdam, foreach (``make_optimizer``), kept so across ``FusedRAdam``'s state."""


class FusedAdam(KeepsItsKernel, torch.optim.Adam):
    """torch's Adam with ``fused=True``, kept so across a state saved by torch's foreach
    Adam or RAdam, and refusing one that asks for what the fused steps here have no code
    for (``UNSUPPORTED``)."""

    def __init__(
        self,
        params: Iterable[torch.Tensor],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> None:
        super().__init__(params, lr=lr, betas=betas, eps=eps, fused=True)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        _refuse_unsupported(state_dict, type(self).__name__)
        super().load_state_dict(state_dict)


class FusedRAdam(FusedAdam):
    """RAdam without weight decay over one param group whose weights all have gradients
    at each step (a network's update), its rectified steps through fused Adam. ``lr`` and
    ``eps`` in the group are RAdam's: set them between steps as for torch's RAdam (a
    schedule); each step turns them into Adam's for its call and back. Its state is
    Adam's (``step``, ``exp_avg``, ``exp_avg_sq``), which is RAdam's, so a checkpoint of
    torch's RAdam loads into it and goes on, and the reverse (``ForeachRAdam``). The step
    count is also kept on the host, so that choosing a step's kind reads no device tensor
    (on a GPU, a sync)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """``FusedAdam``'s arguments."""
        super().__init__(*args, **kwargs)
        if len(self.param_groups) != 1:
            raise ValueError("FusedRAdam takes one param group")
        self.steps = 0

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        states = [self.state[p] for p in self.param_groups[0]["params"] if self.state.get(p)]
        self.steps = int(states[0]["step"]) if states else 0

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> None:  # type: ignore[override]
        if closure is not None:
            raise ValueError("FusedRAdam takes no closure")
        (group,) = self.param_groups
        params = [p for p in group["params"] if p.grad is not None]
        if not params:
            return
        if len(params) != len(group["params"]):
            # one step count for all: a weight that skipped a step would have its own
            raise ValueError("FusedRAdam steps every weight together; some have no gradient")
        step = self.steps + 1
        _, beta2 = group["betas"]
        rect = rectification(step, beta2)
        if rect is None:
            self._momentum_step(group, params, step)
        else:
            lr, eps = group["lr"], group["eps"]
            group["lr"], group["eps"] = lr * rect, eps / math.sqrt(1.0 - beta2**step)
            try:
                # Adam's step itself: where a plain Adam made torch wrap it with the
                # optimizer hooks and profiler record, this class's own step ran them
                adam_step = torch.optim.Adam.step
                if getattr(adam_step, "hooked", False):
                    adam_step = adam_step.__wrapped__  # type: ignore[attr-defined]
                adam_step(self)
            finally:
                group["lr"], group["eps"] = lr, eps
        self.steps = step

    def _momentum_step(self, group: dict[str, Any], params: list[torch.Tensor], step: int) -> None:
        """RAdam's step before rectification: both moments move, the weights by the
        bias-corrected first moment alone. A few steps a run: a plain loop."""
        beta1, beta2 = group["betas"]
        size = group["lr"] / (1.0 - beta1**step)
        for p in params:
            state = self.state[p]
            if not state:
                state["step"] = torch.zeros((), dtype=torch.float32, device=p.device)
                state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            grad = p.grad
            state["step"] += 1
            state["exp_avg"].lerp_(grad, 1.0 - beta1)
            state["exp_avg_sq"].mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
            p.add_(state["exp_avg"], alpha=-size)
