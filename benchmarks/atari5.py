"""Score atari-fast runs: human-normalised, and the Atari-5 estimate of the 57-game median.

    uv run benchmarks/atari5.py runs/atari5-breakout runs/atari5-battle_zone ...
    uv run benchmarks/atari5.py --train --preset atari-84 --seeds 0-2 --out runs/atari5-sticky \\
        -- --set env.pipeline='"maxpool84-sticky"'
    uv run benchmarks/atari5.py --report-only --seeds 0-2 --out runs/atari5-sticky
    uv run benchmarks/atari5.py --train ... --record docs/atari/sticky   # outlives --out

With ``--train``, every game of ``--games`` (Breakout and the five Atari-5 games) is
trained once per seed into ``<out>/<game>/s<seed>`` (the runner of benchmarks/seeds.py,
one game after another, ``--lanes`` seeds at once, with ``--game <game>`` and the flags after
``--`` given to every train.py), each finished seed's best.pt is scored by play.py's
greedy games (play.json), and the seeds are reported. Finished seeds are kept, so after a
stop the same command goes on; a seed stopped part way is refused unless ``--resume`` is
given, which goes on from its checkpoint.pt. ``--record DIR`` keeps what the report reads of
each finished, scored seed (summary.json, scores.csv, play.json) in DIR/<game>/s<seed>, a
folder to commit: the run directories with their checkpoints stay on the machine that ran
them, the record goes with the code, a recorded seed is not trained again, and the report
takes a seed from ``--out``, else from the record. ``--report-only`` reports an ``--out``
without training: per game, the mean and the range (lowest to highest) over its seeds of
the last 100 training games and of the greedy score, beside Dopamine's DQN and Rainbow
(mean and range over their 5 seeds); whether the seed mean is ahead of each one's mean
and above Rainbow's whole range; the Atari-5 estimate from the seed means; and the counts.
``--png-dir`` draws each game's seeds in one plot.

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
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from atari_speed.app.ablation import plot_scores, read_scores
from atari_speed.app.seeds import finished, parse_seeds, run_seeds, score
from atari_speed.core.errors import interrupt_as_exception
from atari_speed.run.checkpoint import write_text_atomic
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
# game: ((DQN lowest, highest), (Rainbow lowest, highest)) of the 5 seeds' returns at the
# same iteration, from the same data and script (docs/atari.md's table lists them beside
# the means).
DOPAMINE_10M_RANGE = {
    "breakout": ((19.3, 28.5), (38.2, 45.2)),
    "battle_zone": ((2972.0, 3941.9), (14276.6, 23291.3)),
    "double_dunk": ((-19.9, -17.9), (-19.2, -18.5)),
    "name_this_game": ((3760.5, 4269.1), (8006.7, 9054.1)),
    "phoenix": ((4033.3, 5924.6), (4680.7, 5070.7)),
    "qbert": ((1013.1, 2521.7), (4264.0, 8056.6)),
}
BASELINES = ("DQN", "Rainbow")
GAMES = ("breakout", *ATARI5)  # what --train trains, in the table's order
DOPAMINE_STICKY = 0.25  # Dopamine's repeat_action_probability: like for like needs it


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
    return lines + dopamine_estimates()


def dopamine_estimates() -> list[str]:
    """Each Dopamine agent's own Atari-5 estimate, from its means at 10M frames."""
    lines = []
    for index, agent in enumerate(BASELINES):
        theirs = {game: normalised(game, DOPAMINE_10M[game][index]) for game in ATARI5}
        lines.append(f"Dopamine's {agent}, Atari-5 estimate: {atari5_median(theirs):.1f}%")
    return lines


def at_10m(emulator_frames: int) -> bool:
    """Whether a run's emulator frames are Dopamine's 10M (within one rollout's worth)."""
    return abs(emulator_frames - 10_000_000) <= 100_000


def warn_frames(run: Path, summary: dict) -> None:
    """A line on stderr where the run is not at Dopamine's 10M frames."""
    emulator_frames = summary.get("emulator_frames", 0)
    if not at_10m(emulator_frames):
        print(
            f"atari5.py: {run}: {emulator_frames:,} emulator frames, not 10M: its count"
            " against Dopamine's 10M-frame figures is not at equal frames",
            file=sys.stderr,
        )


