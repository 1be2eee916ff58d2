"""The ``subprocess`` vector backend: envs split over worker processes.

Every array (actions, observations, rewards, flags, episode statistics) lives in one
shared-memory block allocated once, and the pipes carry only one-word commands; each
worker runs ``step_envs`` (the sync backend's routine) on its slice of that block.
``quiet_children`` is also how other components start their child processes.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import sys
import traceback
import types
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from multiprocessing.connection import Connection, wait
from multiprocessing.shared_memory import SharedMemory
from typing import Any

import numpy as np

from atari_speed.core.errors import WorkerError
from atari_speed.core.shm import attach
from atari_speed.core.timing import Profiler, StageTimer
from atari_speed.envs.pipeline import make_env
from atari_speed.envs.stepping import StepBuffers, VectorEnv, reset_envs, reset_mask, step_envs

_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


@contextmanager
def quiet_children() -> Iterator[None]:
    """Start child processes with one BLAS/OpenMP thread each, SIGINT ignored, and
    without re-running the ``__main__`` script.

    One thread: the workers are the parallelism, and numpy's default of one BLAS thread per
    core in every worker thrashes (measured: the numpy image backend ran 15x slower in 2
    workers on 2 cores). Spawned children read these variables when they import numpy.

    SIGINT ignored: Ctrl-C reaches the whole process group, but only the parent acts on
    it (it saves a checkpoint, then stops its children), so a child never dies of it,
    not even while it is still importing. An ignored signal stays ignored across exec.

    No ``__main__``: a spawned child imports the parent's main script before it runs its
    target, so a script that builds a subprocess vector env at its top level (no
    ``if __name__ == "__main__":``, as quick scripts are written) would have every worker
    run it again and fail. Our children's targets and arguments live in this package, so
    while they start, ``__main__`` is a bare module that gives spawn nothing to import.
    """
    saved = {var: os.environ.get(var) for var in _THREAD_VARS}
    for var in _THREAD_VARS:
        os.environ.setdefault(var, "1")
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    main = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")  # no __file__, no __spec__
    try:
        yield
    finally:
        if main is not None:
            sys.modules["__main__"] = main
        signal.signal(signal.SIGINT, previous)
        for var, value in saved.items():
            if value is None:
                os.environ.pop(var, None)


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
        shm = attach(shm_name)
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
                    reset_envs(envs, buf, first, *payload)
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
        self.pipeline = pipeline
        self.backend = "subprocess"
        self.stage_timer = None  # the workers time their own stages: worker_profiles()
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
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
        num_workers = min(num_envs, num_workers or cores or os.cpu_count() or 1)
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
        seeds, mask = self._seeds(seed), reset_mask(options, self.num_envs)
        splits = np.array_split(np.arange(self.num_envs), len(self.workers))
        self._command(
            "reset",
            [([seeds[i] for i in ids], None if mask is None else mask[ids]) for ids in splits],
        )
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
