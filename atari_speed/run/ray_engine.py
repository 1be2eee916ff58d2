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

Joining a cluster (``run.ray_address``) happens before anything of the run is made, and
each way it can fail is one ConfigError saying what to do: nothing listening there, a
token the cluster refused or none to send, another Ray or Python version on the cluster.

Faults: an actor that dies (its process killed, its node lost) is replaced by a new one
for the same replay columns, up to ``run.actor_restarts`` times, on any node with a free
CPU, with a line and the TensorBoard counter ``ray/actor_restarts``; past that, when no
node left has room for it, or on an error raised in actor code, the run ends with a
WorkerError naming the actor (and saves its checkpoint on the way out). Every wait has a
timeout; on every way out the actors are killed and a Ray started for the run is shut down.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from atari_speed.agent.actor import Actor, Game, Sink
from atari_speed.agent.networks import build_network
from atari_speed.agent.replay import FrameReplay
from atari_speed.agent.rollout import RolloutStore
from atari_speed.agent.schedules import actor_epsilon, epsilon_at
from atari_speed.core.errors import ConfigError, WorkerError
from atari_speed.core.timing import Profiler
from atari_speed.envs.vector import make_vector_env
from atari_speed.run.plan import Plan, require_ray
from atari_speed.run.session import Run
from atari_speed.run.shared import SLOTS, flat_weights, load_flat

WAIT = 0.5  # seconds: the longest ray.wait blocks before the learner looks around again
START_TIMEOUT = 300.0  # seconds for an actor to build its envs and answer
NODE_GRACE = 60.0  # seconds for Ray to mark dead a node whose actor stopped answering


# ---------------------------------------------------------------- the actor side


class BatchSink(Sink, Protocol):
    """The sink a Ray actor fills, from ``clear()`` until ``full``, and sends the learner in
    one piece: DQN's ``StepRecorder`` or PQN's ``RolloutStore``."""

    @property
    def full(self) -> bool: ...

    def clear(self) -> None: ...

    def finish(self, next_obs: np.ndarray) -> None:
        """Record the observation after the last step, where the batch needs it."""

    def send(self) -> dict[str, Any]:
        """The finished batch, as arrays to send."""


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

    @property
    def full(self) -> bool:
        return self.t == self.steps

    def clear(self) -> None:
        self.t, self.finals = 0, {}

    def put_obs(
        self, obs: np.ndarray, cols: slice = slice(None), values: np.ndarray | None = None
    ) -> None:
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

    def finish(self, next_obs: np.ndarray) -> None:
        """Nothing to record: the learner's replay takes the observation after the last
        step from the actor's next batch."""

    def send(self) -> dict[str, Any]:
        """The steps recorded, as arrays to send, and a fresh start."""
        batch = {**{k: v.copy() for k, v in self.arrays.items()}, "finals": self.finals}
        self.clear()
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
        self.recorder: BatchSink
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
            bf16=plan.act_bf16,
        )

    def where(self) -> tuple[int, str]:
        """This actor's process id and the id of the Ray node it runs on."""
        import ray

        return os.getpid(), ray.get_runtime_context().get_node_id()

    def play(
        self, weights: np.ndarray | None, epsilon: float, spread: int = 0
    ) -> tuple[dict[str, Any], list[Game]]:
        """The next batch, played with ``weights`` (if new) at ``epsilon``, and the games
        that ended in it; ``spread`` > 0: the envs first play apart (``Actor.spread``), as
        a resumed run's first batch does (``run.resume_spread``)."""
        if weights is not None:
            load_flat(self.net, torch.from_numpy(weights))
        if spread > 0:
            self.actor.spread(spread, epsilon)
        games: list[Game] = []
        recorder = self.recorder
        recorder.clear()
        while not recorder.full:
            games += self.actor.step(epsilon)
        recorder.finish(self.actor.obs)
        return recorder.send(), games


# ---------------------------------------------------------------- the learner side


