"""Play and train at the same time: actor processes and the learner, over shared memory
(DQN's replay, or PQN's rollouts).

Each actor process runs the one ``Actor`` (``agent/actor.py``) over its own CPU copy of
the network and writes every transition straight into the shared-memory ``FrameReplay``,
into columns it alone owns: nothing per transition crosses a pipe or a queue. The learner
(this process) samples and trains concurrently and, every ``run.publish_every`` updates,
publishes its weights for the actors to reload (``run/shared.py``: the blocks, the
seqlock, starting and stopping the processes).

The update-to-data ratio is the preset's, exactly as in n-env mode (``UpdateSchedule``):
a semaphore holds frame credits. Actors take one per frame and the learner returns
``train_every`` per update, so actors never run more than the warm-up plus a small lead
ahead of the updates; the learner waits for data when it is ahead.

PQN (``run_parallel_pqn``): the actors fill rollouts into two shared slots, in turn, each
actor its own envs' columns; the learner trains on one slot while they fill the other, and
publishes its weights after each. An actor starts rollout r once the learner is done with
rollout r - 2 (the slot's last), so it plays with weights one rollout behind the
learner's: Q-learning does not need its data on-policy.

``run.actors = 0`` is n-env mode: the same actor in the learner's process (``plan.mode``).
"""

from __future__ import annotations

import multiprocessing as mp
import time
import traceback
from typing import Any

import numpy as np
import torch

from atari_speed.agent.actor import Actor, Game
from atari_speed.agent.networks import build_network
from atari_speed.agent.schedules import actor_epsilon, epsilon_at
from atari_speed.core.timing import Profiler
from atari_speed.envs.vector import make_vector_env
from atari_speed.run.plan import Plan
from atari_speed.run.session import Run
from atari_speed.run.shared import (
    CONSUMED,
    SLOTS,
    STOP,
    WAIT,
    ActorMessage,
    Shared,
    SharedSpec,
    check_actors,
    drain,
    load_published,
    publish,
    start_actors,
    stop_actors,
)

# ---------------------------------------------------------------- the actor process


