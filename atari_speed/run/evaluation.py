"""Evaluation beside training: a snapshot of the network plays whole games in a thread."""

from __future__ import annotations

import threading

import numpy as np
import torch

from atari_speed.agent.networks import build_network
from atari_speed.agent.policy import play_episodes
from atari_speed.envs.pipeline import make_env
from atari_speed.run.plan import Plan


class Evaluation:
    """Plays ``eval.episodes`` games with a snapshot of ``net`` in a background thread, so
    the loop (and in parallel mode, the learner) never waits for it."""

    def __init__(self, plan: Plan, net: torch.nn.Module, frames: int) -> None:
        ev = plan.preset.eval
        self.net_state = {k: v.detach().clone() for k, v in net.state_dict().items()}
        snapshot = build_network(plan.preset.dqn, plan.obs_shape, plan.actions).to(plan.device)
        snapshot.load_state_dict(self.net_state)
        snapshot.eval()
        self.stop = threading.Event()
        self.scores: list[float] = []
        self.error: BaseException | None = None
        seed = plan.preset.run.seed + 10_000 + frames

        def play() -> None:
            try:
                env = make_env(plan.pipeline, plan.preset.env.game, seed=seed)
                rng = np.random.default_rng(seed)
                games = play_episodes(
                    env, snapshot, plan.device, ev.episodes, ev.epsilon, rng, stop=self.stop
                )
                self.scores = [g["r"] for g in games]
                env.close()
            except BaseException as err:  # reported on the main thread by result()
                self.error = err

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
