"""Score atari-fast runs: human-normalised, and the Atari-5 estimate of the 57-game median.

    uv run benchmarks/atari5.py runs/atari5-breakout runs/atari5-battle_zone ...

For each run directory (a train.py --run-dir) prints one markdown row: the game, the
mean of its last 100 training games (scores.csv, the game's own unclipped score), the
greedy mean of play.json (written by `uv run play.py <run>/best.pt --episodes 10 --json
--no-window > <run>/play.json`; "-" when absent), agent steps, minutes and FPS of the run,
and both scores human-normalised. When the five Atari-5 games are among the runs, it
ends with their estimate of the median human-normalised score over the 57 games, from
each of the two scores. Beside each run are Dopamine's DQN and Rainbow at 10M frames
(their mean training return over 5 seeds at iteration 9, read from google/dopamine's data
by a retired script: docs/log/benchmarks.md), and the table ends with how many games each run's
training score is ahead of them, and their own Atari-5 estimates (a game given by more
than one run counts once, by the last; a line on stderr says so). `--png-dir DIR` also
draws each run's smoothed training score against frames, as DIR/<game>.png;
`--at 250000,500000` adds a table of each run's smoothed training score (scores.csv's EMA
of whole games) at those agent steps, to compare runs at equal frames.

Human-normalised score (percent): 100 (score - random) / (human - random), with the
random and human scores the Atari-5 repository uses (its Atari-Human.csv, the DQN papers'
figures). The estimate (Aitchison, Sweetser and Hutter 2022, "Atari-5: Distilling the
Arcade Learning Environment down to Five Games"): log10(1 + median) is a weighted sum,
without intercept, of log10(1 + max(score, 0)) over the five games. The weights below
were fitted by the repository's own `RegressionEvaluation` (no intercept) on its data
(maitchison/Atari-5 at 118cad5; 44 algorithms with all five games); it reports a
cross-validated error of 10.4% of the median.
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import sys
from pathlib import Path

from atari_speed.app.ablation import plot_scores, read_scores
from atari_speed.run.tracking import summary_steps

# game: (random, human), Atari-Human.csv of maitchison/Atari-5 ("Random", "Human").
REFERENCE = {
    "breakout": (1.72, 30.5),
    "battle_zone": (2360.0, 37187.5),
    "double_dunk": (-18.55, -16.4),
    "name_this_game": (2292.35, 8049.0),
    "phoenix": (761.4, 7242.6),
    "qbert": (163.88, 13455.0),
}
# The Atari-5 weights, fitted as the module docstring says.
ATARI5 = {
    "battle_zone": 0.3820,
    "double_dunk": 0.0679,
    "name_this_game": 0.3108,
    "phoenix": 0.1241,
    "qbert": 0.0805,
}

# game: (DQN, Rainbow), Dopamine's mean training return over 5 seeds at iteration 9 (the
# one ending at 10M frames), read from google/dopamine's data at 5873f54 by the retired
# dopamine_at.py (docs/log/benchmarks.md; docs/atari.md, "The published baselines at 10M
# frames"). Sticky actions: not atari-fast's protocol (docs/atari.md says where they differ).
DOPAMINE_10M = {
    "breakout": (21.5, 41.9),
    "battle_zone": (3598.5, 20209.1),
    "double_dunk": (-18.9, -18.9),
    "name_this_game": (4000.9, 8604.0),
    "phoenix": (4948.5, 4830.2),
    "qbert": (1658.4, 5353.9),
}
BASELINES = ("DQN", "Rainbow")


def normalised(game: str, score: float) -> float:
    """Human-normalised score in percent (0 = random play, 100 = the human tester)."""
    random, human = REFERENCE[game]
    return 100.0 * (score - random) / (human - random)


def atari5_median(normalised_scores: dict[str, float]) -> float:
    """The Atari-5 estimate of the 57-game median human-normalised score, in percent."""
    log_median = sum(
        weight * math.log10(1.0 + max(normalised_scores[game], 0.0))
        for game, weight in ATARI5.items()
    )
    return 10.0**log_median - 1.0


def last_games(run: Path, n: int = 100) -> list[float]:
    return [float(score) for score in read_scores(run)[-n:, 2]]


def smoothed_curve(run: Path) -> list[tuple[int, float]]:
    """(agent steps, smoothed training score) at the end of each game, in order."""
    return [(int(frames), float(smoothed)) for _, frames, _, smoothed in read_scores(run)]


def smoothed_at(curve: list[tuple[int, float]], steps: int) -> float | None:
    """The smoothed score after the last game that ended by agent step ``steps`` (None
    before the first)."""
    ended = bisect.bisect_right(curve, steps, key=lambda point: point[0])
    return curve[ended - 1][1] if ended else None


def steps_table(runs: list[Path], steps: list[int]) -> list[str]:
    """Markdown: a row per agent step, a column per run, the smoothed score there."""
    curves = [smoothed_curve(run) for run in runs]
    lines = ["| agent steps (frames) | " + " | ".join(run.name for run in runs) + " |"]
    lines.append("|---|" + "---:|" * len(runs))
    for step in steps:
        cells = [smoothed_at(curve, step) for curve in curves]
        text = ["-" if c is None else f"{c:,.1f}" for c in cells]
        lines.append(f"| {step:,} ({step * 4 / 1e6:g}M) | " + " | ".join(text) + " |")
    return lines


def row(run: Path) -> tuple[str, float, float | None, dict]:
    summary = json.loads((run / "summary.json").read_text())
    game = summary["preset"]["env"]["game"]
    if game not in REFERENCE:
        raise SystemExit(f"atari5.py: {run}: game {game!r} has no human/random reference here")
    scores = last_games(run)
    training = sum(scores) / len(scores)
    play = run / "play.json"
    greedy = None
    if play.is_file():
        try:
            greedy = float(json.loads(play.read_text())["mean"])
        except (ValueError, KeyError, TypeError) as err:  # JSONDecodeError is a ValueError
            raise SystemExit(
                f"atari5.py: {play}: not play.py's --json output ({type(err).__name__}: {err}); "
                "is play.py still writing it?"
            ) from None
    return game, training, greedy, summary


def baseline_lines(training: dict[str, float]) -> list[str]:
    """How many games' training scores are ahead of each Dopamine agent's, naming them,
    and that agent's own Atari-5 estimate."""
    lines = []
    for index, agent in enumerate(BASELINES):
        ahead = [game for game, score in training.items() if score > DOPAMINE_10M[game][index]]
        names = ", ".join(ahead) if ahead else "none"
        lines.append(
            f"Ahead of Dopamine's {agent} at 10M frames (training scores): "
            f"{len(ahead)} of {len(training)} ({names})"
        )
    for index, agent in enumerate(BASELINES):
        theirs = {game: normalised(game, DOPAMINE_10M[game][index]) for game in ATARI5}
        lines.append(f"Dopamine's {agent}, Atari-5 estimate: {atari5_median(theirs):.1f}%")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="train.py run directories")
    parser.add_argument(
        "--png-dir", type=Path, help="also write <game>.png: the smoothed score against frames"
    )
    parser.add_argument(
        "--at",
        type=lambda text: [int(float(s)) for s in text.split(",")],
        default=[],
        metavar="STEPS",
        help="also a table of each run's smoothed training score at these agent steps "
        "(comma-separated, e.g. 250000,500000,1e6)",
    )
    args = parser.parse_args(argv)
    if args.png_dir is not None:
        args.png_dir.mkdir(parents=True, exist_ok=True)
    print(
        "| game | last 100 training games | greedy, 10 games | agent steps | minutes | FPS"
        " | human-normalised (training / greedy) | Dopamine at 10M: DQN / Rainbow |"
    )
    print("|---|---:|---:|---:|---:|---:|---|---:|")
    # game -> the score of its last run given: a game given twice counts once, by that run
    training: dict[str, float] = {}
    greedy: dict[str, float | None] = {}
    for run in args.runs:
        for name in ("summary.json", "scores.csv"):
            if not (run / name).is_file():
                print(f"atari5.py: error: {run / name}: no such file", file=sys.stderr)
                return 2
        game, training_score, greedy_score, summary = row(run)
        if game in training:
            print(
                f"atari5.py: {game} given twice: {run} counts in the estimates and counts,"
                " not the one before",
                file=sys.stderr,
            )
        training[game], greedy[game] = training_score, greedy_score
        emulator_frames = summary.get("emulator_frames", 0)
        if abs(emulator_frames - 10_000_000) > 100_000:
            print(
                f"atari5.py: {run}: {emulator_frames:,} emulator frames, not 10M: its count"
                " against Dopamine's 10M-frame figures is not at equal frames",
                file=sys.stderr,
            )
        if args.png_dir is not None:
            plot_scores(
                f"{summary['preset'].get('name') or 'train.py'}: {game}",
                [(run.name, run)],
                args.png_dir / f"{game}.png",
                True,
            )
        greedy_text = greedy_hns_text = "-"
        if greedy_score is not None:
            greedy_text = f"{greedy_score:.1f}"
            greedy_hns_text = f"{normalised(game, greedy_score):.0f}%"
        print(
            f"| {game} | {training_score:.1f} | {greedy_text} | {summary_steps(summary):,}"
            f" | {summary['seconds'] / 60:.1f} | {summary['fps']:,.0f}"
            f" | {normalised(game, training_score):.0f}% / {greedy_hns_text}"
            " | {:.1f} / {:.1f} |".format(*DOPAMINE_10M[game])
        )
    print("\n" + "\n".join(baseline_lines(training)))
    for label, scores in (("training", training), ("greedy", greedy)):
        hns = {game: normalised(game, v) for game, v in scores.items() if v is not None}
        if set(ATARI5) <= set(hns):
            print(f"\nAtari-5 estimate of the 57-game median ({label}): {atari5_median(hns):.0f}%")
    if args.at:
        print("\nSmoothed training score at equal agent steps:\n")
        print("\n".join(steps_table(args.runs, args.at)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
