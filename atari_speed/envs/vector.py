"""N envs stepped together, through one interface with three execution backends.

- ``sync``: the envs stepped in this process, one after another;
- ``subprocess``: envs split over worker processes; every array (actions, observations,
  rewards, flags, episode statistics) lives in one shared-memory block allocated once, and
  the pipes carry only one-word commands. ``sync`` runs the very same ``step_envs``
  function in-process, so it is the serial mode of ``subprocess``;
- ``ale``: ale-py's native C++ ``AtariVectorEnv``, with the pipeline's stages mapped onto
  its options (a stage it cannot express is refused by name).

All three follow gymnasium's vector API with ``SAME_STEP`` autoreset: when env i's episode
ends, ``obs[i]`` is already the first observation of the next one, the last observation
of the ended one is ``infos["final_obs"][i]`` (valid where ``infos["_final_obs"][i]``), and
when a whole *game* ends (not just a life) ``infos["episode"]`` holds its unclipped score
``r``, agent steps ``l`` and emulator ``frames``, valid where ``infos["_episode"][i]``.

The arrays returned by ``reset`` and ``step`` are the env's own buffers, overwritten by the
next call: copy what you keep. That is what lets the subprocess backend move no pixels
through pipes.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import traceback
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields
from multiprocessing.connection import Connection, wait
from multiprocessing.shared_memory import SharedMemory
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from atari_speed.core.errors import ConfigError, WorkerError
from atari_speed.core.shm import Layout, arrays_over, layout_nbytes
from atari_speed.core.timing import Profiler, StageTimer
from atari_speed.envs.pipeline import make_env, resolve_game, resolve_pipeline
from atari_speed.envs.wrappers import StackedFrames

PipelineArg = str | Path | Mapping[str, Any]


@dataclass
class StepBuffers:
    """Every per-step array of N envs. Allocated once; in shared memory for subprocesses."""

    obs: np.ndarray
    final_obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    game_over: np.ndarray
    game_reward: np.ndarray
    game_steps: np.ndarray
    game_frames: np.ndarray

    @staticmethod
    def layout(num_envs: int, obs_shape: tuple[int, ...]) -> Layout:
        n = (num_envs,)
        return [
            ("obs", n + obs_shape, "uint8"),
            ("final_obs", n + obs_shape, "uint8"),
            ("actions", n, "int64"),
            ("rewards", n, "float32"),
            ("terminated", n, "bool"),
            ("truncated", n, "bool"),
            ("game_over", n, "bool"),
            ("game_reward", n, "float64"),
            ("game_steps", n, "int64"),
            ("game_frames", n, "int64"),
        ]

    @classmethod
    def nbytes(cls, num_envs: int, obs_shape: tuple[int, ...]) -> int:
        return layout_nbytes(cls.layout(num_envs, obs_shape))

    @classmethod
    def over(cls, buffer: Any, num_envs: int, obs_shape: tuple[int, ...]) -> StepBuffers:
        """View the arrays over ``buffer`` (a bytearray or a SharedMemory's ``buf``)."""
        return cls(**arrays_over(buffer, cls.layout(num_envs, obs_shape)))

    def release(self) -> None:
        """Drop the views so the shared-memory block can be closed."""
        for f in fields(self):
            setattr(self, f.name, None)


def _write(dst: np.ndarray, obs: Any) -> None:
    if isinstance(obs, StackedFrames):
        obs.write_into(dst)
    else:
        dst[...] = obs


def reset_envs(envs: Sequence[gym.Env], buf: StepBuffers, first: int, seeds: Sequence) -> None:
    """Reset envs ``first..first+len(envs)-1`` of the batch into ``buf``."""
    for j, env in enumerate(envs):
        obs, _ = env.reset(seed=seeds[j])
        _write(buf.obs[first + j], obs)
    buf.game_over[first : first + len(envs)] = False


def step_envs(envs: Sequence[gym.Env], buf: StepBuffers, first: int) -> None:
    """Step envs ``first..`` with ``buf.actions``, autoresetting those whose episode ends.

    The one stepping routine: the sync backend calls it in-process, subprocess workers
    call it on their slice of the shared buffers.
    """
    for j, env in enumerate(envs):
        i = first + j
        obs, reward, terminated, truncated, info = env.step(int(buf.actions[i]))
        buf.rewards[i], buf.terminated[i], buf.truncated[i] = reward, terminated, truncated
        game = info.get("episode")
        buf.game_over[i] = game is not None
        if game is not None:
            buf.game_reward[i], buf.game_steps[i], buf.game_frames[i] = (
                game["r"],
                game["l"],
                game["frames"],
            )
        if terminated or truncated:
            _write(buf.final_obs[i], obs)
            obs, _ = env.reset()
        _write(buf.obs[i], obs)


class VectorEnv(gym.vector.VectorEnv):
    """What the three backends share: spaces, buffers, and the ``infos`` they report."""

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}  # noqa: RUF012
    # With profiling on: the in-process envs' stage taps (sync backend), else None.
    stage_timer: StageTimer | None = None

    def worker_profiles(self) -> dict[str, dict[str, Any]]:
        """Profile reports of env worker processes, by name (subprocess backend); {} when
        there are none to be had."""
        return {}

    def _setup(self, num_envs: int, obs_space: gym.spaces.Box, num_actions: int) -> None:
        self.num_envs = num_envs
        self.single_observation_space = obs_space
        self.single_action_space = gym.spaces.Discrete(num_actions)
        self.observation_space = gym.vector.utils.batch_space(obs_space, num_envs)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, num_envs)

    def _infos(self, buf: StepBuffers) -> dict[str, Any]:
        ended = buf.terminated | buf.truncated
        infos: dict[str, Any] = {}
        if ended.any():
            infos["final_obs"], infos["_final_obs"] = buf.final_obs, ended
        if buf.game_over.any():
            infos["episode"] = {
                "r": buf.game_reward.copy(),
                "l": buf.game_steps.copy(),
                "frames": buf.game_frames.copy(),
            }
            infos["_episode"] = buf.game_over.copy()
        return infos

    def _seeds(self, seed: int | None) -> list[int | None]:
        return [None if seed is None else seed + i for i in range(self.num_envs)]