class ActorProcess:
    """Actor ``index`` of a parallel run: steps the one ``Actor`` with the latest published
    weights, counts its frames in the shared block; for DQN a step at a time, as frame
    ``credits`` allow (``step``), for PQN a rollout at a time (``fill_rollout``)."""

    def __init__(self, index: int, plan: Plan, shared: Shared, credits: Any) -> None:
        preset = plan.preset
        self.index, self.plan, self.shared, self.credits = index, plan, shared, credits
        self.prof = Profiler(preset.run.profile)
        self.net = build_network(preset.dqn, plan.obs_shape, plan.actions)
        self.version = -1
        self.rollouts = 0  # PQN: rollouts this actor has filled
        self.fixed_epsilon = actor_epsilon(preset.explore, index, preset.run.actors)
        envs = preset.run.envs
        seed = preset.run.seed + 1000 * (index + 1)  # each actor its own envs and stream
        venv = make_vector_env(
            plan.pipeline,
            preset.env.game,
            envs,
            backend=preset.env.backend,
            profile=self.prof.enabled,
        )
        try:
            self.actor = Actor(
                venv,
                self.net,
                shared.rollouts[0] if shared.spec.rollout else shared.replay,
                slice(index * envs, (index + 1) * envs),
                seed=seed,
                rng=np.random.default_rng(seed),
                device=torch.device("cpu"),
                prof=self.prof,
                bf16=plan.act_bf16,
            )
        except BaseException:
            venv.close()
            raise

    def refresh_weights(self) -> None:
        first = self.version < 0
        self.version = load_published(self.shared, self.net, self.version)
        if first and self.version >= 0 and self.shared.spec.start_frames > 0:
            # resumed: with the first weights in, the envs (all just reset) play apart
            self.actor.spread(self.plan.preset.run.resume_spread, self.epsilon())

    def take_credits(self, n: int) -> bool:
        """``n`` frame credits, or False (none taken) if they did not come within WAIT s."""
        with self.prof.section("wait for frame credits"):
            for taken in range(n):
                if not self.credits.acquire(timeout=WAIT):
                    for _ in range(taken):
                        self.credits.release()
                    return False
        return True

    def epsilon(self) -> float:
        if self.version < 0:  # no weights received yet: act at random
            return 1.0
        if self.fixed_epsilon is not None:
            return self.fixed_epsilon
        frames = self.shared.spec.start_frames + int(self.shared.frames.sum())
        return epsilon_at(self.plan.preset.explore, frames)

    def step(self) -> list[Game] | None:
        """One vector step, or None if no frame credits came within WAIT seconds."""
        if not self.take_credits(self.actor.num_envs):
            return None
        games = self.actor.step(self.epsilon())
        self.shared.frames[self.index] += self.actor.num_envs
        with self.prof.section("load published weights"):
            self.refresh_weights()
        return games

    def fill_rollout(self) -> list[Game] | None:
        """PQN: rollout r, with the latest weights, into shared slot r % SLOTS once the
        learner is done with the rollout that was there; the games it finished, or None if
        the slot was not freed within WAIT seconds."""
        r, shared = self.rollouts, self.shared
        with self.prof.section("wait for the learner"):
            deadline = time.monotonic() + WAIT
            while shared.control[CONSUMED] < r - SLOTS + 1:
                if time.monotonic() > deadline or shared.control[STOP]:
                    return None
                time.sleep(0.0005)
        with self.prof.section("load published weights"):
            self.refresh_weights()
        slot, games = shared.rollouts[r % SLOTS], []
        slot.clear()
        while not slot.full:
            games += self.actor.step(self.epsilon(), sink=slot)
            shared.frames[self.index] += self.actor.num_envs
        slot.finish(self.actor.obs, self.actor.cols)
        self.rollouts = shared.filled[self.index] = r + 1
        return games

    def profiles(self) -> dict[str, dict[str, Any]]:
        """This actor's profile and its env workers', once it has stopped stepping."""
        self.prof.stop()
        if not self.prof.enabled:
            return {}
        name = f"actor {self.index}"
        workers = self.actor.worker_profiles()
        return {name: self.prof.report(), **{f"{name} {k}": v for k, v in workers.items()}}

    def close(self) -> None:
        self.actor.close()


def actor_main(index: int, plan: Plan, spec: SharedSpec, credits: Any, messages: Any) -> None:
    """Actor process: step until the learner sets STOP; report games and errors."""
    torch.set_num_threads(1)
    shared = actor = None
    try:
        shared = Shared.attach(spec)
        actor = ActorProcess(index, plan, shared, credits)
        parent = mp.parent_process()
        actor.refresh_weights()
        actor.prof.restart()
        while not shared.control[STOP]:
            finished = actor.fill_rollout() if spec.rollout else actor.step()
            if finished:
                messages.put(ActorMessage("games", index, finished))
            if finished is None and parent is not None and not parent.is_alive():
                break  # the learner is gone: exit rather than linger as an orphan
        if actor.prof.enabled:
            messages.put(ActorMessage("profile", index, actor.profiles()))
    except KeyboardInterrupt:
        pass
    except Exception:
        messages.put(ActorMessage("error", index, traceback.format_exc()))
    finally:
        if actor is not None:
            actor.close()
        if shared is not None:
            shared.close(unlink=False)


# ---------------------------------------------------------------- the learner


def shared_spec(run: Run) -> SharedSpec:
    """The shared blocks this run's actors and learner need: DQN's replay, or PQN's
    rollout slots (``rollout`` steps, no replay)."""
    plan, preset = run.plan, run.preset
    pqn = preset.dqn.algorithm == "pqn"
    return SharedSpec(
        capacity=0 if pqn else preset.replay.size,
        columns=plan.total_envs,
        frame_shape=plan.frame_shape,
        k=plan.stack,
        n_steps=1 if pqn else preset.dqn.n_steps,
        gamma=preset.dqn.gamma,
        actors=preset.run.actors,
        weights=sum(p.numel() for p in run.learner.net.parameters()),
        start_frames=run.frames,
        rollout=preset.pqn.rollout if pqn else 0,
    )


