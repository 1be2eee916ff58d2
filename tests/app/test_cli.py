"""train.py's budget flags: --steps, its old name --frames, and --emulator-frames."""

from __future__ import annotations

import pytest

from atari_speed.app import cli
from tests.scripts import train_here


@pytest.fixture
def trained(monkeypatch):
    """The presets train.py would train, without training them."""
    presets = []

    def fake_train(preset, run_dir, resume):
        presets.append(preset)
        return {
            "steps": preset.run.steps,
            "seconds": 1.0,
            "fps": 1.0,
            "episodes": 0,
            "solved": False,
            "best_avg_reward": None,
        }

    monkeypatch.setattr(cli, "_train", fake_train)
    return presets


def test_steps_and_its_old_name_frames_set_the_budget_in_agent_steps(trained):
    for flag in ("--steps", "--frames"):
        out = train_here("--preset", "pong-nenv", flag, "1234")
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith("1,234 agent steps in ")
    assert [p.run.steps for p in trained] == [1234, 1234]
    assert [p.run.emulator_frames for p in trained] == [0, 0]


def test_emulator_frames_sets_the_budget_the_run_converts(trained):
    out = train_here("--preset", "pong-nenv", "--emulator-frames", "10000")
    assert out.returncode == 0, out.stderr
    [preset] = trained
    # converted by make_plan, with the pipeline's frame skip (tests/run/test_plan.py)
    assert preset.run.emulator_frames == 10_000


@pytest.mark.parametrize(
    "flags, named",
    [
        (["--steps", "5", "--emulator-frames", "8"], "--steps and --emulator-frames"),
        (["--frames", "5", "--emulator-frames", "8"], "--frames and --emulator-frames"),
        (["--steps", "5", "--frames", "6"], "--steps and --frames"),
        (["--steps", "5", "--set", "run.frames=6"], "--set run.frames=6 and --set run.steps=5"),
        (
            ["--steps", "5", "--set", "run.emulator_frames=8"],
            "--set run.steps=5 and --set run.emulator_frames=8",
        ),
    ],
)
def test_two_budgets_are_a_one_line_error_naming_both(trained, flags, named):
    out = train_here("--preset", "pong-nenv", *flags)
    assert out.returncode == 2 and not trained
    assert out.stderr.count("\n") == 1 and named in out.stderr, out.stderr


def test_help_shows_the_budget_flags_and_the_fields_new_names():
    text = cli.train_parser().format_help()
    assert "--steps STEPS" in text and "--emulator-frames N" in text
    assert "the old name of --steps" in text
    assert "  steps " in text and "  epsilon_steps " in text and "  lr_decay_steps " in text