class SyncVectorEnv(VectorEnv):
    """The envs stepped one after another in this process."""

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]]) -> None:
        self.envs = [fn() for fn in env_fns]
        first = self.envs[0]
        self._setup(len(self.envs), first.observation_space, int(first.action_space.n))
        shape = first.observation_space.shape
        self.buf = StepBuffers.over(
            bytearray(StepBuffers.nbytes(self.num_envs, shape)), self.num_envs, shape
        )

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        reset_envs(self.envs, self.buf, 0, self._seeds(seed))
        return self.buf.obs, {}

    def step(self, actions: np.ndarray):
        self.buf.actions[:] = actions
        step_envs(self.envs, self.buf, 0)
        b = self.buf
        return b.obs, b.rewards, b.terminated, b.truncated, self._infos(b)

    def close_extras(self, **kwargs: Any) -> None:
        for env in self.envs:
            env.close()


_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


@contextmanager
def quiet_children() -> Iterator[None]:
    """Start child processes with one BLAS/OpenMP thread each and SIGINT ignored.

    One thread: the workers are the parallelism, and numpy's default of one BLAS thread per
    core in every worker thrashes (measured: the numpy image backend ran 15x slower in 2
    workers on 2 cores). Spawned children read these variables when they import numpy.

    SIGINT ignored: Ctrl-C reaches the whole process group, but only the parent acts on
    it (it saves a checkpoint, then stops its children), so a child never dies of it,
    not even while it is still importing. An ignored signal stays ignored across exec.
    """
    saved = {var: os.environ.get(var) for var in _THREAD_VARS}
    for var in _THREAD_VARS:
        os.environ.setdefault(var, "1")
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        for var, value in saved.items():
            if value is None:
                os.environ.pop(var, None)


