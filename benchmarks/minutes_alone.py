"""Minutes a PQN run would have taken alone on the machine, from its agent steps and SGD
updates: runs trained side by side (``seeds.py --lanes 2``) count their agent steps, not
their clocks, and a recipe whose updates per rollout change as it goes (pqn.epochs,
pqn.updates_at_stop, pqn.updates_at_start) costs a different amount per agent step in
each phase, so one FPS figure cannot turn its steps into minutes.

A rollout of E envs x T steps costs the acting ``a`` seconds plus ``u`` seconds per SGD
update made on it. Two or more FPS figures measured alone (``--fps UPDATES:FPS``: the
updates per rollout of a run whose updates do not change, and its FPS after warm-up)
fix ``a`` and ``u`` (least squares); each run's SGD updates come from its TensorBoard
events (``train/sgd_updates``), so its minutes to a smoothed score are
(rollouts x a + updates x u) / 60. Evaluations are left out (their CPU share is in
seeds.py's table), unless ``--eval-share S`` counts them: of a run's recorded evaluations
(every eval.every agent steps, with eval.max_cpu_share 1), those that
eval.max_cpu_share = S would have started (its budget, on the modelled clock of training
and the evaluations chosen before), each at the CPU seconds its games took, before the
level; ``eval.at_end``'s final one comes after the run and is never counted.

    uv run train.py --preset pong-fast --seed 0 --set pqn.epochs=E --set eval.every=0 \\
        --set run.seconds=100 --run-dir /tmp/fps-eE ...      # FPS alone, E = 1, 4, 8
    uv run benchmarks/minutes_alone.py runs/zen3-ep8/s* runs/zen3-base/s* \\
        --fps 64:560 --fps 32:866 --fps 8:1500

Rows are grouped by the runs' parent directory (one set each), with each set's median and
worst (a milestone not reached is the worst).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

from atari_speed.app.seeds import median
from atari_speed.run.evaluation import eval_cpu_allows
from atari_speed.run.tracking import summary_steps

LEVELS = ("-15", "0", "18")


def parse_fps(text: str) -> tuple[float, float]:
    """``UPDATES:FPS`` (``32:866``) as numbers; ValueError naming the flag otherwise."""
    updates, _, fps = text.partition(":")
    try:
        point = float(updates), float(fps)
    except ValueError:
        point = (0.0, 0.0)
    if point[0] < 0 or point[1] <= 0:
        raise ValueError(f"--fps {text!r}: give UPDATES:FPS, e.g. 32:866")
    return point


def rollout_cost(points: list[tuple[float, float]], steps_per_rollout: int) -> tuple[float, float]:
    """(acting seconds per rollout, seconds per SGD update) from (updates per rollout, FPS)
    pairs measured alone: each rollout takes steps_per_rollout / FPS = a + updates x u."""
    if len({p[0] for p in points}) < 2:
        raise ValueError("--fps: give at least two different update counts (UPDATES:FPS)")
    updates = np.array([p[0] for p in points], dtype=float)
    seconds = np.array([steps_per_rollout / p[1] for p in points])
    design = np.stack([np.ones_like(updates), updates], axis=1)
    (acting, update), *_ = np.linalg.lstsq(design, seconds, rcond=None)
    return float(acting), float(update)


def updates_at(steps: np.ndarray, updates: np.ndarray, at: float) -> float:
    """The SGD updates made by agent step ``at``, linear between the logged points."""
    return float(np.interp(at, steps, updates))


def read_updates(run_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    """(agent steps, SGD updates so far) as the run logged them to TensorBoard."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    events.Reload()
    if "train/sgd_updates" not in events.Tags().get("scalars", []):
        raise ValueError(f"{run_dir}: no train/sgd_updates in its TensorBoard events")
    points = sorted((e.step, e.value) for e in events.Scalars("train/sgd_updates"))
    steps, updates = (np.array(column, dtype=float) for column in zip(*points, strict=True))
    return np.concatenate([[0.0], steps]), np.concatenate([[0.0], updates])


