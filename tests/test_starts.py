"""benchmarks/starts.py: its line per checkpoint."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("starts", ROOT / "benchmarks/starts.py")
starts = importlib.util.module_from_spec(spec)
spec.loader.exec_module(starts)


def test_the_line_names_the_starts_lost_and_says_whether_the_mean_is_exact():
    result = {"noops": [0, 1, 2], "scores": [-3.0, 20.0, 20.0], "mean": 16.1, "exact": True}
    line = starts.summary_line("x", result)
    assert "mean +16.10 over 3 starts (exact)" in line
    assert "lost from 1 (0 NOOPs)" in line and "lowest -3" in line and "2 distinct" in line
    line = starts.summary_line("x", {**result, "scores": [1.0, 2.0, 2.0], "exact": False})
    assert "none lost" in line and "an estimate" in line


def test_a_mix_of_weights_lies_on_the_line_between_them():
    a = {"w": torch.zeros(2, 2), "b": torch.ones(3)}
    b = {"w": torch.full((2, 2), 4.0), "b": torch.full((3,), 3.0)}
    assert torch.equal(starts.mixed(a, b, 0.0)["w"], a["w"])
    assert torch.equal(starts.mixed(a, b, 1.0)["b"], b["b"])
    half = starts.mixed(a, b, 0.25)
    assert torch.allclose(half["w"], torch.full((2, 2), 1.0))
    assert torch.allclose(half["b"], torch.full((3,), 1.5))
    # ||b - a|| / ||a||: a's norm is sqrt(3), the difference's sqrt(4 * 16 + 3 * 4)
    assert abs(starts.distance(a, b) - (76**0.5 / 3**0.5)) < 1e-6
    with pytest.raises(ValueError, match="differ"):
        starts.mixed(a, {"w": b["w"]}, 0.5)
