"""How far bf16 moves a checkpoint's Q values: its greedy agent (at a small epsilon) plays
``--envs`` games side by side on ale-py's vector env, every ``--every``-th observation is
kept, and the network scores them in fp32 and under bf16 autocast, as a bf16 run acts and
bootstraps. It prints the size of the Q values, how far bf16 moves them, the gap between
the best two actions, and the share of states whose greedy action bf16 changes (to set
beside the epsilon floor's random actions).

    uv run benchmarks/bf16_q.py runs/x/s0/checkpoint.pt
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from atari_speed.agent.policy import act
from atari_speed.core.errors import ConfigError
from atari_speed.envs.vector import make_vector_env
from atari_speed.run.checkpoint import load_checkpoint

CHUNK = 512  # observations a forward pass


def visited_states(
    ckpt: object, net: torch.nn.Module, envs: int, steps: int, every: int, epsilon: float, seed: int
) -> np.ndarray:
    """Every ``every``-th observation of ``steps`` steps of ``envs`` games of ``net``'s."""
    venv = make_vector_env(ckpt.pipeline, ckpt.game, envs, "ale", num_threads=1)
    try:
        obs, _ = venv.reset(seed=seed)
        rng, kept = np.random.default_rng(seed), []
        for t in range(steps):
            if t % every == 0:
                kept.append(obs.copy())
            actions = act(net, obs, epsilon, venv.single_action_space.n, rng, torch.device("cpu"))
            obs, *_ = venv.step(actions[0])
        return np.concatenate(kept)
    finally:
        venv.close()


@torch.no_grad()
def compare(net: torch.nn.Module, obs: np.ndarray) -> dict[str, float]:
    """Q of ``obs`` in fp32 and under bf16 autocast: their medians and spread, the action
    gap (best minus second best, fp32) and the share of states whose argmax differs."""
    x = torch.from_numpy(obs)
    chunks = range(0, len(x), CHUNK)
    q32 = torch.cat([net(x[i : i + CHUNK]).float() for i in chunks])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        q16 = torch.cat([net(x[i : i + CHUNK]).float() for i in chunks])
    moved = (q16 - q32).abs()
    best_two = q32.topk(2, dim=1).values
    gap = best_two[:, 0] - best_two[:, 1]
    return {
        "states": float(len(x)),
        "q_median": float(q32.abs().median()),
        "moved_median": float(moved.median()),
        "moved_p99": float(moved.quantile(0.99)),
        "gap_median": float(gap.median()),
        "flips": float((q16.argmax(1) != q32.argmax(1)).float().mean()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", help="a checkpoint.pt or best.pt")
    parser.add_argument("--envs", type=int, default=16, help="games side by side")
    parser.add_argument("--steps", type=int, default=1500, help="agent steps of each env")
    parser.add_argument("--every", type=int, default=5, help="keep every n-th observation")
    parser.add_argument("--epsilon", type=float, default=0.01, help="random actions' share")
    parser.add_argument("--seed", type=int, default=123)
    args = parser.parse_args()
    torch.set_num_threads(1)
    try:
        ckpt = load_checkpoint(args.checkpoint)
        net = ckpt.policy(torch.device("cpu"))
        obs = visited_states(ckpt, net, args.envs, args.steps, args.every, args.epsilon, args.seed)
    except ConfigError as err:
        raise SystemExit(f"bf16_q.py: {err}") from None
    r = compare(net, obs)
    print(
        f"{args.checkpoint}: {r['states']:.0f} states; |Q| median {r['q_median']:.3f}; "
        f"bf16 moves Q by {r['moved_median']:.4f} (median), {r['moved_p99']:.4f} (99th "
        f"percentile); best-two action gap median {r['gap_median']:.4f}; greedy action "
        f"changed in {100 * r['flips']:.2f}% of states"
    )


if __name__ == "__main__":
    main()
