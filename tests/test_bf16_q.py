"""benchmarks/bf16_q.py: bf16's effect on Q values and greedy actions, measured as stated."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("bf16_q", ROOT / "benchmarks/bf16_q.py")
bf16_q = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bf16_q)


class TwoActions(torch.nn.Module):
    """Q = (1.0, 1.0 + gap) for every state, from one Linear layer (bf16 under autocast)."""

    def __init__(self, gap: float) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(1, 2)
        with torch.no_grad():
            self.linear.weight.zero_()
            self.linear.bias[:] = torch.tensor([1.0, 1.0 + gap])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(torch.ones(len(x), 1))


def test_a_gap_below_bf16s_resolution_flips_every_greedy_action():
    obs = np.zeros((10, 1, 1, 1), np.uint8)
    # bf16 keeps 8 bits of mantissa: near 1, steps of 1/128 apart, so 1.001 reads 1.0
    small = bf16_q.compare(TwoActions(0.001), obs)
    assert small["flips"] == 1.0 and small["states"] == 10
    # action 0's 1.0 is exact in bf16; action 1's 1.001 moves by its 0.001
    assert small["moved_median"] == 0.0
    assert small["moved_p99"] == pytest.approx(0.001, rel=0.05)
    assert small["gap_median"] == pytest.approx(0.001, rel=0.01)
    big = bf16_q.compare(TwoActions(0.5), obs)
    assert big["flips"] == 0.0 and big["gap_median"] == pytest.approx(0.5)
