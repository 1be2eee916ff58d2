"""benchmarks/eval_cost.py: the ale-backend games it times are whole games, one per env."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import torch

from atari_speed.envs.pipeline import resolve_pipeline

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("eval_cost", ROOT / "benchmarks/eval_cost.py")
eval_cost = importlib.util.module_from_spec(spec)
spec.loader.exec_module(eval_cost)


class AlwaysNoop(torch.nn.Module):
    """Q-values that make NOOP greedy: Pong's opponent then wins every point."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = torch.zeros(len(x), 6)
        q[:, 0] = 1.0
        return q


def test_ale_games_are_whole_games_one_per_env():
    ckpt = SimpleNamespace(pipeline=resolve_pipeline("small"), game="pong")
    scores = eval_cost.play_on_ale(ckpt, AlwaysNoop(), episodes=2, seed=0)
    # an agent that never moves loses 0-21: a whole game's score (not a step's or a
    # point's), one per env
    assert scores == [-21.0, -21.0]
