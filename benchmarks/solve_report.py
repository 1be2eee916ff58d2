"""Time to solve of finished runs, side by side: the ablation table (FPS, minutes to a
smoothed -15, 0 and the stop reward, frames to solve) for any run directories, the
smoothed score at every few minutes, and one PNG of the curves against wall time.

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

from atari_speed.app.ablation import markdown, plot_curves, row, with_deltas


def curve_at(
    run_dir: Path, marks: list[float], every: float, column: int = 0
) -> list[tuple[float, int, float] | None]:
    """(mark, frames, smoothed score) of the last game finished by each mark, in seconds
    (column 0 of scores.csv) or frames (column 1); None before the first game and past the
    run's end."""
    data = np.loadtxt(run_dir / "scores.csv", delimiter=",", skiprows=1, ndmin=2)
    points: list[tuple[float, int, float] | None] = []
    for m in marks:
        before = data[data[:, column] <= m]
        ended = len(data) and data[-1, column] < m - every
        points.append(
            None if ended or not len(before) else (m, int(before[-1, 1]), float(before[-1, 3]))
        )
    return points


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
        every, last, label = args.every * 1e5, max(s["frames"] for s in summaries), "frames"
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
    if args.png:
        plot_curves("Smoothed game score against wall time", rows, args.png)
        print(f"\ncurves: {args.png}")


if __name__ == "__main__":
    main()