def report_runs(runs: list[Path], png_dir: Path | None, at: list[int]) -> int:
    """The table of run directories, one seed each: a row per run."""
    print(
        "| game | last 100 training games | greedy, 10 games | agent steps | minutes | FPS"
        " | human-normalised (training / greedy) | Dopamine at 10M: DQN / Rainbow |"
    )
    print("|---|---:|---:|---:|---:|---:|---|---:|")
    # game -> the score of its last run given: a game given twice counts once, by that run
    training: dict[str, float] = {}
    greedy: dict[str, float | None] = {}
    for run in runs:
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
        warn_frames(run, summary)
        if png_dir is not None:
            plot_scores(
                f"{summary['preset'].get('name') or 'train.py'}: {game}",
                [(run.name, run)],
                png_dir / f"{game}.png",
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
    if at:
        print("\nSmoothed training score at equal agent steps:\n")
        print("\n".join(steps_table(runs, at)))
    return 0


# --- several seeds per game: <out>/<game>/s<seed> ---


class GameSeeds(NamedTuple):
    """One game's seeds in an --out directory, those that have ended a game."""

    game: str
    title: str  # the preset's name and the game, for the plot
    runs: list[tuple[int, Path]]  # (seed, run directory)
    training: list[float]  # each seed's mean of its last 100 training games
    greedy: list[float]  # play.py's greedy mean, of the seeds scored
    frames: list[int]  # each seed's emulator frames, beside runs

    @property
    def training_mean(self) -> float:
        return sum(self.training) / len(self.training)

    @property
    def greedy_mean(self) -> float | None:
        return sum(self.greedy) / len(self.greedy) if self.greedy else None


def spread(values: Sequence[float]) -> str:
    """``mean (lowest to highest)``; one value alone."""
    mean = f"{sum(values) / len(values):,.1f}"
    return mean if len(values) == 1 else f"{mean} ({min(values):,.1f} to {max(values):,.1f})"


def warn_not_sticky(run: Path, summary: dict) -> None:
    """A line on stderr where the run did not play Dopamine's sticky actions."""
    pipeline = summary.get("pipeline")
    probability = pipeline.get("repeat_action_probability") if isinstance(pipeline, dict) else None
    if probability is not None and probability != DOPAMINE_STICKY:
        print(
            f"atari5.py: {run}: repeat_action_probability {probability:g}, not Dopamine's"
            f" {DOPAMINE_STICKY:g}: not like for like",
            file=sys.stderr,
        )


# What the seeds' report reads of a run: a finished, scored seed recorded with them is whole.
# play.json last: keep_record writes it last, so its presence means the rest is there.
RECORD_FILES = ("summary.json", "scores.csv", "play.json")


def recorded(record: Path | None, game: str, seed: int) -> Path | None:
    """``record/<game>/s<seed>`` where it holds a whole record, else None."""
    if record is None:
        return None
    run = record / game / f"s{seed}"
    return run if all((run / name).is_file() for name in RECORD_FILES) else None


def keep_record(run: Path, record: Path, game: str, seed: int) -> None:
    """Copy a finished, scored run's RECORD_FILES to ``record/<game>/s<seed>``, each file
    whole or not at all. An old play.json goes first and the new one comes last, so a copy
    cut short is never a whole record mixing two runs."""
    kept = record / game / f"s{seed}"
    kept.mkdir(parents=True, exist_ok=True)
    (kept / "play.json").unlink(missing_ok=True)
    for name in RECORD_FILES:
        write_text_atomic(kept / name, (run / name).read_text())


def score_and_record(run: Path, episodes: int, record: Path | None, game: str, seed: int) -> None:
    """play.py's greedy score of a finished seed's best.pt (play.json), then its record."""
    score(run, episodes)
    if record is None:
        return
    if (run / "play.json").is_file():
        keep_record(run, record, game, seed)
    else:  # no best.pt to play: not a whole record
        print(f"atari5.py: {run}: not scored, not recorded", file=sys.stderr)


def read_game(
    out: Path, game: str, seeds: Sequence[int], record: Path | None = None
) -> GameSeeds | None:
    """The seeds of ``game`` in ``out/<game>/s<seed>``, or else in ``record``'s, that have
    ended a game (a line on stderr for each left out); None where none has."""
    runs, training, greedy, frames, title = [], [], [], [], ""
    for seed in seeds:
        run = out / game / f"s{seed}"
        # a run going on in --out (its summary.json is written as it trains) is not the
        # recorded one: the record wins until the run there has finished
        if not finished(run) and (kept := recorded(record, game, seed)):
            run = kept
        if not ((run / "summary.json").is_file() and (run / "scores.csv").is_file()):
            print(f"atari5.py: {run}: no run there, left out", file=sys.stderr)
            continue
        if not len(read_scores(run)):
            print(f"atari5.py: {run}: no game ended yet, left out", file=sys.stderr)
            continue
        played, training_score, greedy_score, summary = row(run)
        if played != game:
            raise SystemExit(f"atari5.py: {run}: a run of {played}, in {game}'s directory")
        warn_frames(run, summary)
        warn_not_sticky(run, summary)
        title = title or f"{summary['preset'].get('name') or 'train.py'}: {game}"
        runs.append((seed, run))
        frames.append(int(summary.get("emulator_frames", 0)))
        training.append(training_score)
        if greedy_score is not None:
            greedy.append(greedy_score)
    return GameSeeds(game, title, runs, training, greedy, frames) if runs else None


def ahead_of(result: GameSeeds, index: int) -> bool:
    """Whether the seed mean is ahead of Dopamine's agent ``index``'s mean."""
    return result.training_mean > DOPAMINE_10M[result.game][index]


def above_rainbow(result: GameSeeds) -> bool:
    """Whether the seed mean is above the highest of Rainbow's 5 seeds."""
    return result.training_mean > DOPAMINE_10M_RANGE[result.game][1][1]


def seeds_table(results: list[GameSeeds]) -> list[str]:
    """Markdown: a row per game, its seeds' mean and range beside Dopamine's."""
    lines = [
        "| game | seeds | last 100 training games: mean (lowest to highest)"
        " | greedy (play.py): mean (lowest to highest) | human-normalised (training / greedy)"
        " | Dopamine's DQN at 10M: mean (range of 5 seeds) | Dopamine's Rainbow at 10M: mean"
        " (range)"
        " | ahead of DQN / Rainbow | above Rainbow's range |",
        "|---|---|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in results:
        greedy = greedy_hns = "-"
        if r.greedy:
            greedy = spread(r.greedy)
            if len(r.greedy) < len(r.runs):
                greedy += f", {len(r.greedy)} of {len(r.runs)} seeds"
            greedy_hns = f"{normalised(r.game, r.greedy_mean):.0f}%"
        dopamine = [
            f"{DOPAMINE_10M[r.game][i]:,.1f} ({low:,.1f} to {high:,.1f})"
            for i, (low, high) in enumerate(DOPAMINE_10M_RANGE[r.game])
        ]
        yes = {True: "yes", False: "no"}
        cells = [
            r.game,
            seeds_cell(r),
            spread(r.training),
            greedy,
            f"{normalised(r.game, r.training_mean):.0f}% / {greedy_hns}",
            *dopamine,
            f"{yes[ahead_of(r, 0)]} / {yes[ahead_of(r, 1)]}",
            yes[above_rainbow(r)],
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def seeds_cell(result: GameSeeds) -> str:
    """The seeds of a row, each short of 10M emulator frames (a run still going on) with
    its frames: its score is not yet at Dopamine's frames."""
    return ", ".join(
        str(seed) if at_10m(frames) else f"{seed} (at {frames / 1e6:.2f}M frames)"
        for (seed, _), frames in zip(result.runs, result.frames, strict=True)
    )


def stale_lines(results: list[GameSeeds]) -> list[str]:
    """A line for each seed whose last 100 training games did not all end in the last
    quarter of its agent steps: its score is then, in part, an earlier policy's (a game
    that can be stalled ends rarely once the agent stalls it)."""
    lines = []
    for r in results:
        for (seed, run), frames in zip(r.runs, r.frames, strict=True):
            steps, games = frames // 4, read_scores(run)
            ended, scores = games[:, 1], games[:, 2]
            since = int(ended[-100:].min())
            if since < 0.75 * steps:
                recent = scores[ended >= 0.75 * steps]
                mean = f", averaging {recent.mean():,.1f}" if len(recent) else ""
                lines.append(
                    f"{r.game} seed {seed}: its last 100 training games ended from agent step"
                    f" {since:,} on, of {steps:,} ({len(recent)} in the last quarter{mean}):"
                    " its score is in part an earlier policy's"
                )
    return lines


def resume_lines(results: list[GameSeeds]) -> list[str]:
    """A line for each seed resumed from a checkpoint: how many of its last 100 training
    games are among the first ``run.envs`` to end after a resume, one of which per env
    was in flight at it. A resume scores none of those (``Actor.realign``); runs resumed
    by a version that scored them, joined to the stopped run's game, are in the record
    too, so the count says whether the score can hold one."""
    lines = []
    for r in results:
        for seed, run in r.runs:
            summary = json.loads((run / "summary.json").read_text())
            resumes = summary.get("resumed_at_steps") or []
            if not resumes:
                continue
            ended, envs = read_scores(run)[:, 1].tolist(), int(summary["envs"])
            after = set()
            for at in resumes:
                first = bisect.bisect_right(ended, at)
                after.update(range(first, min(first + envs, len(ended))))
            held = len(after & set(range(max(0, len(ended) - 100), len(ended))))
            where = ", ".join(f"{at:,}" for at in resumes)
            lines.append(
                f"{r.game} seed {seed}: resumed at agent steps {where}; {held} of its last 100"
                f" training games are among the first {envs} (one an env) that ended after a resume"
            )
    return lines


def seed_estimates(results: list[GameSeeds]) -> list[str]:
    """The Atari-5 estimate from the seed means, training and greedy, where all five
    games have them."""
    lines = []
    for label in ("training", "greedy"):
        means = {r.game: r.training_mean if label == "training" else r.greedy_mean for r in results}
        hns = {game: normalised(game, v) for game, v in means.items() if v is not None}
        if set(ATARI5) <= set(hns):
            lines.append(
                f"Atari-5 estimate of the 57-game median from the seed means ({label}):"
                f" {atari5_median(hns):.1f}%"
            )
    return lines


def seed_counts(results: list[GameSeeds]) -> str:
    """On how many games the seed mean is ahead of each Dopamine agent's mean, and above
    Rainbow's range, naming them."""

    def count(games: list[str]) -> str:
        return f"{len(games)} of {len(results)}" + (f" ({', '.join(games)})" if games else "")

    dqn = [r.game for r in results if ahead_of(r, 0)]
    rainbow = [r.game for r in results if ahead_of(r, 1)]
    above = [r.game for r in results if above_rainbow(r)]
    return (
        "Seed means of the last 100 training games at 10M frames: ahead of DQN on "
        f"{count(dqn)}, of Rainbow on {count(rainbow)}, above Rainbow's range on {count(above)}"
    )


def report_seeds(
    out: Path,
    games: Sequence[str],
    seeds: Sequence[int],
    png_dir: Path | None,
    record: Path | None = None,
) -> str:
    """The table of ``out/<game>/s<seed>`` (or of ``record``'s where --out lacks a seed), a
    row per game over its seeds; also written to ``out/atari5.md``, and with ``png_dir`` a
    plot per game of every seed's curve."""
    results = [r for game in games if (r := read_game(out, game, seeds, record)) is not None]
    if not results:
        raise SystemExit(f"atari5.py: {out}: no run of {', '.join(games)} has ended a game")
    lines = [
        *seeds_table(results),
        "",
        *seed_estimates(results),
        *dopamine_estimates(),
        "",
        seed_counts(results),
        *stale_lines(results),
        *resume_lines(results),
    ]
    text = "\n".join(lines) + "\n"
    write_text_atomic(out / "atari5.md", text)
    if png_dir is not None:
        for r in results:
            runs = [(f"seed {seed}", run) for seed, run in r.runs]
            plot_scores(r.title, runs, png_dir / f"{r.game}.png", True)
    return text


def refused(run: Path, resume: bool) -> bool:
    """Whether run_seeds would refuse ``run``: a run there that did not finish, not one to
    go on from its checkpoint.pt."""
    checkpoint = (run / "checkpoint.pt").is_file()
    return run.exists() and not finished(run) and not (resume and checkpoint)


def train(
    preset: str,
    games: Sequence[str],
    seeds: Sequence[int],
    out: Path,
    extra: Sequence[str],
    lanes: int = 1,
    resume: bool = False,
    episodes: int = 10,
    record: Path | None = None,
) -> None:
    """Train every seed of every game not yet finished in ``out/<game>/s<seed>`` nor
    recorded in ``record``, one game after another, score each finished seed's best.pt
    with play.py, and record it."""
    todo = {g: [s for s in seeds if not recorded(record, g, s)] for g in games}
    # run_seeds refuses a game's unfinished seed when that game comes up: find them all
    # before the first game trains, not hours in
    stopped = [run for g in games for s in todo[g] if refused(run := out / g / f"s{s}", resume)]
    if stopped:
        raise ValueError(
            f"runs that did not finish are in {', '.join(map(str, stopped))}: move them away"
            " to train those seeds again, or where one has a checkpoint.pt, pass --resume"
        )
    for game in games:
        if not todo[game]:
            print(f"atari5.py: {game}: every seed recorded in {record}, kept", flush=True)
            continue
        for seed in seeds:
            if seed not in todo[game]:
                print(f"atari5.py: {game} seed {seed}: recorded in {record}, kept", flush=True)

        done: list[int] = []

        def finish(seed: int, game: str = game, done: list[int] = done) -> None:
            # as each seed ends: a stop later in the game loses no finished seed's record
            score_and_record(out / game / f"s{seed}", episodes, record, game, seed)
            done.append(seed)

        run_seeds(preset, todo[game], out / game, ["--game", game, *extra], lanes, resume, finish)
        for seed in (s for s in todo[game] if s not in done):
            run = out / game / f"s{seed}"
            if finished(run):  # finished before this command: kept, not trained
                score_and_record(run, episodes, record, game, seed)
            else:  # a play.json of it now would be kept after it goes on
                print(f"atari5.py: {run}: not finished, not scored", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []  # train.py's flags, after --
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1 :]
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        usage="%(prog)s RUN [RUN ...] [options] | --out DIR (--train | --report-only)"
        " [options] [-- train.py flags]",
    )
    parser.add_argument("runs", nargs="*", type=Path, help="train.py run directories")
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
    parser.add_argument(
        "--out", type=Path, help="seeds of every game as <out>/<game>/s<seed> (no RUN then)"
    )
    parser.add_argument(
        "--train", action="store_true", help="train and score what --out lacks, then report"
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="train nothing: report the seeds in --out (and --record)",
    )
    parser.add_argument(
        "--record",
        type=Path,
        help="keep each finished, scored seed's summary.json, scores.csv and play.json in "
        "RECORD/<game>/s<seed> (a folder to commit); a recorded seed is not trained again "
        "and is reported where --out lacks it",
    )
    parser.add_argument("--preset", default="atari-84", help="with --train (default atari-84)")
    parser.add_argument("--seeds", default="0-2", help="e.g. 0-2 or 0,2,5 (default 0-2)")
    parser.add_argument(
        "--games", default=",".join(GAMES), help=f"comma-separated (default {','.join(GAMES)})"
    )
    parser.add_argument("--lanes", type=int, default=1, help="seeds of a game trained at once")
    parser.add_argument(
        "--episodes", type=int, default=10, help="play.py's greedy games per best.pt"
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="a seed stopped part way goes on from its checkpoint.pt, instead of being refused",
    )
    args = parser.parse_args(argv)
    if args.out is None:
        if not args.runs:
            parser.error("give run directories, or --out with --train or --report-only")
        if args.train or args.report_only or extra or args.record is not None:
            parser.error("--train, --report-only, --record and train.py's flags go with --out")
        if args.png_dir is not None:
            args.png_dir.mkdir(parents=True, exist_ok=True)
        return report_runs(args.runs, args.png_dir, args.at)
    if args.runs:
        parser.error("give run directories or --out, not both")
    if args.train == args.report_only:
        parser.error("--out: give --train (train, then report) or --report-only")
    if extra and not args.train:
        parser.error("the flags after -- go to train.py: only with --train")
    if any(flag == "--game" or flag.startswith("--game=") for flag in extra):
        parser.error("each game is given to train.py as --game: choose them with --games")
    if args.at:
        parser.error("--at reads run directories, not --out")
    if args.record is not None and args.record.resolve() == args.out.resolve():
        parser.error("--record: a folder of its own, not --out")
    try:
        seeds = parse_seeds(args.seeds)
    except ValueError:
        seeds = []
    if not seeds:
        parser.error(f"--seeds {args.seeds!r}: give seeds as 0-2 or 0,2,5")
    games = args.games.split(",")
    unknown = [game for game in games if game not in REFERENCE]
    if unknown:
        parser.error(f"--games: {', '.join(unknown)}: not one of {', '.join(GAMES)}")
    args.out.mkdir(parents=True, exist_ok=True)
    if args.png_dir is not None:
        args.png_dir.mkdir(parents=True, exist_ok=True)
    if args.train:
        try:
            with interrupt_as_exception():  # SIGTERM as Ctrl-C: the runs stopped, not orphaned
                train(
                    args.preset,
                    games,
                    seeds,
                    args.out,
                    extra,
                    max(args.lanes, 1),
                    args.resume,
                    args.episodes,
                    args.record,
                )
        except ValueError as err:
            raise SystemExit(f"atari5.py: {err}") from None
        except KeyboardInterrupt:
            print(
                "atari5.py: stopped; the same command with --resume goes on from here",
                file=sys.stderr,
            )
            return 130
    print(report_seeds(args.out, games, seeds, args.png_dir, args.record), end="")
    print(f"written: {args.out / 'atari5.md'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
