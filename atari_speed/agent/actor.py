"""The one actor: N envs stepped together, one batched forward pass choosing all N actions,
every transition written into the columns it owns of a sink (``Sink``): DQN's replay,
PQN's rollout, or a Ray actor's batch.

n-env mode runs it in the training process over the in-process replay or rollout;
parallel mode runs one per actor process over the shared-memory replay or rollouts. The
replay holds the n-step accumulation (returns are summed at sample time), so the actor
writes each step once and nothing per transition is pickled.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch
from torch import nn

from atari_speed.agent.policy import act
from atari_speed.core.timing import Profiler
from atari_speed.envs.ale import PLAYED
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


class Sink(Protocol):
    """Where the actor writes its steps, into its columns ``cols``: DQN's replay
    (``FrameReplay``), PQN's rollout (``RolloutStore``) or a Ray actor's batch
    (``StepRecorder``). A step is ``put_obs`` then, once the envs have stepped, ``commit``."""

    def put_obs(
        self, obs: np.ndarray, cols: slice = slice(None), values: np.ndarray | None = None
    ) -> None:
        """Row t's observations ``(n, k*C, H, W)``, and max_a Q of each where the actor
        computed it choosing the actions (a sink that has no use for them ignores them)."""

    def commit(
        self,
        actions: np.ndarray,
        rewards: np.ndarray,
        terminated: np.ndarray,
        *,
        truncated: np.ndarray | None = None,
        final_obs: np.ndarray | None = None,
        cols: slice = slice(None),
    ) -> None:
        """Complete row t with a_t, r_t and how the episode ended; ``final_obs`` (the
        vector env's ``infos["final_obs"]``) where it was truncated."""


class Actor:
    """Steps ``venv`` epsilon-greedily with ``net`` into ``sink`` columns ``cols``.

    The vector env is reset with ``seed`` here; ``close()`` closes it. ``rng`` draws the
    exploration (the run's own in n-env mode, so a checkpoint carries it). With a profiler, its
    sections are ``action selection``, ``env step`` (split into the pipeline's stages
    where they run in this process) and ``replay add``. ``bf16`` autocasts the forward
    passes that choose the actions (``Plan.act_bf16``).
    """

    def __init__(
        self,
        venv: VectorEnv,
        net: nn.Module,
        sink: Sink,
        cols: slice,
        seed: int,
        rng: np.random.Generator,
        device: torch.device,
        prof: Profiler,
        bf16: bool = False,
    ) -> None:
        self.venv, self.net, self.sink, self.cols = venv, net, sink, cols
        self.bf16 = bf16
        # the network given, whose max_a Q the sink may reuse as targets (PQN's); ``net``
        # is what acts, which ``act_with`` may change
        self.own_net = net
        self.device, self.prof = device, prof
        self.num_envs = venv.num_envs
        self.actions = int(venv.single_action_space.n)
        self.rng = rng
        if venv.stage_timer is not None:
            prof.split("env step", venv.stage_timer)
        self.obs, _ = venv.reset(seed=seed)
        # envs whose game in progress must not be scored (begun in ``spread`` or ``realign``)
        self.unscored = np.zeros(self.num_envs, dtype=bool)
        # each env's agent steps into its game in progress, for a checkpoint (``realign``)
        self.phases = np.zeros(self.num_envs, dtype=np.int64)

    def act_with(self, net: nn.Module | None) -> None:
        """Act with ``net`` from the next step (None: the network given at the start). The
        values it computes are then not written to the sink: they are not the learner's."""
        self.net = self.own_net if net is None else net

    def spread(self, most: int, epsilon: float) -> None:
        """Env i plays a random number of random actions, 0 to ``most`` (drawn from the
        actor's RNG), the others acting with ``net`` at ``epsilon`` meanwhile; nothing is
        written, and every env's game then in progress, or ended, is not scored: envs
        reset together then play distinct games (``run.resume_spread``)."""
        if most <= 0:
            return
        randoms = self.rng.integers(0, most + 1, self.num_envs)
        for t in range(int(randoms.max())):
            actions = self._act(self.obs, epsilon)[0]
            actions, at_random = np.array(actions), randoms > t
            actions[at_random] = self.rng.integers(0, self.actions, int(at_random.sum()))
            self.obs, *_, infos = self.venv.step(actions)
            self._after_step(infos)
        self.unscored[:] = True

    def realign(
        self,
        phases: np.ndarray,
        epsilon: float,
        on_step: Callable[[], None] | None = None,
    ) -> None:
        """Bring env i, just reset, to ``phases[i]`` agent steps into a game of ``net``'s at
        ``epsilon``, as it was when a checkpoint was written (``run.resume_phases``): the
        envs play ``max(phases)`` steps, env i starting a new game (a partial reset) when
        ``phases[i]`` remain. Nothing is written, so the rollouts that follow come from
        games at the points the checkpoint's envs were at, not all from games' openings.
        No game that ends meanwhile, nor any game then in progress, is scored: each is
        the resumed network's untrained, uncounted play joined to what follows, not a
        game of the run's. Adding the stopped run's points up to the phase to the rest
        of the replayed game, as this once did, joined two different games and scored
        Pong games beyond 21. ``on_step`` is called after each of the ``max(phases)``
        steps (a progress bar).

        An env waiting for its game to begin plays NOOPs in the game it will leave, and
        only the envs in their game are run through the network: most of the steps are
        the waiting envs' where a few phases are long (a shooter's envs, one of them deep
        into a long game)."""
        phases = np.asarray(phases, dtype=np.int64)
        steps = int(phases.max(initial=0))
        actions = np.zeros(self.num_envs, dtype=np.int64)
        for t in range(steps + 1):
            starting = steps - phases == t
            if starting.any():
                self.obs, _ = self.venv.reset(options={"reset_mask": starting})
                self.phases[starting] = 0
            if t < steps:
                playing = steps - phases <= t
                actions[~playing] = 0
                actions[playing] = self._act(self.obs[playing], epsilon)[0]
                self.obs, *_, infos = self.venv.step(actions.copy())
                self._after_step(infos)  # a game shorter than its phase: the next one's
                if on_step is not None:
                    on_step()
        self.unscored[:] = True

    def new_games(self) -> None:
        """Every env starts a new game now; the games they were playing are dropped
        unscored, and games that were unscored (``spread``, ``realign``) are gone."""
        self.obs, _ = self.venv.reset(options={"reset_mask": np.ones(self.num_envs, dtype=bool)})
        self.phases[:] = 0
        self.unscored[:] = False

    def _act(
        self, obs: np.ndarray, epsilon: float | np.ndarray
    ) -> tuple[np.ndarray, np.ndarray | None]:
        return act(self.net, obs, epsilon, self.actions, self.rng, self.device, self.bf16)

    def _after_step(self, infos: dict[str, Any]) -> None:
        """One step more into each env's game (none into a game that just began)."""
        self.phases += 1
        if "_episode" in infos:
            self.phases[infos["_episode"]] = 0

    def step(self, epsilon: float | np.ndarray, sink: Sink | None = None) -> list[Game]:
        """One step of every env at ``epsilon`` (one for all, or each env's), written into
        ``sink`` (default: the actor's own; parallel PQN's actors alternate between two shared
        rollouts); the games it finished."""
        prof, sink = self.prof, self.sink if sink is None else sink
        with prof.section("action selection"):
            actions, values = self._act(self.obs, epsilon)
        with prof.section("replay add"):
            # before step(), which overwrites obs in place
            sink.put_obs(self.obs, self.cols, values if self.net is self.own_net else None)
        with prof.section("env step"):
            self.obs, rewards, terminated, truncated, infos = self.venv.step(actions)
        with prof.section("replay add"):
            final = infos.get("final_obs") if truncated.any() else None
            # The ale backend plays the step after a lost life itself (EpisodicLife's NOOP
            # or FIRE): the transition is of the action played, not of the one chosen.
            played = infos.get(PLAYED, actions)
            sink.commit(
                played, rewards, terminated, truncated=truncated, final_obs=final, cols=self.cols
            )
        self._after_step(infos)
        games = finished_games(infos)
        if games and self.unscored.any():
            ended = np.flatnonzero(infos["_episode"])
            games = [game for game, i in zip(games, ended, strict=True) if not self.unscored[i]]
            self.unscored[ended] = False
        return games

    def worker_profiles(self) -> dict[str, dict[str, Any]]:
        """The env worker processes' profiles (subprocess backend), by name."""
        return self.venv.worker_profiles()

    def close(self) -> None:
        self.venv.close()
