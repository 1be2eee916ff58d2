"""``train.py``'s command line (``play.py``'s is in ``atari_speed.app.play``)."""

from __future__ import annotations

import argparse
import math
import sys
import threading
from pathlib import Path
from typing import Any

from atari_speed.core.config import (
    DEVICES,
    ENGINES,
    MODES,
    PRESET_DIR,
    Preset,
    describe_fields,
    load_preset,
    load_variants,
)
from atari_speed.core.errors import ConfigError, DiskFullError, WorkerError, disk_full_cause

PRESET_NAMES = [p.stem for p in PRESET_DIR.glob("*.toml")]
DEFAULT_PRESET = "pong-fast"
TRAIN_EPILOG = """\
presets: names in presets/ ({presets}),
or a path to a TOML file. Every field below can be set with --set section.key=value
(values are TOML: --set dqn.double=true --set env.pipeline='"fast"').

Output goes to runs/<date>-<preset>-<mode>/: TensorBoard logs (tensorboard --logdir runs),
summary.json, checkpoint.pt (every run.checkpoint_every agent steps and on exit, Ctrl-C
and kill included), replay.npz (DQN's replay, on exit) and best.pt (the best model so far).
--resume continues steps, epsilon, optimizer, statistics and RNG from a checkpoint.pt,
and the replay from the replay.npz beside it, so it trains on at once (without one it
refills the replay first, and says so; PQN keeps no replay; baseline mode's ptan buffer
is refilled). It goes on with the checkpoint's preset as resolved at the run's first
start (auto is not run again) and in the checkpoint's directory; --run-dir, and any
flag or --set given with it, change that, in one line.

preset fields:
"""


def train_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="train.py",
        description="Train a DQN or PQN agent on an Atari game, as fast as this machine allows.",
        epilog=TRAIN_EPILOG.format(presets=", ".join(sorted(PRESET_NAMES))) + describe_fields(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--preset",
        help=f"preset name in presets/ or a TOML path (default: {DEFAULT_PRESET}; with "
        "--resume: the checkpoint's)",
    )
    parser.add_argument(
        "--game",
        help="override env.game: an ALE game name (breakout, space_invaders, SpaceInvaders)",
    )
    parser.add_argument("--mode", choices=MODES, help="override run.mode")
    parser.add_argument(
        "--envs",
        type=_envs_arg,
        help="override run.envs (envs, or per actor); auto = chosen from the machine",
    )
    parser.add_argument(
        "--steps", type=int, help="override run.steps: the budget in agent steps, all envs"
    )
    parser.add_argument(
        "--emulator-frames",
        type=int,
        metavar="N",
        help="the budget in emulator frames instead (sets run.emulator_frames, made agent "
        "steps at start)",
    )
    parser.add_argument("--frames", type=int, help="the old name of --steps (agent steps)")
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        help="override run.engine: where parallel mode's actors run (ray: Ray actors, needs "
        "`uv run --extra ray`; implies --mode parallel)",
    )
    parser.add_argument(
        "--ray-address",
        metavar="HOST:PORT",
        help="with --engine ray: join this Ray cluster (`ray start --head` prints it) instead "
        "of starting a local Ray for the run (sets run.ray_address); with --concurrent: train "
        "the runs there as Ray tasks (docs/scale.md)",
    )
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
        "--seeds",
        type=_seeds_arg,
        metavar="S,S,...",
        help="train the preset (each variant of an ablation preset) once per seed, with "
        "one table at the end, as an ablation does",
    )
    parser.add_argument(
        "--concurrent",
        action="store_true",
        help="train an ablation's variants (or --seeds' runs) at once as Ray tasks, each "
        "pinned to its share of the cores (and a GPU of its own where there are enough); "
        "needs `uv run --extra ray`",
    )
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
        help="time every stage of the learner, its actor processes and env workers (Ray "
        "actors are not profiled); prints a table at the end and writes profile.json and "
        "TensorBoard profile/<stage> (sets run.profile)",
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


