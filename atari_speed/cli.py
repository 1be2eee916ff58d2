"""Command-line entry points: ``train.py`` (and ``play.py`` when it lands)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from atari_speed.config import DEVICES, MODES, describe_fields, load_preset
from atari_speed.errors import ConfigError, WorkerError

TRAIN_EPILOG = """\
presets: names in presets/ (pong-baseline, pong-nenv, pong-parallel, pong-fast, breakout)
or a path to a TOML file. Every field below can be set with --set section.key=value
(values are TOML: --set dqn.double=true --set env.pipeline='"fast"').

Output goes to runs/<date>-<preset>-<mode>/: TensorBoard logs (tensorboard --logdir runs),
summary.json, checkpoint.pt (every run.checkpoint_every frames and on exit, Ctrl-C
included) and best.pt (the best model so far). --resume continues frames, epsilon,
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
    parser.add_argument("--envs", type=int, help="override run.envs (envs, or per actor)")
    parser.add_argument("--frames", type=int, help="override run.frames (agent steps, all envs)")
    parser.add_argument("--device", choices=DEVICES, help="override run.device")
    parser.add_argument("--seed", type=int, help="override run.seed")
    parser.add_argument(
        "--run-dir",
        type=Path,
        help="where logs and checkpoints go (default: runs/<date>-<preset>-<mode>)",
    )
    parser.add_argument("--resume", metavar="CHECKPOINT", help="continue from a checkpoint.pt")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override any preset field (repeatable)",
    )
    return parser


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
    for flag, key in flags.items():
        value = getattr(args, flag)
        if value is not None:
            overrides.append(f"{key}={value!r}" if isinstance(value, str) else f"{key}={value}")
    try:
        from atari_speed.training import fmt_duration, train

        preset = load_preset(args.preset, overrides)
        summary = train(preset, args.run_dir, args.resume)
    except ConfigError as err:
        print(f"train.py: error: {err}", file=sys.stderr)
        return 2
    except WorkerError as err:
        print(f"train.py: error: {str(err).splitlines()[0]}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as interrupt:
        summary = interrupt.args[0] if interrupt.args else {}
        print(
            f"\ninterrupted at {summary.get('frames', '?')} frames; checkpoint.pt saved",
            file=sys.stderr,
        )
        return 130
    verdict = (
        f"solved in {fmt_duration(summary['solved_at_seconds'])} "
        f"({summary['solved_at_frames']:,} frames)"
        if summary["solved"]
        else "not solved"
    )
    print(
        f"{summary['frames']:,} frames in {fmt_duration(summary['seconds'])} "
        f"({summary['fps']:.0f} FPS), {summary['episodes']} games, best smoothed reward "
        f"{summary['best_avg_reward']}: {verdict}"
    )
    return 0
