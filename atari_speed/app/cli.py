"""Command-line entry points: ``train.py`` and ``play.py``."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from atari_speed.core.config import DEVICES, MODES, describe_fields, load_preset, load_variants
from atari_speed.core.errors import ConfigError, WorkerError

TRAIN_EPILOG = """\
presets: names in presets/ (pong-baseline, pong-nenv, pong-parallel, pong-fast, breakout)
or a path to a TOML file. Every field below can be set with --set section.key=value
(values are TOML: --set dqn.double=true --set env.pipeline='"fast"').

Output goes to runs/<date>-<preset>-<mode>/: TensorBoard logs (tensorboard --logdir runs),
summary.json, checkpoint.pt (every run.checkpoint_every frames and on exit, Ctrl-C and
kill included) and best.pt (the best model so far). --resume continues frames, epsilon,
optimizer and statistics from a checkpoint.pt; the replay buffer is refilled.

preset fields:
"""


def train_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="train.py",
        description="Train a DQN agent on an Atari game, as fast as this machine allows.",
        epilog=TRAIN_EPILOG + describe_fields(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--preset",
        default="pong-fast",
        help="preset name in presets/ or a TOML path (default: pong-fast)",
    )
    parser.add_argument("--mode", choices=MODES, help="override run.mode")
    parser.add_argument(
        "--envs",
        type=_envs_arg,
        help="override run.envs (envs, or per actor); auto = chosen from the machine",
    )
    parser.add_argument("--frames", type=int, help="override run.frames (agent steps, all envs)")
    parser.add_argument("--device", choices=DEVICES, help="override run.device")
    parser.add_argument("--seed", type=int, help="override run.seed")
    parser.add_argument(
        "--run-dir",
        type=Path,
        help="where logs and checkpoints go (default: runs/<date>-<preset>-<mode>); for "
        "an ablation preset, the parent of one directory per variant",
    )
    parser.add_argument("--resume", metavar="CHECKPOINT", help="continue from a checkpoint.pt")
    parser.add_argument(
        "--check",
        action="store_true",
        help="print what this machine has (cores, memory, GPU, torch threads, env backends "
        "that work, with a few seconds of measurement) and the configuration the preset's "
        "auto fields would get; no training",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="time every stage of every process; prints a table at the end and writes "
        "profile.json and TensorBoard profile/<stage> (sets run.profile)",
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override any preset field (repeatable)",
    )
    return parser


def _envs_arg(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number or auto") from None


def check_main(preset_name: str, overrides: list[str]) -> int:
    """``train.py --check``: the machine, and what auto would choose for the preset."""
    from atari_speed.app.auto import AUTO, calibrate, choose, detect

    preset = load_preset(preset_name, overrides)
    machine = detect()
    print(f"checking this machine with {preset.name}'s pipeline and network (a few seconds)...")
    calibrate(machine, preset)
    print("\n".join(machine.describe()))
    # Show the choice for every auto field, even ones this preset fixes.
    probe = preset.replace("run", mode=AUTO, envs=0).replace("env", backend=AUTO)
    _, choices = choose(probe, machine)
    print(
        f"\nauto would choose: mode {choices['mode']}, {choices['envs']} envs, "
        f"backend {choices['backend']}, learner threads {choices['learner_threads'] or 'all'}"
    )
    for line in choices["why"]:
        print(f"  {line}")
    fixed = [
        f"{key} = {value!r}"
        for key, value, auto in (
            ("run.mode", preset.run.mode, preset.run.mode == AUTO),
            ("run.envs", preset.run.envs, preset.run.envs == 0),
            ("env.backend", preset.env.backend, preset.env.backend == AUTO),
        )
        if not auto
    ]
    if fixed:
        print(f"{preset.name} fixes {', '.join(fixed)}: those stay as set")
    return 0


def train_main(argv: list[str] | None = None) -> int:
    args = train_parser().parse_args(argv)
    flags = {
        "mode": "run.mode",
        "envs": "run.envs",
        "frames": "run.frames",
        "device": "run.device",
        "seed": "run.seed",
    }
    overrides = list(args.overrides)
    if args.profile:
        overrides.append("run.profile=true")
    for flag, key in flags.items():
        value = getattr(args, flag)
        if value is not None:
            overrides.append(f"{key}={value!r}" if isinstance(value, str) else f"{key}={value}")
    try:
        from atari_speed.run.training import train

        if args.check:
            return check_main(args.preset, overrides)
        variants = load_variants(args.preset, overrides)
        if variants:
            return _ablation(args, variants)
        preset = load_preset(args.preset, overrides)
        summary = train(preset, args.run_dir, args.resume)
    except ConfigError as err:
        print(f"train.py: error: {err}", file=sys.stderr)
        return 2
    except WorkerError as err:
        print(f"train.py: error: {str(err).splitlines()[0]}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as interrupt:
        if not interrupt.args:  # before training began (calibration, setup)
            print("\ninterrupted before training started; nothing saved", file=sys.stderr)
            return 130
        summary = interrupt.args[0]
        print(
            f"\ninterrupted at {summary.get('frames', '?')} frames; checkpoint.pt saved",
            file=sys.stderr,
        )
        _print_profile(summary)
        return 130
    print(outcome(summary))
    _print_profile(summary)
    return 0


def _print_profile(summary: dict[str, Any]) -> None:
    """The per-process profile tables, when the run was profiled."""
    if summary.get("profile"):
        from atari_speed.core.timing import format_profile

        print(format_profile(summary["profile"]))


def outcome(summary: dict[str, Any]) -> str:
    """One line: frames, time, FPS, games, best smoothed reward, solved or not."""
    from atari_speed.run.training import fmt_duration

    verdict = (
        f"solved in {fmt_duration(summary['solved_at_seconds'])} "
        f"({summary['solved_at_frames']:,} frames)"
        if summary["solved"]
        else "not solved"
    )
    best = summary["best_avg_reward"]
    return (
        f"{summary['frames']:,} frames in {fmt_duration(summary['seconds'])} "
        f"({summary['fps']:.0f} FPS), {summary['episodes']} games, best smoothed reward "
        f"{'none (no game finished)' if best is None else f'{best:+.1f}'}: {verdict}"
    )


def _ablation(args: argparse.Namespace, variants: list) -> int:
    """Every variant in turn, then the table (ablation.md/.json/.png in the parent dir)."""
    from atari_speed.app.ablation import run_ablation

    if args.resume:
        raise ConfigError(
            f"--resume: {args.preset} is an ablation preset, which cannot resume; rerun it, "
            "or resume one variant's checkpoint.pt with a preset of that variant's fields "
            "(its summary.json lists them under 'preset')"
        )
    try:
        table, rows = run_ablation(Path(args.preset).stem, variants, args.run_dir)
    except KeyboardInterrupt as interrupt:
        print(
            f"\nablation interrupted; the table so far is in {interrupt.args[0]}", file=sys.stderr
        )
        return 130
    print(
        "\n" + table + f"\nsaved in {Path(rows[0]['run_dir']).parent}: ablation.md, "
        "ablation.json, ablation.png; tensorboard --logdir that directory overlays the runs"
    )
    return 0


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


def play_main(argv: list[str] | None = None) -> int:
    args = play_parser().parse_args(argv)
    stop = threading.Event()
    try:
        import json
        import statistics

        import numpy as np

        from atari_speed.agent.learner import pick_device
        from atari_speed.app.viewer import Recorder, open_window
        from atari_speed.envs.pipeline import make_env
        from atari_speed.run.training import load_checkpoint, play_episodes, policy_of

        check_play_flags(args)
        path = Path(args.path)
        if path.is_dir():
            path = next(
                (p for p in (path / "best.pt", path / "checkpoint.pt") if p.exists()),
                path / "checkpoint.pt",
            )
        data = load_checkpoint(path)
        env = make_env(data["pipeline"], data["game"])
        cap = None if args.max_seconds is None else round(args.max_seconds * 60)
        if cap is not None:
            # The emulator itself then ends the game, as truncated, so every stage (episodic
            # life, the game recorder) sees an ordinary game end. ALE reads this setting when
            # the ROM loads, which the first, seeded reset does.
            env.unwrapped.ale.setInt("max_num_frames_per_episode", cap)
        env.reset(seed=args.seed)
        env.action_space.seed(args.seed)
        if env.action_space.n != data["actions"] or list(env.observation_space.shape) != list(
            data["obs_shape"]
        ):
            raise ConfigError(
                f"{path}: checkpoint is for {data['actions']} actions and "
                f"observations {data['obs_shape']}; the rebuilt "
                f"{data['game']} env has {env.action_space.n} and "
                f"{list(env.observation_space.shape)}"
            )
        device = pick_device(args.device)
        net = policy_of(data, device)

        screen = env.unwrapped.ale.getScreenRGB
        height, width = screen().shape[:2]
        with ExitStack() as stack:
            recorder = (
                stack.enter_context(Recorder(args.record, args.fps or 30.0, (width, height)))
                if args.record is not None
                else None
            )
            window, why_not = (
                (None, None)
                if args.no_window
                else open_window(f"play.py: {path}", args.scale, args.fps)
            )
            if window is not None:
                stack.callback(window.close)
            if why_not is not None:
                then = (
                    f"recording to {args.record}"
                    if args.record
                    else "use --record FILE to save a video"
                )
                print(f"play.py: {why_not}: playing without a window; {then}", file=sys.stderr)

            def on_step() -> bool:
                frame = screen()
                if recorder is not None:
                    recorder.write(frame)
                return window is None or window.show(frame)

            with ctrl_c_sets(stop):
                games = play_episodes(
                    env,
                    net,
                    device,
                    args.episodes,
                    args.epsilon,
                    np.random.default_rng(args.seed),
                    stop=stop,
                    on_step=on_step,
                )
    except ConfigError as err:
        print(f"play.py: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    video = recorder.saved if recorder is not None else None
    scores = [g["r"] for g in games]
    mean = statistics.fmean(scores) if scores else None
    std = statistics.pstdev(scores) if scores else None
    if args.json:
        print(
            json.dumps(
                {
                    "checkpoint": str(path),
                    "game": data["game"],
                    "frames_trained": data["frames"],
                    "episodes": games,
                    "mean": mean,
                    "std": std,
                    "video": None if video is None else str(video),
                }
            )
        )
    else:
        print(f"{path}: {data['game']}, trained {data['frames']:,} frames")
        for i, g in enumerate(games, 1):
            cut = cap is not None and g["frames"] >= cap
            note = f" (cut short at {args.max_seconds:g} s)" if cut else ""
            print(f"game {i}: score {g['r']:g}, {g['l']} steps{note}")
        if scores:
            print(f"mean {mean:.2f} +- {std:.2f} over {len(games)} games")
        if video is not None:
            print(f"video: {video}, {recorder.frames} frames of {width}x{height}")
    if len(games) < args.episodes:
        why = "interrupted" if stop.is_set() else "window closed"
        print(
            f"play.py: {why} after {len(games)} of {args.episodes} games; "
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
