"""What one evaluation costs: a checkpoint plays ``--episodes`` greedy games side by side
(as the run's evaluation does, ``run/evaluation.py``), timed in CPU seconds of the whole
process (torch's threads included), against the CPU seconds training spends on the
frames between two evaluations at a given training FPS.

    uv run benchmarks/eval_cost.py runs/x/best.pt --fps 1571 --every 100000 --reps 3

Every backend times the envs' making, play and closing, as the run's evaluation does
(before ``--backend`` existed the figures left making and closing out). The share
printed is the evaluation's CPU over training's (``cores`` x the seconds those agent steps
take at ``--fps``): what a run loses while evaluations are on, where the machine has no
idle core. ``--backend ale`` plays greedy games of the same snapshot on ale-py's C++
vector env instead (its own resize; one worker thread, one batched forward pass a step,
every env stepped until the longest game ends): whether a faster env would make an
evaluation cheaper. ``--backend every-start`` plays what ``eval.every_start`` plays: one
greedy game from every start, those that meet played once (``--episodes`` is unused).
``--backend ale --episodes 40 --reps 1`` is also the quick way to see how many of 40 game
starts a snapshot loses. ``--threads 1 --kept`` plays every start as a run's evaluation
thread does: its forward passes on one thread, the envs made by the first evaluation and
played again by the rest (``KeptEnvs``; with ``--reps 3`` the median leaves the making
out).
``--split`` says how much of each evaluation was the network's forward passes: their count,
mean batch and CPU seconds (this thread's, timed by forward hooks around the network's own
call, so without choosing the action from its output); the rest is the emulators, the
frames' processing and the evaluation's bookkeeping (with ``--threads 1``, as a run's
evaluation plays: with more, the work of torch's other threads is not in the forward
passes' seconds).
``--as-run`` plays, once, the games the run's
own evaluation of the checkpoint's weights plays (its seeds, epsilon and eval.max_frames):
what ``eval.at_end`` scores for the final weights of a run from before it, given its
checkpoint.pt (one game from every start where the run had ``eval.every_start``). A
trained agent's games are the long ones (Pong's last 1,600 to 2,400
agent steps); an untrained one's are short, so give the run's best.pt.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
import torch

from atari_speed.agent.policy import act
from atari_speed.core.errors import ConfigError
from atari_speed.envs.pipeline import make_env
from atari_speed.envs.vector import make_vector_env
from atari_speed.run.checkpoint import load_checkpoint
from atari_speed.run.evaluation import (
    KeptEnvs,
    evaluation_envs,
    evaluation_seed,
    play_every_start,
    play_side_by_side,
)


def play_on_ale(ckpt: object, net: torch.nn.Module, episodes: int, seed: int) -> list[float]:
    """One game on each of ``episodes`` envs of ale-py's vector env, greedy; the env can
    only step all its envs, so the ones whose game is over play on, unscored."""
    venv = make_vector_env(ckpt.pipeline, ckpt.game, episodes, "ale", num_threads=1)
    try:
        obs, _ = venv.reset(seed=seed)
        scores: list[float | None] = [None] * episodes
        rng = np.random.default_rng(seed)
        while any(score is None for score in scores):
            actions = act(net, obs, 0.0, venv.single_action_space.n, rng, torch.device("cpu"))[0]
            obs, _, _, _, infos = venv.step(actions)
            if "episode" in infos:
                for i in np.flatnonzero(infos["_episode"]):
                    if scores[i] is None:
                        scores[i] = float(infos["episode"]["r"][i])
        return [float(score) for score in scores if score is not None]
    finally:
        venv.close()


def play_as_run(ckpt: object, net: torch.nn.Module, episodes: int) -> tuple[list[float], float]:
    """The games the run's evaluation of the checkpoint's weights plays, and their mean:
    seeded as ``Evaluation`` seeds them, at its preset's epsilon and eval.max_frames, or
    one game from every start (weighted as drawn) where it had eval.every_start."""
    ev = ckpt.preset.get("eval", {})
    seed = evaluation_seed(int(ckpt.preset["run"]["seed"]), ckpt.frames)
    if ev.get("every_start", False):
        played = play_every_start(ckpt.pipeline, ckpt.game, net, ev.get("max_frames", 0), seed)
        return played["scores"], played["mean"]
    envs = evaluation_envs(ckpt.pipeline, ckpt.game, episodes, seed, ev.get("max_frames", 0))
    try:
        rng = np.random.default_rng(seed)
        scores = play_side_by_side(envs, net, torch.device("cpu"), ev.get("epsilon", 0.0), rng)
        return scores, float(np.mean(scores))
    finally:
        for env in envs:
            env.close()


class ForwardTimer:
    """Counts ``net``'s forward passes, the observations they took and this thread's CPU
    seconds in them, from forward hooks (``close`` removes them)."""

    def __init__(self, net: torch.nn.Module) -> None:
        self.passes, self.observations, self.cpu_seconds = 0, 0, 0.0
        self._began = 0.0
        self._hooks = [
            net.register_forward_pre_hook(self._before),
            net.register_forward_hook(self._after),
        ]

    def _before(self, module: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> None:
        self._began = time.thread_time()

    def _after(
        self, module: torch.nn.Module, inputs: tuple[torch.Tensor, ...], out: object
    ) -> None:
        self.cpu_seconds += time.thread_time() - self._began
        self.passes += 1
        self.observations += len(inputs[0])

    def line(self, evaluation_cpu: float) -> str:
        """This evaluation's forward passes, against its CPU seconds, then starts anew."""
        batch = self.observations / self.passes if self.passes else 0.0
        said = (
            f"  {self.passes:,} forward passes (mean batch {batch:.2f}): "
            f"{self.cpu_seconds:.2f} CPU s, {self.cpu_seconds / evaluation_cpu:.0%} of it"
        )
        self.passes, self.observations, self.cpu_seconds = 0, 0, 0.0
        return said

    def close(self) -> None:
        for hook in self._hooks:
            hook.remove()


