"""Dopamine's published Atari training returns at one iteration, per game and agent.

    git clone https://github.com/google/dopamine /tmp/dopamine
    uv run benchmarks/dopamine_at.py /tmp/dopamine --iteration 9 --agents DQN Rainbow \
        --games breakout battlezone doubledunk namethisgame phoenix qbert

Dopamine's baselines/atari/data/<game>.json holds, for each agent and seed, the mean
return of the training games of each iteration (250,000 agent steps = 1M emulator frames,
sticky actions with repeat probability 0.25). Iteration 9 is the one that ends at 10M
frames. Prints a markdown table: the mean over seeds, and the range.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path


def at_iteration(data: list[dict], agent: str, iteration: int) -> list[float]:
    """Every seed's value for ``agent`` at ``iteration``."""
    return [r["Value"] for r in data if r["Agent"] == agent and r["Iteration"] == iteration]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dopamine", type=Path, help="a clone of google/dopamine")
    parser.add_argument("--iteration", type=int, default=9)
    parser.add_argument("--agents", nargs="+", default=["DQN", "Rainbow"])
    parser.add_argument("--games", nargs="+", required=True)
    args = parser.parse_args(argv)
    data_dir = args.dopamine / "baselines" / "atari" / "data"
    print("| game | " + " | ".join(f"{a} (mean, range over seeds)" for a in args.agents) + " |")
    print("|---|" + "---:|" * len(args.agents))
    for game in args.games:
        path = data_dir / f"{game}.json"
        if not path.is_file():
            print(f"dopamine_at.py: error: {path}: no such file", file=sys.stderr)
            return 2
        data = json.loads(path.read_text())
        cells = []
        for agent in args.agents:
            values = at_iteration(data, agent, args.iteration)
            if not values:
                cells.append("-")
                continue
            mean = statistics.mean(values)
            cells.append(
                f"{mean:.1f} ({min(values):.1f} to {max(values):.1f}, {len(values)} seeds)"
            )
        print(f"| {game} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
