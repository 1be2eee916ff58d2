"""The ``ale`` vector backend: ale-py's native C++ ``AtariVectorEnv``, with the pipeline's
stages mapped onto its options (a stage it cannot express is refused by name), and the
check of where its games start compared with the other backends.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode

from atari_speed.core.errors import ConfigError
from atari_speed.envs.pipeline import resolve_game
from atari_speed.envs.stepping import StepBuffers, VectorEnv
from atari_speed.envs.wrappers import FIRE


class AleVectorEnv(VectorEnv):
    """ale-py's native C++ vector env, configured from the pipeline's stages.

    The stages map onto its options; ClipReward is applied here in numpy so the whole-game
    score stays unclipped. ALE does its own resize (WarpFrame's ``backend`` is not used).
    After a life loss ALE keeps playing without the NOOP, FIRE and action 2 that
    EpisodicLife and FireReset add on the other backends; where the pipeline has both and
    the game's action 1 is FIRE, the env's next action after a lost life is FIRE instead
    of the agent's (``fire_after_life_loss``).
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
        differs = ale_start_differs(pipeline)
        if differs:
            warnings.warn(f"ale backend, pipeline {pipeline['name']!r}: {differs}", stacklevel=2)
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
        self.fire_after_life = fire_after_life_loss(pipeline, self.ale.ale.get_action_set())
        self._fire_next = np.zeros(num_envs, dtype=bool)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        obs, info = self.ale.reset(seed=seed)
        self.buf.game_reward[:] = 0
        self.buf.game_steps[:] = 0
        self._prev_frame[:] = info["episode_frame_number"]
        self._fire_next[:] = False
        return obs, {}

    def step(self, actions: np.ndarray):
        actions = np.asarray(actions, np.int32)
        if self._fire_next.any():
            actions = np.where(self._fire_next, FIRE, actions).astype(np.int32)
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
        self._fire_next[:] = self.fire_after_life & terminated & ~b.game_over
        b.rewards[:] = np.sign(reward) if self.clip else reward
        infos = self._infos(b)
        if "final_obs" in info:
            infos["final_obs"] = info["final_obs"]
        b.game_reward[b.game_over] = 0
        b.game_steps[b.game_over] = 0
        return obs, b.rewards, b.terminated, b.truncated, infos

    def close_extras(self, **kwargs: Any) -> None:
        self.ale.close()


def fire_after_life_loss(pipeline: dict[str, Any], action_set: list[Any]) -> bool:
    """Whether the ale backend must press FIRE after a lost life to play as the pipeline
    does on the other backends: there EpisodicLife's reset after a lost life plays FIRE
    (``after_life = "fire"``) or is followed by FireReset's presses. Without them a game
    such as Breakout waits with the ball held until the agent happens to press FIRE, and
    an agent trained so would be evaluated (play.py, the pipeline backends) on games that
    launch the ball for it."""
    stages = {s["wrapper"]: s for s in pipeline["stages"]}
    wants_fire = len(action_set) >= 3 and action_set[FIRE].name == "FIRE"
    life = stages.get("EpisodicLife")
    if life is None or not wants_fire:
        return False
    return life.get("after_life") == "fire" or "FireReset" in stages


# Pipeline stage -> AtariVectorEnv options. Order: ALE resets with no-ops, skips and
# pools, then resizes and stacks, so stages must come in that order to be expressible.
_ALE_ORDER = ("NoopReset", "MaxAndSkip", "WarpFrame", "FrameStack")


def ale_start_differs(pipeline: dict[str, Any]) -> str | None:
    """Why the ale backend would start games at another emulator frame than the pipeline
    does on the other backends (which play.py and evaluation use), or None.

    ALE's fire reset presses FIRE for one emulator frame; FireReset presses FIRE and then
    action 2 as two agent steps (8 frames with skip 4). Without random no-ops every game
    then starts at a fixed frame phase that differs between the two, and a DQN agent learns
    its phase: pong-fast trained on ale scored +12.8 at ALE's phase, -15.2 at the pipeline's
    (benchmarks/frame_phase.py). NoopReset's random start makes the phase random in both,
    but the classic start (no-ops, then FireReset) still leads to other states than ALE's
    (a FIRE frame, then no-ops), and an agent can learn those too (docs/atari.md, the
    greedy gap). Not warned: a pipeline whose NoopReset has ``style = "ale"`` starts as ALE
    does everywhere.
    """
    names = {s["wrapper"] for s in pipeline["stages"]}
    if "FireReset" in names and "NoopReset" not in names:
        return (
            "FireReset without NoopReset starts every game at another emulator frame phase "
            "than the other backends (and play.py) do, and an agent trained on one phase can "
            "lose on the other; add a NoopReset stage to the pipeline"
        )
    return None


def ale_options(pipeline: dict[str, Any]) -> dict[str, Any]:
    """Map a resolved pipeline onto AtariVectorEnv's options, or refuse naming the stage."""
    stages = {s["wrapper"]: s for s in pipeline["stages"]}
    names = [s["wrapper"] for s in pipeline["stages"]]
    where = f"pipeline {pipeline['name']!r} on the ale backend"
    for name in ("WarpFrame", "FrameStack"):
        if name not in stages:
            raise ConfigError(f"{where}: needs a {name} stage (ALE always resizes and stacks)")
    ordered = [n for n in names if n in _ALE_ORDER]
    if ordered != [n for n in _ALE_ORDER if n in stages]:
        raise ConfigError(
            f"{where}: stage order {' -> '.join(ordered)} cannot be expressed; ALE applies "
            f"{' -> '.join(_ALE_ORDER)}"
        )
    warp = stages["WarpFrame"]
    if not warp["grayscale"]:
        raise ConfigError(
            f"{where}: stage {names.index('WarpFrame') + 1} (WarpFrame) grayscale=false is "
            "not supported (ALE stacks RGB channel-last); use another backend"
        )
    skip = stages.get("MaxAndSkip", {"skip": 1, "max_pool": False})
    return {
        "noop_max": stages.get("NoopReset", {"noop_max": 0})["noop_max"],
        "frameskip": skip["skip"],
        "maxpool": skip["max_pool"],
        "life_loss_info": "EpisodicLife" in stages,
        # ALE's own start: one FIRE frame, then its no-ops (NoopReset's "ale" style).
        # FireReset's FIRE and action 2 after the no-ops it cannot play: the nearest.
        "use_fire_reset": "FireReset" in stages
        or stages.get("NoopReset", {}).get("style") == "ale",
        "img_width": warp["width"],
        "img_height": warp["height"],
        "grayscale": True,
        "stack_num": stages["FrameStack"]["k"],
        "clip": "ClipReward" in stages,
    }
