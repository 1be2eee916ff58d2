"""A recipe over several seeds: train each, score each best.pt greedily, and report every
seed beside the median and the worst (``benchmarks/seeds.py`` is the command).

The worst seed is the figure that matters: a recipe that solves on a lucky seed and not
on another is the complaint users make of every DQN code. Agent steps to a score do not
depend on how busy the machine is, so seeds may train side by side (``lanes``, each pinned
to its own cores); minutes are agent steps over an FPS measured with the machine to one run
(``fps_alone``), or the runs' own clocks when they ran one at a time.
"""

from __future__ import annotations

import errno
import fcntl
import json
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np

from atari_speed.app.ablation import plot_scores, read_scores
from atari_speed.core.errors import ConfigError
from atari_speed.run.checkpoint import write_text_atomic
from atari_speed.run.lock import LOCK_FILE, NO_FLOCK, RunDirLock
from atari_speed.run.tracking import games_to_reach, summary_steps

ROOT = Path(__file__).resolve().parents[2]
LEVELS = ("-15", "0")  # with the stop reward: the smoothed scores whose frames are reported
STOP_WAIT = 120.0  # seconds a run has to save and exit after SIGTERM before it is killed
STARTS_FILE = "starts.json"  # best.pt and the final weights played from every start


@dataclass
class SeedResult:
    """One seed's run, from its summary.json (and play.json, once scored)."""

    seed: int
    run_dir: str
    solved: bool
    frames: int  # frames run
    fps: float  # after warm-up, on the run's own clock
    to_frames: dict[str, int]  # smoothed score level -> first frame it was reached
    to_seconds: dict[str, float]
    greedy_frames: int | None  # the first evaluation whose mean reached stop_reward
    best_smoothed: float | None
    play: float | None  # best.pt's mean over the greedy games of play.py
    stop: str = "18"  # the stop reward, as reached's keys spell it
    # the lowest evaluation from the greedy solve on (it included): whether the agent
    # stayed solved once it could play the game; None without a greedy solve
    greedy_low: float | None = None
    # the evaluations' share of the run's CPU from the first on (summary.json's
    # eval_cpu_share); None without an evaluation or from a version before the field
    eval_share: float | None = None
    # the training games that ended from the greedy solve on (scores.csv): how many, and
    # their mean score. How fast the smoothed score climbs to the stop reward after the
    # greedy solve is their level and count; None without a greedy solve or a scores.csv
    games_after: int | None = None
    level_after: float | None = None
    # the games the book's rule asks from the greedy solve on if every one scores exactly
    # that evaluation's mean (tracking.games_to_reach, from the smoothed score of the games
    # before it): how much of greedy to book's the rule's smoothing takes, beside what the
    # games in play at the solve add; None without a greedy solve, its evaluation or a
    # scores.csv; infinite where that mean is at or below the stop reward
    rule_games: float | None = None
    # the agent steps the run was given (run.steps): where an unsolved run would have
    # stopped; None from a summary without it
    budget: int | None = None
    # the final weights' greedy games (eval.at_end's evaluation): whether the agent the run
    # ended with still plays the game, which best.pt (the best-evaluated snapshot) does not
    # say; None where the run made none
    final: float | None = None
    # the agent steps at which the run was resumed (summary.json's resumed_at_steps): its
    # games after are not the uninterrupted run's; empty for a run never stopped, or from
    # a version before the field
    resumed_at: tuple[int, ...] = ()
    # best.pt's and the final weights' greedy games from every start NoopReset can give,
    # weighted as drawn (starts.json, ``score_starts``): without sticky actions, each
    # one's expected greedy score exactly; and the final weights' lowest start. None
    # until scored
    starts_best: float | None = None
    starts_final: float | None = None
    starts_final_low: float | None = None

    @property
    def solve_frames(self) -> float:
        """Frames to solve; infinite when not solved, so it sorts after every solve."""
        return level_frames(self, self.stop)


