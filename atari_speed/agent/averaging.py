"""An exponential moving average of a network's weights, for evaluations and best.pt.

PQN's weights move with every update, and a greedy policy read off them at one instant
can play 20 in one evaluation and 12 in the next (docs/pong-fast.md). The average over
the last few tens of thousands of agent steps is a smoother policy to judge and to keep.
Training learns with the weights as they are (and acts with them, unless
``pqn.act_with_average``); evaluations, and so best.pt, play the average from a smoothed
training score of ``eval.average_from`` on (``eval.average_steps``; ``plays_average``).

The time constant is in agent steps, not updates, so one value means the same in every
mode and at every update-to-data ratio: after ``elapsed`` agent steps the weights that
were averaged before count ``exp(-elapsed / steps)``.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import torch


def plays_average(average_from: float, smoothed: float | None) -> bool:
    """Whether an evaluation plays the weights' average rather than the weights as they
    are, at a smoothed training score of ``smoothed`` (None: no game has ended):
    ``eval.average_from``, where -1000 means always. The one rule of the run's evaluations
    and of everything that plays a checkpoint as they would."""
    return average_from <= -1000 or (smoothed is not None and smoothed >= average_from)


class WeightAverage:
    """The average of ``net``'s weights over about ``steps`` agent steps, from agent step
    ``at`` on (where it equals the weights as they are then)."""

    def __init__(self, net: torch.nn.Module, steps: int, at: int) -> None:
        if steps <= 0:
            raise ValueError(f"steps must be positive, got {steps}")
        self.steps, self.at = steps, at
        # A network of its own, to act with (pqn.act_with_average); ``weights`` are its
        # tensors, so updating them updates it. The copy keeps each tensor's memory format
        # (channels-last weights stay so).
        self.net = copy.deepcopy(net).eval().requires_grad_(False)
        self.weights = self.net.state_dict()

    @torch.no_grad()
    def update(self, net: torch.nn.Module, frames: int) -> None:
        """Move towards ``net``'s weights for the agent steps from the last update to
        ``frames``; integer buffers (none in this app's networks) are copied."""
        elapsed = frames - self.at
        if elapsed <= 0:
            return
        self.at = frames
        new = 1.0 - math.exp(-elapsed / self.steps)
        for name, value in net.state_dict().items():
            average = self.weights[name]
            if average.is_floating_point():
                average.lerp_(value.detach(), new)
            else:
                average.copy_(value)

    def state_dict(self) -> dict[str, Any]:
        return {"weights": self.weights, "at": self.at}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Take a saved average; its weights must have this network's names and shapes."""
        saved = state["weights"]
        if saved.keys() != self.weights.keys() or any(
            saved[k].shape != v.shape for k, v in self.weights.items()
        ):
            raise ValueError("the saved weight average is of another network")
        for name, value in saved.items():
            self.weights[name].copy_(value)
        self.at = int(state["at"])