def token_source() -> str | None:
    """Where Ray would find an authentication token for this process, in the order it
    looks (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH, ~/.ray/auth_token); None if nowhere."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return "RAY_AUTH_TOKEN"
    path = os.environ.get("RAY_AUTH_TOKEN_PATH")
    if path and Path(path).is_file():
        return f"RAY_AUTH_TOKEN_PATH ({path})"
    default = Path.home() / ".ray" / "auth_token"
    return str(default) if default.is_file() else None


def _use_token_auth() -> None:
    """Send the token this machine has. `ray start --head` turns token authentication on
    when it finds a token, and the cluster then refuses clients without one, but
    ``ray.init`` with an address does not turn it on by itself; a cluster without
    authentication ignores the token. Ray caches its config at import, hence the reload."""
    os.environ["RAY_AUTH_MODE"] = "token"
    from ray._raylet import Config

    Config.initialize("")


@contextmanager
def _stderr_into(lines: list[str]) -> Iterator[None]:
    """Ray's C++ client logs each failed try to file descriptor 2 for as long as it
    retries; keep that out of the terminal and hand it to the caller to read."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            lines += sink.read().decode(errors="replace").splitlines()


def join_cluster(address: str, actors: int = 0) -> None:
    """Connect this process to the Ray cluster at ``address`` (HOST:PORT); a no-op when
    Ray is already connected. ConfigError, in one line saying what to do, when nothing
    listens there, the cluster refuses this process's token (or it has none), the
    cluster runs another Ray or Python version, or it has fewer CPUs than ``actors``
    (each takes one, and the run would wait for the rest)."""
    ray = require_ray()
    if ray.is_initialized():
        return
    what = f"run.ray_address = {address!r}"
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(
            f"{what}: expected HOST:PORT, the address `ray start --head --port PORT` prints"
        )
    try:
        socket.create_connection((host, int(port)), timeout=10).close()
    except OSError as err:
        raise ConfigError(
            f"{what}: nothing is listening there ({err.strerror or err}); start the head node "
            f"with `uv run --extra ray ray start --head --port {port}` (docs/scale.md) or give "
            "the address it printed"
        ) from None
    source = token_source()
    if source and "RAY_AUTH_MODE" not in os.environ:
        _use_token_auth()
    sigterm = signal.getsignal(signal.SIGTERM)  # ray.init replaces it with an exit
    logged: list[str] = []
    try:
        with _stderr_into(logged):
            ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    except Exception as err:
        raise ConfigError(f"{what}: {_refusal(err, logged, source)}") from None
    finally:
        signal.signal(signal.SIGTERM, sigterm)  # SIGTERM stays a Ctrl-C: save, then stop
    cpus = int(ray.cluster_resources().get("CPU", 0))
    if cpus < actors:
        ray.shutdown()
        raise ConfigError(
            f"{what}: the cluster has {cpus} CPU(s) for run.actors = {actors}, one each; "
            "add nodes (`ray start --address ...`) or run fewer actors"
        )


def _refusal(err: BaseException, logged: list[str], source: str | None) -> str:
    """What to do about Ray's failure to join a cluster, in one line, from its exception
    chain and what it logged."""
    chain: list[str] = []
    cause: BaseException | None = err
    while cause is not None:
        chain.append(f"{type(cause).__name__}: {cause}")
        cause = cause.__cause__ or cause.__context__
    text = "\n".join([*chain, *logged])
    versions = re.search(
        r"cluster was started with:\s*Ray: (\S+)\s*Python: (\S+).*?started with:\s*"
        r"Ray: (\S+)\s*Python: (\S+)",
        text,
        re.S,
    )
    if versions:
        theirs_ray, theirs_py, ours_ray, ours_py = versions.groups()
        return (
            f"the cluster runs Ray {theirs_ray} on Python {theirs_py}, this process Ray "
            f"{ours_ray} on Python {ours_py}; start every node and train.py from this "
            "repository's uv.lock (`uv sync --extra ray`) with the same Python"
        )
    mode = os.environ.get("RAY_AUTH_MODE", "").lower()
    if "no authentication token was found" in text or (
        source is None and ("InvalidAuthToken" in text or "Unauthenticated" in text)
    ):
        return (
            "the cluster needs an authentication token and this process has none; copy the "
            "head node's ~/.ray/auth_token (`ray get-auth-token` prints it there) to "
            "~/.ray/auth_token here, or set RAY_AUTH_TOKEN to it"
        )
    if "InvalidAuthToken" in text or "Unauthenticated" in text:
        if mode == "disabled":
            return (
                "the cluster needs an authentication token and RAY_AUTH_MODE=disabled here "
                "keeps it from being sent; unset RAY_AUTH_MODE or set it to token"
            )
        return (
            f"the cluster refused the authentication token from {source}; use the head "
            "node's (`ray get-auth-token` prints it there) in RAY_AUTH_TOKEN or "
            "~/.ray/auth_token"
        )
    last = (str(err).strip().splitlines() or [type(err).__name__])[-1][:200]
    return f"could not join the cluster ({last}); is it a Ray head node's address?"