def parse_seeds(text: str) -> list[int]:
    """``0-4`` or ``0,2,5`` (or both: ``0-2,7``); ValueError on anything else."""
    seeds: list[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        seeds += range(int(low), int(high or low) + 1)
    return seeds


def read_result(seed: int, run_dir: Path) -> SeedResult:
    """A seed's figures from its run directory; ValueError naming the file if missing."""
    path = run_dir / "summary.json"
    try:
        summary = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"{path}: no readable summary ({err}); did the run start?") from err
    reached = summary.get("reached", {})
    play_path = run_dir / "play.json"
    play = json.loads(play_path.read_text())["mean"] if play_path.is_file() else None
    # summary_steps: summaries of earlier versions said frames (the same agent steps)
    greedy = summary_steps(summary, "eval_solved_at_steps")
    evaluations = summary.get("evaluations", [])
    from_greedy = [e for e in evaluations if greedy and summary_steps(e) >= greedy]
    after = [e["reward"] for e in from_greedy]
    # the evaluation that solved: eval.at_end's final one can share its step, never precede it
    solve = min(from_greedy, key=summary_steps)["reward"] if from_greedy else None
    finals = [e["reward"] for e in evaluations if e.get("final")]
    starts_path = run_dir / STARTS_FILE
    starts = json.loads(starts_path.read_text()) if starts_path.is_file() else {}
    final_starts = starts.get("final")
    return SeedResult(
        seed=seed,
        run_dir=str(run_dir),
        solved=bool(summary["solved"]),
        frames=int(summary_steps(summary)),
        fps=float(summary.get("fps_after_warmup") or summary["fps"]),
        to_frames={k: int(summary_steps(v)) for k, v in reached.items()},
        to_seconds={k: float(v["seconds"]) for k, v in reached.items()},
        greedy_frames=greedy,
        best_smoothed=summary.get("best_avg_reward"),
        play=play,
        stop=f"{summary['preset']['run']['stop_reward']:g}",
        greedy_low=min(after) if after else None,
        eval_share=summary.get("eval_cpu_share"),
        budget=summary_steps(summary["preset"]["run"]),
        final=finals[-1] if finals else None,
        resumed_at=tuple(summary.get("resumed_at_steps", ())),
        starts_best=starts["best"]["mean"] if "best" in starts else None,
        starts_final=final_starts["mean"] if final_starts else None,
        starts_final_low=min(final_starts["scores"]) if final_starts else None,
        **games_from(run_dir, greedy, solve, float(summary["preset"]["run"]["stop_reward"])),
    )


def games_from(
    run_dir: Path, frames: int | None, level: float | None, stop: float
) -> dict[str, Any]:
    """``games_after`` and ``level_after``: the games in the run's scores.csv that ended
    from agent step ``frames`` on, and their mean score; None for both without ``frames``,
    the file or a game. ``rule_games``: the games the smoothed score, as the last game
    that ended before ``frames`` left it, needs to reach ``stop`` at ``level`` each; None
    without ``frames``, ``level`` or the file."""
    none = {"games_after": None, "level_after": None, "rule_games": None}
    if frames is None or not (run_dir / "scores.csv").is_file():
        return none
    games = read_scores(run_dir)
    before = games[games[:, 1] < frames, 3]
    smoothed = float(before[-1]) if len(before) else None
    rule = None if level is None else games_to_reach(smoothed, level, stop)
    scores = games[games[:, 1] >= frames, 2]
    if not len(scores):
        return none | {"rule_games": rule}
    return {"games_after": len(scores), "level_after": float(scores.mean()), "rule_games": rule}


def finished(run_dir: Path) -> bool:
    """Whether the run in ``run_dir`` ended by itself: solved, or its budget spent."""
    try:
        summary = json.loads((run_dir / "summary.json").read_text())
    except (OSError, json.JSONDecodeError):
        return False
    run = summary["preset"]["run"]
    out_of_time = run["seconds"] > 0 and summary["seconds"] >= run["seconds"]
    budget = summary_steps(run)
    return bool(summary["solved"]) or summary_steps(summary) >= budget or out_of_time


