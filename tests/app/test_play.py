"""play.py: scores, records and (without a display) still plays a checkpoint from a tiny
training run; bad input is one line, exit 2."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from PIL import Image, ImageSequence

from tests.scripts import ROOT, play_here, run_script, start_script, train_here

PONG_BACKGROUND = (144, 72, 17)
# What play must never load: it needs a checkpoint, its network, the env pipeline and the
# viewer, not the training stack.
TRAINING_STACK = (
    "atari_speed.run.training",
    "atari_speed.agent.learner",
    "ptan",
    "torch.utils.tensorboard",
)


def headless(**extra: str) -> dict[str, str]:
    """This environment with no display, whatever the machine running the tests has."""
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    return {**env, **extra}


def play(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """play.py in this process (``play_main``), with no display unless ``env`` gives one;
    the entry point itself runs as a script in the tests marked so below."""
    return play_here(*args, env=headless() if env is None else env)


def play_script(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """play.py in a process of its own (``run_script``), with no display unless ``env``
    gives one."""
    return run_script("play.py", *args, env=headless() if env is None else env)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("run")  # 20 updates: a checkpoint, not an agent
    args = ["--preset", "pong-nenv", "--frames", "120", "--run-dir", str(run_dir)]
    out = train_here(*args, "--set", "replay.initial=100", "--set", "replay.size=1000")
    assert out.returncode == 0, out.stderr
    return run_dir


def test_play_scores_whole_games_as_json(run_dir):
    # play.py as a script, in a process of its own (forked from the preloaded server; the new
    # interpreter's play is test_playing_loads_no_training_module's).
    out = play_script(str(run_dir), "--episodes", "2", "--epsilon", "0.5", "--json")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 1
    result = json.loads(lines[0])
    assert result["game"] == "pong" and result["steps_trained"] == 120
    assert len(result["episodes"]) == 2
    for game in result["episodes"]:
        assert -21 <= game["r"] <= 21 and game["l"] > 0 and game["frames"] >= 4 * game["l"]
    scores = [g["r"] for g in result["episodes"]]
    assert result["mean"] == pytest.approx(sum(scores) / 2)


def test_play_prints_each_game_and_the_mean(run_dir):
    out = play(str(run_dir / "checkpoint.pt"), "--epsilon", "1.0")
    assert out.returncode == 0, out.stderr
    assert "game 1: score " in out.stdout and "mean " in out.stdout


def test_points_says_when_each_point_came_and_how_many_games_were_distinct(run_dir):
    out = play(str(run_dir), "--episodes", "2", "--epsilon", "1.0", "--points")
    assert out.returncode == 0, out.stderr
    games = re.findall(r"game \d: score (-?\d+), (\d+) steps\n  points: ([-+\d ]+)\n", out.stdout)
    assert len(games) == 2
    for score, steps, points in games:
        signed = [int(p) for p in points.split()]
        # a won point counts +1 and a lost one -1, within the game's steps
        assert sum(1 if n > 0 else -1 for n in signed) == int(score)
        assert sum(abs(n) for n in signed) <= int(steps) and max(signed) <= 21
    assert re.search(r"\n[12] distinct of 2 games ", out.stdout)


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
    from atari_speed.run.checkpoint import digest

    data = torch.load(run_dir / "checkpoint.pt", weights_only=True)
    data["actions"] = 4  # Pong's minimal action set has 6
    data["digest"] = digest(data)  # a sound file, only of another game
    torch.save(data, tmp_path / "wrong.pt")
    out = play(str(tmp_path / "wrong.pt"))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "wrong.pt: checkpoint is for 4 actions" in out.stderr and "env has 6" in out.stderr


def test_record_mp4_one_frame_per_step_plus_the_first(run_dir, tmp_path):
    video = tmp_path / "pong.mp4"
    out = play(
        str(run_dir), "--record", str(video), "--episodes", "2", "--max-seconds", "5", "--json"
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["video"] == str(video)
    steps = [g["l"] for g in result["episodes"]]
    # The emulator's own time limit ended both games: 5 s = 300 frames.
    assert [g["frames"] for g in result["episodes"]] == [300, 300]
    capture = cv2.VideoCapture(str(video))
    assert capture.get(cv2.CAP_PROP_FPS) == 30
    count, first = 0, None
    while True:
        ok, frame = capture.read()
        if not ok:
            break
        count += 1
        first = cv2.cvtColor(frame, cv2.COLOR_BGR2RGB) if first is None else first
    assert count == sum(steps) + 1
    assert first.shape == (210, 160, 3)  # the raw screen, not the 84x84 observation
    assert np.abs(first[100, 80].astype(int) - PONG_BACKGROUND).max() < 12
    assert os.listdir(tmp_path) == ["pong.mp4"]  # no temporary file left behind


def test_record_gif(run_dir, tmp_path):
    video = tmp_path / "pong.gif"
    out = play(str(run_dir), "--record", str(video), "--max-seconds", "3", "--fps", "25")
    assert out.returncode == 0, out.stderr
    steps = int(re.search(r"game 1: score -?\d+, (\d+) steps \(cut short at 3 s\)", out.stdout)[1])
    assert f"video: {video}, {steps + 1} frames of 160x210" in out.stdout
    gif = Image.open(video)
    assert gif.size == (160, 210)
    first = np.asarray(gif.convert("RGB"))
    assert tuple(first[100, 80]) == PONG_BACKGROUND
    # Pillow merges repeated screens into one longer frame, so count time, not frames:
    # 40 ms a frame at 25 fps.
    assert sum(f.info["duration"] for f in ImageSequence.Iterator(gif)) == 40 * (steps + 1)
    assert gif.n_frames <= steps + 1


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--record", "{tmp}/out.avi"],
            "out.avi: unsupported video format '.avi'; use .mp4 or .gif",
        ),
        (["--record", "{tmp}/nowhere/out.mp4"], "nowhere/out.mp4: directory "),
        (["--scale", "0"], "--scale must be at least 1, got 0"),
        (["--fps", "-1"], "--fps must be 0 (as fast as possible) or more, got -1"),
        (["--max-seconds", "0"], "--max-seconds must be more than 0, got 0"),
    ],
)
def test_bad_flags_are_one_line_and_exit_2(run_dir, tmp_path, flags, message):
    out = play(str(run_dir), *[f.format(tmp=tmp_path) for f in flags])
    assert out.returncode == 2
    assert "play.py: error: " in out.stderr and message in out.stderr
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert out.stdout == "" and os.listdir(tmp_path) == []


def test_pipeline_flag_plays_on_another_pipeline(run_dir):
    # The run trained on `book` (84x84); `classic` gives the same observations.
    out = play(str(run_dir), "--max-seconds", "2", "--json", "--pipeline", "classic")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["pipeline"] == "classic"
    default = play(str(run_dir), "--max-seconds", "2", "--json")
    assert json.loads(default.stdout)["pipeline"] == "book"


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("small", "observations [4, 84, 84]; the rebuilt pong env has 6 and [4, 42, 42]"),
        ("nope", "pipeline 'nope': no such file; give a path or one of: "),
    ],
)
def test_a_pipeline_that_does_not_fit_is_one_line_and_exit_2(run_dir, name, message):
    out = play(str(run_dir), "--max-seconds", "2", "--pipeline", name)
    assert out.returncode == 2 and message in out.stderr, out.stderr
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr


def test_no_display_says_so_once_and_still_plays(run_dir):
    out = play(str(run_dir), "--max-seconds", "2")
    assert out.returncode == 0, out.stderr
    message = (
        "play.py: no display found (DISPLAY unset): playing without a window; "
        "use --record FILE to save a video"
    )
    assert out.stderr.count(message) == 1 and "Traceback" not in out.stderr
    assert "game 1: score " in out.stdout and "mean " in out.stdout


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="X11 display names")
def test_a_display_that_cannot_be_reached_is_one_line_not_a_crash(run_dir):
    # OpenCV's Qt backend would abort the process here; play.py must try it in a child first.
    out = play_script(str(run_dir), "--max-seconds", "2", env=headless(DISPLAY=":987"))
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("play.py: cannot open a window (") == 1
    assert "playing without a window" in out.stderr and "Traceback" not in out.stderr
    assert "game 1: score " in out.stdout


def test_ctrl_c_keeps_the_video_so_far_and_exits_130(run_dir, tmp_path):
    video = tmp_path / "pong.mp4"
    proc = start_script(
        "play.py", str(run_dir), "--record", str(video), "--episodes", "1000", env=headless()
    )
    try:
        # Wait until the video being written has grown twice (some frames are in), however
        # slowly the machine runs; a deadline only for a play.py that never gets there.
        deadline, sizes = time.monotonic() + 300, set()
        while len(sizes - {0}) < 2:
            assert proc.poll() is None and time.monotonic() < deadline, "play.py never started"
            partial = [p for p in tmp_path.iterdir() if p.name.endswith(".partial.mp4")]
            sizes |= {partial[0].stat().st_size} if partial else set()
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert re.search(r"play.py: interrupted after \d+ of 1000 games", stderr)
    frames = int(re.search(r"video: .*pong.mp4, (\d+) frames of 160x210", stdout)[1])
    capture = cv2.VideoCapture(str(video))
    count = 0
    while capture.read()[0]:
        count += 1
    assert count == frames > 1
    assert os.listdir(tmp_path) == ["pong.mp4"]


def training_modules_after(code: str) -> tuple[list[str], str]:
    """Run ``code`` in a fresh interpreter; the training modules it loaded, and its stdout
    (without the last line, which reports them)."""
    report = (
        f"import json, sys; print(json.dumps([m for m in {TRAINING_STACK!r} if m in sys.modules]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\n{report}"],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
        env=headless(),
    )
    assert out.returncode == 0, out.stderr
    *lines, last = out.stdout.strip().splitlines()
    return json.loads(last), "\n".join(lines)


def test_importing_play_loads_no_training_module():
    loaded, _ = training_modules_after("import atari_speed.app.play")
    assert loaded == []


def test_playing_loads_no_training_module(untrained_checkpoint):
    args = [str(untrained_checkpoint), "--max-seconds", "1", "--no-window", "--json"]
    loaded, stdout = training_modules_after(
        f"from atari_speed.app.play import play_main\nassert play_main({args!r}) == 0"
    )
    assert loaded == []
    result = json.loads(stdout)
    assert result["steps_trained"] == 0 and [g["frames"] for g in result["episodes"]] == [60]
