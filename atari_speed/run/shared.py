"""Parallel mode's machinery, for DQN and PQN alike (both loops are in
``run/parallel.py``): the shared-memory blocks, weight publishing, and
starting, watching and stopping actor processes.

The learner creates two blocks once: the data actors write (DQN's replay, or PQN's two
rollout slots) and a small one (a control array, frames per actor, the published weights).
Actors attach to them by name; nothing per transition crosses a pipe. Weights go through a
seqlock: the version is odd while it is being written.

Faults: every wait has a timeout; the learner checks its actors each iteration, so an
actor that raises or is killed is reported (``WorkerError`` naming it) within a second, and
``stop_actors`` stops them all on every exit path.
"""

from __future__ import annotations

import contextlib
import hashlib
import multiprocessing as mp
import queue
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from multiprocessing.shared_memory import SharedMemory
from pathlib import Path
from typing import Any

import torch

from atari_speed.agent.actor import Game
from atari_speed.agent.replay import FrameReplay
from atari_speed.agent.rollout import RolloutStore
from atari_speed.core.errors import WorkerError
from atari_speed.core.shm import arrays_over, layout_nbytes
from atari_speed.core.shm import attach as attach_block
from atari_speed.core.shm import create as create_block
from atari_speed.envs.vector import quiet_children
from atari_speed.run.session import Run

# Slots of the control array: the stop flag, the weights' version, and (PQN) how many
# rollouts the learner has trained on.
STOP, VERSION, CONSUMED = 0, 1, 2
WAIT = 0.5  # seconds: the longest any wait blocks before re-checking for shutdown
SLOTS = 2  # PQN's rollouts in shared memory: actors fill one while the learner reads the other


@dataclass(frozen=True)
class SharedSpec:
    """What an actor process needs to attach to the learner's shared blocks."""

    capacity: int  # replay transitions (DQN)
    columns: int  # envs in all: actors x envs per actor; each actor owns its columns
    frame_shape: tuple[int, ...]
    k: int  # frames per state
    n_steps: int
    gamma: float
    actors: int
    weights: int  # float32 parameters of the network
    start_frames: int  # frames of the runs this one resumes: the epsilon schedule goes on
    rollout: int = 0  # PQN: steps per rollout (SLOTS rollouts instead of a replay); 0 = DQN
    data_shm: str = ""  # block names, set when the learner has created them
    small_shm: str = ""

    @property
    def obs_shape(self) -> tuple[int, ...]:
        return (self.frame_shape[0] * self.k, *self.frame_shape[1:])

    def data_nbytes(self) -> int:
        if self.rollout:
            return SLOTS * RolloutStore.nbytes(self.columns, self.rollout, self.obs_shape)
        return FrameReplay.nbytes(
            self.capacity, self.columns, self.frame_shape, self.k, self.n_steps
        )


@dataclass(frozen=True)
class ActorMessage:
    """What an actor process sends the learner: ``games`` (a list of Game), its
    ``profile`` when it stops, or an ``error`` (a traceback)."""

    kind: str
    index: int
    payload: Any


class Shared:
    """The shared blocks: the replay (DQN) or SLOTS rollouts (PQN), and a control array,
    frames and rollouts filled per actor, and the weights. ``create`` is the learner's,
    ``attach`` the actors'."""

    replay: FrameReplay
    rollouts: list[RolloutStore]

    def __init__(
        self, spec: SharedSpec, data_shm: SharedMemory, small_shm: SharedMemory, attach: bool
    ) -> None:
        self.spec, self.data_shm, self.small_shm = spec, data_shm, small_shm
        if spec.rollout:
            size = spec.data_nbytes() // SLOTS
            self.rollouts = [
                RolloutStore(spec.columns, spec.rollout, spec.obs_shape, data_shm.buf[i * size :])
                for i in range(SLOTS)
            ]
        else:
            self.replay = FrameReplay(
                spec.capacity,
                spec.columns,
                spec.frame_shape,
                spec.k,
                spec.n_steps,
                spec.gamma,
                buffer=data_shm.buf,
                attach=attach,  # an actor must not reset what others are writing
            )
        arrays = arrays_over(small_shm.buf, self.small_layout(spec))
        self.control, self.frames = arrays["control"], arrays["frames"]
        self.filled, self.weights = arrays["filled"], arrays["weights"]

    @staticmethod
    def small_layout(spec: SharedSpec) -> list[tuple[str, tuple[int, ...], str]]:
        return [
            ("control", (3,), "int64"),
            ("frames", (spec.actors,), "int64"),
            ("filled", (spec.actors,), "int64"),  # PQN: rollouts each actor has filled
            ("weights", (spec.weights,), "float32"),
        ]

    @classmethod
    def create(cls, spec: SharedSpec, run_dir: Path) -> Shared:
        """The blocks of the run in ``run_dir``, named after it: a block of this directory's
        that a killed run left (its resource tracker killed with it) is unlinked here."""
        name = "psm_" + hashlib.sha1(str(run_dir.resolve()).encode()).hexdigest()[:16]
        data_shm = create_block(f"{name}_data", spec.data_nbytes())
        small_shm = create_block(f"{name}_ctl", layout_nbytes(cls.small_layout(spec)))
        named = replace(spec, data_shm=data_shm.name, small_shm=small_shm.name)
        shared = cls(named, data_shm, small_shm, attach=False)
        shared.control[:] = 0
        shared.frames[:] = 0
        shared.filled[:] = 0
        return shared

    @classmethod
    def attach(cls, spec: SharedSpec) -> Shared:
        return cls(spec, attach_block(spec.data_shm), attach_block(spec.small_shm), attach=True)

    def close(self, unlink: bool) -> None:
        # numpy views (and the memoryviews under them) must go before the blocks can close
        self.__dict__.pop("replay", None)
        self.__dict__.pop("rollouts", None)
        self.control = self.frames = self.filled = self.weights = None  # type: ignore[assignment]
        for shm in (self.data_shm, self.small_shm):
            # A view still alive (a traceback on its way out holds the frames that read the
            # block) keeps the mapping until it goes; the name must go now all the same.
            with contextlib.suppress(BufferError):
                shm.close()
            if unlink:
                shm.unlink()


