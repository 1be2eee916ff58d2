"""Play and train at the same time: actor processes and the learner, over shared memory.

Each actor process runs the one ``Actor`` (``agent/actor.py``) over its own CPU copy of
the network and writes every transition straight into the shared-memory ``FrameReplay``,
into columns it alone owns: nothing per transition crosses a pipe or a queue. The learner
(this process) samples and trains concurrently and, every ``run.publish_every`` updates,
copies its weights into a shared block that actors reload from (a seqlock: the version is
odd while it is being written).

The update-to-data ratio is the preset's, exactly as in n-env mode (``UpdateSchedule``):
a semaphore holds frame credits. Actors take one per frame and the learner returns
``train_every`` per update, so actors never run more than the warm-up plus a small lead
ahead of the updates; the learner waits for data when it is ahead.

``run.actors = 0`` is n-env mode: the same actor in the learner's process (``plan.mode``).

Faults: every wait has a timeout; the learner checks its actors each iteration, so an
actor that raises or is killed is reported (``WorkerError`` naming it) within a second, a
checkpoint is written, and all actors are stopped on every exit path.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import time
import traceback
from dataclasses import dataclass, replace
from multiprocessing.shared_memory import SharedMemory
from typing import Any

import numpy as np
import torch

from atari_speed.agent.actor import Actor, Game
from atari_speed.agent.networks import build_network
from atari_speed.agent.replay import FrameReplay
from atari_speed.agent.schedules import actor_epsilon, epsilon_at
from atari_speed.core.errors import WorkerError
from atari_speed.core.shm import arrays_over, layout_nbytes
from atari_speed.core.shm import attach as attach_block
from atari_speed.core.timing import Profiler
from atari_speed.envs.vector import make_vector_env, quiet_children
from atari_speed.run.plan import Plan
from atari_speed.run.session import Run

STOP, VERSION = 0, 1  # slots of the control array
WAIT = 0.5  # seconds: the longest any wait blocks before re-checking for shutdown


@dataclass(frozen=True)
class SharedSpec:
    """What an actor process needs to attach to the learner's shared blocks."""

    capacity: int  # replay transitions
    columns: int  # replay columns: actors x envs per actor
    frame_shape: tuple[int, ...]
    k: int  # frames per state
    n_steps: int
    gamma: float
    actors: int
    weights: int  # float32 parameters of the network
    start_frames: int  # frames of the runs this one resumes: the epsilon schedule goes on
    replay_shm: str = ""  # block names, set when the learner has created them
    small_shm: str = ""


@dataclass(frozen=True)
class ActorMessage:
    """What an actor process sends the learner: ``games`` (a list of Game), its
    ``profile`` when it stops, or an ``error`` (a traceback)."""

    kind: str
    index: int
    payload: Any


class Shared:
    """The shared blocks: replay, weights, and a control array (stop flag, weights
    version) beside frames per actor. ``create`` is the learner's, ``attach`` the actors'."""

    def __init__(
        self, spec: SharedSpec, replay_shm: SharedMemory, small_shm: SharedMemory, attach: bool
    ) -> None:
        self.spec, self.replay_shm, self.small_shm = spec, replay_shm, small_shm
        self.replay = FrameReplay(
            spec.capacity,
            spec.columns,
            spec.frame_shape,
            spec.k,
            spec.n_steps,
            spec.gamma,
            buffer=replay_shm.buf,
            attach=attach,  # an actor must not reset what others are writing
        )
        arrays = arrays_over(small_shm.buf, self.small_layout(spec))
        self.control, self.frames, self.weights = (
            arrays["control"],
            arrays["frames"],
            arrays["weights"],
        )

    @staticmethod
    def small_layout(spec: SharedSpec) -> list[tuple[str, tuple[int, ...], str]]:
        return [
            ("control", (2,), "int64"),
            ("frames", (spec.actors,), "int64"),
            ("weights", (spec.weights,), "float32"),
        ]

    @classmethod
    def create(cls, spec: SharedSpec) -> Shared:
        replay_args = (spec.capacity, spec.columns, spec.frame_shape, spec.k, spec.n_steps)
        replay_shm = SharedMemory(create=True, size=FrameReplay.nbytes(*replay_args))
        small_shm = SharedMemory(create=True, size=layout_nbytes(cls.small_layout(spec)))
        named = replace(spec, replay_shm=replay_shm.name, small_shm=small_shm.name)
        shared = cls(named, replay_shm, small_shm, attach=False)
        shared.control[:] = 0
        shared.frames[:] = 0
        return shared

    @classmethod
    def attach(cls, spec: SharedSpec) -> Shared:
        return cls(spec, attach_block(spec.replay_shm), attach_block(spec.small_shm), attach=True)

    def close(self, unlink: bool) -> None:
        # numpy views must go before the blocks can close
        self.replay = self.control = self.frames = self.weights = None  # type: ignore[assignment]
        for shm in (self.replay_shm, self.small_shm):
            shm.close()
            if unlink:
                shm.unlink()


def publish(shared: Shared, net: torch.nn.Module) -> None:
    # reshape, not view: a channels-last weight is not contiguous in NCHW order.
    flat = torch.cat([p.detach().reshape(-1) for p in net.parameters()]).cpu().numpy()
    shared.control[VERSION] += 1  # odd: writing
    shared.weights[:] = flat
    shared.control[VERSION] += 1  # even: complete


def load_flat(net: torch.nn.Module, flat: torch.Tensor) -> None:
    """Inverse of ``publish``'s flattening, whatever each parameter's memory layout."""
    offset = 0
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(flat[offset : offset + p.numel()].view(p.shape))
            offset += p.numel()


