"""A run resolved once, up front: everything the loops read and nothing they decide.

``make_plan`` takes a preset whose ``auto`` fields are already chosen (``app/auto.py``
does that), resolves its pipeline, probes one env for the observation shape and action
count, and picks the device. The loops, the tracker and the checkpoint only read the plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import torch

from atari_speed.agent.networks import pick_device
from atari_speed.core.config import Preset, steps_budget
from atari_speed.core.errors import ConfigError
from atari_speed.envs.pipeline import env_pipeline, make_env, resolve_game
from atari_speed.envs.wrappers import emulator_sticky, noop_stage


@dataclass(frozen=True)
class Plan:
    """One run's complete configuration."""

    preset: Preset  # with no auto field left
    pipeline: dict[str, Any]  # the resolved wrapper pipeline
    game: str  # the ALE ROM id (pong), or a gymnasium id as given
    obs_shape: tuple[int, ...]  # one observation, (k*C, H, W)
    actions: int
    device: torch.device
    bf16: bool = False  # autocast the network's passes to bf16 (run.precision)
    choices: dict[str, Any] = field(default_factory=dict)  # what auto chose, and why

    @property
    def mode(self) -> str:
        """The loop that runs: parallel with ``run.actors = 0`` is n-env mode (the same
        actor, in this process)."""
        run = self.preset.run
        return "n-env" if run.mode == "parallel" and run.actors == 0 else run.mode

    @property
    def act_bf16(self) -> bool:
        """The actors choose actions under bf16 autocast (run.act_bf16, with bf16)."""
        return self.bf16 and self.preset.run.act_bf16

    @property
    def actor_processes(self) -> int:
        return self.preset.run.actors if self.mode == "parallel" else 0

    @property
    def total_envs(self) -> int:
        """Envs stepped in all: ``run.envs``, times the actors in parallel mode."""
        return self.preset.run.envs * max(self.actor_processes, 1)

    @property
    def stack(self) -> int:
        """Frames per observation (FrameStack's k)."""
        return next((s["k"] for s in self.pipeline["stages"] if s["wrapper"] == "FrameStack"), 1)

    @property
    def frame_skip(self) -> int:
        """Emulator frames per agent step (MaxAndSkip's skip)."""
        return frame_skip(self.pipeline)

    @property
    def frame_shape(self) -> tuple[int, ...]:
        """One frame of an observation, ``(C, H, W)``: what the replay stores per step."""
        return (self.obs_shape[0] // self.stack, *self.obs_shape[1:])


def frame_skip(pipeline: dict[str, Any]) -> int:
    """Emulator frames per agent step of a resolved pipeline: MaxAndSkip's skip, else 1."""
    return next((s["skip"] for s in pipeline["stages"] if s["wrapper"] == "MaxAndSkip"), 1)


def require_ray() -> Any:
    """The ray module, or ConfigError saying how to install it (an optional extra)."""
    try:
        import ray
    except ImportError:
        raise ConfigError(
            "run.engine = 'ray' needs Ray, an optional extra: run `uv run --extra ray "
            "train.py ...` (or `uv sync --extra ray` once)"
        ) from None
    return ray


def check_every_start(pipeline: dict[str, Any], probe: gym.Env) -> None:
    """ConfigError unless ``eval.every_start`` can play this pipeline: a NoopReset stage
    to give the starts, and no sticky actions (a start's greedy game is then one game)."""
    where = f"eval.every_start = true with pipeline {pipeline.get('name', 'inline')!r}"
    if emulator_sticky(probe):
        raise ConfigError(
            f"{where}: its sticky actions make a start's greedy game one draw of many; "
            "set eval.every_start = false (eval.episodes games are played then)"
        )
    try:
        noop_stage(probe)
    except ConfigError as err:
        raise ConfigError(f"{where}: {err}; set eval.every_start = false") from None


def make_plan(preset: Preset, choices: dict[str, Any] | None = None) -> Plan:
    """Resolve ``preset`` into a plan; ConfigError if an ``auto`` field is left unchosen.
    A budget in emulator frames becomes one in agent steps here, where the pipeline's
    frame skip is known."""
    run, env = preset.run, preset.env
    if "auto" in (run.mode, env.backend, run.precision) or run.envs == 0:
        raise ConfigError(
            "run.mode, run.envs, run.precision or env.backend is 'auto': choose them first "
            "(app/auto.py)"
        )
    if run.mode == "parallel" and run.actors and run.engine == "ray":
        require_ray()  # before anything of the run is made
    device = pick_device(run.device)
    # run.amp is deprecated (run.precision replaces it); true still asks bf16 of a CUDA GPU
    amp = run.amp and device.type == "cuda" and torch.cuda.is_bf16_supported()
    bf16 = run.precision == "bf16" or amp
    pipeline = env_pipeline(env)
    probe = make_env(pipeline, env.game)
    obs_shape, actions = tuple(probe.observation_space.shape), int(probe.action_space.n)
    try:
        if preset.eval.every_start:
            check_every_start(pipeline, probe)
    finally:
        probe.close()
    choices = dict(choices or {})
    preset, budget = steps_budget(preset, frame_skip(pipeline))
    if budget:
        print(budget, flush=True)
        choices.setdefault("why", []).append(budget)
    if run.mode == "parallel" and run.actors == 0:
        choices.setdefault("why", []).append(
            "mode n-env: parallel with run.actors = 0 runs the same actor in this process"
        )
    return Plan(
        preset=preset,
        pipeline=pipeline,
        game=resolve_game(env.game),
        obs_shape=obs_shape,
        actions=actions,
        device=device,
        bf16=bf16,
        choices=choices,
    )
