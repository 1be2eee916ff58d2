"""Preset config: the old names of fields renamed to say agent steps, and the budget in
agent steps or in emulator frames."""

from __future__ import annotations

import dataclasses

import pytest

from atari_speed.core.config import (
    RENAMED,
    SECTIONS,
    ConfigError,
    describe_fields,
    load_preset,
    load_variants,
    steps_budget,
)

NEW = ["run.steps=5000", "explore.epsilon_steps=700", "pqn.lr_decay_steps=9000"]
OLD = ["run.frames=5000", "explore.epsilon_frames=700", "pqn.lr_decay_frames=9000"]


def test_every_old_name_is_a_field_no_more_and_its_new_name_is_one():
    for old, new in RENAMED.items():
        for name, present in ((old, False), (new, True)):
            section, key = name.split(".")
            fields = {f.name for f in dataclasses.fields(SECTIONS[section])}
            assert (key in fields) is present, name


def test_old_names_in_a_preset_file_are_read_as_the_new_ones(tmp_path):
    old = tmp_path / "old.toml"
    old.write_text(
        "[run]\nframes = 5000\n[explore]\nepsilon_frames = 700\n[pqn]\nlr_decay_frames = 9000\n"
        '[[variant]]\nname = "a"\nrun.frames = 6000\n'
    )
    new = tmp_path / "new.toml"
    new.write_text(
        "[run]\nsteps = 5000\n[explore]\nepsilon_steps = 700\n[pqn]\nlr_decay_steps = 9000\n"
        '[[variant]]\nname = "a"\nrun.steps = 6000\n'
    )
    preset = load_preset(old)
    assert (preset.run.steps, preset.explore.epsilon_steps, preset.pqn.lr_decay_steps) == (
        5000,
        700,
        9000,
    )
    assert preset == dataclasses.replace(load_preset(new), name="old")
    [(_, variant)] = load_variants(old)
    assert variant.run.steps == 6000


def test_old_names_in_set_are_read_as_the_new_ones():
    preset = load_preset("pong-fast", OLD)
    assert preset == load_preset("pong-fast", NEW)
    assert (preset.run.steps, preset.explore.epsilon_steps, preset.pqn.lr_decay_steps) == (
        5000,
        700,
        9000,
    )


def test_a_file_giving_one_field_under_both_names_is_a_one_line_error(tmp_path):
    path = tmp_path / "both.toml"
    path.write_text("[explore]\nepsilon_steps = 700\nepsilon_frames = 800\n")
    with pytest.raises(ConfigError) as err:
        load_preset(path)
    message = str(err.value)
    assert "\n" not in message and str(path) in message
    assert "[explore] epsilon_frames and epsilon_steps are both given" in message


def test_set_giving_one_field_under_both_names_is_a_one_line_error():
    with pytest.raises(ConfigError) as err:
        load_preset("pong-fast", ["run.steps=5000", "run.envs=8", "run.frames=6000"])
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("--set run.steps=5000 and --set run.frames=6000: one field")
    # the same name twice is not both names: the last one wins, as for any field
    assert load_preset("pong-fast", ["run.frames=1", "run.frames=2"]).run.steps == 2


def test_overrides_are_checked_against_each_other_once_all_are_given():
    # score_rise_from must be below score_from once both are set, in either order
    rise = ["explore.epsilon_at_stop=0.001", "explore.epsilon_peak=0.01"]
    for order in (1, -1):
        fields = ["explore.score_from=10.0", "explore.score_rise_from=5.0"][::order]
        assert load_preset("pong-fast", [*rise, *fields]).explore.score_rise_from == 5.0
    # an inconsistency names every override, since any of them may be the one to change
    with pytest.raises(ConfigError, match=r"^--set run.mode='parallel' --set explore.epsilon_at"):
        load_preset("pong-fast", ["run.mode='parallel'", "explore.epsilon_at_stop=0.0"])