def _attach(name: str) -> SharedMemory:
    """Attach to the parent's block without letting this process's exit unlink it."""
    try:
        return SharedMemory(name=name, track=False)  # Python >= 3.13
    except TypeError:
        # Older Pythons register every attachment with the resource tracker, which then
        # unlinks the parent's block (with a warning) when the worker exits.
        from multiprocessing import resource_tracker

        register = resource_tracker.register
        resource_tracker.register = lambda *args, **kwargs: None
        try:
            return SharedMemory(name=name)
        finally:
            resource_tracker.register = register


def _worker(
    index: int,
    pipeline: dict[str, Any],
    game: str,
    first: int,
    count: int,
    num_envs: int,
    obs_shape: tuple[int, ...],
    shm_name: str,
    conn: Connection,
    profile: bool = False,
) -> None:
    """Env worker: builds its envs, then steps them on command into shared memory.
    With ``profile`` it times its stages and answers ``profile`` with its report."""
    shm = buf = None
    try:
        import cv2

        cv2.setNumThreads(1)  # parallelism comes from the worker processes
        prof, stages = Profiler(profile), StageTimer()
        tap = stages.tap if profile else None
        envs = [make_env(pipeline, game, tap=tap) for _ in range(count)]
        prof.split("env step", stages)
        shm = _attach(shm_name)
        buf = StepBuffers.over(shm.buf, num_envs, obs_shape)
        conn.send(("ready", None))
        prof.restart()
        while True:
            with prof.section("wait for command"):
                command, payload = conn.recv()  # EOFError when the parent is gone: exit
            reply = None
            if command == "step":
                with prof.section("env step"):
                    step_envs(envs, buf, first)
            elif command == "reset":
                with prof.section("env step"):  # the stage taps time resets as steps
                    reset_envs(envs, buf, first, payload)
            elif command == "profile":
                reply = prof.report()
            elif command == "close":
                conn.send(("ok", None))
                break
            conn.send(("ok", reply))
    except (EOFError, KeyboardInterrupt, BrokenPipeError):
        pass
    except Exception:
        with contextlib.suppress(OSError, BrokenPipeError):
            conn.send(("error", traceback.format_exc()))
    finally:
        if buf is not None:
            buf.release()
        if shm is not None:
            shm.close()


