"""benchmarks/starts.py: a greedy agent's game from every start, weighted as drawn."""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path

import pytest
import torch

from atari_speed.agent.networks import DQN
from atari_speed.core.errors import ConfigError
from atari_speed.envs.pipeline import resolve_pipeline

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("starts", ROOT / "benchmarks/starts.py")
starts = importlib.util.module_from_spec(spec)
spec.loader.exec_module(starts)


def small_pipeline(noop_max: int, sticky: float = 0.0) -> dict:
    pipeline = copy.deepcopy(resolve_pipeline("small"))
    for stage in pipeline["stages"]:
        if stage["wrapper"] == "NoopReset":
            stage["noop_max"] = noop_max
    pipeline["repeat_action_probability"] = sticky
    return pipeline


def test_every_start_plays_each_once_weighted_as_drawn_and_the_same_each_time():
    torch.manual_seed(0)
    net = DQN((4, 42, 42), 6, network="small", layer_norm=True).eval()
    # Pong's ale-style start: one FIRE frame, then max(0, U{0..2} - 1) NOOPs: 0 twice in 3
    result = starts.every_start(small_pipeline(3), "pong", net, max_frames=2000)
    assert result["noops"] == [0, 1] and result["weights"] == pytest.approx([2 / 3, 1 / 3])
    assert len(result["scores"]) == 2 and result["exact"]
    mean = 2 / 3 * result["scores"][0] + 1 / 3 * result["scores"][1]
    assert result["mean"] == pytest.approx(mean)
    # no sticky actions: a start's greedy game is one game, whatever the env's seed
    again = starts.every_start(small_pipeline(3), "pong", net, max_frames=2000, seed=100)
    assert again["scores"] == result["scores"]
    line = starts.summary_line("x", {**result, "scores": [-3.0, 2.0]})
    assert "lost from 1 (0 NOOPs)" in line and "lowest -3" in line and "(exact)" in line
    sticky = starts.every_start(small_pipeline(2, sticky=0.25), "pong", net, max_frames=400)
    assert not sticky["exact"] and "an estimate" in starts.summary_line("x", sticky)


def test_a_pipeline_without_noop_starts_is_refused():
    pipeline = copy.deepcopy(resolve_pipeline("small"))
    pipeline["stages"] = [s for s in pipeline["stages"] if s["wrapper"] != "NoopReset"]
    net = DQN((4, 42, 42), 6, network="small", layer_norm=True).eval()
    with pytest.raises(ConfigError, match="no NoopReset stage"):
        starts.every_start(pipeline, "pong", net, max_frames=400)
