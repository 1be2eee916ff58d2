"""Can an agent stall a game? Each action held for a whole game, then random play.

    uv run benchmarks/stall.py --game double_dunk --steps 6000

For each action of the game's minimal set held at every agent step (frame skip 4, no
sticky actions), and for uniformly random actions, plays up to ``--steps`` agent steps
from one reset and prints a markdown row: the points won and lost, and the agent step at
which the game ended ("-" when it had not). A game in which some held action neither wins
nor loses a point for thousands of steps can be stalled: a learner whose play still loses
points values that action's 0 above playing, and its games run to the time limit
(docs/atari.md, DoubleDunk).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from ale_py.env import AtariEnv

from atari_speed import resolve_game
from atari_speed.core.errors import ConfigError


def play(env: AtariEnv, choose, steps: int, seed: int) -> tuple[float, float, int | None]:
    """(points won, points lost, the agent step the game ended at or None) for ``choose``,
    a function of the step number giving the action index."""
    env.reset(seed=seed)
    won = lost = 0.0
    for step in range(1, steps + 1):
        _, reward, terminated, truncated, _ = env.step(choose(step))
        won, lost = won + max(reward, 0.0), lost + max(-reward, 0.0)
        if terminated or truncated:
            return won, lost, step
    return won, lost, None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--game", default="double_dunk", help="ALE game name (default: %(default)s)"
    )
    parser.add_argument("--steps", type=int, default=6000, help="agent steps per policy")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        rom = resolve_game(args.game)
    except ConfigError as err:
        print(f"stall.py: error: {err}", file=sys.stderr)
        return 2
    env = AtariEnv(game=rom, obs_type="ram", frameskip=4, repeat_action_probability=0.0)
    names = env.unwrapped.get_action_meanings()
    rng = np.random.default_rng(args.seed)
    policies = [(f"{name} held", lambda _, a=a: a) for a, name in enumerate(names)]
    policies.append(("random", lambda _: int(rng.integers(len(names)))))
    print(f"{rom}, up to {args.steps:,} agent steps (frame skip 4) per row, seed {args.seed}\n")
    print("| actions | points won | points lost | game over at step |")
    print("|---|---:|---:|---:|")
    for label, choose in policies:
        won, lost, ended = play(env, choose, args.steps, args.seed)
        print(f"| {label} | {won:g} | {lost:g} | {'-' if ended is None else f'{ended:,}'} |")
    env.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
