"""One learner update (sample-free: a fixed batch of 32) in several implementations of the
same math: torch threads, channels-last weights, fused vs per-tensor Adam.

    uv run benchmarks/sgd_step.py

Rows are interleaved over the repetitions and each reports the median milliseconds.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from atari_speed.agent.learner import Learner
from atari_speed.agent.networks import DQN
from atari_speed.agent.replay import Batch
from atari_speed.core.config import DQNConfig


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10, help="updates per timing window")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    batch = Batch(
        states=rng.integers(0, 255, (32, 4, 84, 84), dtype=np.uint8),
        next_states=rng.integers(0, 255, (32, 4, 84, 84), dtype=np.uint8),
        actions=rng.integers(0, 6, 32),
        returns=rng.random(32).astype(np.float32),
        discounts=np.where(rng.random(32) < 0.1, 0.0, 0.99).astype(np.float32),
    )
    cores = torch.get_num_threads()
    rows = {}
    for threads in sorted({1, cores}):
        for channels_last in (False, True):
            for fused in (True, False):
                torch.manual_seed(0)
                learner = Learner(
                    DQN((4, 84, 84), 6),
                    DQNConfig(),
                    torch.device("cpu"),
                    channels_last=channels_last,
                )
                if not fused:
                    learner.optimizer = torch.optim.Adam(
                        learner.net.parameters(), lr=1e-4, foreach=False
                    )
                name = (
                    f"{threads} thread{'s' if threads > 1 else ''}, "
                    f"{'channels-last' if channels_last else 'NCHW'}, "
                    f"{'fused' if fused else 'per-tensor'} Adam"
                )
                rows[name] = (threads, learner, [])
    for _ in range(args.reps):
        for threads, learner, times in rows.values():
            torch.set_num_threads(threads)
            learner.step(batch)  # warm the allocator and caches at this thread count
            start = time.perf_counter()
            for _ in range(args.steps):
                learner.step(batch)
            learner.pop_loss()
            times.append((time.perf_counter() - start) / args.steps * 1e3)
    print("\n| learner update (batch 32, Nature CNN) | ms |\n|---|---:|")
    for name, (_, _, times) in rows.items():
        print(f"| {name} | {statistics.median(times):.1f} |")


if __name__ == "__main__":
    main()