def _seeds_arg(text: str) -> list[int]:
    try:
        seeds = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected seeds like 0,1,2") from None
    if not seeds or len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"{text!r}: expected distinct seeds like 0,1,2")
    return seeds


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
    # Show the choice for every auto field, even ones this preset fixes.
    probe = preset.replace("run", mode=AUTO, envs=0, precision=AUTO).replace("env", backend=AUTO)
    # Calibrate the update the preset runs: PQN's minibatch follows its run.envs.
    calibrate(machine, probe.replace("run", envs=preset.run.envs))
    print("\n".join(machine.describe()))
    _, choices = choose(probe, machine)
    print(
        f"\nauto would choose: mode {choices['mode']}, {choices['envs']} envs, "
        f"backend {choices['backend']}, learner threads {choices['learner_threads'] or 'all'}, "
        f"precision {choices['precision']}"
    )
    for line in choices["why"]:
        print(f"  {line}")
    fixed = [
        f"{key} = {value!r}"
        for key, value, auto in (
            ("run.mode", preset.run.mode, preset.run.mode == AUTO),
            ("run.envs", preset.run.envs, preset.run.envs == 0),
            ("env.backend", preset.env.backend, preset.env.backend == AUTO),
            ("run.precision", preset.run.precision, preset.run.precision == AUTO),
        )
        if not auto
    ]
    if fixed:
        print(f"{preset.name} fixes {', '.join(fixed)}: those stay as set")
    return 0


def quiet_disk_full_in_threads() -> None:
    """A thread that dies of a full disk (TensorBoard's writer) prints no traceback: the
    main thread's next write meets the same error and reports it in one line. Installed
    once per process, however often ``train_main`` is called."""
    previous = threading.excepthook
    if getattr(previous, "quiet_disk_full", False):
        return

    def hook(args: Any) -> None:
        if disk_full_cause(args.exc_value) is None:
            previous(args)

    hook.quiet_disk_full = True  # type: ignore[attr-defined]
    threading.excepthook = hook


