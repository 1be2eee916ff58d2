"""A preset (or a variant of it) over several seeds: per seed, agent steps and minutes to
a smoothed -15, 0 and the stop reward, the greedy agent's solve, FPS and the greedy score
of best.pt in play.py; over the seeds, the median and the worst; one plot of every
seed's curve against agent steps.

    uv run benchmarks/seeds.py --preset pong-fast --seeds 0-4 --out runs/seeds-pong-fast
    uv run benchmarks/seeds.py --preset pong-fast --seeds 0-4 --lanes 2 --out runs/nd \\
        -- --steps 1000000 --set pqn.lr_decay_steps=3000000   # screening: two at once
    uv run benchmarks/seeds.py --seeds 0-4 --out runs/nd --report-only --fps-alone 1500
    uv run benchmarks/seeds.py --seeds 0-4 --out runs/nd --report-only --against runs/base

Arguments after ``--`` go to every train.py run. Seeds already finished in ``--out``
are kept, so the command can be run again after a stop; with ``--resume`` a seed stopped
part way goes on from its checkpoint.pt (else it is refused). Agent steps to a score do not
depend on how busy the machine is, so ``--lanes 2`` (two runs at once, one core each) screens a
recipe in half the wall time; for minutes, measure FPS with one run alone on the machine
and give it as ``--fps-alone``. Writes seeds.md, seeds.json and seeds.png in ``--out``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from atari_speed.app.seeds import finished, parse_seeds, report, run_seeds, score, score_starts
from atari_speed.core.errors import interrupt_as_exception


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--preset", default="pong-fast", help="preset name or TOML path")
    parser.add_argument("--seeds", default="0-4", help="e.g. 0-4 or 0,2,5 (default 0-4)")
    parser.add_argument("--out", type=Path, required=True, help="one run directory per seed")
    parser.add_argument("--lanes", type=int, default=1, help="seeds trained at once")
    parser.add_argument(
        "--episodes", type=int, default=10, help="play.py's greedy games per best.pt"
    )
    parser.add_argument(
        "--fps-alone",
        type=float,
        help="FPS of one run alone on the machine: minutes = agent steps / this (default: each "
        "run's own FPS, right only when the runs ran one at a time)",
    )
    parser.add_argument("--title", help="the table's and the plot's title")
    parser.add_argument(
        "--against",
        type=Path,
        help="another set's --out (a recipe it is compared with): the seeds both have, side "
        "by side, with the agent step where their games parted ways; then every finished run "
        "of each set pooled, with the rank-sum test's p per milestone",
    )
    parser.add_argument(
        "--report-only", action="store_true", help="train and play nothing: report the runs"
    )
    parser.add_argument(
        "--every-start",
        action="store_true",
        help="also play each finished seed's best.pt and final weights greedily from every "
        "start NoopReset can give, weighted as drawn (benchmarks/starts.py; ~1-2 minutes a "
        "file for Pong), once, into starts.json; with --report-only too",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="a seed stopped part way (a checkpoint.pt, no finished summary) goes on from its "
        "checkpoint with train.py --resume, instead of being refused",
    )
    parser.add_argument("train_args", nargs=argparse.REMAINDER, help="-- then train.py flags")
    args = parser.parse_args(argv)
    try:
        seeds = parse_seeds(args.seeds)
    except ValueError:
        parser.error(f"--seeds {args.seeds!r}: give seeds as 0-4 or 0,2,5")
    extra = args.train_args[1:] if args.train_args[:1] == ["--"] else args.train_args
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        if not args.report_only:
            with interrupt_as_exception():  # SIGTERM as Ctrl-C: the runs stopped, not orphaned
                run_seeds(args.preset, seeds, args.out, extra, max(args.lanes, 1), args.resume)
                for seed in seeds:
                    score(args.out / f"s{seed}", args.episodes)
        if args.every_start:
            for seed in seeds:
                if finished(args.out / f"s{seed}"):
                    score_starts(args.out / f"s{seed}")
        title = args.title or f"{args.preset} {' '.join(extra)}".strip()
        if args.against is not None and not args.against.is_dir():
            raise ValueError(f"--against {args.against}: no such directory")
        text, _ = report(seeds, args.out, title, args.fps_alone, args.against)
    except ValueError as err:
        sys.exit(f"seeds.py: {err}")
    except KeyboardInterrupt:  # Ctrl-C: the runs were stopped (run_seeds), their checkpoints kept
        print(
            "seeds.py: stopped; finished seeds are kept, and the same command with --resume "
            "goes on from each stopped seed's checkpoint.pt",
            file=sys.stderr,
        )
        return 130
    print(text)
    print(f"written: {args.out / 'seeds.md'}, seeds.json, seeds.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
