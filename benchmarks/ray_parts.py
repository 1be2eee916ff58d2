"""What limits many actors, part by part: the learner's update rate, inserting actors'
batches into the replay, moving a batch through Ray's object store, and broadcasting the
weights. The figures docs/scale.md scales to 10, 100 and 1,000 actors.

    uv run --extra ray benchmarks/ray_parts.py

All with the book pipeline (84x84 frames, 4-frame stacks) and the Nature network, fp32,
on this machine's CPU; median of ``--reps`` timings.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
import torch

from atari_speed.agent.learner import Learner
from atari_speed.agent.networks import build_network
from atari_speed.agent.replay import Batch, FrameReplay
from atari_speed.core.config import load_preset
from atari_speed.run.ray_engine import write_batch

STEPS, ENVS = 16, 8  # one actor batch: run.ray_steps x envs per actor


def timed(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def fake_batch(rng: np.random.Generator) -> dict:
    grid = (STEPS, ENVS)
    return {
        "frames": rng.integers(0, 255, (*grid, 1, 84, 84), dtype=np.uint8),
        "actions": rng.integers(0, 6, grid),
        "rewards": np.zeros(grid, np.float32),
        "terminated": np.zeros(grid, bool),
        "truncated": np.zeros(grid, bool),
        "finals": {},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    preset = load_preset("pong-parallel")
    net = build_network(preset.dqn, (4, 84, 84), 6)
    weights = sum(p.numel() for p in net.parameters())
    out: dict[str, float] = {"weights_mb": weights * 4 / 1e6}

    learner = Learner(net, preset.dqn, torch.device("cpu"))
    batch = Batch.empty(32, (4, 84, 84))
    batch.states[:] = rng.integers(0, 255, batch.states.shape)
    batch.next_states[:] = batch.states
    batch.actions[:], batch.returns[:], batch.discounts[:] = 0, 0.0, 0.99
    learner.step(batch)
    out["sgd_updates_per_s"] = 20 / timed(
        lambda: [learner.step(batch) for _ in range(20)], args.reps
    )

    replay = FrameReplay(100_000, ENVS, (1, 84, 84), 4)
    one = fake_batch(rng)
    out["replay_insert_per_s"] = (
        STEPS * ENVS / timed(lambda: write_batch(one, replay, slice(None)), args.reps)
    )

    import ray

    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    try:

        @ray.remote
        class Source:
            def __init__(self) -> None:
                self.batch = fake_batch(np.random.default_rng(1))

            def batch_out(self) -> dict:
                return self.batch

            def weights_in(self, flat: np.ndarray) -> int:
                return len(flat)

        source = Source.remote()
        ray.get(source.batch_out.remote())
        n = 20
        seconds = timed(lambda: ray.get([source.batch_out.remote() for _ in range(n)]), args.reps)
        out["batch_mb"] = one["frames"].nbytes / 1e6
        out["ray_batches_per_s"] = n / seconds
        out["ray_transitions_per_s"] = n * STEPS * ENVS / seconds
        flat = torch.cat([p.detach().reshape(-1) for p in net.parameters()]).numpy()
        out["ray_put_weights_s"] = timed(lambda: ray.put(flat), args.reps)

        def broadcast() -> None:
            ref = ray.put(flat)
            ray.get(source.weights_in.remote(ref))

        out["ray_weights_to_actor_s"] = timed(broadcast, args.reps)
    finally:
        ray.shutdown()
    for key, value in out.items():
        print(f"{key}: {value:,.4g}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