class SubprocessVectorEnv(VectorEnv):
    """Envs in ``num_workers`` processes, all data in one shared-memory block.

    A worker that raises or dies is reported as a ``WorkerError`` naming it; every wait
    has a timeout (``timeout`` seconds), and ``close`` always joins or kills the workers.
    """

    def __init__(
        self,
        pipeline: dict[str, Any],
        game: str,
        num_envs: int,
        num_workers: int | None = None,
        timeout: float = 60.0,
        start_method: str = "spawn",
        profile: bool = False,
    ) -> None:
        probe = make_env(pipeline, game)
        self._setup(num_envs, probe.observation_space, int(probe.action_space.n))
        probe.close()
        shape = self.single_observation_space.shape
        self.timeout = timeout
        self.shm = SharedMemory(create=True, size=StepBuffers.nbytes(num_envs, shape))
        self.buf = StepBuffers.over(self.shm.buf, num_envs, shape)
        self.workers: list[mp.Process] = []
        self.conns: list[Connection] = []
        self.closed = False
        self.interrupted = False  # a command's replies were not all read (Ctrl-C)
        num_workers = min(num_envs, num_workers or os.cpu_count() or 1)
        splits = np.array_split(np.arange(num_envs), num_workers)
        ctx = mp.get_context(start_method)
        try:
            for index, ids in enumerate(splits):
                parent, child = ctx.Pipe()
                args = (
                    index,
                    pipeline,
                    game,
                    int(ids[0]),
                    len(ids),
                    num_envs,
                    shape,
                    self.shm.name,
                    child,
                    profile,
                )
                proc = ctx.Process(
                    target=_worker, args=args, daemon=True, name=f"atari-speed-env-worker-{index}"
                )
                with quiet_children():
                    proc.start()
                child.close()
                self.workers.append(proc)
                self.conns.append(parent)
            self._gather("start")
        except BaseException:
            self.close(terminate=True)
            raise

    def _gather(self, what: str) -> list[Any]:
        """Wait for every worker's reply; raise WorkerError for one that fails or dies."""
        pending = dict(enumerate(self.conns))
        replies: list[Any] = [None] * len(self.conns)
        sentinels = {p.sentinel: i for i, p in enumerate(self.workers)}
        while pending:
            ready = wait([*pending.values(), *sentinels], timeout=self.timeout)
            if not ready:
                raise WorkerError(
                    f"env worker {min(pending)} gave no answer to {what} in {self.timeout:.0f} s"
                )
            for obj in ready:
                if obj in sentinels:
                    index = sentinels[obj]
                    if index in pending and not pending[index].poll():
                        raise self._died(index, what)
                    continue
                index = self.conns.index(obj)
                try:
                    status, payload = obj.recv()
                except (EOFError, OSError):
                    # It died mid-reply: report it now rather than wait for the sentinel.
                    raise self._died(index, what) from None
                if status == "error":
                    last = payload.strip().splitlines()[-1]
                    raise WorkerError(f"env worker {index} failed during {what}: {last}\n{payload}")
                replies[index] = payload
                del pending[index]
        return replies

    def _died(self, index: int, what: str) -> WorkerError:
        proc = self.workers[index]
        proc.join(timeout=1)
        return WorkerError(
            f"env worker {index} (pid {proc.pid}) died during {what} with exit code {proc.exitcode}"
        )

    def _command(self, command: str, payloads: Sequence[Any] | None = None) -> list[Any]:
        if self.closed:
            raise WorkerError("the vector env is closed")
        self.interrupted = True  # until every reply is in
        try:
            for i, conn in enumerate(self.conns):
                try:
                    conn.send((command, None if payloads is None else payloads[i]))
                except OSError:
                    raise self._died(i, command) from None
            replies = self._gather(command)
            self.interrupted = False
            return replies
        except WorkerError:
            # One worker failed: stop them all now, so no exit path leaves orphans.
            self.close(terminate=True)
            raise

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        seeds = self._seeds(seed)
        splits = np.array_split(np.arange(self.num_envs), len(self.workers))
        self._command("reset", [[seeds[i] for i in ids] for ids in splits])
        return self.buf.obs, {}

    def worker_profiles(self) -> dict[str, dict[str, Any]]:
        if self.closed or self.interrupted:
            return {}  # a reply to the interrupted command may still be in a pipe
        try:
            replies = self._command("profile")
        except WorkerError:  # workers already gone (a signal to the process group): no reports
            return {}
        return {f"env worker {i}": r for i, r in enumerate(replies) if r}

    def step(self, actions: np.ndarray):
        self.buf.actions[:] = actions
        self._command("step")
        b = self.buf
        return b.obs, b.rewards, b.terminated, b.truncated, self._infos(b)

    def close(self, terminate: bool = False, **kwargs: Any) -> None:
        if self.closed:
            return
        self.closed = True
        for proc, conn in zip(self.workers, self.conns, strict=False):
            if not terminate and proc.is_alive():
                with contextlib.suppress(OSError, BrokenPipeError):
                    conn.send(("close", None))
        for proc in self.workers:
            proc.join(timeout=0 if terminate else 5)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=5)
        for conn in self.conns:
            conn.close()
        self.buf.release()
        self.shm.close()
        self.shm.unlink()

    def __del__(self) -> None:
        if getattr(self, "workers", None) is not None and not getattr(self, "closed", True):
            self.close(terminate=True)