def train_main(argv: list[str] | None = None) -> int:
    args = train_parser().parse_args(argv)
    named, args.preset = args.preset, args.preset or DEFAULT_PRESET
    quiet_disk_full_in_threads()
    flags = {
        "game": "env.game",
        "mode": "run.mode",
        "envs": "run.envs",
        "steps": "run.steps",
        "frames": "run.frames",  # the old name: config.RENAMED reads it as run.steps
        "emulator_frames": "run.emulator_frames",
        "device": "run.device",
        "seed": "run.seed",
        "engine": "run.engine",
        "ray_address": "run.ray_address",
    }
    overrides = list(args.overrides)
    # --concurrent --ray-address: the runs go to that cluster as Ray tasks; otherwise the
    # address is the cluster a run's Ray actors join.
    tasks_on = args.ray_address if args.concurrent else None
    if tasks_on:
        args.ray_address = None
    if args.profile:
        overrides.append("run.profile=true")
    if (args.engine == "ray" or args.ray_address) and args.mode is None:
        overrides.append("run.mode='parallel'")  # Ray runs parallel mode's actors
    if args.ray_address and args.engine is None:
        overrides.append("run.engine='ray'")
    for flag, key in flags.items():
        value = getattr(args, flag)
        if value is not None:
            overrides.append(f"{key}={value!r}" if isinstance(value, str) else f"{key}={value}")
    try:
        _one_budget_flag(args)
        if args.game is not None:
            from atari_speed.envs.pipeline import resolve_game

            resolve_game(args.game)  # one line naming close games, before any calibration
        if args.check:
            return check_main(args.preset, overrides)
        if args.resume and not (args.seeds or args.concurrent):
            preset, run_dir = _resumed(args, overrides, named)
        else:
            variants = with_seeds(args, load_variants(args.preset, overrides), overrides)
            if variants or args.concurrent:
                runs = variants or [(args.preset, load_preset(args.preset, overrides))]
                return _ablation(args, runs, tasks_on)
            preset, run_dir = load_preset(args.preset, overrides), args.run_dir
        summary = _train(preset, run_dir, args.resume)
    except ConfigError as err:
        print(f"train.py: error: {err}", file=sys.stderr)
        return 2
    except (WorkerError, DiskFullError) as err:
        print(f"train.py: error: {str(err).splitlines()[0]}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as interrupt:
        if not interrupt.args:  # before training began (calibration, setup)
            print("\ninterrupted before training started; nothing saved", file=sys.stderr)
            return 130
        summary = interrupt.args[0]
        steps = summary.get("steps")
        print(
            f"\ninterrupted at {'?' if steps is None else f'{steps:,}'} agent steps; "
            "checkpoint.pt saved",
            file=sys.stderr,
        )
        _print_profile(summary)
        return 130
    print(outcome(summary))
    _print_profile(summary)
    return 0


def _one_budget_flag(args: argparse.Namespace) -> None:
    """At most one of --steps, --frames (its old name) and --emulator-frames."""
    given = [
        flag
        for flag, value in (
            ("--steps", args.steps),
            ("--frames", args.frames),
            ("--emulator-frames", args.emulator_frames),
        )
        if value is not None
    ]
    if len(given) > 1:
        raise ConfigError(
            f"{' and '.join(given)} are both given: one budget, in agent steps (--steps; "
            "--frames is its old name) or in emulator frames (--emulator-frames)"
        )


def _resumed(
    args: argparse.Namespace, overrides: list[str], named: str | None
) -> tuple[Preset, Path]:
    """The preset --resume goes on with (the checkpoint's, changed by ``overrides``; said
    in one line) and the run's directory: the checkpoint's, unless --run-dir says another."""
    from atari_speed.app.resume import resumed_preset

    preset, line = resumed_preset(args.resume, overrides, named)
    print(line, flush=True)
    return preset, args.run_dir or Path(args.resume).parent


def _train(preset: Preset, run_dir: Path | None, resume: str | None) -> dict[str, Any]:
    """Fill in the preset's auto fields (calibrating, if it has any: a resumed preset has
    none unless a --set gives one), then train."""
    from atari_speed.app.auto import resolve
    from atari_speed.run.training import train

    preset, choices = resolve(preset)
    return train(preset, run_dir, resume, choices=choices)


def _print_profile(summary: dict[str, Any]) -> None:
    """The per-process profile tables, when the run was profiled."""
    if summary.get("profile"):
        from atari_speed.core.timing import format_profile

        print(format_profile(summary["profile"]))


def outcome(summary: dict[str, Any]) -> str:
    """One line: agent steps, time, FPS, games, best smoothed reward, solved or not."""
    verdict = (
        f"solved in {fmt_duration(summary['solved_at_seconds'])} "
        f"({summary['solved_at_steps']:,} agent steps)"
        if summary["solved"]
        else "not solved"
    )
    best = summary["best_avg_reward"]
    return (
        f"{summary['steps']:,} agent steps in {fmt_duration(summary['seconds'])} "
        f"({summary['fps']:.0f} FPS), {summary['episodes']} games, best smoothed reward "
        f"{'none (no game finished)' if best is None else f'{best:+.1f}'}: {verdict}"
    )


def fmt_duration(seconds: float) -> str:
    """``12m05s``, or ``1h02m05s`` from an hour on; ``?`` if not finite."""
    if not math.isfinite(seconds):
        return "?"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


def with_seeds(
    args: argparse.Namespace, variants: list[tuple[str, Preset]], overrides: list[str]
) -> list[tuple[str, Preset]]:
    """``--seeds 0,1``: every variant (or the one preset) once per seed."""
    if not args.seeds:
        return variants
    base = variants or [("", load_preset(args.preset, overrides))]
    return [
        (f"{name}, seed {seed}" if name else f"seed {seed}", preset.replace("run", seed=seed))
        for name, preset in base
        for seed in args.seeds
    ]


def _ablation(args: argparse.Namespace, variants: list, tasks_on: str | None = None) -> int:
    """Every variant (in turn, or at once with --concurrent, on this machine or as tasks on
    the cluster at ``tasks_on``), then the table (ablation.md/.json/.png in the parent
    dir)."""
    from atari_speed.app.ablation import check_envs, run_ablation

    if args.concurrent and any(p.run.engine == "ray" for _, p in variants):
        raise ConfigError(
            "--concurrent with run.engine = 'ray': the variants' Ray actors would compete with "
            "the variants for the same cores; run them in turn, or use engine = 'local'"
        )
    if args.resume:
        raise ConfigError(
            f"--resume: {args.preset} is an ablation preset, which cannot resume; rerun it, "
            "or resume one variant's checkpoint.pt with a preset of that variant's fields "
            "(its summary.json lists them under 'preset')"
        )
    check_envs(variants)
    try:
        table, rows = run_ablation(
            Path(args.preset).stem,
            variants,
            args.run_dir,
            concurrent=args.concurrent,
            address=tasks_on,
        )
    except KeyboardInterrupt as interrupt:
        where = interrupt.args[0] if interrupt.args else "its run directory"
        print(f"\nablation interrupted; the table so far is in {where}", file=sys.stderr)
        return 130
    print(
        "\n" + table + f"\nsaved in {Path(rows[0]['run_dir']).parent}: ablation.md, "
        "ablation.json, ablation.png; tensorboard --logdir that directory overlays the runs"
    )
    return 0
