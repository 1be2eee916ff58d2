"""Baseline mode: the book's loop on ptan's own experience source, buffer, agent and
selector, one env; the reference row of every comparison. It shares the learner, the
update schedule and the run's bookkeeping with the other modes."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from atari_speed.agent.actor import Game
from atari_speed.agent.replay import Batch
from atari_speed.core.config import DQNConfig
from atari_speed.core.timing import Profiler, StageTimer
from atari_speed.envs.pipeline import make_env
from atari_speed.run.session import Run


class GameLog(gym.Wrapper):
    """Collects finished games for loops that never see infos (ptan's)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.finished: list[Game] = []

    def step(self, action: Any):
        out = self.env.step(action)
        if "episode" in out[4]:
            episode = out[4]["episode"]
            self.finished.append(Game(float(episode["r"]), int(episode["l"])))
        return out


def timed_agent(net: torch.nn.Module, selector: Any, device: torch.device, prof: Profiler) -> Any:
    """ptan's DQNAgent, its calls timed as action selection (ptan needs a BaseAgent)."""
    import ptan

    def states_to_tensor(states: list[Any]) -> torch.Tensor:
        return torch.from_numpy(np.stack([np.asarray(s) for s in states])).to(device)

    agent = ptan.agent.DQNAgent(net, selector, device=device, preprocessor=states_to_tensor)

    class TimedAgent(ptan.agent.BaseAgent):
        def __call__(self, states: list[Any], agent_states: list[Any]) -> Any:
            with prof.section("action selection"):
                return agent(states, agent_states)

    return TimedAgent()


def run_baseline(run: Run) -> None:
    """One env step into ptan's buffer, the updates that are due, the periodic chores."""
    import ptan

    plan, preset, prof = run.plan, run.preset, run.prof
    stages = StageTimer()
    tap = stages.tap if prof.enabled else None
    env = GameLog(make_env(plan.pipeline, preset.env.game, seed=preset.run.seed, tap=tap))
    selector = ptan.actions.EpsilonGreedyActionSelector(epsilon=run.epsilon)
    agent = timed_agent(run.learner.net, selector, plan.device, prof)
    source = ptan.experience.ExperienceSourceFirstLast(
        env, agent, gamma=preset.dqn.gamma, steps_count=preset.dqn.n_steps
    )
    buffer = ptan.experience.ExperienceReplayBuffer(source, buffer_size=preset.replay.size)
    replay = PtanReplay(buffer, preset.dqn)
    # ptan steps the env inside populate(): the env's stages are split out of that section
    # (ptan populate/<stage>) and "ptan populate/rest" is ptan's experience and buffer
    # bookkeeping, the replay add of this mode.
    prof.split("ptan populate", stages)
    collected = 0
    prof.restart()
    try:
        while not run.done:
            selector.epsilon = run.epsilon
            with prof.section("ptan populate"):
                buffer.populate(1)
            collected += 1
            with prof.section("logging + checkpoints"):
                run.tracker.advance(1)
                for game in env.finished:
                    run.game(game)
                env.finished.clear()
            for _ in range(run.updates_due(collected)):
                run.learn(replay)
            with prof.section("logging + checkpoints"):
                run.periodic(len(buffer) / preset.replay.size)
    finally:
        prof.stop()
        env.close()


class PtanReplay:
    """ptan's buffer as the learner samples a replay (``learner.Replay``). ptan draws with
    Python's ``random``, as the book's loop does, so ``rng`` is not used."""

    def __init__(self, buffer: Any, dqn: DQNConfig) -> None:
        self.buffer, self.dqn = buffer, dqn

    def sample(self, batch_size: int, rng: np.random.Generator, out: Batch | None = None) -> Batch:
        return unpack_ptan(self.buffer.sample(batch_size), self.dqn)


def unpack_ptan(batch: list[Any], dqn: Any) -> Batch:
    """ptan ExperienceFirstLast list -> the learner's batch. ptan ends an n-step window
    early only at an episode's end (``last_state`` None): no bootstrap there."""
    ended = np.array([e.last_state is None for e in batch])
    return Batch(
        states=np.stack([np.asarray(e.state) for e in batch]),
        next_states=np.stack(
            [np.asarray(e.state if e.last_state is None else e.last_state) for e in batch]
        ),
        actions=np.array([e.action for e in batch], dtype=np.int64),
        returns=np.array([e.reward for e in batch], dtype=np.float32),
        discounts=np.where(ended, 0.0, dqn.gamma**dqn.n_steps).astype(np.float32),
    )
