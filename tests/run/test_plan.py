"""A run's plan: a budget in emulator frames becomes one in agent steps, by the frame skip
of the run's own pipeline."""

from __future__ import annotations

from atari_speed.core.config import load_preset
from atari_speed.run.plan import frame_skip, make_plan

SKIP_2 = {
    "stage": [
        {"wrapper": "MaxAndSkip", "skip": 2},
        {"wrapper": "WarpFrame", "width": 42, "height": 42},
        {"wrapper": "FrameStack", "k": 2},
    ]
}


def test_the_plan_converts_emulator_frames_with_its_pipelines_frame_skip(capsys):
    preset = load_preset("pong-nenv", ["run.emulator_frames=1001", "run.device='cpu'"])
    plan = make_plan(preset)  # the book pipeline: skip 4
    assert (plan.frame_skip, plan.preset.run.steps, plan.preset.run.emulator_frames) == (4, 251, 0)
    line = "budget: run.emulator_frames 1,001 = run.steps 251 agent steps (frame skip 4)"
    assert plan.choices["why"] == [line] and line in capsys.readouterr().out
    skip_2 = make_plan(preset.replace("env", pipeline=SKIP_2))
    assert (skip_2.frame_skip, skip_2.preset.run.steps) == (2, 501)
    # a budget in steps is left as it is, and said nowhere
    steps = make_plan(load_preset("pong-nenv", ["run.steps=700", "run.device='cpu'"]))
    assert steps.preset.run.steps == 700 and "why" not in steps.choices


def test_a_pipeline_without_frame_skip_has_one_emulator_frame_per_step():
    assert frame_skip({"stages": [{"wrapper": "FrameStack", "k": 4}]}) == 1


def test_the_actors_act_in_bf16_only_when_asked_and_the_run_is_in_bf16():
    def plan(*overrides: str) -> bool:
        preset = load_preset("pong-nenv", ["run.steps=700", "run.device='cpu'", *overrides])
        return make_plan(preset).act_bf16

    assert plan("run.precision='bf16'", "run.act_bf16=true")
    assert not plan("run.precision='bf16'")  # off by default
    assert not plan("run.precision='fp32'", "run.act_bf16=true")  # fp32 acts in fp32
