"""One learner update (sample-free: a fixed batch of 32) in several implementations of the
same math: torch threads, channels-last weights, fused vs per-tensor Adam. With --pqn,
PQN's update instead (pong-fast's `small` LayerNorm network on 42x42 frames, fp32, all
threads): minibatches of 128 against 256, per update and per sample, channels-last
weights, and RAdam's step alone per tensor against foreach.

    uv run benchmarks/sgd_step.py
    uv run benchmarks/sgd_step.py --pqn

Rows are interleaved over the repetitions and each reports the median milliseconds.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

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
    parser.add_argument("--pqn", action="store_true", help="PQN's update (see above)")
    args = parser.parse_args()
    if args.pqn:
        pqn_rows(args.reps, args.steps)
        return
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
            times.append(ms_per_call(lambda learner=learner: learner.step(batch), args.steps))
            learner.pop_loss()
    print("\n| learner update (batch 32, Nature CNN) | ms |\n|---|---:|")
    for name, (_, _, times) in rows.items():
        print(f"| {name} | {statistics.median(times):.1f} |")


def ms_per_call(call: Callable[[], object], n: int) -> float:
    """Mean milliseconds of ``n`` back-to-back calls: one timing window of a row."""
    start = time.perf_counter()
    for _ in range(n):
        call()
    return (time.perf_counter() - start) / n * 1e3


def pqn_rows(reps: int, steps: int) -> None:
    """PQN's minibatch update, interleaved rows, median ms per update and per sample."""
    from atari_speed.agent.pqn import QLambdaLearner
    from atari_speed.core.config import PQNConfig

    shape, actions = (4, 42, 42), 6
    cfg = DQNConfig(algorithm="pqn", network="small", layer_norm=True, learning_rate=2.5e-4)
    rng = np.random.default_rng(0)

    def learner(channels_last: bool = False) -> QLambdaLearner:
        torch.manual_seed(0)
        net = DQN(shape, actions, network="small", layer_norm=True)
        return QLambdaLearner(
            net, cfg, PQNConfig(), torch.device("cpu"), channels_last=channels_last
        )

    def args_of(size: int) -> tuple[torch.Tensor, ...]:
        return (
            torch.from_numpy(rng.integers(0, 255, (size, *shape), dtype=np.uint8)),
            torch.from_numpy(rng.integers(0, actions, size)),
            torch.from_numpy(rng.normal(size=size).astype(np.float32)),
        )

    rows = {
        "minibatch 256 (pong-fast)": (learner(), args_of(256), []),
        "minibatch 128": (learner(), args_of(128), []),
        "minibatch 256, channels-last (run.channels_last)": (
            learner(channels_last=True),
            args_of(256),
            [],
        ),
    }
    for _ in range(reps):
        for pqn, batch, times in rows.values():
            pqn.step(*batch)  # warm the allocator and caches
            times.append(ms_per_call(lambda pqn=pqn, batch=batch: pqn.step(*batch), steps))
            pqn.pop_loss()
    print(
        f"\n| PQN update (small + LayerNorm, 42x42, fp32, {torch.get_num_threads()} threads) "
        "| ms | us per sample |\n|---|---:|---:|"
    )
    for name, (_, batch, times) in rows.items():
        ms = statistics.median(times)
        print(f"| {name} | {ms:.1f} | {ms * 1e3 / len(batch[0]):.0f} |")

    # RAdam's step alone, on the same parameters with fixed gradients.
    optimizers = {}
    for foreach in (False, True):
        torch.manual_seed(0)
        net = DQN(shape, actions, network="small", layer_norm=True)
        for p in net.parameters():
            p.grad = torch.randn_like(p)
        optimizers[foreach] = (torch.optim.RAdam(net.parameters(), lr=2.5e-4, foreach=foreach), [])
    for _ in range(reps):
        for opt, times in optimizers.values():
            times.append(ms_per_call(opt.step, steps * 5))
    print("\n| RAdam step alone | ms |\n|---|---:|")
    for foreach, (_, times) in optimizers.items():
        name = "foreach (the learner's)" if foreach else "per tensor (torch's CPU default)"
        print(f"| {name} | {statistics.median(times):.2f} |")


if __name__ == "__main__":
    main()
