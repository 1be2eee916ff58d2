"""How a trained agent's score depends on the emulator frame its games start at.

    uv run benchmarks/frame_phase.py CHECKPOINT [--games 2] [--epsilon 0.02] [--with-noops 24]

Plays the checkpoint on its own pipeline with any NoopReset stage removed, so each game
starts at a fixed frame: the pipeline's own start, then 1, 2 and 3 extra emulator frames
later (with frame skip 4 these are the four phases a game can start at). Then it plays
the same number of games on the ale backend, whose FIRE reset lasts one frame where
FireReset's lasts eight. An agent trained without random no-ops learns one phase; this
shows which, and what the others cost.

``--with-noops N`` then plays N games (one each in N envs side by side) on the pipeline as
the checkpoint has it, no-ops included, on the in-process (``sync``, play.py's) and the
``ale`` backend: the score the agent makes in each of the two envs it can meet.
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

import numpy as np
import torch

from atari_speed.agent.policy import act
from atari_speed.envs.vector import make_vector_env
from atari_speed.run.checkpoint import load_checkpoint

CPU = torch.device("cpu")


def play(
    env: Any, net: torch.nn.Module, games: int, epsilon: float, shift: int, seed: int
) -> list[float]:
    """Whole games on a one-env vector env, each started ``shift`` NOOP frames late."""
    rng = np.random.default_rng(seed)
    actions_n = int(env.single_action_space.n)
    obs, _ = env.reset(seed=seed)
    pending = shift
    scores: list[float] = []
    while len(scores) < games:
        for _ in range(pending):  # on the raw emulator: moves the phase, not the agent's clock
            env.envs[0].unwrapped.ale.act(0)
        pending = 0
        actions, _ = act(net, np.asarray(obs), epsilon, actions_n, rng, CPU)
        obs, _, _, _, info = env.step(actions)
        if "episode" in info and info["_episode"][0]:
            scores.append(float(info["episode"]["r"][0]))
            pending = shift  # the next game has begun: start it late too
    return scores


def one_game_each(env: Any, net: torch.nn.Module, epsilon: float, seed: int) -> list[float]:
    """The first whole game of each env of ``env``, played side by side."""
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    scores: list[float | None] = [None] * env.num_envs
    while any(s is None for s in scores):
        actions, _ = act(net, np.asarray(obs), epsilon, env.single_action_space.n, rng, CPU)
        obs, _, _, _, info = env.step(actions)
        if "episode" in info:
            for i in np.flatnonzero(info["_episode"]):
                if scores[i] is None:
                    scores[i] = float(info["episode"]["r"][i])
    return [float(s) for s in scores if s is not None]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("checkpoint")
    parser.add_argument("--games", type=int, default=2, help="games per start phase")
    parser.add_argument("--epsilon", type=float, default=0.02, help="as in training")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--with-noops", type=int, default=0, metavar="N",
        help="also N games with the pipeline's no-ops on the sync and ale backends",
    )  # fmt: skip
    args = parser.parse_args()
    checkpoint = load_checkpoint(args.checkpoint)
    net = checkpoint.policy(CPU)
    pipeline = dict(checkpoint.pipeline)
    pipeline["stages"] = [s for s in pipeline["stages"] if s["wrapper"] != "NoopReset"]
    print(
        f"{args.checkpoint}: {checkpoint.game}, pipeline {pipeline['name']} without no-ops, "
        f"epsilon {args.epsilon}, {args.games} games each\n"
    )
    print("| start | mean score | games |\n|---|---:|---|")
    with torch.no_grad():
        for shift in range(4):
            env = make_vector_env(pipeline, checkpoint.game, 1, backend="sync")
            scores = play(env, net, args.games, args.epsilon, shift, args.seed)
            env.close()
            label = "pipeline's own" if shift == 0 else f"+{shift} frame{'s' * (shift > 1)}"
            print(f"| {label} | {statistics.mean(scores):+.1f} | {scores} |", flush=True)
        env = make_vector_env(pipeline, checkpoint.game, 1, backend="ale")
        scores = play(env, net, args.games, args.epsilon, 0, args.seed)
        env.close()
        print(f"| ale backend | {statistics.mean(scores):+.1f} | {scores} |")
        if args.with_noops:
            print(f"\nWith the pipeline's no-ops, {args.with_noops} games, one per env:\n")
            print("| backend | mean score | games |\n|---|---:|---|")
            for backend in ("sync", "ale"):
                env = make_vector_env(
                    checkpoint.pipeline, checkpoint.game, args.with_noops, backend=backend
                )
                scores = one_game_each(env, net, args.epsilon, args.seed)
                env.close()
                print(f"| {backend} | {statistics.mean(scores):+.1f} | {scores} |", flush=True)


if __name__ == "__main__":
    main()