class AleVectorEnv(VectorEnv):
    """ale-py's native C++ vector env, configured from the pipeline's stages.

    The stages map onto its options; ClipReward is applied here in numpy so the whole-game
    score stays unclipped. ALE does its own resize (WarpFrame's ``backend`` is not used),
    and after a life loss it keeps playing without the NOOP and FIRE that EpisodicLife and
    FireReset add on the other backends.
    """

    def __init__(
        self, pipeline: dict[str, Any], game: str, num_envs: int, num_threads: int = 0
    ) -> None:
        from ale_py.vector_env import AtariVectorEnv

        rom = resolve_game(game)
        if "-v" in rom:
            raise ConfigError(f"ale backend: give a game name such as 'pong', not the id {rom!r}")
        options = ale_options(pipeline)
        differs = ale_start_differs(pipeline)
        if differs:
            warnings.warn(f"ale backend, pipeline {pipeline['name']!r}: {differs}", stacklevel=2)
        self.clip = options.pop("clip")
        self.skip = options["frameskip"]
        self.ale = AtariVectorEnv(
            rom,
            num_envs,
            num_threads=num_threads,
            autoreset_mode=AutoresetMode.SAME_STEP,
            repeat_action_probability=pipeline["repeat_action_probability"],
            episodic_life=False,
            reward_clipping=False,
            **options,
        )
        self._setup(num_envs, self.ale.single_observation_space, self.ale.single_action_space.n)
        self.buf = StepBuffers.over(
            bytearray(StepBuffers.nbytes(num_envs, self.single_observation_space.shape)),
            num_envs,
            self.single_observation_space.shape,
        )
        self._prev_frame = np.zeros(num_envs, dtype=np.int64)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        obs, info = self.ale.reset(seed=seed)
        self.buf.game_reward[:] = 0
        self.buf.game_steps[:] = 0
        self._prev_frame[:] = info["episode_frame_number"]
        return obs, {}

    def step(self, actions: np.ndarray):
        obs, reward, terminated, truncated, info = self.ale.step(np.asarray(actions, np.int32))
        b = self.buf
        b.game_reward += reward
        b.game_steps += 1
        frame = info["episode_frame_number"]
        # A life loss ends the training episode but the game plays on; a finished game
        # restarts, which shows as the episode frame counter going back.
        b.game_over[:] = truncated | (terminated & (frame < self._prev_frame))
        b.game_frames[:] = self._prev_frame + self.skip
        self._prev_frame[:] = frame
        b.terminated[:], b.truncated[:] = terminated, truncated
        b.rewards[:] = np.sign(reward) if self.clip else reward
        infos = self._infos(b)
        if "final_obs" in info:
            infos["final_obs"] = info["final_obs"]
        b.game_reward[b.game_over] = 0
        b.game_steps[b.game_over] = 0
        return obs, b.rewards, b.terminated, b.truncated, infos

    def close_extras(self, **kwargs: Any) -> None:
        self.ale.close()


# Pipeline stage -> AtariVectorEnv options. Order: ALE resets with no-ops, skips and
# pools, then resizes and stacks, so stages must come in that order to be expressible.
_ALE_ORDER = ("NoopReset", "MaxAndSkip", "WarpFrame", "FrameStack")


def ale_start_differs(pipeline: dict[str, Any]) -> str | None:
    """Why the ale backend would start games at another emulator frame than the pipeline
    does on the other backends (which play.py and evaluation use), or None.

    ALE's fire reset presses FIRE for one emulator frame; FireReset presses FIRE and then
    action 2 as two agent steps (8 frames with skip 4). Without random no-ops every game
    then starts at a fixed frame phase that differs between the two, and a DQN agent learns
    its phase: pong-fast trained on ale scored +12.8 at ALE's phase, -15.2 at the pipeline's
    (benchmarks/frame_phase.py). NoopReset's random start makes the phase random in both.
    """
    names = {s["wrapper"] for s in pipeline["stages"]}
    if "FireReset" in names and "NoopReset" not in names:
        return (
            "FireReset without NoopReset starts every game at another emulator frame phase "
            "than the other backends (and play.py) do, and an agent trained on one phase can "
            "lose on the other; add a NoopReset stage to the pipeline"
        )
    return None


