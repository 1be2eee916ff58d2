"""What one evaluation costs: a checkpoint plays ``--episodes`` greedy games side by side
(as the run's evaluation does, ``run/evaluation.py``), timed in CPU seconds of the whole
process (torch's threads included), against the CPU seconds training spends on the
frames between two evaluations at a given training FPS.

    uv run benchmarks/eval_cost.py runs/x/best.pt --fps 1571 --every 100000 --reps 3

The share printed is the evaluation's CPU over training's (``cores`` x the seconds those
frames take at ``--fps``): what a run loses while evaluations are on, where the machine
has no idle core. A trained agent's games are the long ones (Pong's last 1,600 to 2,400
agent steps); an untrained one's are short, so give the run's best.pt.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
import torch

from atari_speed.envs.pipeline import make_env
from atari_speed.run.checkpoint import load_checkpoint
from atari_speed.run.evaluation import play_side_by_side


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("checkpoint", help="a best.pt or checkpoint.pt")
    parser.add_argument("--episodes", type=int, default=10, help="games per evaluation")
    parser.add_argument("--fps", type=float, required=True, help="training FPS, measured alone")
    parser.add_argument("--every", type=int, default=100_000, help="frames between evaluations")
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--reps", type=int, default=3, help="evaluations timed (median)")
    args = parser.parse_args()
    ckpt = load_checkpoint(args.checkpoint)
    net = ckpt.policy(torch.device("cpu"))
    budget = args.cores * args.every / args.fps
    costs = []
    for rep in range(args.reps):
        envs = [
            make_env(ckpt.pipeline, ckpt.game, seed=1000 * rep + i) for i in range(args.episodes)
        ]
        rng = np.random.default_rng(rep)
        cpu, wall = time.process_time(), time.perf_counter()
        scores = play_side_by_side(envs, net, torch.device("cpu"), 0.0, rng)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        for env in envs:
            env.close()
        costs.append(cpu)
        print(
            f"evaluation {rep}: mean {np.mean(scores):+.1f} over {len(scores)} games, "
            f"{cpu:.1f} CPU s ({wall:.1f} s wall), {cpu / budget:.1%} of training's "
            f"{budget:.0f} CPU s per {args.every:,} frames"
        )
    median = statistics.median(costs)
    print(
        f"median: {median:.1f} CPU s per evaluation = {median / budget:.1%} of training's CPU "
        f"at {args.fps:,.0f} FPS on {args.cores} cores, evaluating every {args.every:,} frames"
    )


if __name__ == "__main__":
    main()