# ---------------------------------------------------------------- the actor process


class ActorProcess:
    """Actor ``index`` of a parallel run: takes frame credits, steps the one ``Actor`` with
    the latest published weights, counts its frames in the shared block."""

    def __init__(self, index: int, plan: Plan, shared: Shared, credits: Any) -> None:
        preset = plan.preset
        self.index, self.plan, self.shared, self.credits = index, plan, shared, credits
        self.prof = Profiler(preset.run.profile)
        self.net = build_network(preset.dqn, plan.obs_shape, plan.actions)
        self.version = -1
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
                shared.replay,
                slice(index * envs, (index + 1) * envs),
                seed=seed,
                rng=np.random.default_rng(seed),
                device=torch.device("cpu"),
                prof=self.prof,
            )
        except BaseException:
            venv.close()
            raise

    def refresh_weights(self) -> None:
        version = int(self.shared.control[VERSION])
        if version == self.version or version % 2:
            return
        flat = torch.from_numpy(self.shared.weights.copy())
        if int(self.shared.control[VERSION]) == version:  # not rewritten while copying
            load_flat(self.net, flat)
            self.version = version

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
            finished = actor.step()
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


def run_parallel(run: Run) -> None:
    """The learner side of parallel mode: start the actors, learn, stop them on any exit."""
    plan, cfg = run.plan, run.preset.run
    spec = SharedSpec(
        capacity=run.preset.replay.size,
        columns=plan.total_envs,
        frame_shape=plan.frame_shape,
        k=plan.stack,
        n_steps=run.preset.dqn.n_steps,
        gamma=run.preset.dqn.gamma,
        actors=cfg.actors,
        weights=sum(p.numel() for p in run.learner.net.parameters()),
        start_frames=run.frames,
    )
    shared = Shared.create(spec)
    publish(shared, run.learner.net)
    ctx = mp.get_context("spawn")
    credits = ctx.Semaphore(run.schedule.actor_credits(plan.total_envs))
    messages = ctx.Queue()
    procs: list[mp.Process] = []
    # The learner is the bottleneck at the usual update-to-data ratios and actors mostly
    # wait for credits, so it gets every core unless told otherwise (docs/train_speed.md).
    torch.set_num_threads(cfg.learner_threads or (mp.cpu_count() or 1))
    try:
        for i in range(cfg.actors):
            proc = ctx.Process(
                target=actor_main,
                args=(i, plan, shared.spec, credits, messages),
                daemon=True,
                name=f"atari-speed-actor-{i}",
            )
            with quiet_children():
                proc.start()
            procs.append(proc)
        run.tracker.note_choices(
            actors=cfg.actors,
            envs_per_actor=cfg.envs,
            learner_threads=torch.get_num_threads(),
            actor_pids=[p.pid for p in procs],
        )
        _learn(run, shared, credits, messages, procs)
    finally:
        _stop(run, shared, messages, procs)


def _learn(run: Run, shared: Shared, credits: Any, messages: Any, procs: list[mp.Process]) -> None:
    """Update whenever the actors' frames make one due; otherwise wait for them."""
    prof, dqn = run.prof, run.preset.dqn
    counted = 0  # frames the actors made in this run, as far as the tracker knows
    prof.restart()
    while not run.done:
        with prof.section("actor messages"):
            _check_actors(procs, messages)
            finished = _drain(messages)
        produced = int(shared.frames.sum())
        run.tracker.advance(produced - counted)  # at once: checkpoint and summary agree
        counted = produced
        if run.updates_due(produced) > 0:
            run.update(shared.replay)
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


def _stop(run: Run, shared: Shared, messages: Any, procs: list[mp.Process]) -> None:
    """Stop and join the actors (killing any that do not stop), collect their profiles,
    and release the shared blocks."""
    run.prof.stop()
    shared.control[STOP] = 1
    if run.prof.enabled:
        # Read before joining: a process is joined only once its queue data is flushed.
        _collect_profiles(messages, len(procs), run.profiles)
    for proc in procs:
        proc.join(timeout=5)
        if proc.is_alive():
            proc.kill()
            proc.join(timeout=5)
    messages.close()
    messages.join_thread()
    shared.close(unlink=True)


def _collect_profiles(messages: Any, actors: int, into: dict[str, dict[str, Any]]) -> None:
    """The profiles stopped actors sent last; games and errors left in the queue are moot."""
    received, deadline = 0, time.monotonic() + 5
    while received < actors and time.monotonic() < deadline:
        try:
            message = messages.get(timeout=max(deadline - time.monotonic(), 0.01))
        except queue.Empty:
            return
        if message.kind == "profile":
            into.update(message.payload)
            received += 1


def _drain(messages: Any) -> list[Game]:
    """The games actors have reported; WorkerError if one reported an error."""
    finished: list[Game] = []
    while True:
        try:
            message = messages.get_nowait()
        except queue.Empty:
            return finished
        if message.kind == "error":
            last = message.payload.strip().splitlines()[-1]
            raise WorkerError(f"actor {message.index} failed: {last}\n{message.payload}")
        finished.extend(message.payload)


def _check_actors(procs: list[mp.Process], messages: Any) -> None:
    for index, proc in enumerate(procs):
        if proc.exitcode is not None:
            _drain(messages)  # an actor that raised has put its error there: report that
            raise WorkerError(f"actor {index} (pid {proc.pid}) died with exit code {proc.exitcode}")
