"""The seven classic Atari wrappers, one job each, on the gymnasium 1.x API.

Semantics follow Stable-Baselines3's ``atari_wrappers`` and gymnasium's
``AtariPreprocessing`` where those agree, and fix the known bugs:

- MaxAndSkip max-pools the last two frames *actually seen* in the step, so a game that ends
  on the first inner frame never returns a pooled frame from the previous step;
- FireReset resets again and returns the fresh observation if the game ends while firing;
- NoopReset resets again if a no-op ends the game;
- EpisodicLife ends the *training* episode on a life loss, while ``GameRecorder`` (added by
  the pipeline builder, not a stage) reports the whole game's unclipped reward and length;
- MaxAndSkip refuses an env that already skips frames (ALE ``v5`` ids).

The pipeline builder (``atari_speed.envs.pipeline``) puts these together from a file.
"""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from atari_speed.core.errors import ConfigError
from atari_speed.envs.imaging import IMAGE_BACKENDS

NOOP = 0
FIRE = 1  # where a game has FIRE as its action 1 (``fires_at_1``)
# In the info of a reset that only went on past a lost life (EpisodicLife): the game and
# what the screen showed before it go on.
GAME_GOES_ON = "game_goes_on"
# In a reset's options: start a new game even where a life was lost and the game could go
# on (EpisodicLife); the vector envs' own resets, full or partial, say it.
NEW_GAME = "new_game"
# In every step's info (``GameRecorder``): the unclipped score of the game so far.
GAME_SCORE = "game_score"
# In a reset's options: the NOOP frames NoopReset plays (after its FIRE frame, style "ale")
# instead of a random number: one start of the game, chosen (benchmarks/starts.py).
NOOPS = "noops"


def fires_at_1(env: gym.Env) -> bool:
    """Whether the game's action 1 is FIRE (Breakout, Qbert, Pong; not Ms. Pac-Man): where
    FireReset and EpisodicLife's ``after_life="fire"`` press it."""
    meanings = env.unwrapped.get_action_meanings()  # type: ignore[attr-defined]
    return len(meanings) >= 3 and meanings[FIRE] == "FIRE"


def _ale(env: gym.Env) -> Any:
    return env.unwrapped.ale  # type: ignore[attr-defined]


class NoopReset(gym.Wrapper):
    """On reset, play a random number of NOOPs so start states vary.

    ``style="classic"`` (baselines', the book's): 1..noop_max NOOP frames. ``style="ale"``:
    a game starts as ale-py's native vector env starts it (``PreprocessedEnv::reset``,
    ale-py 0.12): FIRE for one frame where the game has FIRE, then max(0, U{0..noop_max-1}
    - 1) NOOP frames (U{0..noop_max-1} without FIRE). An agent trained on the ``ale``
    backend learns from those starts; a pipeline with this style gives them on every
    backend, and so in play.py (docs/atari.md, the greedy gap, measures what the classic
    starts cost such an agent).

    Observation, reward and episode end are unchanged. If a NOOP ends the game, the env is
    reset again and the remaining NOOPs are played from the fresh start. A reset's
    ``options[NOOPS]`` plays that many NOOP frames instead of a random number (after the
    FIRE frame where there is one): a game's start, chosen; ``starts()`` lists them.
    """

    def __init__(self, env: gym.Env, noop_max: int = 30, style: str = "classic") -> None:
        super().__init__(env)
        self.noop_max = noop_max
        meanings = env.unwrapped.get_action_meanings()  # type: ignore[attr-defined]
        if meanings[NOOP] != "NOOP":
            raise ConfigError(f"NoopReset: action 0 of this game is {meanings[NOOP]}, not NOOP")
        self.fire = meanings.index("FIRE") if style == "ale" and "FIRE" in meanings else None
        self.style = style

    def starts(self) -> dict[int, float]:
        """Each NOOP count a reset may play (``options[NOOPS]``), with its probability."""
        if self.style == "classic":
            return {n: 1 / self.noop_max for n in range(1, self.noop_max + 1)}
        draws = [max(0, u - 1) if self.fire is not None else u for u in range(self.noop_max)]
        return {n: draws.count(n) / self.noop_max for n in sorted(set(draws))}

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        chosen = (kwargs.get("options") or {}).get(NOOPS)
        if chosen is not None and chosen not in (starts := self.starts()):
            first, last = min(starts), max(starts)
            raise ConfigError(
                f"NoopReset: options[{NOOPS!r}] = {chosen} is not a start of its "
                f"(it plays {first} to {last} NOOP frames)"
            )
        obs, info = self.env.reset(**kwargs)
        rng = self.unwrapped.np_random
        if self.style == "classic":
            noops = int(rng.integers(1, self.noop_max + 1))
        else:
            noops = int(rng.integers(0, self.noop_max))
            if self.fire is not None:
                obs, _, terminated, truncated, info = self.env.step(self.fire)
                if terminated or truncated:
                    obs, info = self.env.reset()
                noops = max(0, noops - 1)
        if chosen is not None:
            noops = chosen
        for _ in range(noops):
            obs, _, terminated, truncated, info = self.env.step(NOOP)
            if terminated or truncated:
                obs, info = self.env.reset()
        return obs, info


