"""``play.py``: watch, record and score a trained agent.

Play needs only a checkpoint, its network, the env pipeline and the viewer: never the
training stack (the training loops, the learner, ptan, TensorBoard). Those imports, and
torch's, wait until the flags are checked, so ``--help`` and a bad flag answer at once.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from atari_speed.core.config import DEVICES
from atari_speed.core.errors import ConfigError

if TYPE_CHECKING:
    import gymnasium as gym
    import torch

    from atari_speed.app.viewer import Recorder, Window
    from atari_speed.run.checkpoint import Checkpoint

PLAY_EPILOG = """\
With a display, the game is shown in a window (close it, or press q or Esc, to stop);
without one, or with --no-window, it plays headless and still prints the scores.

--record FILE writes the emulator's raw RGB screen (160x210, unscaled) to FILE, .mp4 or
.gif, with or without a window: one frame at the start and one after every agent step
(4 emulator frames in the usual pipelines), at --fps frames a second (30 if --fps is 0;
a GIF at most 50). A GIF is held in memory until the end: use .mp4 for long games.

Ctrl-C, or closing the window, stops play: the video is finished, the games already over
are scored and the one in progress is not. Ctrl-C exits 130.
"""

EMULATOR_FPS = 60  # emulator frames per second of game time, for --max-seconds


def play_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="play.py",
        description="Watch, record and score a trained agent: rebuilds the checkpoint's game\n"
        "and pipeline, plays whole games and prints each game's score (unclipped, across\n"
        "lives) and length.",
        epilog=PLAY_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "path", help="a checkpoint (.pt) or a run directory (then best.pt, else checkpoint.pt)"
    )
    parser.add_argument("--episodes", type=int, default=1, help="games to play (default: 1)")
    parser.add_argument(
        "--epsilon", type=float, default=0.0, help="chance of a random action (default: 0, greedy)"
    )
    parser.add_argument("--seed", type=int, default=0, help="env and exploration seed")
    parser.add_argument("--device", choices=DEVICES, default="auto")
    parser.add_argument(
        "--record", metavar="FILE", type=Path, help="write the game to a video (.mp4 or .gif)"
    )
    parser.add_argument(
        "--fps",
        type=float,
        default=30.0,
        help="agent steps shown a second, and the video's frame rate "
        "(default: 30; 0 = as fast as possible)",
    )
    parser.add_argument(
        "--scale", type=int, default=3, help="window size, times the 160x210 screen (default: 3)"
    )
    parser.add_argument("--no-window", action="store_true", help="never open a window")
    parser.add_argument(
        "--max-seconds",
        type=float,
        metavar="S",
        help="end each game after S seconds of game time (60 emulator frames a second), as "
        "a truncated game: a quick preview or a short clip (default: the emulator's 30 minutes)",
    )
    parser.add_argument(
        "--pipeline",
        metavar="NAME",
        help="play on this wrapper pipeline (a name in wrappers/ or a .toml path) instead of "
        "the one saved in the checkpoint; its observations must fit the network (default: "
        "the checkpoint's)",
    )
    parser.add_argument(
        "--points",
        action="store_true",
        help="also print when each point came: +N or -N, a reward of that sign N agent steps "
        "after the last; and how many games were distinct after their first point. A near-greedy "
        "agent on a deterministic emulator can replay the same points over and over "
        "(docs/pong-fast.md)",
    )
    parser.add_argument(
        "--json", action="store_true", help="print only one JSON object on one line, for scripts"
    )
    return parser


def check_play_flags(args: argparse.Namespace) -> None:
    """Refuse a bad --fps, --scale, --max-seconds or --record before the checkpoint loads."""
    if args.fps < 0:
        raise ConfigError(f"--fps must be 0 (as fast as possible) or more, got {args.fps:g}")
    if args.scale < 1:
        raise ConfigError(f"--scale must be at least 1, got {args.scale}")
    if args.max_seconds is not None and args.max_seconds <= 0:
        raise ConfigError(f"--max-seconds must be more than 0, got {args.max_seconds:g}")
    if args.record is not None:
        from atari_speed.app.viewer import check_video_path

        check_video_path(args.record)


def frame_cap(args: argparse.Namespace) -> int | None:
    """--max-seconds as emulator frames per game; None = the emulator's own limit."""
    return None if args.max_seconds is None else round(args.max_seconds * EMULATOR_FPS)


def open_env(checkpoint: Checkpoint, path: Path, args: argparse.Namespace) -> gym.Env:
    """The checkpoint's game and pipeline, seeded, with --max-seconds' cap, checked to fit
    the checkpoint's network."""
    from atari_speed.envs.pipeline import make_env

    env = make_env(
        args.pipeline or checkpoint.pipeline, checkpoint.game, max_frames=frame_cap(args)
    )
    env.reset(seed=args.seed)
    env.action_space.seed(args.seed)
    check_fits(env, checkpoint, path)
    return env


def check_fits(env: gym.Env, checkpoint: Checkpoint, path: Path) -> None:
    """Refuse a checkpoint whose actions or observation shape the rebuilt env lacks."""
    shape = list(env.observation_space.shape)
    if env.action_space.n != checkpoint.actions or shape != list(checkpoint.obs_shape):
        raise ConfigError(
            f"{path}: checkpoint is for {checkpoint.actions} actions and "
            f"observations {checkpoint.obs_shape}; the rebuilt "
            f"{checkpoint.game} env has {env.action_space.n} and {shape}"
        )


