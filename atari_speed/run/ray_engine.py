"""Parallel mode on Ray (``run.engine = "ray"``): the actors are Ray actors, on this
machine or on a cluster's nodes, and the learner is this process.

Each Ray actor runs the one ``Actor`` (``agent/actor.py``) over its own vector env and a
CPU copy of the network, into a ``StepRecorder`` instead of a replay: ``run.ray_steps``
vector steps become one set of numpy arrays (each step's newest frame, actions, rewards,
how games ended), which crosses Ray's object store as a whole, never a transition at a
time. The learner writes them into its replay columns for that actor with the same
``put_obs``/``commit`` calls an in-process actor makes, so the replay, its n-step
returns and truncation handling are the ones every other mode uses.

The update-to-data ratio is the preset's exactly: the learner makes the updates
``UpdateSchedule`` says are due for the frames it has received, and each actor has one
batch in flight, so actors run at most one batch ahead of the learner. Weights go out
with ``ray.put`` every ``run.publish_every`` updates, to each actor with its next batch.

PQN: each Ray actor fills its envs' columns of a rollout (``pqn.rollout`` steps) and
sends it whole (``RolloutStore.send``); once every actor's columns of rollout r are in, the
learner trains on it and publishes its weights. As with local actors, an actor may play
rollout r + 1 while the learner trains on r, never further ahead, so it plays with weights
one rollout behind the learner's.

Faults: an actor that dies (its process killed, its node lost) is replaced by a new one
for the same replay columns, up to ``run.actor_restarts`` times, with a line and the
TensorBoard counter ``ray/actor_restarts``; past that, or on an error raised in actor
code, the run ends with a WorkerError naming the actor. Every wait has a timeout; on every
way out the actors are killed and a Ray started for the run is shut down.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from atari_speed.agent.actor import Actor, Game
from atari_speed.agent.networks import build_network
from atari_speed.agent.replay import FrameReplay
from atari_speed.agent.rollout import RolloutStore
from atari_speed.agent.schedules import actor_epsilon, epsilon_at
from atari_speed.core.errors import WorkerError
from atari_speed.core.timing import Profiler
from atari_speed.envs.vector import make_vector_env
from atari_speed.run.plan import Plan, require_ray
from atari_speed.run.session import Run
from atari_speed.run.shared import SLOTS, flat_weights, load_flat

WAIT = 0.5  # seconds: the longest ray.wait blocks before the learner looks around again
START_TIMEOUT = 300.0  # seconds for an actor to build its envs and answer


# ---------------------------------------------------------------- the actor side


@dataclass
class StepRecorder:
    """A sink for the one ``Actor`` that keeps ``steps`` vector steps of ``num_envs`` envs
    as arrays: what an actor sends the learner in one piece."""

    steps: int
    num_envs: int
    frame_shape: tuple[int, ...]
    t: int = 0
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    finals: dict[int, np.ndarray] = field(default_factory=dict)  # step -> truncated frames

    def __post_init__(self) -> None:
        grid = (self.steps, self.num_envs)
        self.arrays = {
            "frames": np.empty((*grid, *self.frame_shape), np.uint8),  # each obs's newest
            "actions": np.empty(grid, np.int64),
            "rewards": np.empty(grid, np.float32),
            "terminated": np.empty(grid, bool),
            "truncated": np.empty(grid, bool),
        }

    def put_obs(self, obs: np.ndarray, cols: slice = slice(None)) -> None:
        self.arrays["frames"][self.t] = obs[:, -self.frame_shape[0] :]

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
        a, t = self.arrays, self.t
        a["actions"][t], a["rewards"][t], a["terminated"][t] = actions, rewards, terminated
        a["truncated"][t] = False if truncated is None else truncated
        if final_obs is not None:
            self.finals[t] = np.asarray(final_obs)[:, -self.frame_shape[0] :].copy()
        self.t += 1

    def take(self) -> dict[str, Any]:
        """The steps recorded, as arrays to send, and a fresh start."""
        batch = {**{k: v.copy() for k, v in self.arrays.items()}, "finals": self.finals}
        self.t, self.finals = 0, {}
        return batch


def write_batch(batch: dict[str, Any], replay: FrameReplay, cols: slice) -> int:
    """Write an actor's batch into ``replay`` columns ``cols``, step by step, as the actor
    would have written it there itself; the frames (agent steps) it held."""
    steps, envs = batch["actions"].shape
    for t in range(steps):
        replay.put_obs(batch["frames"][t], cols)
        replay.commit(
            batch["actions"][t],
            batch["rewards"][t],
            batch["terminated"][t],
            truncated=batch["truncated"][t],
            final_obs=batch["finals"].get(t),
            cols=cols,
        )
    return steps * envs


class RayActor:
    """One actor of a Ray run: its vector env, network copy and ``Actor``; ``play``
    returns the next batch: ``run.ray_steps`` steps (DQN) or a rollout (PQN). A plain
    class, made a Ray actor by ``ray.remote`` when the engine starts (so Ray is needed only
    then)."""

    def __init__(self, index: int, plan: Plan, seed: int) -> None:
        torch.set_num_threads(1)
        preset = plan.preset
        self.net = build_network(preset.dqn, plan.obs_shape, plan.actions)
        venv = make_vector_env(
            plan.pipeline, preset.env.game, preset.run.envs, backend=preset.env.backend
        )
        self.recorder: StepRecorder | RolloutStore
        if preset.dqn.algorithm == "pqn":
            self.recorder = RolloutStore(venv.num_envs, preset.pqn.rollout, plan.obs_shape)
        else:
            self.recorder = StepRecorder(preset.run.ray_steps, venv.num_envs, plan.frame_shape)
        rng = np.random.default_rng(seed)
        self.actor = Actor(
            venv,
            self.net,
            self.recorder,
            slice(None),
            seed,
            rng,
            torch.device("cpu"),
            Profiler(False),
        )

    def pid(self) -> int:
        return os.getpid()

    def play(self, weights: np.ndarray | None, epsilon: float) -> tuple[dict[str, Any], list[Game]]:
        """The next batch, played with ``weights`` (if new) at ``epsilon``, and the games
        that ended in it."""
        if weights is not None:
            load_flat(self.net, torch.from_numpy(weights))
        games: list[Game] = []
        recorder = self.recorder
        if isinstance(recorder, RolloutStore):
            recorder.clear()
            while not recorder.full:
                games += self.actor.step(epsilon)
            recorder.finish(self.actor.obs)
            return recorder.send(), games
        for _ in range(recorder.steps):
            games += self.actor.step(epsilon)
        return recorder.take(), games


# ---------------------------------------------------------------- the learner side


@contextmanager
def ray_session(run: Run) -> Iterator[Any]:
    """Ray, joined at ``run.ray_address`` or started here (and stopped on the way out)."""
    ray = require_ray()
    cfg = run.preset.run
    started = not ray.is_initialized()
    if started:
        sigterm = signal.getsignal(signal.SIGTERM)  # ray.init replaces it with an exit
        if cfg.ray_address:
            ray.init(address=cfg.ray_address, logging_level="ERROR", log_to_driver=False)
        else:
            # Every actor asks for a CPU; a laptop with fewer cores than actors still runs
            # them all (they mostly wait for the learner).
            cpus = max(os.cpu_count() or 1, cfg.actors)
            ray.init(
                num_cpus=cpus,
                include_dashboard=False,
                logging_level="ERROR",
                log_to_driver=False,
            )
        signal.signal(signal.SIGTERM, sigterm)  # SIGTERM stays a Ctrl-C: save, then stop
    try:
        yield ray
    finally:
        if started:
            ray.shutdown()


class RayActors:
    """The run's Ray actors: one batch in flight each, replaced when one dies."""

    def __init__(self, ray: Any, run: Run) -> None:
        self.ray, self.run = ray, run
        self.remote = ray.remote(num_cpus=1, max_restarts=0)(RayActor)
        cfg = run.preset.run
        self.count, self.envs = cfg.actors, cfg.envs
        self.restarts = [0] * self.count
        self.handles: list[Any] = [None] * self.count
        self.pending: dict[Any, int] = {}  # batch in flight -> actor index
        self.asked: dict[Any, float] = {}  # batch in flight -> when it was asked for
        self.version = 0  # weights published so far
        self.weights: Any = None  # the latest published, in the object store
        self.sent = [-1] * self.count  # the version each actor has
        for i in range(self.count):
            self.handles[i] = self._new(i)
        try:
            pids = self.ray.get([h.pid.remote() for h in self.handles], timeout=START_TIMEOUT)
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError) as err:
            self.stop()
            why = (str(err).strip().splitlines() or [type(err).__name__])[-1][:200]
            raise WorkerError(f"ray actors could not start: {why}") from None
        run.tracker.note_choices(
            actors=self.count, envs_per_actor=self.envs, actor_pids=pids, engine="ray"
        )

    def _new(self, i: int) -> Any:
        seed = self.run.preset.run.seed + 1000 * (i + 1) + 7919 * self.restarts[i]
        return self.remote.remote(i, self.run.plan, seed)

    def columns(self, i: int) -> slice:
        return slice(i * self.envs, (i + 1) * self.envs)

    def publish(self, net: torch.nn.Module) -> None:
        self.weights, self.version = self.ray.put(flat_weights(net)), self.version + 1

    def submit(self, i: int) -> None:
        """Ask actor ``i`` for its next batch, sending the latest weights if it lacks them."""
        explore, frames = self.run.preset.explore, self.run.frames
        fixed = actor_epsilon(explore, i, self.count)
        epsilon = fixed if fixed is not None else epsilon_at(explore, frames)
        weights = self.weights if self.sent[i] < self.version else None
        self.sent[i] = self.version
        ref = self.handles[i].play.remote(weights, epsilon)
        self.pending[ref], self.asked[ref] = i, time.monotonic()

    def receive(self) -> tuple[list[tuple[int, dict[str, Any]]], list[Game], list[int]]:
        """What came in within WAIT seconds: the batches, by actor; the games they held;
        the actors that died and were replaced (their batch lost, asked for again). An
        actor whose batch came is not asked for the next one here: the caller does that
        (``submit``) when it wants it."""
        ray = self.ray
        refs = list(self.pending)
        ready, _ = ray.wait(refs, num_returns=1, timeout=WAIT)  # the first, then all ready
        if ready:
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        batches, games, replaced = [], [], []
        for ref in refs:
            late = time.monotonic() - self.asked[ref] > START_TIMEOUT
            if ref not in ready and not late:
                continue
            i = self.pending.pop(ref)
            del self.asked[ref]
            if ref not in ready:  # never came (its node lost, no CPU for its replacement)
                self.replace(i, TimeoutError(f"no batch in {START_TIMEOUT:.0f} s"))
                replaced.append(i)
                continue
            try:
                batch, finished = ray.get(ref, timeout=START_TIMEOUT)
            except ray.exceptions.RayActorError as err:
                self.replace(i, err)
                replaced.append(i)
            except ray.exceptions.RayTaskError as err:
                last = str(err).strip().splitlines()[-1]
                raise WorkerError(f"ray actor {i} failed: {last}\n{err}") from None
            else:
                batches.append((i, batch))
                games += finished
        return batches, games, replaced

    def replace(self, i: int, err: Exception) -> None:
        """Actor ``i`` died: a new one takes its columns, or, past ``run.actor_restarts``,
        WorkerError naming it."""
        limit = self.run.preset.run.actor_restarts
        why = (str(err).strip().splitlines() or [type(err).__name__])[0][:160]
        if self.restarts[i] >= limit:
            raise WorkerError(
                f"ray actor {i} died {self.restarts[i] + 1} times, more than run.actor_restarts "
                f"= {limit} allows (last: {why})"
            )
        self.restarts[i] += 1
        self.ray.kill(self.handles[i], no_restart=True)
        self.handles[i], self.sent[i] = self._new(i), -1
        total = sum(self.restarts)
        print(f"ray actor {i} died ({why}); restarted it ({self.restarts[i]} of {limit})")
        self.run.tracker.writer.add_scalar("ray/actor_restarts", total, self.run.frames)
        self.run.tracker.note_choices(actor_restarts=total)
        self.submit(i)

    def stop(self) -> None:
        """Kill every actor (their envs go with their processes)."""
        for handle in self.handles:
            if handle is not None:
                with contextlib.suppress(Exception):  # gone with its node or the session
                    self.ray.kill(handle, no_restart=True)


