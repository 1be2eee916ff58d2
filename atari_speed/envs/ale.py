"""The ``ale`` vector backend: ale-py's native C++ ``AtariVectorEnv``, with the pipeline's
stages mapped onto its options (a stage it cannot play as the other backends do is refused
by name), and the reason, if any, why ``auto`` must not put a pipeline on it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode

from atari_speed.core.errors import ConfigError
from atari_speed.envs.pipeline import resolve_game
from atari_speed.envs.stepping import StepBuffers, VectorEnv, reset_mask
from atari_speed.envs.wrappers import FIRE, NOOP

# In a step's infos where the env played other actions than it was given (the step after
# a lost life): the actions played, which are what a transition must record.
PLAYED = "played_actions"


class AleVectorEnv(VectorEnv):
    """ale-py's native C++ vector env, configured from the pipeline's stages.

    The stages map onto its options (``ale_options``); ClipReward is applied here in numpy
    so the whole-game score stays unclipped. ALE does its own resize (WarpFrame's
    ``backend`` is not used). After a lost life ALE plays on, so the step EpisodicLife's
    reset plays on the other backends (NOOP, or FIRE: ``after_life_action``) is played here
    as the env's next step, in place of the agent's action; that step's infos carry the
    actions played under ``PLAYED``, for the transition to record. That one step is the
    difference from the other backends: they play it inside the reset, unseen.
    """

    def __init__(
        self, pipeline: dict[str, Any], game: str, num_envs: int, num_threads: int = 0
    ) -> None:
        from ale_py.vector_env import AtariVectorEnv

        self.pipeline = pipeline
        self.backend = "ale"
        self.stage_timer = None  # ALE's native stages cannot be timed one by one
        rom = resolve_game(game)
        if "-v" in rom:
            raise ConfigError(f"ale backend: give a game name such as 'pong', not the id {rom!r}")
        options = ale_options(pipeline)
        self.clip = options.pop("clip")
        self.skip = options["frameskip"]
        self.ale = AtariVectorEnv(
            rom,
            num_envs,
            num_threads=num_threads,
            autoreset_mode=AutoresetMode.SAME_STEP,
            repeat_action_probability=pipeline["repeat_action_probability"],
            episodic_life=False,
            reward_clipping=False,
            **options,
        )
        self._setup(num_envs, self.ale.single_observation_space, self.ale.single_action_space.n)
        self.buf = StepBuffers.over(
            bytearray(StepBuffers.nbytes(num_envs, self.single_observation_space.shape)),
            num_envs,
            self.single_observation_space.shape,
        )
        self._prev_frame = np.zeros(num_envs, dtype=np.int64)
        self.after_life = after_life_action(pipeline, self.ale.ale.get_action_set())
        self._after_life_next = np.zeros(num_envs, dtype=bool)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        # ALE's own reset takes the same reset_mask; checked here as the other backends do
        mask = reset_mask(options, self.num_envs)
        obs, info = self.ale.reset(seed=seed, options=options)
        if mask is None:
            mask = np.ones(self.num_envs, dtype=bool)
        self.buf.game_reward[mask] = 0
        self.buf.game_steps[mask] = 0
        self._prev_frame[mask] = info["episode_frame_number"][mask]
        self._after_life_next[mask] = False
        return obs, {}

    def step(self, actions: np.ndarray):
        actions = np.asarray(actions, np.int32)
        replaced = self._after_life_next.any()
        if replaced:
            actions = np.where(self._after_life_next, self.after_life, actions).astype(np.int32)
        obs, reward, terminated, truncated, info = self.ale.step(actions)
        b = self.buf
        b.game_reward += reward
        b.game_steps += 1
        frame = info["episode_frame_number"]
        # A life loss ends the training episode but the game plays on; a finished game
        # restarts, which shows as the episode frame counter going back.
        b.game_over[:] = truncated | (terminated & (frame < self._prev_frame))
        b.game_frames[:] = self._prev_frame + self.skip
        self._prev_frame[:] = frame
        b.terminated[:], b.truncated[:] = terminated, truncated
        if self.after_life is not None:
            self._after_life_next[:] = terminated & ~b.game_over
        b.rewards[:] = np.sign(reward) if self.clip else reward
        infos = self._infos(b)
        if replaced:
            infos[PLAYED] = actions.astype(np.int64)
        if "final_obs" in info:
            infos["final_obs"] = info["final_obs"]
        b.game_reward[b.game_over] = 0
        b.game_steps[b.game_over] = 0
        return obs, b.rewards, b.terminated, b.truncated, infos

    def close_extras(self, **kwargs: Any) -> None:
        self.ale.close()


def after_life_action(pipeline: dict[str, Any], action_set: list[Any]) -> int | None:
    """The action the ale backend plays after a lost life in place of the agent's, as
    EpisodicLife's reset plays it on the other backends: FIRE where ``after_life = "fire"``
    and the game's action 1 is FIRE (without it a game such as Breakout waits with the ball
    held), else NOOP; None without EpisodicLife (a lost life is no reset there)."""
    stages = {s["wrapper"]: s for s in pipeline["stages"]}
    life = stages.get("EpisodicLife")
    if life is None:
        return None
    fires = len(action_set) >= 3 and action_set[FIRE].name == "FIRE"
    return FIRE if life.get("after_life") == "fire" and fires else NOOP


# Pipeline stage -> AtariVectorEnv options. Order: ALE resets with no-ops, skips and
# pools, then resizes and stacks, so stages must come in that order to be expressible.
_ALE_ORDER = ("NoopReset", "MaxAndSkip", "WarpFrame", "FrameStack")
# Every stage ALE can play as the pipeline backends do (FireReset is refused by name).
_ALE_STAGES = (*_ALE_ORDER, "EpisodicLife", "ClipReward", "FireReset")


def ale_start_differs(pipeline: dict[str, Any]) -> str | None:
    """Why the ale backend cannot play ``pipeline`` as the other backends (and so play.py
    and the evaluation) do, or None: ``ale_options``'s refusal. ``auto`` sets ale aside
    for such a pipeline."""
    try:
        ale_options(pipeline)
    except ConfigError as err:
        return str(err)
    return None


def ale_options(pipeline: dict[str, Any]) -> dict[str, Any]:
    """Map a resolved pipeline onto AtariVectorEnv's options, or refuse naming the stage
    that ALE would play otherwise than the other backends do.

    ALE starts a game with one FIRE frame where the game has FIRE, then its no-ops
    (NoopReset's ``style = "ale"``); it cannot play the classic no-ops (1..noop_max, no
    FIRE) or FireReset's FIRE and action 2 after them, and its frame stack goes on across
    a lost life (FrameStack's ``keep_across_lives``). Starting games elsewhere is not a
    detail: pong-fast trained on ALE's start scored +12.8 there and -15.2 from FireReset's
    (docs/log/benchmarks.md: frame_phase.py).
    """
    stages = {s["wrapper"]: s for s in pipeline["stages"]}
    names = [s["wrapper"] for s in pipeline["stages"]]
    where = f"pipeline {pipeline['name']!r} on the ale backend"

    def stage(name: str) -> str:
        return f"{where}: stage {names.index(name) + 1} ({name})"

    for name in ("WarpFrame", "FrameStack"):
        if name not in stages:
            raise ConfigError(f"{where}: needs a {name} stage (ALE always resizes and stacks)")
    ordered = [n for n in names if n in _ALE_ORDER]
    if ordered != [n for n in _ALE_ORDER if n in stages]:
        raise ConfigError(
            f"{where}: stage order {' -> '.join(ordered)} cannot be expressed; ALE applies "
            f"{' -> '.join(_ALE_ORDER)}"
        )
    if (
        "EpisodicLife" in stages
        and "MaxAndSkip" in stages
        and names.index("EpisodicLife") < names.index("MaxAndSkip")
    ):
        raise ConfigError(
            f"{stage('EpisodicLife')} before MaxAndSkip: ALE ends a step's frames at a lost "
            "life only after them; put EpisodicLife after MaxAndSkip or use another backend"
        )
    for name in names:
        if name not in _ALE_STAGES:
            raise ConfigError(f"{stage(name)} has no counterpart in ALE; use another backend")
    warp = stages["WarpFrame"]
    if not warp["grayscale"]:
        raise ConfigError(
            f"{stage('WarpFrame')} grayscale=false is not supported (ALE stacks RGB "
            "channel-last); use another backend"
        )
    noop = stages.get("NoopReset")
    if noop is not None and noop["style"] != "ale":
        raise ConfigError(
            f"{stage('NoopReset')} style={noop['style']!r}: ALE starts a game with one FIRE "
            'frame, then its no-ops; set style = "ale" or use another backend'
        )
    if "FireReset" in stages:
        raise ConfigError(
            f"{stage('FireReset')}: ALE cannot press FIRE and action 2 after its no-ops; "
            'drop it for NoopReset style = "ale" (one FIRE frame first) or use another backend'
        )
    if "EpisodicLife" in stages and not stages["FrameStack"]["keep_across_lives"]:
        raise ConfigError(
            f"{stage('FrameStack')} keep_across_lives=false: ALE's stack goes on across a "
            "lost life; set keep_across_lives = true or use another backend"
        )
    skip = stages.get("MaxAndSkip", {"skip": 1, "max_pool": False})
    return {
        "noop_max": noop["noop_max"] if noop is not None else 0,
        "frameskip": skip["skip"],
        "maxpool": skip["max_pool"],
        "life_loss_info": "EpisodicLife" in stages,
        "use_fire_reset": noop is not None,  # ALE's start: one FIRE frame, then no-ops
        "img_width": warp["width"],
        "img_height": warp["height"],
        "grayscale": True,
        "stack_num": stages["FrameStack"]["k"],
        "clip": "ClipReward" in stages,
    }
