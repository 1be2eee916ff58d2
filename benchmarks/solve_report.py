"""Time to solve of finished runs, side by side: the ablation table (FPS, minutes to a
smoothed -15, 0 and the stop reward, frames to solve) for any run directories, the
smoothed score at every few minutes, and one PNG of the curves against wall time. With
--games, also how the games of each run went, window by window of frames: how many ended,
how long they lasted and how many were lost 20-21 or worse (from the run's TensorBoard
events), which shows a run stuck short of solved in long rallies or lost games.

    uv run benchmarks/solve_report.py runs/a runs/b --names "16 x 64" "32 x 32" \\
        --png docs/pong-fast-curves.png

Each run directory needs its summary.json and scores.csv (every train.py run writes
both). The CPU each ran on is printed beside it, from what auto recorded.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from atari_speed.app.ablation import markdown, plot_curves, read_scores, row, with_deltas
from atari_speed.run.tracking import summary_steps


def curve_at(
    run_dir: Path, marks: list[float], every: float, column: int = 0
) -> list[tuple[float, int, float] | None]:
    """(mark, frames, smoothed score) of the last game finished by each mark, in seconds
    (column 0 of scores.csv) or frames (column 1); None before the first game and past the
    run's end."""
    data = read_scores(run_dir)
    points: list[tuple[float, int, float] | None] = []
    for m in marks:
        before = data[data[:, column] <= m]
        ended = len(data) and data[-1, column] < m - every
        points.append(
            None if ended or not len(before) else (m, int(before[-1, 1]), float(before[-1, 3]))
        )
    return points


def games_by_window(run_dir: Path, window: int) -> list[tuple[int, int, float, float, int]]:
    """(window start, games ended, median and longest length in agent steps, games scored
    -20 or worse) for each ``window`` frames of the run, from its TensorBoard events."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    events.Reload()
    lengths = events.Scalars("episode/length")
    scores = events.Scalars("episode/reward")
    windows: dict[int, list[tuple[float, float]]] = {}
    for length, score in zip(lengths, scores, strict=True):
        windows.setdefault(length.step // window, []).append((length.value, score.value))
    rows = []
    for w in sorted(windows):
        games = np.array(windows[w])
        rows.append(
            (
                w * window,
                len(games),
                float(np.median(games[:, 0])),
                float(games[:, 0].max()),
                int((games[:, 1] <= -20).sum()),
            )
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("runs", nargs="+", type=Path, help="run directories")
    parser.add_argument("--names", nargs="+", help="a name per run (default: the directory)")
    parser.add_argument(
        "--by", choices=("minutes", "frames"), default="minutes", help="the curve's axis"
    )
    parser.add_argument(
        "--every",
        type=float,
        default=2.0,
        help="curve points every so many minutes, or 100k frames with --by frames",
    )
    parser.add_argument("--png", type=Path, help="write the curves here")
    parser.add_argument(
        "--games",
        type=float,
        metavar="FRAMES",
        help="also tabulate each run's games per window of so many frames (e.g. 250000)",
    )
    args = parser.parse_args()
    names = args.names or [run.name for run in args.runs]
    if len(names) != len(args.runs):
        parser.error(f"{len(args.runs)} runs but {len(names)} names")
    rows, summaries = [], []
    for name, run_dir in zip(names, args.runs, strict=True):
        summary = json.loads((run_dir / "summary.json").read_text())
        summaries.append(summary)
        rows.append(row(name, run_dir, summary))
    print(markdown("Time to solve", with_deltas(rows)))
    for name, summary in zip(names, summaries, strict=True):
        machine = summary.get("choices", {}).get("machine", {})
        cpu = machine.get("cpu") or "CPU not recorded (no auto field)"
        units = ", ".join(machine.get("cpu_bf16_units", [])) or "none recorded"
        print(
            f"- {name}: {cpu} (bf16 units: {units}), {summary['device']}, "
            f"torch threads {summary['torch_threads']}, {summary['precision']}, "
            f"mode {summary['mode']}, {summary['envs']} envs"
        )
    if args.by == "frames":
        every, last = args.every * 1e5, max(summary_steps(s) for s in summaries)
        label = "frames"
    else:
        every, last, label = args.every * 60, max(s["seconds"] for s in summaries), "minutes"
    marks = list(np.arange(every, last + every, every))
    column = 1 if args.by == "frames" else 0
    curves = [curve_at(run, marks, every, column) for run in args.runs]
    print(f"\nSmoothed score (frames) at each mark of {label}:\n")
    print(f"| {label} | " + " | ".join(names) + " |")
    print("|---:|" + "---|" * len(names))
    for i, m in enumerate(marks):
        cells = []
        for curve in curves:
            point = curve[i]
            cells.append("" if point is None else f"{point[2]:+.1f} ({point[1] / 1e6:.2f}M)")
        mark = f"{m / 1e6:.1f}M" if args.by == "frames" else f"{m / 60:g}"
        print(f"| {mark} | " + " | ".join(cells) + " |")
    for name, run_dir in zip(names, args.runs, strict=True) if args.games else ():
        print(f"\nGames of {name}, per {args.games / 1e3:g}k frames:\n")
        print("| frames from | games ended | median length | longest | scored -20 or worse |")
        print("|---:|---:|---:|---:|---:|")
        for start, games, median, longest, lost in games_by_window(run_dir, int(args.games)):
            print(f"| {start / 1e6:.2f}M | {games} | {median:,.0f} | {longest:,.0f} | {lost} |")
    if args.png:
        plot_curves("Smoothed game score against wall time", rows, args.png)
        print(f"\ncurves: {args.png}")


if __name__ == "__main__":
    main()
