"""Declarative wrapper pipelines: read a TOML file, check it, build the env.

A pipeline file (``wrappers/book.toml``)::

    description = "..."
    image_backend = "opencv"          # opencv | pillow | numpy
    repeat_action_probability = 0.0   # sticky actions; 0 = off, as NoFrameskip-v4

    [[stage]]
    wrapper = "MaxAndSkip"
    skip = 4
    max_pool = true

Stages are applied in file order, the first one closest to the emulator. Every check runs
when the file is read, before any env exists, and fails with a ``ConfigError`` naming the
file, the stage and what is allowed. ``resolve_pipeline`` returns a plain JSON-able dict
with every default filled in: what runs and checkpoints carry.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym

from atari_speed.core.errors import ConfigError
from atari_speed.envs import wrappers as w
from atari_speed.envs.imaging import IMAGE_BACKENDS

if TYPE_CHECKING:
    from atari_speed.core.config import EnvConfig

PIPELINE_DIR = Path(__file__).resolve().parents[2] / "wrappers"
MAX_EPISODE_FRAMES = 108_000  # 30 minutes of play, as ALE's registered ids


@dataclass(frozen=True)
class Param:
    """One stage parameter: its type, default, and allowed range or choices."""

    type: type
    default: Any
    doc: str
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()

    def allowed(self) -> str:
        if self.choices:
            return " | ".join(self.choices)
        if self.type is bool:
            return "true | false"
        return f"{self.type.__name__} in [{self.low}, {self.high}]"


@dataclass(frozen=True)
class StageSpec:
    """A registered wrapper: the class and its parameters."""

    cls: Callable[..., gym.Env]
    params: dict[str, Param] = field(default_factory=dict)


_SIZE = {"low": 8, "high": 512}
STAGES: dict[str, StageSpec] = {
    "NoopReset": StageSpec(
        w.NoopReset,
        {
            "noop_max": Param(int, 30, "most NOOPs played on reset", 1, 1000),
            "style": Param(
                str,
                "classic",
                "classic: 1..noop_max NOOPs; ale: ale-py's vector env's start (one FIRE "
                "frame where the game has FIRE, then its NOOPs)",
                choices=("classic", "ale"),
            ),
        },
    ),
    "MaxAndSkip": StageSpec(
        w.MaxAndSkip,
        {
            "skip": Param(int, 4, "emulator frames per agent step", 1, 16),
            "max_pool": Param(bool, True, "max over the last two frames of the step"),
        },
    ),
    "EpisodicLife": StageSpec(
        w.EpisodicLife,
        {
            "after_life": Param(
                str,
                "noop",
                "the step played after a lost life: noop, or fire (where action 1 is FIRE)",
                choices=("noop", "fire"),
            )
        },
    ),
    "FireReset": StageSpec(w.FireReset),
    "WarpFrame": StageSpec(
        w.WarpFrame,
        {
            "width": Param(int, 84, "output width in pixels", **_SIZE),
            "height": Param(int, 84, "output height in pixels", **_SIZE),
            "grayscale": Param(bool, True, "gray (H, W) instead of RGB (H, W, 3)"),
            "backend": Param(
                str,
                None,
                "image backend; default: the pipeline's image_backend",
                choices=tuple(IMAGE_BACKENDS),
            ),
        },
    ),
    "ClipReward": StageSpec(w.ClipReward),
    "FrameStack": StageSpec(
        w.FrameStack,
        {
            "k": Param(int, 4, "frames stacked", 1, 16),
            "keep_across_lives": Param(
                bool, False, "keep the frames across a lost life (as ale-py's vector env)"
            ),
        },
    ),
}

# (earlier, later, why): if both stages are present, `earlier` must come first.
ORDER_RULES: tuple[tuple[str, str, str], ...] = (
    ("MaxAndSkip", "WarpFrame", "it pools raw emulator frames"),
    ("MaxAndSkip", "FrameStack", "pooling a stack would mix frames of different times"),
    ("WarpFrame", "FrameStack", "it resizes single frames, not stacks"),
)

TOP_LEVEL: dict[str, Param] = {
    "description": Param(str, "", "one line saying what the pipeline is for"),
    "image_backend": Param(
        str, "opencv", "WarpFrame's image backend", choices=tuple(IMAGE_BACKENDS)
    ),
    "repeat_action_probability": Param(
        float, 0.0, "sticky actions: chance the emulator repeats the last action", 0.0, 1.0
    ),
}


def _check_value(where: str, name: str, value: Any, param: Param) -> Any:
    """Return ``value`` if it fits ``param``, else raise a ConfigError naming ``where``."""
    expected = param.type
    ok = isinstance(value, expected) and not (expected is not bool and isinstance(value, bool))
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        value, ok = float(value), True
    if not ok:
        raise ConfigError(
            f"{where}: {name} = {value!r} has type {type(value).__name__}; "
            f"expected {param.allowed()}"
        )
    if param.choices and value not in param.choices:
        raise ConfigError(f"{where}: {name} = {value!r} is not one of {param.allowed()}")
    if param.low is not None and not (param.low <= value <= param.high):
        raise ConfigError(
            f"{where}: {name} = {value!r} is out of range; expected {param.allowed()}"
        )
    return value


def _resolve_stage(source: str, index: int, raw: Any, image_backend: str) -> dict[str, Any]:
    where = f"{source}: stage {index + 1}"
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: expected a table with a 'wrapper' key, got {raw!r}")
    name = raw.get("wrapper")
    if name not in STAGES:
        close = difflib.get_close_matches(str(name), STAGES, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise ConfigError(f"{where}: unknown wrapper {name!r}{hint}; known: {', '.join(STAGES)}")
    where = f"{where} ({name})"
    spec = STAGES[name]
    resolved: dict[str, Any] = {"wrapper": name}
    for key, value in raw.items():
        if key == "wrapper":
            continue
        if key not in spec.params:
            allowed = ", ".join(spec.params) or "none"
            raise ConfigError(f"{where}: unknown parameter {key!r}; allowed: {allowed}")
        resolved[key] = _check_value(where, key, value, spec.params[key])
    for key, param in spec.params.items():
        resolved.setdefault(key, param.default)
    if name == "WarpFrame" and resolved["backend"] is None:
        resolved["backend"] = image_backend
    return resolved


def env_pipeline(env: EnvConfig) -> dict[str, Any]:
    """A preset's pipeline, resolved with its ``env.image_backend`` (empty: the file's)."""
    return resolve_pipeline(env.pipeline, env.image_backend or None)


def resolve_pipeline(
    pipeline: str | Path | Mapping[str, Any], image_backend: str | None = None
) -> dict[str, Any]:
    """Read and check a pipeline, returning a plain dict with every default filled in.

    ``pipeline`` is a name in ``wrappers/`` (``"book"``), a path to a TOML file, or a dict
    of the same shape (a resolved pipeline resolves to itself). ``image_backend``, if
    given, replaces the file's (stages that name their own backend keep it).
    """
    if isinstance(pipeline, Mapping):
        source, raw, name = "<pipeline dict>", dict(pipeline), str(pipeline.get("name", "inline"))
    else:
        path = Path(pipeline)
        if path.suffix != ".toml" and not path.exists():
            path = PIPELINE_DIR / f"{pipeline}.toml"
        if not path.is_file():
            known = sorted(p.stem for p in PIPELINE_DIR.glob("*.toml"))
            raise ConfigError(
                f"pipeline {str(pipeline)!r}: no such file; give a path or one of: "
                f"{', '.join(known)}"
            )
        source, name = str(path), path.stem
        try:
            raw = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as err:
            raise ConfigError(f"{source}: not valid TOML: {err}") from None
    raw.pop("name", None)
    if image_backend is not None:
        raw["image_backend"] = image_backend
    stages = raw.pop("stages", raw.pop("stage", []))
    if not isinstance(stages, list):
        raise ConfigError(f"{source}: 'stage' must be a list of [[stage]] tables")
    resolved: dict[str, Any] = {"name": name}
    for key, value in raw.items():
        if key not in TOP_LEVEL:
            raise ConfigError(
                f"{source}: unknown key {key!r}; allowed: {', '.join(TOP_LEVEL)}, stage"
            )
        resolved[key] = _check_value(source, key, value, TOP_LEVEL[key])
    for key, param in TOP_LEVEL.items():
        resolved.setdefault(key, param.default)
    resolved["stages"] = [
        _resolve_stage(source, i, stage, resolved["image_backend"])
        for i, stage in enumerate(stages)
    ]
    _check_order(source, [s["wrapper"] for s in resolved["stages"]])
    return resolved


def _check_order(source: str, names: list[str]) -> None:
    for name in set(names):
        if names.count(name) > 1:
            raise ConfigError(
                f"{source}: wrapper {name} appears {names.count(name)} times; "
                "each stage may appear once"
            )
    for earlier, later, why in ORDER_RULES:
        if earlier in names and later in names and names.index(earlier) > names.index(later):
            raise ConfigError(
                f"{source}: stage {names.index(earlier) + 1} ({earlier}) must come before "
                f"stage {names.index(later) + 1} ({later}): {why}"
            )


# ---------------------------------------------------------------- games


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower().replace("-", "_")


def quiet_ale() -> Any:
    """ale_py, its logging set to errors only: without this every emulator prints a
    two-line version banner (once per process, a dozen times in a run with workers).
    Every env is built after a ``resolve_game``, which calls this."""
    import ale_py

    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
    return ale_py


def resolve_game(game: str) -> str:
    """Return the ALE ROM id for ``game`` ("pong", "Pong", "MsPacman", "ms_pacman").

    A gymnasium id (anything with ``-v``, such as ``PongNoFrameskip-v4``) is returned as
    is, after checking it is registered.
    """
    ale_py = quiet_ale()
    if "-v" in game:
        if game not in gym.registry:
            close = difflib.get_close_matches(game, list(gym.registry), n=3)
            raise ConfigError(f"game {game!r}: no such gymnasium id; close: {close}")
        return game
    rom = _snake(game)
    roms = ale_py.roms.get_all_rom_ids()
    if rom not in roms:
        close = difflib.get_close_matches(rom, roms, n=4)
        hint = f"did you mean {', '.join(close)}?" if close else "see ale_py.roms.get_all_rom_ids()"
        raise ConfigError(f"game {game!r}: unknown Atari game; {hint}")
    return rom


def make_emulator(
    game: str, repeat_action_probability: float = 0.0, max_frames: int | None = None
) -> gym.Env:
    """The bare emulator: no frame skip, RGB frames, minimal action set; a game ends,
    truncated, after ``max_frames`` emulator frames (None: MAX_EPISODE_FRAMES).

    For a ROM id this equals ``<Game>NoFrameskip-v4`` (with sticky actions only if asked
    for), built without gym.make's checker wrappers, which cost time on every step.
    """
    from ale_py.env import AtariEnv

    game = resolve_game(game)
    if "-v" in game:
        return gym.make(game, max_num_frames_per_episode=max_frames or MAX_EPISODE_FRAMES)
    return AtariEnv(
        game=game,
        frameskip=1,
        repeat_action_probability=repeat_action_probability,
        full_action_space=False,
        max_num_frames_per_episode=max_frames or MAX_EPISODE_FRAMES,
    )


# ---------------------------------------------------------------- builder


def build_stages(
    env: gym.Env, stages: list[dict[str, Any]], tap: Callable[[gym.Env, str], gym.Env] | None
) -> gym.Env:
    """Apply resolved stages in order; ``tap(env, label)`` may wrap each layer for timing."""
    if tap is not None:
        env = tap(env, "emulator")
    for stage in stages:
        params = {k: v for k, v in stage.items() if k != "wrapper"}
        env = STAGES[stage["wrapper"]].cls(env, **params)
        if tap is not None:
            env = tap(env, stage["wrapper"])
    return env


def make_env(
    pipeline: str | Path | Mapping[str, Any],
    game: str,
    seed: int | None = None,
    *,
    tap: Callable[[gym.Env, str], gym.Env] | None = None,
    max_frames: int | None = None,
) -> gym.Env:
    """Build one env: emulator, then the pipeline's stages, with whole-game statistics.

    When a game ends, that step's ``info["episode"]`` holds ``r`` (unclipped score of
    the whole game, across lives), ``l`` (agent steps) and ``frames`` (emulator frames).
    ``tap`` is for profiling: it wraps the emulator and each stage (see ``timing``).
    ``max_frames``: a game's most emulator frames, after which the emulator ends it as
    truncated, so every stage sees an ordinary game end (None: MAX_EPISODE_FRAMES).

    With ``seed`` the env is reset once here, seeded: that reloads the ROM, which costs
    more than the rest of the making, and only sticky actions draw the emulator's random
    numbers.
    """
    resolved = resolve_pipeline(pipeline)
    emulator = make_emulator(game, resolved["repeat_action_probability"], max_frames)
    recorder = w.GameRecorder(emulator)
    env = w.AgentStepCounter(build_stages(recorder, resolved["stages"], tap), recorder)
    env.pipeline = resolved  # type: ignore[attr-defined]
    if seed is not None:
        env.reset(seed=seed)
        env.action_space.seed(seed)
    return env
