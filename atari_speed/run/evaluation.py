"""Evaluation beside training: a snapshot of the network plays whole games in a thread.

The games are played side by side on a vector env, one game each, with one batched forward
pass a step: on a CPU a pass over 10 observations costs about what one costs, so the
evaluation's cost is mostly the emulators' steps, which the ale backend makes cheap.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import torch

from atari_speed.agent.networks import build_network
from atari_speed.agent.policy import act
from atari_speed.core.config import EvalConfig
from atari_speed.envs.ale import ale_start_differs
from atari_speed.envs.vector import VectorEnv, make_vector_env
from atari_speed.run.plan import Plan


def evaluating(ev: EvalConfig, best_smoothed: float | None) -> bool:
    """Whether evaluations are on by now: ``eval.every`` set, and the best smoothed
    training score so far at ``eval.from_reward`` (-1000: from the start)."""
    if not ev.every:
        return False
    return ev.from_reward <= -1000 or (
        best_smoothed is not None and best_smoothed >= ev.from_reward
    )


def play_side_by_side(
    venv: VectorEnv,
    net: torch.nn.Module,
    device: torch.device,
    epsilon: float,
    rng: np.random.Generator,
    stop: threading.Event | None = None,
) -> list[float]:
    """One whole game on each of ``venv``'s envs, all stepped together with one batched
    forward pass a step; each env's first game's unclipped score, in env order. An env
    whose game is over plays on (its next game is not counted) until the last one ends:
    a vector env steps all its envs, and the ale backend steps them in C++ at a fraction
    of the Python pipeline's cost. ``stop`` ends play early, with only the games finished."""
    obs, _ = venv.reset()
    scores: list[float | None] = [None] * venv.num_envs
    actions = int(venv.single_action_space.n)
    while None in scores and not (stop is not None and stop.is_set()):
        obs, _, _, _, infos = venv.step(act(net, obs, epsilon, actions, rng, device)[0])
        if "episode" in infos:
            for i in np.flatnonzero(infos["_episode"]):
                if scores[i] is None:
                    scores[i] = float(infos["episode"]["r"][i])
    return [s for s in scores if s is not None]


def eval_backend(pipeline: dict) -> str:
    """The ale backend where it plays the pipeline as the other backends do (its C++
    envs make an evaluation several times cheaper: docs/pong-fast.md), else sync."""
    return "sync" if ale_start_differs(pipeline) else "ale"


class Evaluation:
    """Plays ``eval.episodes`` games with a snapshot of ``net`` in a background thread, so
    the loop (and in parallel mode, the learner) never waits for it. ``frames`` and
    ``seconds`` say when the snapshot was taken: the score is of the weights then."""

    def __init__(self, plan: Plan, net: torch.nn.Module, frames: int, seconds: float = 0.0) -> None:
        ev = plan.preset.eval
        self.frames, self.seconds = frames, seconds
        self.net_state = {k: v.detach().clone() for k, v in net.state_dict().items()}
        snapshot = build_network(plan.preset.dqn, plan.obs_shape, plan.actions).to(plan.device)
        snapshot.load_state_dict(self.net_state)
        snapshot.eval()
        self.stop = threading.Event()
        self.scores: list[float] = []
        self.error: BaseException | None = None
        self.cpu_seconds = 0.0  # this thread's CPU time (not torch's pool threads, nor ALE's)
        seed = plan.preset.run.seed + 10_000 + frames

        def play() -> None:
            start = time.thread_time()
            venv: VectorEnv | None = None
            try:
                backend = eval_backend(plan.pipeline)
                # one ALE thread: the evaluation plays beside training, not instead of it
                threads = {"num_threads": 1} if backend == "ale" else {}
                venv = make_vector_env(
                    plan.pipeline, plan.preset.env.game, ev.episodes, backend, seed, **threads
                )
                rng = np.random.default_rng(seed)
                self.scores = play_side_by_side(
                    venv, snapshot, plan.device, ev.epsilon, rng, stop=self.stop
                )
            except BaseException as err:  # reported on the main thread by result()
                self.error = err
            finally:
                if venv is not None:
                    venv.close()
                self.cpu_seconds = time.thread_time() - start

        self.thread = threading.Thread(target=play, name="atari-speed-eval", daemon=True)
        self.thread.start()

    def finished(self) -> bool:
        return not self.thread.is_alive()

    def result(self) -> float:
        """The mean score of the games played; re-raises what stopped the thread."""
        if self.error is not None:
            raise self.error
        return float(np.mean(self.scores)) if self.scores else float("nan")

    def cancel(self) -> None:
        self.stop.set()
        self.thread.join(timeout=10)