def lost_line(scores: list[float]) -> str:
    """How many games the agent lost (scored below 0) and its lowest score: a mean of 10
    says little where a snapshot wins most games 21-0 and loses some 0-21."""
    return f"{sum(score < 0 for score in scores)} lost, lowest {min(scores):+.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("checkpoint", help="a best.pt or checkpoint.pt")
    parser.add_argument("--episodes", type=int, default=10, help="games per evaluation")
    parser.add_argument("--fps", type=float, required=True, help="training FPS, measured alone")
    parser.add_argument(
        "--every", type=int, default=100_000, help="agent steps between evaluations"
    )
    parser.add_argument(
        "--backend",
        choices=("python", "ale", "every-start"),
        default="python",
        help="python: the run's evaluation (the pipeline's envs side by side); "
        "ale: ale-py's vector env; every-start: eval.every_start's games",
    )
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--reps", type=int, default=3, help="evaluations timed (median)")
    parser.add_argument(
        "--as-run",
        action="store_true",
        help="once, the games the run's own evaluation of these weights plays",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="torch threads for the games' forward passes (0: torch's default; a run's "
        "evaluation thread uses 1)",
    )
    parser.add_argument(
        "--kept",
        action="store_true",
        help="every-start: one set of envs for every evaluation, as a run keeps them",
    )
    parser.add_argument(
        "--split",
        action="store_true",
        help="also say the forward passes' count, mean batch and share of each evaluation",
    )
    args = parser.parse_args()
    if args.kept and (args.backend != "every-start" or args.as_run):
        parser.error("--kept keeps every-start's envs: give it with --backend every-start")
    if args.threads:
        torch.set_num_threads(args.threads)
    kept = KeptEnvs() if args.kept else None
    ckpt = load_checkpoint(args.checkpoint)
    # as run: the weights its evaluations would play here (Checkpoint.policy)
    net = ckpt.policy(torch.device("cpu"), evaluated=args.as_run)
    timer = ForwardTimer(net) if args.split else None
    budget = args.cores * args.every / args.fps
    max_frames = ckpt.preset.get("eval", {}).get("max_frames", 0)
    costs = []
    try:
        for rep in range(1 if args.as_run else args.reps):
            cpu, wall = time.process_time(), time.perf_counter()
            mean, games = None, "games"
            if args.as_run:
                scores, mean = play_as_run(ckpt, net, args.episodes)
                print(f"agent step {ckpt.frames:,}: games {scores}")
            elif args.backend == "every-start":
                played = play_every_start(ckpt.pipeline, ckpt.game, net, max_frames, kept=kept)
                scores, mean, games = played["scores"], played["mean"], "starts, weighted as drawn"
            elif args.backend == "ale":
                try:
                    scores = play_on_ale(ckpt, net, args.episodes, seed=1000 * rep)
                except ConfigError as err:  # a pipeline the ale backend cannot play as trained
                    raise SystemExit(f"eval_cost.py: {args.checkpoint}: {err}") from None
            else:
                envs = [
                    make_env(ckpt.pipeline, ckpt.game, seed=1000 * rep + i)
                    for i in range(args.episodes)
                ]
                scores = play_side_by_side(
                    envs, net, torch.device("cpu"), 0.0, np.random.default_rng(rep)
                )
                for env in envs:
                    env.close()
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            costs.append(cpu)
            print(
                f"evaluation {rep}: mean {np.mean(scores) if mean is None else mean:+.1f} over "
                f"{len(scores)} {games} "
                f"({lost_line(scores)}), {cpu:.1f} CPU s ({wall:.1f} s wall), "
                f"{cpu / budget:.1%} of training's {budget:.0f} CPU s per "
                f"{args.every:,} agent steps"
            )
            if timer is not None:
                print(timer.line(cpu))
    finally:
        if kept is not None:
            kept.close()
        if timer is not None:
            timer.close()
    median = statistics.median(costs)
    print(
        f"median: {median:.1f} CPU s per evaluation = {median / budget:.1%} of training's CPU "
        f"at {args.fps:,.0f} FPS on {args.cores} cores, evaluating every {args.every:,} agent steps"
    )


if __name__ == "__main__":
    main()
