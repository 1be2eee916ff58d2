"""benchmarks/starts.py: its line per checkpoint."""

from __future__ import annotations

import importlib.util
from pathlib import Path

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