@contextmanager
def ray_session(run: Run) -> Iterator[Any]:
    """Ray, joined at ``run.ray_address`` (left running, this process disconnected on the
    way out) or started here (and stopped on the way out); or, inside a Ray task, the
    Ray it runs in, left as it is."""
    ray = require_ray()
    cfg = run.preset.run
    if cfg.ray_address:
        join_cluster(cfg.ray_address)  # already joined when the plan was made
    elif ray.is_initialized():
        yield ray
        return
    else:
        sigterm = signal.getsignal(signal.SIGTERM)  # ray.init replaces it with an exit
        # Every actor asks for a CPU; a laptop with fewer cores than actors still runs
        # them all (they mostly wait for the learner).
        cpus = max(os.cpu_count() or 1, cfg.actors)
        ray.init(
            # "local": a new Ray of its own, even where `ray start` left a cluster (which
            # ray.init would otherwise join) or RAY_ADDRESS names one.
            address="local",
            num_cpus=cpus,
            include_dashboard=False,
            logging_level="ERROR",
            log_to_driver=False,
        )
        signal.signal(signal.SIGTERM, sigterm)  # SIGTERM stays a Ctrl-C: save, then stop
    try:
        yield ray
    finally:
        ray.shutdown()


class RayActors:
    """The run's Ray actors: one batch in flight each, replaced when one dies."""

    def __init__(self, ray: Any, run: Run) -> None:
        self.ray, self.run = ray, run
        # SPREAD: on a cluster, one actor per node before a second on any, so the
        # nodes share the work and a lost node takes as few actors as it can.
        self.remote = ray.remote(num_cpus=1, max_restarts=0, scheduling_strategy="SPREAD")(RayActor)
        cfg = run.preset.run
        self.count, self.envs = cfg.actors, cfg.envs
        self.restarts = [0] * self.count
        self.handles: list[Any] = [None] * self.count
        self.pids = [0] * self.count
        self.nodes = [""] * self.count  # the Ray node each actor runs on
        self.frames = [0] * self.count  # frames received from each actor's columns
        self.pending: dict[Any, int] = {}  # batch in flight -> actor index
        self.asked: dict[Any, float] = {}  # batch in flight -> when it was asked for
        self.version = 0  # weights published so far
        self.weights: Any = None  # the latest published, in the object store
        self.sent = [-1] * self.count  # the version each actor has
        # a resumed run's actors, all reset at once, spread their envs in their first batch
        self.to_spread = set(range(self.count)) if run.resumed_from is not None else set()
        for i in range(self.count):
            self.handles[i] = self._new(i)
        try:
            started = self.ray.get([h.where.remote() for h in self.handles], timeout=START_TIMEOUT)
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError) as err:
            self.stop()
            why = (str(err).strip().splitlines() or [type(err).__name__])[-1][:200]
            raise WorkerError(f"ray actors could not start: {why}") from None
        for i, (pid, node) in enumerate(started):
            self.pids[i], self.nodes[i] = pid, node
        run.tracker.note_choices(
            actors=self.count,
            envs_per_actor=self.envs,
            actor_pids=list(self.pids),
            actor_nodes=list(self.nodes),
            engine="ray",
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
        spread = self.run.preset.run.resume_spread if i in self.to_spread else 0
        self.to_spread.discard(i)
        ref = self.handles[i].play.remote(weights, epsilon, spread)
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
            except (ray.exceptions.RayActorError, ray.exceptions.ObjectLostError) as err:
                # ObjectLostError: the batch was made, but on a node lost before it came.
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
        """Actor ``i`` died: a new one takes its columns, on a node with a free CPU; or,
        past ``run.actor_restarts`` or with no node left to hold it, WorkerError naming
        it."""
        limit = self.run.preset.run.actor_restarts
        why = (str(err).strip().splitlines() or [type(err).__name__])[0][:160]
        if self._node_lost(i, err):
            why = f"its node {self.nodes[i][:12]} was lost"
        if self.restarts[i] >= limit:
            raise WorkerError(
                f"ray actor {i} died {self.restarts[i] + 1} times, more than run.actor_restarts "
                f"= {limit} allows (last: {why})"
            )
        self._check_room(i, why)
        self.restarts[i] += 1
        self.ray.kill(self.handles[i], no_restart=True)
        self.handles[i], self.sent[i] = self._new(i), -1
        started = self.handles[i].where.remote()
        deadline = time.monotonic() + START_TIMEOUT
        # Waited for, so a replacement that cannot start ends the run here; polled, so a
        # node lost meanwhile ends it at once rather than after START_TIMEOUT.
        while not self.ray.wait([started], timeout=WAIT)[0]:
            self._check_room(i, why)
            if time.monotonic() > deadline:
                raise WorkerError(
                    f"ray actor {i} died ({why}) and its replacement did not start within "
                    f"{START_TIMEOUT:.0f} s; see `ray status` for the cluster's free CPUs"
                )
        try:
            self.pids[i], self.nodes[i] = self.ray.get(started, timeout=START_TIMEOUT)
        except self.ray.exceptions.RayActorError as again:
            # Placed on a node that was dying too (Ray had not yet seen it go): one more
            # death, counted against run.actor_restarts like any other.
            self.replace(i, again)
            return
        total = sum(self.restarts)
        print(
            f"ray actor {i} died ({why}); restarted it ({self.restarts[i]} of {limit}) on "
            f"node {self.nodes[i][:12]}",
            flush=True,
        )
        self.run.tracker.writer.add_scalar("ray/actor_restarts", total, self.run.frames)
        self.run.tracker.note_choices(
            actor_restarts=total, actor_pids=list(self.pids), actor_nodes=list(self.nodes)
        )
        self.submit(i)

    def _node_lost(self, i: int, err: Exception) -> bool:
        """Whether actor ``i``'s node is gone. Ray may report the actor unavailable, or a
        batch on its node lost, before it has marked the node dead (it waits for missed
        health checks): then give it NODE_GRACE seconds to decide."""
        exceptions = self.ray.exceptions
        unsure = isinstance(err, (exceptions.ActorUnavailableError, exceptions.ObjectLostError))
        deadline = time.monotonic() + (NODE_GRACE if unsure else 0)
        while self.nodes[i] in self._alive():
            if time.monotonic() >= deadline:
                return False
            time.sleep(1)
        return True

    def _alive(self) -> dict[str, dict[str, Any]]:
        """The cluster's live nodes, by id."""
        return {n["NodeID"]: n for n in self.ray.nodes() if n["Alive"]}

    def _check_room(self, i: int, why: str) -> None:
        """WorkerError when the live nodes have fewer CPUs than the run has actors, each
        holding one: then nowhere is free to start actor ``i`` again."""
        alive = self._alive()
        cpus = int(sum(n["Resources"].get("CPU", 0) for n in alive.values()))
        if cpus < self.count:
            raise WorkerError(
                f"ray actor {i} died ({why}) and the nodes left have {cpus} CPU(s) for "
                f"{self.count} actors, none free to restart it on; add a node "
                "(`ray start --address ...`, docs/scale.md) or run fewer actors (run.actors)"
            )

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
    run.spread_after_resume()  # each actor spreads its envs in its first batch; said here
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
            run.tracker.note_choices(actor_frames=list(actors.frames))


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
                written = write_batch(batch, replay, actors.columns(i))
                actors.frames[i] += written
                frames += written
                actors.submit(i)
        collected += frames
        with prof.section("logging + checkpoints"):
            run.tracker.advance(frames)
            for game in games:
                run.game(game)
        for _ in range(run.updates_due(collected)):
            run.learn(replay)
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
                actors.frames[i] += batch["actions"].size
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
            run.learn(rollout)
            trained += 1
            with prof.section("publish weights"):
                actors.publish(run.learner.net)
        for i in sorted(idle):
            if playing[i] < trained + SLOTS:
                actors.submit(i)
                idle.discard(i)
        with prof.section("logging + checkpoints"):
            run.periodic(buffer_fill=1.0)