def ale_options(pipeline: dict[str, Any]) -> dict[str, Any]:
    """Map a resolved pipeline onto AtariVectorEnv's options, or refuse naming the stage."""
    stages = {s["wrapper"]: s for s in pipeline["stages"]}
    names = [s["wrapper"] for s in pipeline["stages"]]
    where = f"pipeline {pipeline['name']!r} on the ale backend"
    for name in ("WarpFrame", "FrameStack"):
        if name not in stages:
            raise ConfigError(f"{where}: needs a {name} stage (ALE always resizes and stacks)")
    ordered = [n for n in names if n in _ALE_ORDER]
    if ordered != [n for n in _ALE_ORDER if n in stages]:
        raise ConfigError(
            f"{where}: stage order {' -> '.join(ordered)} cannot be expressed; ALE applies "
            f"{' -> '.join(_ALE_ORDER)}"
        )
    warp = stages["WarpFrame"]
    if not warp["grayscale"]:
        raise ConfigError(
            f"{where}: stage {names.index('WarpFrame') + 1} (WarpFrame) grayscale=false is "
            "not supported (ALE stacks RGB channel-last); use another backend"
        )
    skip = stages.get("MaxAndSkip", {"skip": 1, "max_pool": False})
    return {
        "noop_max": stages.get("NoopReset", {"noop_max": 0})["noop_max"],
        "frameskip": skip["skip"],
        "maxpool": skip["max_pool"],
        "life_loss_info": "EpisodicLife" in stages,
        "use_fire_reset": "FireReset" in stages,
        "img_width": warp["width"],
        "img_height": warp["height"],
        "grayscale": True,
        "stack_num": stages["FrameStack"]["k"],
        "clip": "ClipReward" in stages,
    }


VECTOR_BACKENDS = ("sync", "subprocess", "ale")


def make_vector_env(
    pipeline: PipelineArg,
    game: str,
    num_envs: int,
    backend: str = "sync",
    seed: int | None = None,
    profile: bool = False,
    **options: Any,
) -> VectorEnv:
    """Build ``num_envs`` envs of one pipeline and game on an execution backend.

    ``options`` go to the backend: ``num_workers``, ``timeout``, ``start_method`` for
    ``subprocess``; ``num_threads`` for ``ale``. If worker processes cannot be started
    here (some notebooks and sandboxes), ``subprocess`` falls back to ``sync`` with a
    warning. ``seed`` seeds env i with ``seed + i`` at the first reset. ``profile`` times
    every pipeline stage: in this process (``stage_timer``) or in the env workers
    (``worker_profiles()``); ale's native stages cannot be timed one by one.
    """
    if backend not in VECTOR_BACKENDS:
        raise ConfigError(f"env backend {backend!r}: expected one of {', '.join(VECTOR_BACKENDS)}")
    if not isinstance(num_envs, int) or num_envs < 1:
        raise ConfigError(f"num_envs = {num_envs!r}: expected an integer >= 1")
    resolved = resolve_pipeline(pipeline)
    resolve_game(game)
    timer = StageTimer() if profile and backend != "ale" else None
    tap = None if timer is None else timer.tap
    if backend == "ale":
        env: VectorEnv = AleVectorEnv(resolved, game, num_envs, **options)
    elif backend == "subprocess":
        try:
            env = SubprocessVectorEnv(resolved, game, num_envs, profile=profile, **options)
            timer = None  # the workers time their own stages
        except (OSError, EOFError) as err:
            warnings.warn(
                f"subprocess env backend could not start worker processes ({err}); "
                "falling back to the in-process sync backend",
                RuntimeWarning,
                stacklevel=2,
            )
            env = SyncVectorEnv([lambda: make_env(resolved, game, tap=tap)] * num_envs)
    else:
        env = SyncVectorEnv([lambda: make_env(resolved, game, tap=tap)] * num_envs)
    env.stage_timer = timer
    env.pipeline = resolved  # type: ignore[attr-defined]
    env.backend = backend  # type: ignore[attr-defined]
    if seed is not None:
        env.reset(seed=seed)
        env.action_space.seed(seed)
    return env
