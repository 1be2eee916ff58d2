"""Which weights a run's greedy evaluations should play: the weights as they are, their
moving average (``eval.average_steps``), or the weights below a smoothed training score
and the average from it (``eval.average_from``), compared on runs already made.

Evaluations never touch training (their games, seeds and random numbers are their own),
so a run kept with ``eval.snapshots = true`` holds at every evaluation both the weights
(``snapshots/<step>.pt``) and their average (``<step>-average.pt``), and what any of the
three rules would have read there can be played after the run, exactly: one greedy game
from every start (``play_every_start``, as ``eval.every_start``), the scores kept in
``snapshots/starts.json`` so that each snapshot is played once. The smoothed training
score at an evaluation is the last one scores.csv holds at or before its agent step.

Per run and rule it prints the greedy agent's first evaluation at the stop reward, the
lowest evaluation from it on (the final one included: did the agent stay solved?), and
the agent steps from it to the training score's solve (the book's rule).

    uv run benchmarks/eval_weights.py runs/fp32/s0 runs/fp32/s1 --average-from 15
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path
from typing import Any

from atari_speed.agent.averaging import plays_average
from atari_speed.core.errors import ConfigError
from atari_speed.run.tracking import summary_steps

SCORES = "starts.json"  # in snapshots/: each snapshot's mean over every start


def smoothed_at(run_dir: Path, steps: int) -> float | None:
    """The smoothed training score scores.csv holds at agent step ``steps`` (None: no game
    had ended by then)."""
    smoothed = None
    with (run_dir / "scores.csv").open() as f:
        for row in csv.DictReader(f):
            if int(row["steps"]) > steps:
                break
            smoothed = float(row["smoothed"])
    return smoothed


def snapshot_means(run_dir: Path, max_frames: int) -> dict[str, float]:
    """Every snapshot's exact greedy mean over every start, by file name; played once and
    kept in snapshots/starts.json."""
    import torch  # here: --help needs no torch

    from atari_speed.run.checkpoint import load_checkpoint
    from atari_speed.run.evaluation import play_every_start

    folder = run_dir / "snapshots"
    path = folder / SCORES
    means: dict[str, float] = json.loads(path.read_text()) if path.is_file() else {}
    for file in sorted(folder.glob("*.pt")):
        if file.name not in means:
            ckpt = load_checkpoint(file)
            net = ckpt.policy(torch.device("cpu"))
            means[file.name] = play_every_start(ckpt.pipeline, ckpt.game, net, max_frames)["mean"]
            print(f"{file}: {means[file.name]:+.2f}", file=sys.stderr, flush=True)
            path.write_text(json.dumps(means, indent=1))
    return means


def judged(
    points: list[tuple[int, float]], stop: float, solved_at: int | None, final: set[int]
) -> dict:
    """The first evaluation at ``stop`` (not eval.at_end's, at the steps in ``final``: it
    comes after the run), the lowest from it on and its agent steps to the solve."""
    first = next((i for i, (s, r) in enumerate(points) if r >= stop and s not in final), None)
    if first is None:
        return {"first": None, "low": None, "gap": None}
    at = points[first][0]
    return {
        "first": at,
        "low": min(r for _, r in points[first:]),
        "gap": None if solved_at is None else solved_at - at,
    }


def rules(run_dir: Path, average_from: float) -> dict[str, Any]:
    """Each rule's evaluations of one run: (agent step, mean) at every snapshot."""
    summary = json.loads((run_dir / "summary.json").read_text())
    preset = summary["preset"]
    stop = preset["run"]["stop_reward"]
    means = snapshot_means(run_dir, preset.get("eval", {}).get("max_frames", 0))
    steps = sorted({int(summary_steps(e)) for e in summary["evaluations"]})
    missing = [s for s in steps if f"{s}.pt" not in means or f"{s}-average.pt" not in means]
    if missing:
        raise ConfigError(
            f"{run_dir}: no snapshot and average at agent steps {missing[:3]}: "
            "it needs a run made with eval.snapshots = true and eval.average_steps"
        )
    smoothed = [smoothed_at(run_dir, s) for s in steps]
    raw = [(s, means[f"{s}.pt"]) for s in steps]
    average = [(s, means[f"{s}-average.pt"]) for s in steps]
    switched = [
        (s, means[f"{s}-average.pt" if plays_average(average_from, m) else f"{s}.pt"])
        for s, m in zip(steps, smoothed, strict=True)
    ]
    solved_at = summary_steps(summary, "solved_at_steps") if summary.get("solved") else None
    final = {int(summary_steps(e)) for e in summary["evaluations"] if e.get("final")}
    return {
        "solved_at": solved_at,
        "points": list(
            zip(steps, smoothed, [r for _, r in raw], [r for _, r in average], strict=True)
        ),
        "weights": judged(raw, stop, solved_at, final),
        "average": judged(average, stop, solved_at, final),
        "switched": judged(switched, stop, solved_at, final),
    }


def cell(j: dict) -> str:
    if j["first"] is None:
        return "- | - | -"
    gap = "-" if j["gap"] is None else f"{j['gap'] / 1e6:.2f}M"
    return f"{j['first'] / 1e6:.2f}M | {j['low']:+.2f} | {gap}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("runs", nargs="+", type=Path, help="run directories with snapshots/")
    parser.add_argument(
        "--average-from",
        type=float,
        default=15.0,
        help="the smoothed score from which the switched rule plays the average",
    )
    args = parser.parse_args()
    rows, detail = [], []
    for run_dir in args.runs:
        try:
            result = rules(run_dir, args.average_from)
        except (ConfigError, OSError, KeyError) as err:
            raise SystemExit(f"eval_weights.py: {run_dir}: {err}") from None
        solved = result["solved_at"]
        book = "-" if solved is None else f"{solved:,}"
        rows.append(
            f"| {run_dir} | {book} | "
            + " | ".join(cell(result[k]) for k in ("weights", "average", "switched"))
            + " |"
        )
        points = ", ".join(
            f"{s / 1e6:.2f}M ({'-' if m is None else f'{m:.1f}'}): {r:+.2f} / {a:+.2f}"
            for s, m, r, a in result["points"]
        )
        detail.append(f"- {run_dir}: {points}")
    head = "first greedy solve | lowest after | to the training score's solve"
    print(f"| run | training score's solve (agent steps) | weights: {head} | average: {head} | "
          f"average from {args.average_from:g}: {head} |")  # fmt: skip
    print("|---|---:|" + "---:|" * 9)
    print("\n".join(rows))
    print(
        "\nEvaluations, agent step (smoothed training score then): "
        "the weights / their average, each over every start:"
    )
    print("\n".join(detail))


if __name__ == "__main__":
    main()
