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


def play_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="play.py",
        description="Play a trained agent: rebuilds the checkpoint's game and pipeline, plays "
        "whole games and prints each game's score (unclipped, across lives) and length.",
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
        "--json", action="store_true", help="print only one JSON object on one line, for scripts"
    )
    return parser


def play_main(argv: list[str] | None = None) -> int:
    args = play_parser().parse_args(argv)
    try:
        import json
        import statistics

        import numpy as np

        from atari_speed.learner import DQN, pick_device
        from atari_speed.pipeline import make_env
        from atari_speed.training import load_checkpoint, play_episodes

        path = Path(args.path)
        if path.is_dir():
            path = next(
                (p for p in (path / "best.pt", path / "checkpoint.pt") if p.exists()),
                path / "checkpoint.pt",
            )
        data = load_checkpoint(path)
        env = make_env(data["pipeline"], data["game"], seed=args.seed)
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
        net = DQN(tuple(data["obs_shape"]), data["actions"], dueling=data["dueling"]).to(device)
        net.load_state_dict(data["net"])
        net.eval()
        games = play_episodes(
            env, net, device, args.episodes, args.epsilon, np.random.default_rng(args.seed)
        )
    except ConfigError as err:
        print(f"play.py: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    scores = [g["r"] for g in games]
    mean = statistics.fmean(scores)
    std = statistics.pstdev(scores)
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
                }
            )
        )
        return 0
    print(f"{path}: {data['game']}, trained {data['frames']:,} frames")
    for i, g in enumerate(games, 1):
        print(f"game {i}: score {g['r']:g}, {g['l']} steps")
    print(f"mean {mean:.2f} +- {std:.2f} over {len(games)} games")
    return 0