def noop_stage(env: gym.Env) -> NoopReset:
    """The env's NoopReset wrapper, or ConfigError when its pipeline has none."""
    while isinstance(env, gym.Wrapper):
        if isinstance(env, NoopReset):
            return env
        env = env.env
    raise ConfigError("its pipeline has no NoopReset stage: every game starts the same")


def emulator_sticky(env: gym.Env) -> float:
    """The probability that ``env``'s emulator repeats the last action in place of the
    new one: the pipeline's ``repeat_action_probability``, or a gym id's own (a -v5 id)."""
    return float(env.unwrapped.ale.getFloat("repeat_action_probability"))  # type: ignore[attr-defined]


class MaxAndSkip(gym.Wrapper):
    """Repeat each action ``skip`` frames and sum the rewards.

    With ``max_pool`` the observation is the pixel-wise max of the last two frames seen in
    this step (Atari sprites flicker between frames); without it, just the last frame (the
    book's "skip without max-pool"). The episode ends as soon as an inner frame ends it.
    """

    def __init__(self, env: gym.Env, skip: int = 4, max_pool: bool = True) -> None:
        super().__init__(env)
        inner_skip = getattr(env.unwrapped, "_frameskip", 1)
        if inner_skip != 1:
            spec = env.unwrapped.spec
            name = spec.id if spec is not None else type(env.unwrapped).__name__
            raise ConfigError(
                f"MaxAndSkip: {name} already skips {inner_skip} frames per step; adding "
                f"skip={skip} would skip {inner_skip} x {skip}. Use a game name such as "
                f"'pong' or a NoFrameskip id, or drop the MaxAndSkip stage."
            )
        self.skip = skip
        self.max_pool = max_pool
        # Without max-pool only the last frame is seen: where the emulator below can play
        # frames without rendering them, the skipped ones are played that way (a quarter of
        # the renders; the same game frame for frame: tests/envs/test_wrappers.py).
        self._step_frames = None if max_pool else frame_stepper(env)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        if self._step_frames is not None:
            return self._step_frames(action, self.skip)
        total = 0.0
        previous = obs = None
        for _ in range(self.skip):
            # Only frames seen in *this* step are ever pooled: a buffer kept across steps
            # would pool a stale frame when the game ends on an early inner frame.
            previous = obs
            obs, reward, terminated, truncated, info = self.env.step(action)
            total += float(reward)
            if terminated or truncated:
                break
        if self.max_pool and previous is not None:
            obs = np.maximum(previous, obs)
        return obs, total, terminated, truncated, info


class EpisodicLife(gym.Wrapper):
    """End the training episode when a life is lost; reset the game only when it is over.

    After a life loss, ``reset`` does not restart the game (unless its ``options`` say
    ``NEW_GAME``, as a vector env's own resets do): it plays one step and returns
    from there, NOOP (``after_life="noop"``, baselines') or, where the game's action 1 is
    FIRE, FIRE (``after_life="fire"``: what the ``ale`` backend plays in the agent's place
    after a lost life, ``atari_speed.envs.ale.fire_after_life_loss``). The reward and
    length the user sees (``info["episode"]``) still cover the whole game, because
    ``GameRecorder`` sits below this wrapper.
    """

    def __init__(self, env: gym.Env, after_life: str = "noop") -> None:
        super().__init__(env)
        self.lives = 0
        self.game_over = True
        self.after_life = FIRE if after_life == "fire" and fires_at_1(env) else NOOP

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.game_over = terminated or truncated
        lives = _ale(self.env).lives()
        if 0 < lives < self.lives:
            terminated = True
        self.lives = lives
        return obs, reward, terminated, truncated, info

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        if self.game_over or (kwargs.get("options") or {}).get(NEW_GAME):
            obs, info = self.env.reset(**kwargs)
        else:
            obs, _, terminated, truncated, info = self.env.step(self.after_life)
            if terminated or truncated:
                obs, info = self.env.reset(**kwargs)
            else:
                info = {**info, GAME_GOES_ON: True}  # for FrameStack(keep_across_lives)
        self.game_over = False
        self.lives = _ale(self.env).lives()
        return obs, info