def open_outputs(
    stack: ExitStack, args: argparse.Namespace, path: Path, size: tuple[int, int]
) -> tuple[Recorder | None, Window | None]:
    """The video recorder (with --record) and the window (unless --no-window or none can
    open: then one line on stderr says so), closed when ``stack`` closes."""
    from atari_speed.app.viewer import Recorder, open_window

    recorder = None
    if args.record is not None:
        recorder = stack.enter_context(Recorder(args.record, args.fps or 30.0, size))
    window, why_not = (
        (None, None) if args.no_window else open_window(f"play.py: {path}", args.scale, args.fps)
    )
    if window is not None:
        stack.callback(window.close)
    if why_not is not None:
        then = f"recording to {args.record}" if args.record else "use --record FILE to save a video"
        print(f"play.py: {why_not}: playing without a window; {then}", file=sys.stderr)
    return recorder, window


@dataclass
class Played:
    """What a session of play gave: the finished games and the video, if any."""

    games: list[dict[str, Any]]
    size: tuple[int, int]  # the screen's width and height
    video: Path | None = None
    video_frames: int = 0


def watch(
    env: gym.Env,
    net: torch.nn.Module,
    device: torch.device,
    args: argparse.Namespace,
    path: Path,
    stop: threading.Event,
) -> Played:
    """Play ``args.episodes`` games, showing and recording the raw screen after every step;
    the first Ctrl-C (``stop``), or closing the window, ends play early."""
    import numpy as np

    from atari_speed.agent.policy import play_episodes

    screen = env.unwrapped.ale.getScreenRGB
    height, width = screen().shape[:2]
    with ExitStack() as stack:
        recorder, window = open_outputs(stack, args, path, (width, height))

        def on_step() -> bool:
            frame = screen()
            if recorder is not None:
                recorder.write(frame)
            return window is None or window.show(frame)

        rng = np.random.default_rng(args.seed)
        with ctrl_c_sets(stop):
            games = play_episodes(
                env,
                net,
                device,
                args.episodes,
                args.epsilon,
                rng,
                stop=stop,
                on_step=on_step,
                points=args.points,
            )
    if recorder is None:  # the recorder saved the video as the stack closed
        return Played(games, (width, height))
    return Played(games, (width, height), recorder.saved, recorder.frames)


def print_json(path: Path, checkpoint: Checkpoint, played: Played, pipeline: str) -> None:
    import json

    mean, std = score_stats(played.games)
    result = {
        "checkpoint": str(path),
        "game": checkpoint.game,
        "steps_trained": checkpoint.frames,  # agent steps; episodes count emulator frames
        "pipeline": pipeline,
        "episodes": played.games,
        "mean": mean,
        "std": std,
        "video": None if played.video is None else str(played.video),
    }
    print(json.dumps(result))


def print_text(
    path: Path, checkpoint: Checkpoint, played: Played, args: argparse.Namespace
) -> None:
    cap = frame_cap(args)
    print(f"{path}: {checkpoint.game}, trained {checkpoint.frames:,} agent steps")
    if args.pipeline:
        print(f"played on pipeline {args.pipeline}, not the checkpoint's")
    for i, g in enumerate(played.games, 1):
        cut = cap is not None and g["frames"] >= cap
        note = f" (cut short at {args.max_seconds:g} s)" if cut else ""
        print(f"game {i}: score {g['r']:g}, {g['l']} steps{note}")
        if args.points:
            print("  points: " + " ".join(f"{n:+d}" for n in g["points"]))
    mean, std = score_stats(played.games)
    if played.games:
        print(f"mean {mean:.2f} +- {std:.2f} over {len(played.games)} games")
    if args.points and played.games:
        # from the second point: the first one's steps count the start's random no-ops
        distinct = len({tuple(g["points"][1:]) for g in played.games})
        print(f"{distinct} distinct of {len(played.games)} games (their points after the first)")
    if played.video is not None:
        width, height = played.size
        print(f"video: {played.video}, {played.video_frames} frames of {width}x{height}")


def score_stats(games: list[dict[str, Any]]) -> tuple[float | None, float | None]:
    """Mean and (population) standard deviation of the games' scores; None if none."""
    import statistics

    scores = [g["r"] for g in games]
    if not scores:
        return None, None
    return statistics.fmean(scores), statistics.pstdev(scores)


def play_main(argv: list[str] | None = None) -> int:
    args = play_parser().parse_args(argv)
    stop = threading.Event()
    try:
        from atari_speed.agent.networks import pick_device
        from atari_speed.run.checkpoint import find_checkpoint, load_checkpoint

        check_play_flags(args)
        path = find_checkpoint(Path(args.path))
        checkpoint = load_checkpoint(path)
        env = open_env(checkpoint, path, args)
        device = pick_device(args.device)
        played = watch(env, checkpoint.policy(device), device, args, path, stop)
    except ConfigError as err:
        print(f"play.py: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    if args.json:
        print_json(path, checkpoint, played, args.pipeline or checkpoint.pipeline.get("name"))
    else:
        print_text(path, checkpoint, played, args)
    if len(played.games) < args.episodes:
        why = "interrupted" if stop.is_set() else "window closed"
        print(
            f"play.py: {why} after {len(played.games)} of {args.episodes} games; "
            "the game in progress is not scored",
            file=sys.stderr,
        )
    return 130 if stop.is_set() else 0


@contextmanager
def ctrl_c_sets(stop: threading.Event) -> Iterator[None]:
    """The first Ctrl-C sets ``stop``, so play ends between two steps with the video
    finished and the games so far scored; a second one interrupts at once."""

    def handler(signum: int, frame: Any) -> None:
        stop.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
