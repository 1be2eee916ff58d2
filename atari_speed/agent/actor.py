"""The one actor: N envs stepped together, one batched forward pass choosing all N actions,
every transition written into replay columns it owns.

n-env mode runs it in the training process over the in-process replay; parallel mode runs
one per actor process over the shared-memory replay. Either way the replay holds the
n-step accumulation (returns are summed at sample time), so the actor writes each step
once and nothing per transition is pickled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from atari_speed.agent.policy import act
from atari_speed.agent.replay import FrameReplay
from atari_speed.agent.rollout import RolloutStore
from atari_speed.core.timing import Profiler
from atari_speed.envs.vector import VectorEnv


@dataclass(frozen=True)
class Game:
    """A finished whole game (all lives): its unclipped score and agent steps."""

    score: float
    length: int


def finished_games(infos: dict[str, Any]) -> list[Game]:
    """The games a vector step finished, from its ``infos``."""
    if "_episode" not in infos:
        return []
    episode = infos["episode"]
    return [
        Game(float(episode["r"][i]), int(episode["l"][i]))
        for i in np.flatnonzero(infos["_episode"])
    ]


class Actor:
    """Steps ``venv`` epsilon-greedily with ``net`` into ``replay`` columns ``cols``.

    The vector env is reset with ``seed`` here; ``close()`` closes it. ``rng`` draws the
    exploration (the run's own in n-env mode, so a checkpoint carries it). With a profiler, its
    sections are ``action selection``, ``env step`` (split into the pipeline's stages
    where they run in this process) and ``replay add``.
    """

    def __init__(
        self,
        venv: VectorEnv,
        net: nn.Module,
        replay: FrameReplay | RolloutStore,
        cols: slice,
        seed: int,
        rng: np.random.Generator,
        device: torch.device,
        prof: Profiler,
    ) -> None:
        self.venv, self.net, self.replay, self.cols = venv, net, replay, cols
        self.device, self.prof = device, prof
        self.num_envs = venv.num_envs
        self.actions = int(venv.single_action_space.n)
        self.rng = rng
        if venv.stage_timer is not None:
            prof.split("env step", venv.stage_timer)
        self.obs, _ = venv.reset(seed=seed)

    def step(self, epsilon: float, sink: FrameReplay | RolloutStore | None = None) -> list[Game]:
        """One step of every env, written into ``sink`` (default: the actor's replay; parallel
        PQN's actors alternate between two shared rollouts); the games it finished."""
        prof, replay = self.prof, self.replay if sink is None else sink
        with prof.section("action selection"):
            actions, values = act(self.net, self.obs, epsilon, self.actions, self.rng, self.device)
        with prof.section("replay add"):
            # before step(), which overwrites obs in place; a rollout keeps the values too
            if isinstance(replay, RolloutStore):
                replay.put_obs(self.obs, self.cols, values)
            else:
                replay.put_obs(self.obs, self.cols)
        with prof.section("env step"):
            self.obs, rewards, terminated, truncated, infos = self.venv.step(actions)
        with prof.section("replay add"):
            final = infos.get("final_obs") if truncated.any() else None
            replay.commit(
                actions, rewards, terminated, truncated=truncated, final_obs=final, cols=self.cols
            )
        return finished_games(infos)

    def worker_profiles(self) -> dict[str, dict[str, Any]]:
        """The env worker processes' profiles (subprocess backend), by name."""
        return self.venv.worker_profiles()

    def close(self) -> None:
        self.venv.close()
