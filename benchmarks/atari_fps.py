"""Training FPS of atari-fast per game, alone on the machine: each row a fresh ``train.py``
run for ``--seconds`` of wall time (n-env mode, ale backend), FPS counted from the first
SGD update, and the minutes 10M emulator frames (2.5M agent steps) take at that FPS.

    uv run benchmarks/atari_fps.py                                   # 6 games x 2 rows
    uv run benchmarks/atari_fps.py --games breakout qbert --reps 3 --seconds 90
    uv run benchmarks/atari_fps.py --rows fp32 "84x84 nature, auto" --games breakout

Rows are the precision (``fp32``; ``auto``, which takes bf16 where one update measured at
start is faster in it, and the table says what it took; ``bf16``; ``bf16 acting``, in
which the envs' actions are chosen in bf16 too: ``run.act_bf16``) and the frame size
(42x42 frames through the ``small`` network, atari-fast as it is; 84x84 frames through
Nature's network, the published PQN and DQN shape, ``wrappers/maxpool84.toml``). Games
and rows alternate within each repetition, so a drifting machine spreads over all of
them; each cell is the median over the repetitions. Nothing else should run meanwhile:
FPS is wall time.
"""

from __future__ import annotations

import argparse
import statistics

from tqdm import tqdm
from train_speed import fps_of, run_row  # benchmarks/: the train.py runner of every row

GAMES = ("breakout", "battle_zone", "double_dunk", "name_this_game", "phoenix", "qbert")
AGENT_STEPS = 2_500_000  # atari-fast's budget: 10M emulator frames at skip 4
NATURE_84 = ["--set", "env.pipeline='maxpool84'", "--set", "dqn.network='nature'"]
ROWS: dict[str, list[str]] = {
    "fp32": ["--set", "run.precision='fp32'"],
    "auto": ["--set", "run.precision='auto'"],
    "84x84 nature, fp32": [*NATURE_84, "--set", "run.precision='fp32'"],
    "84x84 nature, auto": [*NATURE_84, "--set", "run.precision='auto'"],
    "84x84 nature, bf16": [*NATURE_84, "--set", "run.precision='bf16'"],
    "84x84 nature, bf16 acting": [
        *NATURE_84,
        *("--set", "run.precision='bf16'", "--set", "run.act_bf16=true"),
    ],
}


def run_cell(game: str, row: str, seconds: float) -> tuple[float, str]:
    """One run: its FPS after the first update and the precision it trained in."""
    game_args = ["--game", game, "--mode", "n-env", "--set", "env.backend='ale'", *ROWS[row]]
    summary = run_row(game_args, seconds, None, [], preset="atari-fast")
    return fps_of(summary), summary["precision"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", nargs="+", default=list(GAMES), metavar="GAME")
    parser.add_argument("--rows", nargs="+", choices=list(ROWS), default=["fp32", "auto"])
    parser.add_argument("--seconds", type=float, default=75.0, help="wall time of each run")
    parser.add_argument("--reps", type=int, default=1, help="repetitions; cells are medians")
    args = parser.parse_args()

    fps: dict[tuple[str, str], list[float]] = {(g, r): [] for g in args.games for r in args.rows}
    took: dict[tuple[str, str], set[str]] = {key: set() for key in fps}
    with tqdm(total=args.reps * len(fps), desc="runs") as bar:
        for _ in range(args.reps):
            for game in args.games:
                for row in args.rows:
                    value, precision = run_cell(game, row, args.seconds)
                    fps[game, row].append(value)
                    took[game, row].add(precision)
                    bar.update()

    print("\n| game | " + " | ".join(f"{r}: FPS (min per 10M frames)" for r in args.rows) + " |")
    print("|---|" + "---|" * len(args.rows))
    for game in args.games:
        cells = []
        for row in args.rows:
            median = statistics.median(fps[game, row])
            minutes = AGENT_STEPS / median / 60 if median > 0 else float("nan")
            cells.append(f"{median:,.0f} ({minutes:.1f}), {'/'.join(sorted(took[game, row]))}")
        print(f"| {game} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
