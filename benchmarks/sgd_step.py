"""One learner update (sample-free: a fixed batch of 32) in several implementations of the
same math: torch threads, channels-last weights, fused vs per-tensor Adam. With --pqn,
PQN's update instead (pong-fast's `small` LayerNorm network on 42x42 frames, fp32, all
threads): minibatches of 128 against 256, per update and per sample, channels-last
weights, and RAdam's step alone per tensor, foreach and fused. With --targets, what a
pong-fast rollout's Q(lambda) targets cost (64 envs x 32 steps, the preset's network,
channels-last, fp32 and bf16): with the max_a Q the actor computed reused, against
computed again (``pqn.act_with_average``: the average acts, so its values are not the
learner's), beside the weights' average's update and one acting pass.

    uv run benchmarks/sgd_step.py
    uv run benchmarks/sgd_step.py --pqn
    taskset -c 0 uv run benchmarks/sgd_step.py --targets

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
    parser.add_argument("--targets", action="store_true", help="PQN's targets (see above)")
    args = parser.parse_args()
    if args.targets:
        target_rows(args.reps, args.steps)
        return
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


def target_rows(reps: int, steps: int) -> None:
    """A rollout's targets with the actor's values and without, interleaved, median ms."""
    from atari_speed.agent.averaging import WeightAverage
    from atari_speed.agent.policy import greedy_and_values
    from atari_speed.agent.pqn import QLambdaLearner
    from atari_speed.agent.rollout import RolloutStore
    from atari_speed.core.config import PQNConfig

    shape, actions, envs, length = (4, 42, 42), 6, 64, 32
    cfg = DQNConfig(algorithm="pqn", network="small", layer_norm=True)
    rng = np.random.default_rng(0)
    torch.manual_seed(0)
    net = DQN(shape, actions, network="small", layer_norm=True)
    cpu = torch.device("cpu")
    learners = {
        bf16: QLambdaLearner(net, cfg, PQNConfig(), cpu, bf16=bf16, channels_last=True)
        for bf16 in (False, True)
    }
    rollout = RolloutStore(envs, length, shape)
    for _ in range(length):
        obs = rng.integers(0, 255, (envs, *shape), dtype=np.uint8)
        rollout.put_obs(obs, values=greedy_and_values(net, obs, cpu)[1])
        rollout.commit(rng.integers(0, actions, envs), np.zeros(envs), np.zeros(envs, bool))
    rollout.finish(rng.integers(0, 255, (envs, *shape), dtype=np.uint8))
    acted = rollout.values.copy()
    average = WeightAverage(net, 50_000, 0)
    frames = iter(range(2048, 10**9, 2048))

    def targets(learner: QLambdaLearner, reuse: bool) -> None:
        rollout.values[:] = acted if reuse else np.nan
        learner.targets(rollout)

    rows: dict[str, tuple[Callable[[], object], list[float]]] = {}
    for bf16, learner in learners.items():
        precision = "bf16" if bf16 else "fp32"
        rows[f"targets, the actor's values reused, {precision}"] = (
            lambda learner=learner: targets(learner, True),
            [],
        )
        rows[f"targets, every row's values computed, {precision}"] = (
            lambda learner=learner: targets(learner, False),
            [],
        )
    rows["the weights' average updated"] = (lambda: average.update(net, next(frames)), [])
    rows["one acting pass (64 envs, fp32)"] = (lambda: greedy_and_values(net, obs, cpu), [])
    for _ in range(reps):
        for call, times in rows.values():
            call()
            times.append(ms_per_call(call, steps))
    print(
        f"\n| a rollout of {envs} envs x {length} steps, {torch.get_num_threads()} threads "
        "| ms |\n|---|---:|"
    )
    for name, (_, times) in rows.items():
        print(f"| {name} | {statistics.median(times):.2f} |")


def pqn_rows(reps: int, steps: int) -> None:
    """PQN's minibatch update, interleaved rows, median ms per update and per sample."""
    from atari_speed.agent.optim import FusedRAdam
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
    kinds = {
        "per tensor (torch's CPU default)": lambda params: torch.optim.RAdam(
            params, lr=2.5e-4, foreach=False
        ),
        "foreach (the learner's)": lambda params: torch.optim.RAdam(
            params, lr=2.5e-4, foreach=True
        ),
        "fused (pqn.fused_optimizer: agent/optim.py)": lambda params: FusedRAdam(params, lr=2.5e-4),
    }
    optimizers = {}
    for name, make in kinds.items():
        torch.manual_seed(0)
        net = DQN(shape, actions, network="small", layer_norm=True)
        for p in net.parameters():
            p.grad = torch.randn_like(p)
        optimizers[name] = (make(net.parameters()), [])
    for _ in range(reps):
        for opt, times in optimizers.values():
            times.append(ms_per_call(opt.step, steps * 5))
    print("\n| RAdam step alone | ms |\n|---|---:|")
    for name, (_, times) in optimizers.items():
        print(f"| {name} | {statistics.median(times):.2f} |")


if __name__ == "__main__":
    main()