def run_minutes(
    run_dir: Path, cost: dict[int, tuple[float, float]], eval_share: float | None = None
) -> dict[str, float]:
    """Minutes alone to each level (infinite where not reached), for one run; ``cost``
    maps steps per rollout to its (acting, update) seconds; ``eval_share``: count the
    evaluations that eval.max_cpu_share = eval_share would have let start (None: none)."""
    summary = json.loads((run_dir / "summary.json").read_text())
    preset = summary["preset"]
    per_rollout = int(preset["run"]["envs"]) * int(preset["pqn"]["rollout"])
    if per_rollout not in cost:
        raise ValueError(f"{run_dir}: rollouts of {per_rollout} agent steps; no --fps for them")
    acting, update = cost[per_rollout]
    steps, updates = read_updates(run_dir)

    def training(at: float) -> float:
        return at / per_rollout * acting + updates_at(steps, updates, at) * update

    chosen: list[dict[str, float]] = []  # evaluations started: agent step, clock, CPU s
    if eval_share is not None:
        for e in summary.get("evaluations", []):
            if e.get("final"):
                continue
            at = float(summary_steps(e))
            clock = training(at) + sum(c["cpu_seconds"] for c in chosen)
            if eval_cpu_allows(chosen, eval_share, clock):
                chosen.append({"at": at, "run_cpu_seconds": clock, "cpu_seconds": e["cpu_seconds"]})
    minutes = {}
    for level in LEVELS:
        reached = summary.get("reached", {}).get(level)
        if reached is None:
            minutes[level] = math.inf
            continue
        at = float(summary_steps(reached))
        evaluations = [c for c in chosen if c["at"] < at]
        minutes[level] = (training(at) + sum(c["cpu_seconds"] for c in evaluations)) / 60
        if level == LEVELS[-1] and eval_share is not None:
            spent = sum(c["cpu_seconds"] for c in evaluations)
            since = training(at) + spent - evaluations[0]["run_cpu_seconds"] if evaluations else 0
            minutes["evaluations"] = len(evaluations)
            minutes["eval share"] = spent / since if since > 0 else math.nan
    return minutes


def table(rows: list[tuple[Path, dict[str, float]]]) -> str:
    """Markdown: a row per run, then each set's median and worst; with ``--eval-share``,
    each run's evaluations begun before the solve and their share of its CPU from the
    first on, at the solve."""
    evals = any("evaluations" in m for _, m in rows)
    extra = ["evaluations before 18", "their CPU share"] if evals else []
    lines = ["| run | " + " | ".join([*(f"min to {lv}" for lv in LEVELS), *extra]) + " |"]
    lines.append("|---|" + "---:|" * (len(LEVELS) + len(extra)))

    def cell(value: float) -> str:
        return "not reached" if math.isinf(value) else f"{value:.1f}"

    def eval_cells(minutes: dict[str, float]) -> list[str]:
        if not evals or "evaluations" not in minutes:
            return [""] * len(extra)
        share = minutes["eval share"]
        return [f"{minutes['evaluations']:.0f}", "" if math.isnan(share) else f"{share:.1%}"]

    for parent in dict.fromkeys(path.parent for path, _ in rows):
        group = [(path, m) for path, m in rows if path.parent == parent]
        for path, minutes in group:
            cells = [cell(minutes[lv]) for lv in LEVELS] + eval_cells(minutes)
            lines.append(f"| {path} | " + " | ".join(cells) + " |")
        for name, pick in (("median", median), ("worst", max)):
            values = [pick([m[lv] for _, m in group]) for lv in LEVELS]
            cells = [*map(cell, values), *[""] * len(extra)]
            lines.append(f"| **{parent} {name}** | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("runs", nargs="+", type=Path, help="run directories")
    parser.add_argument(
        "--fps",
        action="append",
        required=True,
        metavar="UPDATES:FPS",
        help="SGD updates per rollout and the FPS a run with that many stepped alone; twice "
        "or more",
    )
    parser.add_argument(
        "--rollout-steps",
        type=int,
        default=2048,
        help="agent steps per rollout (envs x pqn.rollout) the --fps runs had (default 2048)",
    )
    parser.add_argument(
        "--eval-share",
        type=float,
        default=None,
        metavar="S",
        help="count the evaluations eval.max_cpu_share = S would have started (1: all the run "
        "recorded); default: evaluations left out",
    )
    args = parser.parse_args(argv)
    try:
        points = [parse_fps(text) for text in args.fps]
        cost = {args.rollout_steps: rollout_cost(points, args.rollout_steps)}
        if args.eval_share is not None and not 0 < args.eval_share <= 1:
            raise ValueError(f"--eval-share {args.eval_share:g}: give a share in (0, 1]")
        rows = [(run, run_minutes(run, cost, args.eval_share)) for run in args.runs]
    except (ValueError, OSError, KeyError) as err:
        sys.exit(f"minutes_alone.py: {err}")
    acting, update = cost[args.rollout_steps]
    print(table(rows))
    print(
        f"A rollout of {args.rollout_steps} agent steps: {acting:.3f} s of acting + "
        f"{update * 1000:.1f} ms per SGD update (from --fps {' '.join(args.fps)})."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