def flat_weights(net: torch.nn.Module) -> Any:
    """Every parameter in one float32 numpy array, in ``net.parameters()`` order."""
    # reshape, not view: a channels-last weight is not contiguous in NCHW order.
    return torch.cat([p.detach().reshape(-1) for p in net.parameters()]).cpu().numpy()


def publish(shared: Shared, net: torch.nn.Module) -> None:
    flat = flat_weights(net)
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


def load_published(shared: Shared, net: torch.nn.Module, version: int) -> int:
    """Load the published weights into ``net`` if they are newer than ``version`` and
    were not being rewritten while copied; the version ``net`` now has."""
    latest = int(shared.control[VERSION])
    if latest == version or latest % 2:
        return version
    flat = torch.from_numpy(shared.weights.copy())
    if int(shared.control[VERSION]) != latest:  # rewritten while copying: next time
        return version
    load_flat(net, flat)
    return latest


# ---------------------------------------------------------------- actor processes


def start_actors(
    run: Run, shared: Shared, target: Callable[..., None], args: tuple[Any, ...]
) -> tuple[Any, list[mp.Process]]:
    """Publish the learner's weights, then start ``run.actors`` processes of
    ``target(index, plan, spec, *args, messages)``; the message queue and the processes.
    On failure, whatever started is stopped (the caller releases the blocks). The learner gets
    every core unless ``run.learner_threads`` says otherwise (auto leaves one for actors
    where they do real work)."""
    cfg = run.preset.run
    ctx = mp.get_context("spawn")
    messages = ctx.Queue()
    procs: list[mp.Process] = []
    torch.set_num_threads(cfg.learner_threads or (mp.cpu_count() or 1))
    try:
        publish(shared, run.learner.net)
        for i in range(cfg.actors):
            proc = ctx.Process(
                target=target,
                args=(i, run.plan, shared.spec, *args, messages),
                daemon=True,
                name=f"atari-speed-actor-{i}",
            )
            with quiet_children():
                proc.start()
            procs.append(proc)
    except BaseException:
        stop_actors(run, shared, messages, procs)
        raise
    run.tracker.note_choices(
        actors=cfg.actors,
        envs_per_actor=cfg.envs,
        learner_threads=torch.get_num_threads(),
        actor_pids=[p.pid for p in procs],
    )
    return messages, procs


def stop_actors(run: Run, shared: Shared, messages: Any, procs: list[mp.Process]) -> None:
    """Stop and join the actors (killing any that do not stop) and collect their profiles.
    The blocks stay: the learner may still read them (to save the replay), then closes
    them itself."""
    run.prof.stop()
    shared.control[STOP] = 1
    if run.prof.enabled:
        # Read before joining: a process is joined only once its queue data is flushed.
        collect_profiles(messages, len(procs), run.profiles)
    for proc in procs:
        proc.join(timeout=5)
        if proc.is_alive():
            proc.kill()
            proc.join(timeout=5)
    messages.close()
    messages.join_thread()


def collect_profiles(messages: Any, actors: int, into: dict[str, dict[str, Any]]) -> None:
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


def drain(messages: Any) -> list[Game]:
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


def check_actors(procs: list[mp.Process], messages: Any) -> None:
    """WorkerError naming the first actor that has died (its own error if it sent one)."""
    for index, proc in enumerate(procs):
        if proc.exitcode is not None:
            drain(messages)  # an actor that raised has put its error there: report that
            raise WorkerError(f"actor {index} (pid {proc.pid}) died with exit code {proc.exitcode}")
