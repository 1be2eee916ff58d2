"""PQN end to end: train.py with tiny rollouts, its checkpoint, --resume, play.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from atari_speed.run.checkpoint import load_checkpoint
from tests.scripts import play_here, run_script, train_here

TINY = [
    "--preset",
    "pong-pqn",
    "--set",
    "run.envs=4",
    "--set",
    "pqn.rollout=16",
    "--set",
    "pqn.epochs=2",
    "--set",
    "pqn.minibatches=2",
    "--set",
    "run.log_every=64",
]


@pytest.fixture(scope="module")
def pqn_run(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("pqn")
    out = train_here(*TINY, "--frames", "1024", "--run-dir", str(run_dir))
    assert out.returncode == 0, out.stderr
    return run_dir


def test_pqn_trains_on_whole_rollouts(pqn_run):
    summary = json.loads((pqn_run / "summary.json").read_text())
    assert summary["mode"] == "n-env" and summary["steps"] == 1024
    assert summary["preset"]["dqn"]["algorithm"] == "pqn"
    data = load_checkpoint(pqn_run / "checkpoint.pt")
    # 1024 frames / (4 envs x 16 steps) = 16 rollouts, each 2 epochs x 2 minibatches
    assert data.learner["updates"] == 64 and "target" not in data.learner
    net = data.policy(torch.device("cpu"))
    assert data.layer_norm and any(isinstance(m, torch.nn.GroupNorm) for m in net.modules())


# the updates of each of 16 rollouts under RISE (pqn.updates_at_start=0.25, epsilon_steps=1024):
# rollout k ends at 64k agent steps, a quarter of its 4 updates at step 0, all at 1024
RISE = ["--set", "pqn.updates_at_start=0.25", "--set", "explore.epsilon_steps=1024"]
RISING_DUE = [max(1, round(4 * (0.25 + 0.75 * 64 * k / 1024))) for k in range(1, 17)]


def test_the_updates_per_rollout_rise_while_epsilon_falls(tmp_path):
    out = train_here(*TINY, *RISE, "--frames", "1024", "--run-dir", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert load_checkpoint(tmp_path / "checkpoint.pt").learner["updates"] == sum(RISING_DUE) < 64


def test_a_resumed_run_makes_the_updates_the_uninterrupted_one_makes(tmp_path):
    # the factor follows the agent steps restored from the checkpoint, not the resumed
    # process's own count, so stopping halfway changes no rollout's updates
    first = train_here(*TINY, *RISE, "--frames", "512", "--run-dir", str(tmp_path / "a"))
    assert first.returncode == 0, first.stderr
    args = ["--frames", "1024", "--run-dir", str(tmp_path / "b"), "--resume"]
    out = train_here(*TINY, *args, str(tmp_path / "a" / "checkpoint.pt"))
    assert out.returncode == 0, out.stderr
    data = load_checkpoint(tmp_path / "b" / "checkpoint.pt")
    assert data.frames == 1024 and data.learner["updates"] == sum(RISING_DUE)


def test_pqn_resumes_where_it_stopped(pqn_run, tmp_path):
    out = train_here(
        *TINY,
        "--frames",
        "1536",
        "--run-dir",
        str(tmp_path),
        "--resume",
        str(pqn_run / "checkpoint.pt"),
    )
    assert out.returncode == 0, out.stderr
    # the restarted envs were first brought back to where their games were (not counted
    # as agent steps), and it said so
    assert "brought back to the point of a game" in out.stdout
    assert "the games then in progress not scored" in out.stdout
    assert "run.resume_phases" in out.stdout
    data = load_checkpoint(tmp_path / "checkpoint.pt")
    assert data.frames == 1536 and data.learner["updates"] == 64 + 8 * 4
    resumed = json.loads((tmp_path / "summary.json").read_text())["resumed_at_steps"]
    assert resumed == [1024]  # where it was resumed, for the seed benchmark to say
    first = json.loads((pqn_run / "summary.json").read_text())["resumed_at_steps"]
    assert first == []


def test_a_checkpoint_keeps_each_envs_steps_into_its_game(pqn_run):
    checkpoint = load_checkpoint(pqn_run / "checkpoint.pt")
    summary = json.loads((pqn_run / "summary.json").read_text())
    # one per env: 1024 agent steps / 4 envs, and 256 steps end no game of Pong
    assert summary["preset"]["run"]["envs"] == 4 and summary["episodes"] == 0
    assert checkpoint.env_phases == [256] * 4


def test_a_resume_with_nothing_left_to_play_keeps_the_checkpoints_phases(pqn_run, tmp_path):
    # its envs play nothing, so the checkpoint it writes on the way out keeps those resumed
    args = ["--frames", "1024", "--run-dir", str(tmp_path), "--resume"]
    out = train_here(*TINY, *args, str(pqn_run / "checkpoint.pt"))
    assert out.returncode == 0, out.stderr
    resumed, kept = (
        load_checkpoint(tmp_path / "checkpoint.pt"),
        load_checkpoint(pqn_run / "checkpoint.pt"),
    )
    assert resumed.env_phases == kept.env_phases == [256] * 4


def test_a_resume_without_phases_restored_spreads_the_envs_instead(pqn_run, tmp_path):
    args = ["--frames", "1280", "--run-dir", str(tmp_path), "--resume"]
    out = train_here(
        *TINY,
        *args,
        str(pqn_run / "checkpoint.pt"),
        "--set",
        "run.resume_phases=0",
        "--set",
        "run.resume_spread=64",
    )
    assert out.returncode == 0, out.stderr
    assert "first plays 0 to 64 random actions" in out.stdout and "run.resume_spread" in out.stdout
    assert "brought back" not in out.stdout


def test_play_plays_a_pqn_checkpoint(pqn_run):
    args = [str(pqn_run / "checkpoint.pt"), "--no-window", "--max-seconds", "2", "--json"]
    out = play_here(*args)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert len(result["episodes"]) == 1 and result["steps_trained"] == 1024


def test_pqn_refuses_what_it_cannot_run(tmp_path):
    out = train_here(*TINY, "--mode", "baseline", "--run-dir", str(tmp_path))
    assert out.returncode == 2 and "algorithm = 'pqn' with mode = 'baseline'" in out.stderr
    out = train_here(*TINY, "--set", "pqn.minibatches=3", "--run-dir", str(tmp_path))
    assert out.returncode == 2 and "does not divide a rollout of 4 envs x 16 steps" in out.stderr
    out = train_here(
        *TINY, "--set", "run.mode='parallel'", "--set", "run.actors=3",
        "--set", "pqn.minibatches=5", "--run-dir", str(tmp_path),
    )  # fmt: skip
    assert out.returncode == 2
    assert "rollout of 12 envs (3 actors x 4) x 16 steps = 192 transitions" in out.stderr


def test_pqn_in_parallel_mode_trains_on_the_actors_rollouts(tmp_path):
    """Two actor processes fill 2 x 4 envs' columns of each rollout; the learner counts
    every frame, trains epochs x minibatches per rollout, and every process reports its
    own profile."""
    out = run_script(
        "train.py", *TINY, "--mode", "parallel", "--set", "run.actors=2", "--profile",
        "--frames", "512", "--run-dir", str(tmp_path),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["mode"] == "parallel" and summary["envs"] == 8
    rollout = 8 * 16
    assert summary["update_to_data"]["rollout"] == rollout
    frames, updates = (
        summary["steps"],
        load_checkpoint(tmp_path / "checkpoint.pt").learner["updates"],
    )
    # 2 epochs x 2 minibatches per rollout trained on; every frame the actors stepped is
    # counted, and they run at most one rollout ahead of the learner, plus the one they are in
    assert frames >= 512 and frames % 4 == 0 and updates % 4 == 0
    trained = updates // 4
    assert trained * rollout <= frames <= (trained + 2) * rollout
    profile = json.loads((tmp_path / "profile.json").read_text())["processes"]
    assert {"main", "actor 0", "actor 1"} <= set(profile)
    stages = {name: {row["stage"] for row in p["rows"]} for name, p in profile.items()}
    assert {"returns", "sgd step", "wait for actors' rollouts"} <= stages["main"]
    assert {"env step", "action selection", "wait for the learner"} <= stages["actor 1"]


def test_a_resume_past_the_phase_limit_brings_the_envs_back_to_the_limit(pqn_run, tmp_path):
    # phases of 256 cut to 100
    args = ["--frames", "1280", "--run-dir", str(tmp_path), "--set", "run.resume_phases=100"]
    out = train_here(*TINY, *args, "--resume", str(pqn_run / "checkpoint.pt"))
    assert out.returncode == 0, out.stderr
    assert "(100 to 100 agent steps in, the games then in progress not scored" in out.stdout


def test_the_subprocess_backend_checkpoints_each_envs_phase_on_the_way_out(tmp_path):
    # its envs are closed (their shared buffers released) before the last checkpoint
    args = ["--frames", "256", "--run-dir", str(tmp_path), "--set", "env.backend='subprocess'"]
    out = train_here(*TINY, *args)
    assert out.returncode == 0, out.stderr
    checkpoint = load_checkpoint(tmp_path / "checkpoint.pt")
    assert checkpoint.env_phases == [64] * 4


def test_a_run_with_quantiles_checkpoints_plays_and_resumes_only_with_them(tmp_path):
    quantiles = ["--set", "dqn.quantiles=4"]
    out = train_here(*TINY, *quantiles, "--frames", "512", "--run-dir", str(tmp_path / "a"))
    assert out.returncode == 0, out.stderr
    data = load_checkpoint(tmp_path / "a" / "checkpoint.pt")
    assert data.quantiles == 4 and data.learner["updates"] == 32
    net = data.policy(torch.device("cpu"))
    x = torch.randint(0, 255, (2, *data.obs_shape), dtype=torch.uint8)
    with torch.no_grad():
        assert net(x, True).shape == (2, data.actions, 4)
    played = play_here(str(tmp_path / "a"), "--no-window", "--max-seconds", "1", "--json")
    assert played.returncode == 0, played.stderr
    assert json.loads(played.stdout)["steps_trained"] == 512
    # a resume takes the checkpoint's preset, quantiles included, unless told otherwise
    args = ["--frames", "1024", "--resume", str(tmp_path / "a" / "checkpoint.pt")]
    without = ["--set", "dqn.quantiles=0", "--run-dir", str(tmp_path / "b")]
    refused = train_here(*TINY, *args, *without)
    assert refused.returncode == 2
    assert "'quantiles': 4" in refused.stderr and "'quantiles': 0" in refused.stderr
    resumed = train_here(*TINY, *args, "--run-dir", str(tmp_path / "c"))
    assert resumed.returncode == 0, resumed.stderr
    assert load_checkpoint(tmp_path / "c" / "checkpoint.pt").learner["updates"] == 64
