"""Can an agent stall a game? Each action held for a whole game, random play, and agents.

    uv run benchmarks/stall.py --game double_dunk --steps 6000
    uv run benchmarks/stall.py --game double_dunk --agent runs/atari84-double_dunk/checkpoint.pt

For each action of the game's minimal set held at every agent step (frame skip 4, no
sticky actions), for uniformly random actions, and for each ``--agent`` checkpoint's
policy on its own pipeline (epsilon ``--epsilon``), plays up to ``--steps`` agent steps
from one reset and prints a markdown row: the points won and lost, the agent step at
which the game ended ("-" when it had not), and the discounted return of the clipped
rewards (gamma ``--gamma``, as the learner discounts; through lost lives, cut at the last
step played) averaged over the steps played. A
game in which some held action neither wins nor loses a point for thousands of steps can
be stalled: a learner whose play still loses points values that action's 0 above playing,
and its games run to the time limit (docs/atari.md, DoubleDunk). An agent's row also
gives its network's mean max_a Q over the steps: what it expects of its own play.
"""

from __future__ import annotations

import argparse
import sys
from typing import NamedTuple

import numpy as np
from ale_py.env import AtariEnv

from atari_speed import resolve_game
from atari_speed.core.errors import ConfigError


class Played(NamedTuple):
    """One policy's stretch of play."""

    won: float  # points won (unclipped)
    lost: float  # points lost
    ended: int | None  # the agent step the game ended at; None: still going
    value: float  # discounted return of the clipped rewards, the mean over the steps played


def discounted_mean(rewards: list[float], gamma: float) -> float:
    """The mean over steps t of sum_k gamma^k sign(r_{t+k}), up to the last step played."""
    total = ret = 0.0
    for reward in reversed(rewards):
        ret = float(np.sign(reward)) + gamma * ret
        total += ret
    return total / len(rewards) if rewards else 0.0


def play(env, choose, steps: int, seed: int, gamma: float = 0.99) -> Played:
    """Play ``choose``, a function of the step number (1-based) and the last observation
    giving the action index, for up to ``steps`` agent steps from a seeded reset."""
    obs, _ = env.reset(seed=seed)
    rewards: list[float] = []
    ended = None
    for step in range(1, steps + 1):
        obs, reward, terminated, truncated, _ = env.step(choose(step, obs))
        rewards.append(float(reward))
        if terminated or truncated:
            ended = step
            break
    won = sum(r for r in rewards if r > 0)
    lost = -sum(r for r in rewards if r < 0)
    return Played(won, lost, ended, discounted_mean(rewards, gamma))


class WholeGames:
    """An env whose episodes are whole games: a lost life's end (EpisodicLife's, for
    learning) is played through with the pipeline's own reset, so that a row ends only
    when the game does, as the held and random rows' raw emulator does."""

    def __init__(self, env) -> None:
        self.env = env

    def reset(self, seed: int):
        return self.env.reset(seed=seed)

    def close(self) -> None:
        self.env.close()

    def step(self, action: int):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if (terminated or truncated) and "episode" not in info:
            obs, _ = self.env.reset()
            terminated = truncated = False
        return obs, reward, terminated, truncated, info


def agent_policy(path: str, epsilon: float, seed: int, game: str):
    """The checkpoint's env (its pipeline without ClipReward, so that points are counted
    unclipped; the observations are the same) and its epsilon-greedy policy, which also
    keeps the network's max_a Q at each step in ``policy.values``."""
    import torch

    from atari_speed.agent.policy import act
    from atari_speed.envs.pipeline import make_env, resolve_pipeline
    from atari_speed.run.checkpoint import load_checkpoint

    checkpoint = load_checkpoint(path)
    if checkpoint.game != game:
        raise ConfigError(f"{path}: a checkpoint for {checkpoint.game}, not {game}")
    pipeline = dict(resolve_pipeline(checkpoint.pipeline))
    pipeline["stages"] = [s for s in pipeline["stages"] if s["wrapper"] != "ClipReward"]
    env = WholeGames(make_env(pipeline, game))
    actions = checkpoint.actions
    device = torch.device("cpu")
    net = checkpoint.policy(device)
    rng = np.random.default_rng(seed)

    def policy(step: int, obs) -> int:
        action, values = act(net, np.asarray(obs)[None], epsilon, actions, rng, device)
        if values is not None:  # None at epsilon 1: no forward pass
            policy.values.append(float(values[0]))
        return int(action[0])

    policy.values = []
    return env, policy


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--game", default="double_dunk", help="ALE game name (default: %(default)s)"
    )
    parser.add_argument("--steps", type=int, default=6000, help="agent steps per policy")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--agent",
        action="append",
        default=[],
        metavar="CHECKPOINT",
        help="a row for this checkpoint's policy too (repeatable)",
    )
    parser.add_argument(
        "--epsilon", type=float, default=0.0, help="agents' chance of a random action"
    )
    parser.add_argument(
        "--gamma", type=float, default=0.99, help="discount of the value column (the presets')"
    )
    args = parser.parse_args(argv)
    try:
        rom = resolve_game(args.game)
        agents = [(path, *agent_policy(path, args.epsilon, args.seed, rom)) for path in args.agent]
    except ConfigError as err:
        print(f"stall.py: error: {err}", file=sys.stderr)
        return 2
    env = AtariEnv(game=rom, obs_type="ram", frameskip=4, repeat_action_probability=0.0)
    names = env.unwrapped.get_action_meanings()
    rng = np.random.default_rng(args.seed)
    rows = [(f"{name} held", env, lambda _s, _o, a=a: a) for a, name in enumerate(names)]
    rows.append(("random", env, lambda _s, _o: int(rng.integers(len(names)))))
    rows += [(f"agent {path}, epsilon {args.epsilon:g}", e, p) for path, e, p in agents]
    print(f"{rom}, up to {args.steps:,} agent steps (frame skip 4) per row, seed {args.seed}\n")
    print(
        f"| actions | points won | points lost | game over at step | value (gamma {args.gamma:g}) |"
    )
    print("|---|---:|---:|---:|---:|")
    for label, game_env, choose in rows:
        p = play(game_env, choose, args.steps, args.seed, args.gamma)
        end = "-" if p.ended is None else f"{p.ended:,}"
        print(f"| {label} | {p.won:g} | {p.lost:g} | {end} | {p.value:.3f} |")
    for path, agent_env, policy in agents:
        agent_env.close()
        if policy.values:  # none at epsilon 1: every action random, no forward pass
            mean_q = np.mean(policy.values)
            print(f"\n{path}: its network's mean max_a Q over those steps: {mean_q:.3f}")
    env.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
