"""What --resume goes on with: the checkpoint's preset as resolved at the run's first
start, changed only by what is given with --resume, in one line."""

from __future__ import annotations

import pytest

from atari_speed.app.auto import needs_choice
from atari_speed.app.resume import resumed_preset
from atari_speed.core.config import load_preset
from atari_speed.core.errors import ConfigError
from atari_speed.run.checkpoint import Checkpoint, save_checkpoint

# pong-fast as auto resolved it at a run's first start (the run)
RESOLVED = (
    load_preset("pong-fast")
    .replace("run", mode="n-env", envs=8, precision="fp32", steps=60_000)
    .replace("env", backend="ale")
)


def save_stored_preset(preset: dict, path) -> None:
    """A checkpoint at ``path`` whose stored (resolved) preset is ``preset``."""
    saved = Checkpoint(
        game="pong",
        pipeline={"stages": []},
        preset=preset,
        obs_shape=[4, 42, 42],
        actions=6,
        dueling=False,
        frames=15_336,
        net={},
    )
    save_checkpoint(saved, path)


@pytest.fixture
def checkpoint(tmp_path):
    path = tmp_path / "run" / "checkpoint.pt"
    path.parent.mkdir()
    save_stored_preset(RESOLVED.to_dict(), path)
    return path


def test_a_resume_goes_on_with_the_preset_resolved_at_the_first_start(checkpoint):
    assert needs_choice(load_preset("pong-fast")), "the preset file leaves auto to choose"
    preset, line = resumed_preset(checkpoint, [])
    assert preset == RESOLVED and not needs_choice(preset), "auto is not run again"
    assert line == (
        f"--resume: {checkpoint}: pong-fast as resolved at its start (n-env, 8 envs, ale "
        "backend, fp32, 60,000 agent steps)"
    )
    again, _ = resumed_preset(checkpoint, [], named="pong-fast")  # --preset, the same one
    assert again == RESOLVED


def test_what_is_given_with_a_resume_changes_it_and_is_said_in_one_line(checkpoint):
    sets = ["run.steps=90000", "eval.every=50000", "run.envs=8"]  # the last changes nothing
    preset, line = resumed_preset(checkpoint, sets)
    assert preset == RESOLVED.replace("run", steps=90_000).replace("eval", every=50_000)
    assert "\n" not in line
    assert line.endswith(
        "60,000 agent steps), changed by what was given with --resume: run.steps 60000 -> "
        "90000, eval.every 100000 -> 50000"
    )
    # the old name, as docs/log's commands give it, is the same field
    assert resumed_preset(checkpoint, ["run.frames=90000", *sets[1:]]) == (preset, line)


def old_names(preset: dict) -> dict:
    """``preset`` (to_dict's) as versions before run.steps saved it in a checkpoint: no
    run.emulator_frames, and run.frames, explore.epsilon_frames, pqn.lr_decay_frames."""
    run = {k: v for k, v in preset["run"].items() if k != "emulator_frames"}
    run["frames"] = run.pop("steps")
    explore = dict(preset["explore"])
    explore["epsilon_frames"] = explore.pop("epsilon_steps")
    pqn = dict(preset["pqn"])
    pqn["lr_decay_frames"] = pqn.pop("lr_decay_steps")
    return {**preset, "run": run, "explore": explore, "pqn": pqn}


def test_a_checkpoint_of_an_earlier_version_resumes_with_its_old_field_names(tmp_path):
    from atari_speed.core.config import RENAMED

    resolved = RESOLVED.replace("pqn", lr_decay_steps=3_000_000).replace(
        "explore", epsilon_steps=123_456
    )
    saved = old_names(resolved.to_dict())
    assert {f"{s}.{k}" for s in saved if s != "name" for k in saved[s]} >= set(RENAMED)
    path = tmp_path / "checkpoint.pt"
    save_stored_preset(saved, path)
    preset, line = resumed_preset(path, ["run.frames=90000"])
    assert preset == resolved.replace("run", steps=90_000)
    assert line.endswith(
        "60,000 agent steps), changed by what was given with --resume: run.steps 60000 -> 90000"
    )


def test_a_resume_given_a_budget_in_emulator_frames_keeps_it_to_convert(checkpoint):
    preset, line = resumed_preset(checkpoint, ["run.emulator_frames=400000"])
    assert (preset.run.steps, preset.run.emulator_frames) == (60_000, 400_000)
    assert line.endswith("--resume: run.emulator_frames 0 -> 400000")  # make_plan converts it
    with pytest.raises(ConfigError, match=r"run\.steps=1 and --set run\.emulator_frames=4"):
        resumed_preset(checkpoint, ["run.steps=1", "run.emulator_frames=4"])


def test_a_resume_with_another_preset_or_a_bad_set_is_refused_in_one_line(checkpoint):
    with pytest.raises(ConfigError, match=r"was trained with preset pong-fast, not pong-nenv; "):
        resumed_preset(checkpoint, [], named="pong-nenv")
    with pytest.raises(ConfigError, match=r"--set run\.envs=-1: \[run\]: envs = -1 is out of"):
        resumed_preset(checkpoint, ["run.envs=-1"])
