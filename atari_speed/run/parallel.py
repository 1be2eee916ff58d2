"""Play and train at the same time: actor processes and the learner, over shared memory.

Each actor steps ``run.envs`` envs with one batched forward pass of its own CPU copy of
the network and writes every transition straight into the shared-memory ``FrameReplay``,
into columns it alone owns: nothing per transition crosses a pipe or a queue. The learner
(this process) samples and trains concurrently and, every ``run.publish_every`` updates,
copies its weights into a shared block that actors reload from (a seqlock: the version is
odd while it is being written).

The update-to-data ratio is the preset's, exactly as in the other modes: a semaphore holds
frame credits. Actors take one per frame and the learner returns ``train_every`` per
update, so actors can never run more than ``replay.initial`` + a small lead ahead of the
updates; the learner waits for data when it is ahead.

``run.actors = 0`` runs the very same ``Actor`` in the learner's process, alternating with
updates: the serial mode, for debugging and tests.

Faults: every wait has a timeout; the learner checks its actors each iteration, so an
actor that raises or is killed is reported (``WorkerError`` naming it) within a second, a
checkpoint is written, and all actors are stopped on every exit path.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import time
import traceback
from multiprocessing.shared_memory import SharedMemory
from typing import Any

import numpy as np
import torch

from atari_speed.agent.learner import net_for, select_actions
from atari_speed.agent.replay import FrameReplay
from atari_speed.core.config import Preset
from atari_speed.core.errors import WorkerError
from atari_speed.core.shm import arrays_over, layout_nbytes
from atari_speed.core.timing import Profiler
from atari_speed.envs.vector import _attach, make_vector_env, quiet_children
from atari_speed.run.training import epsilon_at, stack_size

STOP, VERSION = 0, 1  # slots of the control array
WAIT = 0.5  # seconds: the longest any wait blocks before re-checking for shutdown


class Shared:
    """The shared blocks: replay, weights, and a control array (stop flag, weights version,
    frames per actor). Created by the learner, attached by actors."""

    def __init__(self, spec: dict[str, Any], create: bool) -> None:
        self.spec = spec
        replay_args = (
            spec["capacity"],
            spec["columns"],
            spec["frame_shape"],
            spec["k"],
            spec["n_steps"],
        )
        self.layout = [
            ("control", (2,), "int64"),
            ("frames", (spec["actors_slots"],), "int64"),
            ("weights", (spec["weights"],), "float32"),
        ]
        small = layout_nbytes(self.layout)
        if create:
            self.replay_shm = SharedMemory(create=True, size=FrameReplay.nbytes(*replay_args))
            self.small_shm = SharedMemory(create=True, size=small)
            spec["replay_shm"], spec["small_shm"] = self.replay_shm.name, self.small_shm.name
        else:
            self.replay_shm = _attach(spec["replay_shm"])
            self.small_shm = _attach(spec["small_shm"])
        self.replay = FrameReplay(*replay_args, gamma=spec["gamma"], buffer=self.replay_shm.buf)
        arrays = arrays_over(self.small_shm.buf, self.layout)
        self.control, self.frames, self.weights = (
            arrays["control"],
            arrays["frames"],
            arrays["weights"],
        )
        if create:
            self.control[:] = 0
            self.frames[:] = 0

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


def actor_epsilon(preset: Preset, index: int) -> float | None:
    """Actor ``index``'s fixed epsilon (Ape-X's spread), or None to follow the schedule."""
    base, actors = preset.explore.actor_base, max(preset.run.actors, 1)
    if base <= 0:
        return None
    return base ** (1 + 7 * index / (actors - 1)) if actors > 1 else base


class Actor:
    """Steps ``envs`` envs into replay columns ``cols``, with the latest published weights."""

    def __init__(
        self,
        index: int,
        preset: Preset,
        pipeline: dict[str, Any],
        shared: Shared,
        credits: Any,
        cols: slice,
        obs_shape: tuple[int, ...],
        actions: int,
        prof: Profiler | None = None,
    ) -> None:
        self.prof = prof or Profiler(preset.run.profile)
        self.index, self.preset, self.shared, self.credits, self.cols = (
            index,
            preset,
            shared,
            credits,
            cols,
        )
        self.actions = actions
        self.venv = make_vector_env(
            pipeline,
            preset.env.game,
            preset.run.envs,
            backend=preset.env.backend,
            profile=self.prof.enabled,
        )
        if self.venv.stage_timer is not None:
            self.prof.split("env step", self.venv.stage_timer)
        self.obs, _ = self.venv.reset(seed=preset.run.seed + 1000 * (index + 1))
        self.net = net_for(preset.dqn, obs_shape, actions)
        self.version = -1
        self.rng = np.random.default_rng(preset.run.seed + 1000 * (index + 1))
        self.device = torch.device("cpu")
        self.fixed_epsilon = actor_epsilon(preset, index)

    def refresh_weights(self) -> None:
        version = int(self.shared.control[VERSION])
        if version == self.version or version % 2:
            return
        flat = torch.from_numpy(self.shared.weights.copy())
        if int(self.shared.control[VERSION]) == version:  # not rewritten while copying
            load_flat(self.net, flat)
            self.version = version

    def step(self) -> list[tuple[float, int]] | None:
        """One vector step, or None if no frame credits came within WAIT seconds."""
        n, prof = self.preset.run.envs, self.prof
        with prof.section("wait for frame credits"):
            for taken in range(n):
                if not self.credits.acquire(timeout=WAIT):
                    for _ in range(taken):
                        self.credits.release()
                    return None
        epsilon = self.fixed_epsilon
        if epsilon is None:
            frames = self.shared.spec["start_frames"] + int(self.shared.frames.sum())
            epsilon = epsilon_at(self.preset, frames)
        if self.version < 0:  # no weights received yet: act at random
            epsilon = 1.0
        with prof.section("action selection"):
            actions = select_actions(
                self.net, self.obs, epsilon, self.actions, self.rng, self.device
            )
        replay = self.shared.replay
        with prof.section("replay add"):
            replay.put_obs(self.obs, self.cols)
        with prof.section("env step"):
            self.obs, rewards, terminated, truncated, infos = self.venv.step(actions)
        with prof.section("replay add"):
            replay.commit(actions, rewards, terminated | truncated, self.cols)
        self.shared.frames[self.index] += n
        with prof.section("load published weights"):
            self.refresh_weights()
        if "_episode" not in infos:
            return []
        return [
            (float(infos["episode"]["r"][i]), int(infos["episode"]["l"][i]))
            for i in np.flatnonzero(infos["_episode"])
        ]

    def profiles(self, name: str) -> dict[str, dict[str, Any]]:
        """This actor's profile and its env workers', once it has stopped stepping."""
        self.prof.stop()
        if not self.prof.enabled:
            return {}
        workers = self.venv.worker_profiles()
        return {name: self.prof.report(), **{f"{name} {k}": v for k, v in workers.items()}}

    def close(self) -> None:
        self.venv.close()


def _actor_main(
    index: int,
    preset: Preset,
    pipeline: dict[str, Any],
    spec: dict[str, Any],
    credits: Any,
    games: Any,
    cols: slice,
    obs_shape: tuple[int, ...],
    actions: int,
) -> None:
    """Actor process: step until the learner sets STOP; report games and errors."""
    torch.set_num_threads(1)
    shared = actor = None
    try:
        shared = Shared(spec, create=False)
        actor = Actor(index, preset, pipeline, shared, credits, cols, obs_shape, actions)
        parent = mp.parent_process()
        actor.prof.restart()
        while not shared.control[STOP]:
            finished = actor.step()
            if finished:
                games.put(("games", index, finished))
            if finished is None and parent is not None and not parent.is_alive():
                break  # the learner is gone: exit rather than linger as an orphan
        if actor.prof.enabled:
            games.put(("profile", index, actor.profiles(f"actor {index}")))
    except KeyboardInterrupt:
        pass
    except Exception:
        games.put(("error", index, traceback.format_exc()))
    finally:
        if actor is not None:
            actor.close()
        if shared is not None:
            shared.close(unlink=False)


def run_parallel(run: Any) -> None:
    """The learner side of parallel mode (``run`` is a ``training.Run``)."""
    preset = run.preset
    dqn, cfg = preset.dqn, preset.run
    serial = cfg.actors == 0
    actors = max(cfg.actors, 1)
    weights = sum(p.numel() for p in run.learner.net.parameters())
    spec = {
        "capacity": preset.replay.size,
        "columns": actors * cfg.envs,
        "frame_shape": run.frame_shape,
        "k": stack_size(run.pipeline),
        "n_steps": dqn.n_steps,
        "gamma": dqn.gamma,
        "actors_slots": actors,
        "weights": weights,
        "start_frames": run.frames,
    }
    shared = Shared(spec, create=True)
    run.fill = lambda: len(shared.replay) / preset.replay.size
    publish(shared, run.learner.net)
    ctx = mp.get_context("spawn")
    # Actors may run this far ahead of the updates: the warm-up plus one step of each.
    credits = ctx.Semaphore(preset.replay.initial + 2 * actors * cfg.envs)
    games = ctx.Queue()
    procs: list[mp.Process] = []
    serial_actor = None
    cores = os.cpu_count() or 1
    # Measured on 2 cores, pong-parallel: 31 FPS with 2 learner threads, 22 with 1. The
    # learner is the bottleneck at the book's update-to-data ratio; actors mostly wait.
    torch.set_num_threads(cfg.learner_threads or cores)
    run.tracker.choices.update(
        actors=cfg.actors, envs_per_actor=cfg.envs, learner_threads=torch.get_num_threads()
    )
    try:
        for i in range(actors):
            cols = slice(i * cfg.envs, (i + 1) * cfg.envs)
            args = (i, preset, run.pipeline, spec, credits, games, cols, run.obs_shape, run.actions)
            if serial:
                serial_actor = Actor(
                    i,
                    preset,
                    run.pipeline,
                    shared,
                    credits,
                    cols,
                    run.obs_shape,
                    run.actions,
                    prof=run.prof,  # same process: its sections go in the learner's table
                )
                continue
            proc = ctx.Process(
                target=_actor_main, args=args, daemon=True, name=f"atari-speed-actor-{i}"
            )
            with quiet_children():
                proc.start()
            procs.append(proc)
        run.tracker.choices["actor_pids"] = [p.pid for p in procs]
        run.tracker.write_summary()
        _learn(run, shared, credits, games, procs, serial_actor)
    finally:
        run.prof.stop()
        shared.control[STOP] = 1
        if run.prof.enabled:
            # Read before joining: a process is joined only once its queue data is flushed.
            _collect_profiles(games, len(procs), run.profiles)
        for proc in procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=5)
        if serial_actor is not None:
            if run.prof.enabled:  # its own sections are already in the learner's table
                run.profiles.update(serial_actor.venv.worker_profiles())
            serial_actor.close()
        games.close()
        games.join_thread()
        shared.close(unlink=True)


def _learn(
    run: Any,
    shared: Shared,
    credits: Any,
    games: Any,
    procs: list[mp.Process],
    serial_actor: Actor | None,
) -> None:
    preset, prof = run.preset, run.prof
    dqn = preset.dqn
    batch = None
    base_updates = run.learner.updates  # resumed runs count updates from here
    start_frames = run.frames  # a resumed run's frames; actors count from zero
    prof.restart()
    while not run.done:
        with prof.section("actor messages"):
            _check_actors(procs, games)
            finished = _drain(games)  # empty in serial mode: the in-process actor returns games
        produced = int(shared.frames.sum())
        run.frames = start_frames + produced
        run.tracker.advance(run.frames)  # at once: the checkpoint and summary agree on frames
        updates = run.learner.updates - base_updates
        can_learn = produced >= preset.replay.initial and (
            updates <= (produced - preset.replay.initial) // dqn.train_every
        )
        if can_learn:
            with prof.section("replay sample"):
                batch = shared.replay.sample(dqn.batch_size, run.rng, batch)
            run.learner.step(batch)
            for _ in range(dqn.train_every):
                credits.release()
            if run.learner.updates % preset.run.publish_every == 0:
                with prof.section("publish weights"):
                    publish(shared, run.learner.net)
                if serial_actor is not None:
                    serial_actor.refresh_weights()
        elif serial_actor is not None:
            finished += serial_actor.step() or []
        else:
            with prof.section("wait for actors' frames"):
                time.sleep(0.001)  # data comes from the actors; nothing to do until it does
        with prof.section("logging + checkpoints"):
            for score, length in finished:
                if run.tracker.game(score, length):
                    run.game_improved()
            run.periodic()


def _collect_profiles(games: Any, actors: int, into: dict[str, dict[str, Any]]) -> None:
    """The profiles stopped actors sent last; games and errors left in the queue are moot."""
    received, deadline = 0, time.monotonic() + 5
    while received < actors and time.monotonic() < deadline:
        try:
            kind, _, payload = games.get(timeout=max(deadline - time.monotonic(), 0.01))
        except queue.Empty:
            return
        if kind == "profile":
            into.update(payload)
            received += 1


def _drain(games: Any) -> list[tuple[float, int]]:
    finished: list[tuple[float, int]] = []
    while True:
        try:
            kind, index, payload = games.get_nowait()
        except queue.Empty:
            return finished
        if kind == "error":
            last = payload.strip().splitlines()[-1]
            raise WorkerError(f"actor {index} failed: {last}\n{payload}")
        finished.extend(payload)


def _check_actors(procs: list[mp.Process], games: Any) -> None:
    for index, proc in enumerate(procs):
        if proc.exitcode is not None:
            _drain(games)  # an actor that raised has put its error there: report that
            raise WorkerError(f"actor {index} (pid {proc.pid}) died with exit code {proc.exitcode}")
