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
    .replace("run", mode="n-env", envs=8, precision="fp32", frames=60_000)
    .replace("env", backend="ale")
)


@pytest.fixture
def checkpoint(tmp_path):
    path = tmp_path / "run" / "checkpoint.pt"
    path.parent.mkdir()
    saved = Checkpoint(
        game="pong",
        pipeline={"stages": []},
        preset=RESOLVED.to_dict(),
        obs_shape=[4, 42, 42],
        actions=6,
        dueling=False,
        frames=15_336,
        net={},
    )
    save_checkpoint(saved, path)
    return path


def test_a_resume_goes_on_with_the_preset_resolved_at_the_first_start(checkpoint):
    assert needs_choice(load_preset("pong-fast")), "the preset file leaves auto to choose"
    preset, line = resumed_preset(checkpoint, [])
    assert preset == RESOLVED and not needs_choice(preset), "auto is not run again"
    assert line == (
        f"--resume: {checkpoint}: pong-fast as resolved at its start (n-env, 8 envs, ale "
        "backend, fp32, 60,000 frames)"
    )
    again, _ = resumed_preset(checkpoint, [], named="pong-fast")  # --preset, the same one
    assert again == RESOLVED


def test_what_is_given_with_a_resume_changes_it_and_is_said_in_one_line(checkpoint):
    sets = ["run.frames=90000", "eval.every=50000", "run.envs=8"]  # the last changes nothing
    preset, line = resumed_preset(checkpoint, sets)
    assert preset == RESOLVED.replace("run", frames=90_000).replace("eval", every=50_000)
    assert "\n" not in line
    assert line.endswith(
        "60,000 frames), changed by what was given with --resume: run.frames 60000 -> 90000, "
        "eval.every 100000 -> 50000"
    )


def test_a_resume_with_another_preset_or_a_bad_set_is_refused_in_one_line(checkpoint):
    with pytest.raises(ConfigError, match=r"was trained with preset pong-fast, not pong-nenv; "):
        resumed_preset(checkpoint, [], named="pong-nenv")
    with pytest.raises(ConfigError, match=r"--set run\.envs=-1: \[run\]: envs = -1 is out of"):
        resumed_preset(checkpoint, ["run.envs=-1"])