def hear_actors(
    run: Run, shared: Shared, messages: Any, procs: list[mp.Process], counted: int
) -> tuple[list[Game], int]:
    """Check the actors are alive, take the games they finished, and count the frames they
    made at once (checkpoint and summary agree); the games and the frames counted now."""
    with run.prof.section("actor messages"):
        check_actors(procs, messages)
        finished = drain(messages)
    produced = int(shared.frames.sum())
    run.tracker.advance(produced - counted)
    return finished, produced


def run_parallel(run: Run) -> None:
    """The learner side of parallel mode: start the actors, learn, stop them on any exit;
    the replay is restored before they start and saved once they have stopped."""
    run.spread_after_resume()  # the actors spread themselves; this says so
    shared = Shared.create(shared_spec(run), run.run_dir)
    try:
        with run.keep_replay(shared.replay):
            lead = run.schedule.actor_credits(run.plan.total_envs, run.restored)
            credits = mp.get_context("spawn").Semaphore(lead)
            messages, procs = start_actors(run, shared, actor_main, (credits,))
            try:
                _learn(run, shared, credits, messages, procs)
            finally:
                stop_actors(run, shared, messages, procs)
    finally:
        shared.close(unlink=True)  # on every exit path: the resource tracker has nothing left


def _learn(run: Run, shared: Shared, credits: Any, messages: Any, procs: list[mp.Process]) -> None:
    """Update whenever the actors' frames make one due; otherwise wait for them."""
    prof, dqn = run.prof, run.preset.dqn
    produced = 0  # frames the actors made in this run, as far as the tracker knows
    prof.restart()
    while not run.done:
        finished, produced = hear_actors(run, shared, messages, procs, produced)
        if run.updates_due(produced) > 0:
            run.learn(shared.replay)
            for _ in range(dqn.train_every):
                credits.release()
            if run.learner.updates % run.preset.run.publish_every == 0:
                with prof.section("publish weights"):
                    publish(shared, run.learner.net)
        else:
            with prof.section("wait for actors' frames"):
                time.sleep(0.001)  # data comes from the actors; nothing to do until it does
        with prof.section("logging + checkpoints"):
            for game in finished:
                run.game(game)
            run.periodic(len(shared.replay) / run.preset.replay.size)


def run_parallel_pqn(run: Run) -> None:
    """PQN's learner in parallel mode: start the actors, train on each rollout they fill,
    stop them on any exit."""
    run.spread_after_resume()  # the actors spread themselves; this says so
    shared = Shared.create(shared_spec(run), run.run_dir)
    try:
        messages, procs = start_actors(run, shared, actor_main, (None,))
        try:
            _learn_rollouts(run, shared, messages, procs)
        finally:
            stop_actors(run, shared, messages, procs)
    finally:
        shared.close(unlink=True)


def _learn_rollouts(run: Run, shared: Shared, messages: Any, procs: list[mp.Process]) -> None:
    """Train on rollout r as soon as every actor has filled its columns of it."""
    prof = run.prof
    produced = 0  # frames the actors made in this run, as far as the tracker knows
    prof.restart()
    while not run.done:
        finished, produced = hear_actors(run, shared, messages, procs, produced)
        r = int(shared.control[CONSUMED])
        if shared.filled.min() > r:
            rollout = shared.rollouts[r % SLOTS]
            run.learn(rollout)
            with prof.section("publish weights"):
                publish(shared, run.learner.net)
            shared.control[CONSUMED] = r + 1  # after publishing: the slot's next rollout
            # is played with these weights
        else:
            with prof.section("wait for actors' rollouts"):
                time.sleep(0.001)
        with prof.section("logging + checkpoints"):
            for game in finished:
                run.game(game)
            run.periodic(buffer_fill=1.0)
