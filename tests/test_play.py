"""play.py: scores a checkpoint from a tiny training run; bad input is one line, exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent


def play(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "play.py"), *args],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
    )


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("run")
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "train.py"),
            "--preset",
            "pong-nenv",
            "--frames",
            "300",
            "--run-dir",
            str(run_dir),
            "--set",
            "replay.initial=100",
            "--set",
            "replay.size=1000",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    return run_dir


def test_play_scores_whole_games_as_json(run_dir):
    out = play(str(run_dir), "--episodes", "2", "--epsilon", "0.5", "--json")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 1
    result = json.loads(lines[0])
    assert result["game"] == "pong" and result["frames_trained"] == 300
    assert len(result["episodes"]) == 2
    for game in result["episodes"]:
        assert -21 <= game["r"] <= 21 and game["l"] > 0 and game["frames"] >= 4 * game["l"]
    scores = [g["r"] for g in result["episodes"]]
    assert result["mean"] == pytest.approx(sum(scores) / 2)


def test_play_prints_each_game_and_the_mean(run_dir):
    out = play(str(run_dir / "checkpoint.pt"), "--epsilon", "1.0")
    assert out.returncode == 0, out.stderr
    assert "game 1: score " in out.stdout and "mean " in out.stdout


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d / "missing.pt", "missing.pt: no such checkpoint file"),
        (
            lambda d: (d / "junk.pt").write_bytes(b"not a checkpoint") and d / "junk.pt",
            "junk.pt: not a readable checkpoint",
        ),
        (
            lambda d: torch.save({"a": torch.ones(1)}, d / "other.pt") or d / "other.pt",
            "other.pt: not an atari-speed checkpoint",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, make, message):
    out = play(str(make(tmp_path)))
    assert out.returncode == 2
    assert message in out.stderr and "Traceback" not in out.stderr
    assert out.stderr.count("\n") == 1


def test_truncated_checkpoint(run_dir, tmp_path):
    data = (run_dir / "checkpoint.pt").read_bytes()
    (tmp_path / "cut.pt").write_bytes(data[: len(data) // 3])
    out = play(str(tmp_path / "cut.pt"))
    assert out.returncode == 2 and "cut.pt: not a readable checkpoint" in out.stderr


def test_checkpoint_that_does_not_fit_its_game(run_dir, tmp_path):
    data = torch.load(run_dir / "checkpoint.pt", weights_only=True)
    data["actions"] = 4  # Pong's minimal action set has 6
    torch.save(data, tmp_path / "wrong.pt")
    out = play(str(tmp_path / "wrong.pt"))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "wrong.pt: checkpoint is for 4 actions" in out.stderr and "env has 6" in out.stderr