class FireReset(gym.Wrapper):
    """Press FIRE (then action 2) after reset, for games that wait for it to start.

    If the game ends during these presses, reset again and retry, so the observation
    returned is always that of a live game. In a game whose action 1 is not FIRE this
    wrapper does nothing, so one pipeline file serves every game.
    """

    def __init__(self, env: gym.Env, max_tries: int = 3) -> None:
        super().__init__(env)
        self.active = fires_at_1(env)
        self.max_tries = max_tries

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        if not self.active:
            return obs, info
        for _ in range(self.max_tries):
            ended = False
            for action in (FIRE, 2):
                obs, _, terminated, truncated, info = self.env.step(action)
                if terminated or truncated:
                    ended = True
                    break
            if not ended:
                return obs, info
            obs, info = self.env.reset()
        return obs, info


class WarpFrame(gym.ObservationWrapper):
    """Shrink each frame to ``height x width``, gray (``(H, W)``) or RGB (``(H, W, 3)``).

    ``backend`` names a function in ``atari_speed.envs.imaging.IMAGE_BACKENDS``.
    """

    def __init__(
        self,
        env: gym.Env,
        width: int = 84,
        height: int = 84,
        grayscale: bool = True,
        backend: str = "opencv",
    ) -> None:
        super().__init__(env)
        self.width, self.height, self.grayscale = width, height, grayscale
        self.resize = IMAGE_BACKENDS[backend]
        shape = (height, width) if grayscale else (height, width, 3)
        self.observation_space = spaces.Box(0, 255, shape=shape, dtype=np.uint8)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return self.resize(observation, self.width, self.height, self.grayscale)


class ClipReward(gym.RewardWrapper):
    """Replace the reward by its sign (-1, 0, +1), so one learning rate fits every game."""

    def reward(self, reward: SupportsFloat) -> float:
        return float(np.sign(float(reward)))


class StackedFrames:
    """The last k frames, channel-first, without copying them until someone asks.

    ``np.asarray(obs)`` gives the ``(k * C, H, W)`` uint8 array. The frames are held by
    reference (each one a fresh array from the stage below), so the stack wrapper copies
    no pixels per step and consecutive observations share their frames. ``write_into``
    copies the stack straight into a caller's buffer (a batch row, shared memory).
    """

    __slots__ = ("frames", "shape")
    dtype = np.dtype(np.uint8)

    def __init__(self, frames: tuple[np.ndarray, ...]) -> None:
        self.frames = frames
        channels = frames[0].shape[0]
        self.shape = (channels * len(frames), *frames[0].shape[1:])

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        out = np.empty(self.shape, dtype=np.uint8)
        self.write_into(out)
        return out if dtype is None else out.astype(dtype)

    def write_into(self, out: np.ndarray) -> None:
        channels = self.frames[0].shape[0]
        for i, frame in enumerate(self.frames):
            out[i * channels : (i + 1) * channels] = frame

    @property
    def newest(self) -> np.ndarray:
        """The most recent frame, ``(C, H, W)``: what a frame-deduplicating buffer stores."""
        return self.frames[-1]

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, index: Any) -> np.ndarray:
        return np.asarray(self)[index]


class FrameStack(gym.ObservationWrapper):
    """Observe the last ``k`` frames, channel-first: ``(k, H, W)`` gray, ``(3k, H, W)`` RGB.

    After a reset the older slots are zeros (as ptan's ``wrap_dqn``), except, with
    ``keep_across_lives``, after a reset that only went on past a lost life
    (EpisodicLife's): the frames before it stay, as ale-py's vector env keeps its stack
    there. Observations are ``StackedFrames``: use ``np.asarray(obs)`` for an array.
    """

    def __init__(self, env: gym.Env, k: int = 4, keep_across_lives: bool = False) -> None:
        super().__init__(env)
        self.k = k
        self.keep_across_lives = keep_across_lives
        space = env.observation_space
        assert isinstance(space, spaces.Box) and space.dtype == np.uint8, space
        frame_shape = space.shape if len(space.shape) == 2 else (space.shape[2], *space.shape[:2])
        single = (1, *frame_shape) if len(frame_shape) == 2 else frame_shape
        self._zeros = np.zeros(single, dtype=np.uint8)
        self._zeros.flags.writeable = False
        self._frames: tuple[np.ndarray, ...] = (self._zeros,) * k
        self.observation_space = spaces.Box(
            0, 255, shape=(single[0] * k, *single[1:]), dtype=np.uint8
        )

    @staticmethod
    def _channel_first(frame: np.ndarray) -> np.ndarray:
        return frame[np.newaxis] if frame.ndim == 2 else np.moveaxis(frame, 2, 0)

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        if not (self.keep_across_lives and info.get(GAME_GOES_ON)):
            self._frames = (self._zeros,) * self.k
        return self.observation(obs), info

    def observation(self, observation: np.ndarray) -> StackedFrames:
        self._frames = (*self._frames[1:], self._channel_first(observation))
        return StackedFrames(self._frames)