def test_a_budget_in_steps_and_one_in_emulator_frames_at_once_is_refused(tmp_path):
    path = tmp_path / "two.toml"
    path.write_text("[run]\nframes = 5000\nemulator_frames = 40000\n")
    with pytest.raises(ConfigError, match=r"steps = 5000 and emulator_frames = 40000 are both"):
        load_preset(path)
    with pytest.raises(ConfigError, match=r"^--set run.frames=5 and --set run.emulator_frames=8"):
        load_preset("pong-fast", ["run.frames=5", "run.emulator_frames=8"])
    # emulator_frames = 0 is no budget: steps alone
    assert load_preset("pong-fast", ["run.steps=5", "run.emulator_frames=0"]).run.steps == 5


def test_a_later_budget_replaces_an_earlier_one_in_the_other_unit(tmp_path):
    path = tmp_path / "frames.toml"
    path.write_text("[run]\nemulator_frames = 40000\n")
    assert load_preset(path).run.emulator_frames == 40000
    # the command line's budget in steps replaces the file's in emulator frames
    steps = load_preset(path, ["run.steps=5000"]).run
    assert (steps.steps, steps.emulator_frames) == (5000, 0)
    # and one in emulator frames replaces a file's in steps (it is converted at start)
    frames = load_preset("pong-fast", ["run.emulator_frames=40000"]).run
    assert (frames.steps, frames.emulator_frames) == (3_000_000, 40000)


def test_a_budget_in_emulator_frames_becomes_agent_steps_by_the_frame_skip():
    preset = load_preset("atari-fast", ["run.emulator_frames=10000000"])
    converted, line = steps_budget(preset, 4)
    assert (converted.run.steps, converted.run.emulator_frames) == (2_500_000, 0)
    assert line == (
        "budget: run.emulator_frames 10,000,000 = run.steps 2,500,000 agent steps (frame skip 4)"
    )
    assert converted == preset.replace("run", steps=2_500_000, emulator_frames=0)
    # rounded up: the budget is at least the emulator frames asked for
    assert steps_budget(preset.replace("run", emulator_frames=10), 4)[0].run.steps == 3
    assert steps_budget(preset.replace("run", emulator_frames=10), 1)[0].run.steps == 10
    unchanged = load_preset("atari-fast")
    assert steps_budget(unchanged, 4) == (unchanged, None)


def test_help_names_the_new_fields_and_the_old_names_it_reads():
    text = describe_fields()
    for name in ("steps", "emulator_frames", "epsilon_steps", "lr_decay_steps"):
        assert f"  {name} " in text, name
    assert "run.frames (now run.steps)" in text
    fields = [line.split()[0] for line in text.splitlines() if line.startswith("  ")]
    assert not {"frames", "epsilon_frames", "lr_decay_frames"} & set(fields)


@pytest.mark.parametrize(
    "overrides, match",
    [
        (["run.stop_reward=inf"], r"max_game_score = 21 with run.stop_reward = inf"),
        (["run.stop_reward=25.0"], r"max_game_score = 21 with run.stop_reward = 25"),
    ],
)
def test_evaluations_cut_short_need_a_stop_reward_a_game_can_reach(overrides, match):
    load_preset("pong-nenv", ["eval.max_game_score=21.0"])  # Pong's 18: accepted
    with pytest.raises(ConfigError, match=match):
        load_preset("pong-nenv", ["eval.max_game_score=21.0", *overrides])


@pytest.mark.parametrize(
    "preset, overrides",
    [("pong-nenv", ["dqn.quantiles=8"]), ("pong-fast", ["dqn.quantiles=8", "dqn.dueling=true"])],
)
def test_quantiles_are_pqns_without_a_dueling_head(preset, overrides):
    assert load_preset("atari-84", ["dqn.quantiles=8"]).dqn.quantiles == 8
    match = r"\[dqn\] quantiles = 8 with algorithm = '.*or quantiles = 0"
    with pytest.raises(ConfigError, match=match):
        load_preset(preset, overrides)