def run_ray(run: Run) -> None:
    """The learner of parallel mode on Ray: start the actors, learn on what they send
    (DQN: through the replay; PQN: rollout by rollout), publish weights; on any way out,
    stop it all."""
    plan, preset, prof = run.plan, run.preset, run.prof
    pqn = preset.dqn.algorithm == "pqn"
    replay = None
    if not pqn:
        replay = run.new_replay(plan.total_envs)
    kept = contextlib.nullcontext() if replay is None else run.keep_replay(replay)
    with ray_session(run) as ray, kept:
        actors = RayActors(ray, run)
        try:
            actors.publish(run.learner.net)
            for i in range(actors.count):
                actors.submit(i)
            if replay is None:
                _learn_rollouts(run, actors)
            else:
                _learn(run, actors, replay)
        finally:
            prof.stop()
            actors.stop()


def _learn(run: Run, actors: RayActors, replay: FrameReplay) -> None:
    """DQN: write each batch into its actor's replay columns and ask for the next at once;
    make the updates due."""
    prof, cfg = run.prof, run.preset.run
    collected = 0  # frames received in this run (beside any restored replay)
    prof.restart()
    while not run.done:
        frames = 0
        with prof.section("ray batches"):
            batches, games, replaced = actors.receive()
            for i in replaced:  # its games there end as truncations
                replay.end_open_episodes(actors.columns(i))
            for i, batch in batches:
                frames += write_batch(batch, replay, actors.columns(i))
                actors.submit(i)
        collected += frames
        with prof.section("logging + checkpoints"):
            run.tracker.advance(frames)
            for game in games:
                run.game(game)
        for _ in range(run.updates_due(collected)):
            run.update(replay)
            if run.learner.updates % cfg.publish_every == 0:
                with prof.section("publish weights"):
                    actors.publish(run.learner.net)
        with prof.section("logging + checkpoints"):
            run.periodic(len(replay) / run.preset.replay.size)