def frame_stepper(env: gym.Env) -> Any:
    """``GameRecorder.step_frames`` as reached through ``env`` and the layers below it,
    where the recorder plays unseen frames and every layer between passes a step on
    unchanged; else None. A layer that does something with each step (a timing tap) takes
    part by a ``through_frames(stepper)`` method that returns its own stepper."""
    if isinstance(env, GameRecorder):
        return env.step_frames if env.plays_unseen else None
    if not isinstance(env, gym.Wrapper):
        return None
    below = frame_stepper(env.env)
    through = getattr(env, "through_frames", None)
    if below is None or (through is None and type(env).step is not gym.Wrapper.step):
        return None
    return below if through is None else through(below)


def _plays_frames_unseen(env: gym.Env) -> bool:
    """Whether ``env`` is ale-py's emulator itself, as ``make_emulator`` builds it, with the
    members ``GameRecorder.step_frames`` plays it by (not a gym.make id, whose checker
    wrappers sit on it, nor a subclass with a step of its own)."""
    from ale_py.env import AtariEnv

    members = ("ale", "_action_set", "_get_obs", "_get_info")
    return (
        type(env).step is AtariEnv.step
        and isinstance(env, AtariEnv)
        and not getattr(env, "continuous", False)
        and all(hasattr(env, name) for name in members)
    )


class GameRecorder(gym.Wrapper):
    """Not a stage: sits on the emulator and reports each whole game in ``info["episode"]``.

    Every step's info gets the game's unclipped score so far (``GAME_SCORE``); when the
    game itself ends (not a life), the step's info also gets
    ``{"r": unclipped game score, "l": agent steps, "frames": emulator frames}``. Agent
    steps are counted by ``AgentStepCounter`` at the top of the pipeline, because only the
    top sees one call per agent action.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.reward = 0.0
        self.frames = 0
        self.agent_steps = 0
        # (emulator frame, score after it) for each frame that scored: the game's score at
        # any frame, which a greedy evaluation that merges games needs (run.evaluation)
        self.scored: list[tuple[int, float]] = []
        self.plays_unseen = _plays_frames_unseen(env)

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        self.reward, self.frames, self.agent_steps = 0.0, 0, 0
        self.scored = []
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._count(float(reward))
        return obs, reward, terminated, truncated, self._info(info, terminated or truncated)

    def step_frames(
        self, action: Any, frames: int
    ) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """``frames`` steps of ``action`` as one, rewards summed, ending with the game, the
        screen rendered after the last frame only (``plays_unseen``: a frame skip that
        shows its last frame). The frames before it are played on ale-py's emulator
        itself, as its own step plays them, without the render and the info; a game that
        ends on one of them is rendered there, as the emulator's step would."""
        emulator = self.env.unwrapped
        ale, code = emulator.ale, emulator._action_set[action]  # type: ignore[attr-defined]
        total = 0.0
        for _ in range(frames - 1):
            reward = float(ale.act(code))
            self._count(reward)
            total += reward
            if ale.game_over():  # on a frame nobody saw: its screen is the step's
                terminated, truncated = ale.game_over(with_truncation=False), ale.game_truncated()
                info = self._info(emulator._get_info(), True)  # type: ignore[attr-defined]
                return emulator._get_obs(), total, terminated, truncated, info  # type: ignore[attr-defined]
        obs, reward, terminated, truncated, info = self.step(action)
        return obs, total + float(reward), terminated, truncated, info

    def _count(self, reward: float) -> None:
        self.reward += reward
        self.frames += 1
        if reward:
            self.scored.append((self.frames, self.reward))

    def _info(self, info: dict[str, Any], game_ends: bool) -> dict[str, Any]:
        info[GAME_SCORE] = self.reward
        if game_ends:
            info = {
                **info,
                "episode": {"r": self.reward, "l": self.agent_steps, "frames": self.frames},
            }
        return info


class AgentStepCounter(gym.Wrapper):
    """Not a stage: the outermost wrapper, counting agent steps for ``GameRecorder``."""

    def __init__(self, env: gym.Env, recorder: GameRecorder) -> None:
        super().__init__(env)
        self.recorder = recorder

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        # Counted before the inner step so the recorder's report includes this step.
        self.recorder.agent_steps += 1
        return self.env.step(action)