def median(values: Sequence[float]) -> float:
    """The median, where infinite values (not solved) count as the largest."""
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        return math.nan
    if n % 2:
        return ordered[n // 2]
    low, high = ordered[n // 2 - 1], ordered[n // 2]
    return math.inf if math.isinf(high) else (low + high) / 2


def level_frames(result: SeedResult, level: str) -> float:
    return float(result.to_frames[level]) if level in result.to_frames else math.inf


def greedy_gap(result: SeedResult) -> float | None:
    """Frames from the greedy solve to the book's (the smoothed training score's); infinite
    where the greedy agent solved and the training score did not; None without a greedy
    solve."""
    if result.greedy_frames is None:
        return None
    return result.solve_frames - result.greedy_frames


def _frames(value: float, ran: int | None = None) -> str:
    if math.isinf(value):
        return "not solved" if ran is None else f"not by {ran / 1e6:.2f}M"
    return f"{value / 1e6:.2f}M"


def _share(share: float | None) -> str:
    return "" if share is None else f"{share:.1%}"


def _score_pick(scores: list[float], name: str) -> float:
    """The median of scores, or for the worst row the lowest (a score's worst is its least)."""
    return float(np.median(scores)) if name == "median" else min(scores)


def _best(smoothed: float | None, missing: str) -> str:
    """The best smoothed score to a tenth, rounded down: an unsolved run's 17.95 reads
    +17.9, not the +18.0 it did not reach."""
    if smoothed is None:
        return missing
    return f"{math.floor(smoothed * 10 + 1e-9) / 10:+.1f}"  # 1e-9: a tenth stored a hair under


def _minutes(frames: float, fps: float | None) -> str:
    return "" if math.isinf(frames) or not fps else f"{frames / fps / 60:.1f}"


def table(results: list[SeedResult], fps_alone: float | None = None) -> str:
    """Markdown: a row per seed, then the median and the worst over the seeds.

    Minutes are frames over ``fps_alone`` when given (FPS measured with the machine to
    one run), else over each run's own FPS (right only when the runs ran one at a time).
    """
    if not results:
        return "no runs\n"
    stop = results[0].stop
    levels = (*LEVELS, stop)
    head = [f"steps to {lv}" for lv in levels] + [f"min to {lv}" for lv in levels]
    head += ["greedy solve", "greedy low after", "games after (mean)", "games the rule asks"]
    head += ["greedy to book's"]
    head += ["FPS", "best smoothed"]
    head += ["eval CPU", "play.py", "final weights", "every start: best.pt / final (lowest)"]
    lines = ["| seed | " + " | ".join(head) + " |", "|---:|" + "---:|" * len(head)]

    def cells(frames: list[float], fps: float | None, rest: list[str], ran: int | None) -> str:
        parts = [_frames(f, ran) for f in frames] + [_minutes(f, fps) for f in frames]
        return " | ".join(parts + rest)

    for r in results:
        fps = fps_alone or r.fps
        frames = [level_frames(r, lv) for lv in levels]
        greedy = "" if r.greedy_frames is None else _frames(r.greedy_frames)
        low = "" if r.greedy_low is None else f"{r.greedy_low:+.1f}"
        gap = greedy_gap(r)
        gap_cell = "" if gap is None else _frames(gap, r.frames - (r.greedy_frames or 0))
        best = _best(r.best_smoothed, "")
        play = "" if r.play is None else f"{r.play:.1f}"
        after = "" if r.level_after is None else f"{r.games_after} ({r.level_after:+.1f})"
        final = "" if r.final is None else f"{r.final:+.1f}"
        rest = [greedy, low, after, _games(r.rule_games), gap_cell, f"{r.fps:,.0f}", best]
        rest += [_share(r.eval_share), play]
        rest += [final, _starts_cell(r.starts_best, r.starts_final, r.starts_final_low)]
        lines.append(f"| {r.seed} | " + cells(frames, fps, rest, r.frames) + " |")
    fps = fps_alone or float(np.median([r.fps for r in results]))
    plays = [r.play for r in results if r.play is not None]
    lows = [r.greedy_low for r in results if r.greedy_low is not None]
    levels_after = [r.level_after for r in results if r.level_after is not None]
    rules = [r.rule_games for r in results if r.rule_games is not None]
    gaps = [g for g in map(greedy_gap, results) if g is not None]
    shares = [r.eval_share for r in results if r.eval_share is not None]
    finals = [r.final for r in results if r.final is not None]
    starts = [
        [getattr(r, f) for r in results if getattr(r, f) is not None]
        for f in ("starts_best", "starts_final", "starts_final_low")
    ]
    for name, pick in (("median", median), ("worst", max)):
        frames = [pick([level_frames(r, lv) for r in results]) for lv in levels]
        play = low = gap = after = final = rule = ""
        share = _share(pick(shares)) if shares else ""
        if plays:
            play = f"{_score_pick(plays, name):.1f}"
        if lows:
            low = f"{_score_pick(lows, name):+.1f}"
        if gaps:
            gap = _frames(pick(gaps))
        if levels_after:
            after = f"({_score_pick(levels_after, name):+.1f})"
        if finals:
            final = f"{_score_pick(finals, name):+.1f}"
        if rules:
            rule = _games(pick(rules))
        picked = [_score_pick(v, name) if v else None for v in starts]
        rest = ["", low, after, rule, gap, "", "", share, play, final, _starts_cell(*picked)]
        lines.append(f"| **{name}** | " + cells(frames, fps, rest, None) + " |")
    solved = sum(r.solved for r in results)
    clock = f"{fps_alone:,.0f} FPS measured alone" if fps_alone else "each run's own FPS"
    lines += [
        "",
        f"{solved} of {len(results)} seeds solved (smoothed training score >= {stop}). "
        "Steps are agent steps summed over the envs (times the frame skip: emulator "
        f"frames); minutes are steps over {clock}. Greedy solve: the first evaluation "
        "(a snapshot's greedy games) whose mean reached the stop reward; greedy low after: "
        "the lowest evaluation from it on (did the agent stay solved?); games after: the "
        "training games that ended from it on and their mean score (the smoothed score climbs "
        "to the stop reward at their level, one game per game's length in agent steps; "
        "evaluations at epsilon 0 play a few distinct games); games the rule asks: how many "
        "games the smoothed score needs from its value at the greedy solve to the stop reward "
        "if every one scores exactly that evaluation's mean (never: the mean is not above it; "
        "games after counts the games still in play at the solve as well); greedy to book's: "
        "steps from it to the training score's solve. eval CPU: the evaluations' share of the "
        "run's CPU from the first on (the first always plays, so a run that ends soon after "
        "it reads above eval.max_cpu_share; eval.at_end's final one is left out). play.py: "
        "best.pt's mean over greedy games. final weights: the weights the run ended with, "
        "their greedy games' mean (eval.at_end; it counts in greedy low after). every start: "
        "best.pt's and the final weights' greedy games from every start NoopReset can give, "
        "weighted as drawn (seeds.py --every-start; without sticky actions the agent's "
        "expected greedy score, exactly), and the final weights' lowest start's score.",
    ]
    resumed = [r for r in results if r.resumed_at]
    if resumed:
        where = "; ".join(
            f"seed {r.seed} at {', '.join(_frames(f) for f in r.resumed_at)}" for r in resumed
        )
        lines += [
            "",
            f"Resumed (--resume): {where}. A resume restarts every env's game at once, so the "
            "games after it are not the uninterrupted run's and its solve can come later "
            "(docs/usage.md).",
        ]
    return "\n".join(lines) + "\n"


def _games(count: float | None) -> str:
    if count is None:
        return ""
    return "never" if math.isinf(count) else f"{count:.0f}"


def _starts_cell(best: float | None, final: float | None, low: float | None) -> str:
    if best is None and final is None:
        return ""
    best_text = "" if best is None else f"{best:+.1f}"
    final_text = "" if final is None else f"{final:+.1f} ({low:+.0f})"
    return f"{best_text} / {final_text}"


def parted_at(run_dir: Path, other_dir: Path) -> tuple[bool, int] | None:
    """Where two runs' training games part ways: (True, the agent step at which the first
    game that differs, in score or in the step it ended, ended in the earlier run), or
    (False, the shorter run's last game's step) where every game of the shorter is the
    other's; None where either has no game. Runs of one seed on one thread follow the same
    path until a change acts, so this says where a lever started to matter."""
    paths = [d / "scores.csv" for d in (run_dir, other_dir)]
    if not all(p.is_file() for p in paths):
        return None
    a, b = (read_scores(d)[:, 1:3] for d in (run_dir, other_dir))
    n = min(len(a), len(b))
    if n == 0:
        return None
    differ = np.flatnonzero((a[:n] != b[:n]).any(axis=1))
    if len(differ):
        i = differ[0]
        return True, int(min(a[i, 0], b[i, 0]))
    return False, int(a[n - 1, 0])


def compare_table(results: list[SeedResult], others: list[SeedResult], name: str) -> str:
    """Markdown: each seed's agent steps to -15, 0, the greedy solve and the stop reward in
    this set and in ``name``'s (``this / other``), where their games parted ways, then the
    median and the worst of each; seeds missing from either set are left out."""
    by_seed = {r.seed: r for r in others}
    pairs = [(r, by_seed[r.seed]) for r in results if r.seed in by_seed]
    if not pairs:
        return f"no seed of this set is in {name}\n"
    stop = pairs[0][0].stop
    levels = (*LEVELS, "greedy", stop)
    head = ["steps to -15", "to 0", "greedy solve", f"to {stop}", "best smoothed", "parted at"]
    lines = ["| seed | " + " | ".join(head) + " |", "|---:|" + "---:|" * len(head)]

    def steps(r: SeedResult, level: str) -> float:
        return _milestone(r, level, math.inf)

    def pair(this: float, other: float, ran: tuple[int | None, int | None]) -> str:
        return f"{_frames(this, ran[0])} / {_frames(other, ran[1])}"

    for this, other in pairs:
        cells = [
            pair(steps(this, lv), steps(other, lv), (this.frames, other.frames)) for lv in levels
        ]
        best = [_best(r.best_smoothed, "-") for r in (this, other)]
        parted = parted_at(Path(this.run_dir), Path(other.run_dir))
        where = "" if parted is None else _frames(parted[1])
        if parted is not None and not parted[0]:
            where = f"same to {where}"
        cells += [" / ".join(best), where]
        lines.append(f"| {this.seed} | " + " | ".join(cells) + " |")
    for label, pick in (("median", median), ("worst", max)):
        cells = [
            pair(
                pick([steps(t, lv) for t, _ in pairs]),
                pick([steps(o, lv) for _, o in pairs]),
                (None, None),
            )
            for lv in levels
        ]
        lines.append(f"| **{label}** | " + " | ".join([*cells, "", ""]) + " |")
    solved = [sum(t.solved for t, _ in pairs), sum(o.solved for _, o in pairs)]
    lines += [
        "",
        f"This set / {name}: {solved[0]} / {solved[1]} of {len(pairs)} seeds solved. Agent "
        "steps; the greedy solve is the first evaluation whose mean reached the stop reward. "
        "Parted at: the agent step at which the two runs' training games first differ (runs of "
        "one seed on one thread are the same until a change acts).",
    ]
    return "\n".join(lines) + "\n"


def read_set(directory: Path) -> tuple[list[SeedResult], list[str]]:
    """Every finished run of a set's directory (its ``s<seed>`` with a summary.json), by
    seed, and the names of those not finished (still running, or stopped part way)."""
    runs, unfinished = [], []
    for path in sorted(directory.glob("s*")):
        if not (path.name[1:].isdigit() and (path / "summary.json").is_file()):
            continue
        if finished(path):
            runs.append(read_result(int(path.name[1:]), path))
        else:
            unfinished.append(str(path))
    return sorted(runs, key=lambda r: r.seed), unfinished


def midranks(values: Sequence[float]) -> np.ndarray:
    """Ranks from 1, ties (infinite values among them) sharing their mean rank."""
    _, inverse, counts = np.unique(np.asarray(values), return_inverse=True, return_counts=True)
    top = np.cumsum(counts)  # the highest rank of each distinct value
    return (top - (counts - 1) / 2.0)[inverse]


def rank_sum_p(first: Sequence[float], second: Sequence[float], draws: int = 20_000) -> float:
    """One-sided p of the rank-sum (Mann-Whitney) test that ``first``'s values are smaller:
    the share of the ways to split the pooled values into groups of these sizes whose first
    group's rank sum is at most the observed one. Exact over every split where there are at
    most ``draws`` of them, else over ``draws`` random splits (seeded: the same p each time)."""
    ranks = midranks([*first, *second])
    k, n = len(first), len(ranks)
    observed = ranks[:k].sum() + 1e-9  # a hair over: equal sums count, as they should
    if math.comb(n, k) <= draws:
        picks = np.array(list(combinations(range(n), k)), dtype=np.intp).reshape(-1, k)
    else:
        picks = np.random.default_rng(0).permuted(np.tile(np.arange(n), (draws, 1)), axis=1)
    sums = ranks[picks[:, :k]].sum(axis=1)
    return float((sums <= observed).mean())


def pooled_table(
    results: list[SeedResult], others: list[SeedResult], name: str, left_out: Sequence[str] = ()
) -> str:
    """Markdown: every finished run of this set against every one of ``name``'s, whatever
    their seeds, as two samples: per milestone (-15, 0, the greedy solve, the stop
    reward) how many runs reached it by a common cap, the median, and the one-sided
    rank-sum p each way. The cap is the fewest agent steps of any run's budget (or of where
    an unsolved one ended): every run is seen to there, so a set with a shorter budget is
    not counted as slower past it, nor a longer one as faster."""
    if not results or not others:
        return f"no finished run in this set or in {name}\n"
    cap = min(_horizon(r) for r in (*results, *others))
    stop = results[0].stop
    head = ["this set: reached", "median", f"{name}: reached", "median"]
    head += ["p, this set earlier", "p, this set later"]
    lines = ["| milestone | " + " | ".join(head) + " |", "|---|" + "---:|" * len(head)]
    for level, label in (
        *((lv, f"smoothed {lv}") for lv in LEVELS),
        ("greedy", "greedy solve"),
        (stop, f"smoothed {stop} (solved)"),
    ):
        this, other = ([_milestone(r, level, cap) for r in runs] for runs in (results, others))
        cells = []
        for values in (this, other):
            cells += [f"{sum(map(math.isfinite, values))} of {len(values)}"]
            cells += [_frames(median(values))]
        cells += [f"{rank_sum_p(this, other):.3f}", f"{rank_sum_p(other, this):.3f}"]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    by = "(no cap)" if math.isinf(cap) else f"by {cap / 1e6:.2f}M agent steps"
    seeds = [", ".join(str(r.seed) for r in runs) for runs in (results, others)]
    lines += [
        "",
        f"Reached: runs that reached the milestone {by}, the shortest budget of a run (or "
        f"where an unsolved one ended; this set's seeds {seeds[0]}; {name}'s {seeds[1]}). "
        "A run's outcome is a draw that its seed number does not carry from one recipe to "
        "another (docs/seed-outcomes), so the sets are two samples, not pairs: p is the "
        "one-sided rank-sum test's over the pooled runs (exact where the splits are few, "
        "else 20,000 drawn), those not there by the cap tied as the slowest; a small p in "
        "the first column says this set gets there earlier than chance would explain.",
    ]
    if left_out:
        lines.append(f"Not finished, left out: {', '.join(left_out)}.")
    return "\n".join(lines) + "\n"


def _horizon(result: SeedResult) -> float:
    """How far a run's milestones are known: where an unsolved run ended; for a solved
    one, its budget (had it not solved it would have stopped there), else no limit."""
    if not result.solved:
        return float(result.frames)
    return math.inf if result.budget is None else float(result.budget)


def _milestone(result: SeedResult, level: str, cap: float) -> float:
    """Agent steps to ``level`` (a smoothed score, or "greedy": the greedy solve);
    infinite where not reached by ``cap``."""
    if level == "greedy":
        steps = math.inf if result.greedy_frames is None else float(result.greedy_frames)
    else:
        steps = level_frames(result, level)
    return steps if steps <= cap else math.inf


def plot(results: list[SeedResult], title: str, path: Path) -> None:
    """Every seed's smoothed training score against agent steps, with the stop reward."""
    runs = [(f"seed {r.seed}", Path(r.run_dir)) for r in results]
    line = float(results[0].stop) if results else None
    plot_scores(title, runs, path, by_steps=True, line_at=line)


def lane_cores(lanes: int, cores: Sequence[int]) -> list[list[int]]:
    """The cores of each lane, from ``cores`` (the ones this process may run on, so that
    two seeds.py started under ``taskset`` share the machine): an equal share each, at
    least one."""
    per = max(len(cores) // lanes, 1)
    return [[cores[(lane * per + i) % len(cores)] for i in range(per)] for lane in range(lanes)]


def train_command(preset: str, seed: int, run_dir: Path, extra: Sequence[str]) -> list[str]:
    return [
        sys.executable,
        str(ROOT / "train.py"),
        "--preset",
        preset,
        "--seed",
        str(seed),
        "--run-dir",
        str(run_dir),
        *extra,
    ]


def run_seeds(
    preset: str,
    seeds: Sequence[int],
    out: Path,
    extra: Sequence[str] = (),
    lanes: int = 1,
    resume: bool = False,
    on_finished: Callable[[int], None] | None = None,
) -> None:
    """Train every seed not yet finished in ``out/s<seed>``, ``lanes`` at a time, each
    lane pinned to its share of the cores with as many torch threads. A run directory left
    by an unfinished run is refused (its logs would mix with a new run's), or with
    ``resume`` goes on from its checkpoint.pt (train.py --resume in the same directory,
    whose logs then continue from the checkpoint). ``on_finished(seed)`` is called as each
    seed trained here ends by itself, while the other lanes go on."""
    todo: list[tuple[int, Path | None]] = []  # (seed, the checkpoint it goes on from)
    for seed in seeds:
        run_dir = out / f"s{seed}"
        checkpoint = run_dir / "checkpoint.pt"
        if finished(run_dir):
            print(f"seed {seed}: finished in {run_dir}, kept", flush=True)
        elif resume and checkpoint.is_file():
            todo.append((seed, checkpoint))
        elif run_dir.exists():
            if checkpoint.is_file():
                hint = ", or pass --resume to go on from its checkpoint.pt"
            else:
                hint = " (it has no checkpoint.pt to go on from)"
            raise ValueError(
                f"{run_dir}: a run that did not finish is there; move it away to train "
                f"seed {seed} again{hint}"
            )
        else:
            todo.append((seed, None))
    cores = lane_cores(lanes, sorted(os.sched_getaffinity(0)))
    running: dict[int, tuple[subprocess.Popen, int]] = {}  # lane -> (process, seed)
    try:
        while todo or running:
            for lane in range(lanes):
                if lane not in running and todo:
                    seed, checkpoint = todo.pop(0)
                    try:
                        proc = start(preset, seed, out, extra, cores[lane], checkpoint)
                    except ConfigError as err:  # another seeds.py is running this seed
                        print(f"seed {seed}: {err}; skipped", file=sys.stderr, flush=True)
                        continue
                    running[lane] = (proc, seed)
            if not running:
                continue
            lane, (proc, seed) = wait_any(running)
            del running[lane]
            if proc.returncode != 0:
                print(f"seed {seed}: train.py exited {proc.returncode}", file=sys.stderr)
            elif on_finished is not None and finished(out / f"s{seed}"):
                on_finished(seed)
    finally:
        stop_all([proc for proc, _ in running.values()])


def start(
    preset: str,
    seed: int,
    out: Path,
    extra: Sequence[str],
    cores: list[int],
    checkpoint: Path | None = None,
) -> subprocess.Popen:
    """Seed ``seed``'s train.py on ``cores``, from the start or on from ``checkpoint``;
    ConfigError, with its log untouched, where a run holds the seed's directory or another
    seeds.py its log."""
    run_dir = out / f"s{seed}"
    log = out / f"s{seed}.log"
    run_dir.mkdir(parents=True, exist_ok=True)
    fd = lock_log(log)
    try:
        # train.py takes the directory's lock only once it has started: until then the
        # log's lock (which train.py inherits with the log) is what keeps a second
        # seeds.py from starting this seed too and emptying the winner's log.
        RunDirLock(run_dir).acquire().release()
        # Another seeds.py sharing ``out`` may have run this seed since this one listed it.
        if finished(run_dir):
            raise ConfigError(f"{run_dir}: finished by another run since this seeds.py began")
        if checkpoint is None and any(p.name != LOCK_FILE for p in run_dir.iterdir()):
            raise ConfigError(
                f"{run_dir}: written by another run since this seeds.py began; its run is "
                "left as it is"
            )
        if checkpoint is None:
            os.ftruncate(fd, 0)
        env = {**os.environ, "OMP_NUM_THREADS": str(len(cores)), "MKL_NUM_THREADS": str(len(cores))}
        how = "training" if checkpoint is None else f"going on from {checkpoint}"
        print(f"seed {seed}: {how} on cores {cores}, log {log}", flush=True)
        if checkpoint is not None:
            extra = [*extra, "--resume", str(checkpoint)]
        return subprocess.Popen(
            train_command(preset, seed, run_dir, extra),
            stdout=fd,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=ROOT,
            preexec_fn=lambda: os.sched_setaffinity(0, cores),
        )
    finally:
        os.close(fd)  # the train.py started holds the log's lock from here on


def lock_log(log: Path) -> int:
    """A descriptor of ``log``, opened for appending without emptying it, with an ``flock``
    that lasts while it or a copy (a train.py's stdout) is open; ConfigError, the log
    untouched, where another seeds.py (or the train.py it started) holds it."""
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise ConfigError(f"{log}: written by a run another seeds.py started") from None
    except OSError as err:
        os.close(fd)
        if err.errno not in NO_FLOCK:
            raise
        # not a ConfigError: that would read as "another seeds.py has this seed" and skip it
        raise ValueError(
            f"{log}: this filesystem cannot lock files ({errno.errorcode[err.errno]}); "
            "give an --out on a local disk"
        ) from None
    except BaseException:
        os.close(fd)
        raise
    return fd


def wait_any(
    running: dict[int, tuple[subprocess.Popen, int]],
) -> tuple[int, tuple[subprocess.Popen, int]]:
    """The first lane whose run ends (polling: a wait on one would block the others)."""
    while True:
        for lane, entry in running.items():
            if entry[0].poll() is not None:
                return lane, entry
        time.sleep(1.0)


def stop_all(procs: list[subprocess.Popen]) -> None:
    """SIGTERM each run still going (it saves and exits, as on Ctrl-C; SIGINT may be
    ignored in a child of a background shell), then kill what has not."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=STOP_WAIT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=STOP_WAIT)


def score(run_dir: Path, episodes: int) -> float | None:
    """Play best.pt greedily with play.py, once: its mean, saved as play.json beside it."""
    path = run_dir / "play.json"
    if path.is_file():
        return float(json.loads(path.read_text())["mean"])
    best = run_dir / "best.pt"
    if not best.is_file():
        return None
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "play.py"),
            str(best),
            "--episodes",
            str(episodes),
            "--json",
            "--no-window",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=3600,
    )
    if done.returncode != 0:
        print(f"{best}: play.py exited {done.returncode}: {done.stderr.strip()[-300:]}")
        return None
    result = json.loads(done.stdout.strip().splitlines()[-1])
    write_text_atomic(path, json.dumps(result, indent=2))
    return float(result["mean"])


def score_starts(run_dir: Path) -> dict[str, Any] | None:
    """Play best.pt and the final weights (checkpoint.pt; their moving average where the
    run's evaluations would play it there, ``Checkpoint.policy``) greedily from every
    start (``play_every_start``), each game cut at the run's eval.max_frames, once: saved
    as starts.json beside them. None where the run has neither file, or its pipeline has
    no NoopReset (said in a line)."""
    path = run_dir / STARTS_FILE
    if path.is_file():
        return json.loads(path.read_text())
    import torch  # here: the rest of seeds.py needs no torch

    from atari_speed.run.checkpoint import load_checkpoint
    from atari_speed.run.evaluation import play_every_start

    summary = json.loads((run_dir / "summary.json").read_text())
    max_frames = summary["preset"].get("eval", {}).get("max_frames", 0)
    result: dict[str, Any] = {}
    for name, file in (("best", "best.pt"), ("final", "checkpoint.pt")):
        if not (run_dir / file).is_file():
            continue
        try:
            ckpt = load_checkpoint(run_dir / file)
            net = ckpt.policy(torch.device("cpu"), evaluated=True)
            played = play_every_start(ckpt.pipeline, ckpt.game, net, max_frames)
        except ConfigError as err:
            print(f"{run_dir / file}: not played from every start: {err}")
            return None
        result[name] = {"steps": ckpt.frames, **played}
    if not result:
        return None
    write_text_atomic(path, json.dumps(result, indent=2))
    return result


def report(
    seeds: Sequence[int],
    out: Path,
    title: str,
    fps_alone: float | None = None,
    against: Path | None = None,
) -> tuple[str, list[SeedResult]]:
    """The table of the seeds in ``out``, written with the plot and the data beside them;
    with ``against`` (another set's directory), the seeds both have, side by side."""
    results = [read_result(s, out / f"s{s}") for s in seeds]
    text = f"# {title}\n\n" + table(results, fps_alone)
    if against is not None:
        others = [read_result(s, against / f"s{s}") for s in seeds if (against / f"s{s}").is_dir()]
        text += f"\n## Against {against}\n\n" + compare_table(results, others, str(against))
        mine = [r for r in results if finished(Path(r.run_dir))]
        theirs, unfinished = read_set(against)
        unfinished += [r.run_dir for r in results if r not in mine]
        text += f"\n## Pooled against {against}\n\n"
        text += pooled_table(mine, theirs, str(against), unfinished)
    write_text_atomic(out / "seeds.md", text)
    data = {"title": title, "fps_alone": fps_alone, "seeds": [asdict(r) for r in results]}
    write_text_atomic(out / "seeds.json", json.dumps(data, indent=2))
    plot(results, title, out / "seeds.png")
    return text, results