def _learn_rollouts(run: Run, actors: RayActors) -> None:
    """PQN: gather every actor's columns of rollout r, train on it, publish; an actor is
    asked for its next rollout while it is less than SLOTS ahead of the learner."""
    plan, prof = run.plan, run.prof
    rollout = RolloutStore(plan.total_envs, run.preset.pqn.rollout, plan.obs_shape)
    playing = [0] * actors.count  # the rollout each actor plays (or has sent) next
    idle: set[int] = set()  # actors with no rollout asked for (asked below once allowed)
    arrived: dict[int, dict[int, dict[str, Any]]] = {}  # rollout -> actor -> its columns
    trained = 0  # rollouts the learner has trained on
    prof.restart()
    while not run.done:
        with prof.section("ray batches"):
            batches, games, _ = actors.receive()  # a replaced actor replays its rollout
            for i, batch in batches:
                arrived.setdefault(playing[i], {})[i] = batch
                playing[i] += 1
                idle.add(i)
        with prof.section("logging + checkpoints"):
            run.tracker.advance(sum(b["actions"].size for _, b in batches))
            for game in games:
                run.game(game)
        if len(arrived.get(trained, {})) == actors.count:
            with prof.section("ray batches"):
                for i, batch in arrived.pop(trained).items():
                    rollout.put_columns(batch, actors.columns(i))
            run.learner.learn(rollout, run.decay_progress(), run.rng)
            trained += 1
            with prof.section("publish weights"):
                actors.publish(run.learner.net)
        for i in sorted(idle):
            if playing[i] < trained + SLOTS:
                actors.submit(i)
                idle.discard(i)
        with prof.section("logging + checkpoints"):
            run.periodic(buffer_fill=1.0)
