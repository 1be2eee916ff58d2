"""Starting train.py and play.py without paying their imports each time.

A fresh interpreter spends ~8 s of a test's 10-20 s importing torch, and torch._dynamo
(which torch.optim imports at an optimizer's first ``add_param_group``), gymnasium, ale-py
and cv2. The tests whose subject is the process (Ctrl-C, kill, actor processes, exit
statuses) need a process of their own, not those imports: here each such process is forked
from one server, started once per test session, that imported those modules and ran
nothing else (no torch op, no thread pool, no CUDA: what makes forking it safe). The
server is multiprocessing's forkserver (it relays each child's exit status to this
process); each child then does what the interpreter does for ``python script args``:

- its own session (when asked), SIGINT raising KeyboardInterrupt, the given working
  directory and environment, stdout and stderr to files, ``sys.argv``, the script run as
  ``__main__``;
- its own multiprocessing resource tracker (the forkserver's children would otherwise
  share this process's, and a leaked shared-memory block would be reported here, not in
  the run's stderr, where tests look for it);
- at the end, what the interpreter does at exit: wait for non-daemon threads, run the
  atexit handlers, flush, exit with the script's status (an uncaught exception: its
  traceback and 1; KeyboardInterrupt uncaught: 130 after its traceback, where Python
  would kill itself with SIGINT).

Tests about the interpreter itself (which modules an import loads, a display that would
crash Qt) still start a fresh one (``tests.scripts.run_script``).
"""

from __future__ import annotations

import atexit
import multiprocessing as mp
import os
import runpy
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from multiprocessing import resource_tracker
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# What train.py and play.py import before their first frame. Not CUDA: importing torch
# does not initialise it.
PRELOAD = [
    "torch",
    "torch._dynamo",
    "numpy",
    "cv2",
    "gymnasium",
    "ale_py",
    "atari_speed.app.cli",
    "atari_speed.app.play",
]

_context: mp.context.BaseContext | None = None
_scratch: Path | None = None


def scratch_dir(prefix: str) -> Path:
    """A new directory for a launched script's files (its output, a patched script), under
    one that this process removes at exit."""
    global _scratch
    if _scratch is None:
        _scratch = Path(tempfile.mkdtemp(prefix="atari-speed-tests-"))
        atexit.register(shutil.rmtree, _scratch, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=prefix, dir=_scratch))


def context() -> mp.context.BaseContext:
    """The forkserver context, its server told what to import before the first start."""
    global _context
    if _context is None:
        _context = mp.get_context("forkserver")
        _context.set_forkserver_preload(PRELOAD)
    return _context


def warm() -> None:
    """Start the server now, without waiting for it: its imports (~8 s of CPU) then overlap
    with what this process does meanwhile (collecting the tests, the first in-process ones)
    instead of delaying the first test that starts a script."""
    from multiprocessing import forkserver

    context()
    forkserver.ensure_running()


def _exit_status(code: object) -> int:
    """``sys.exit(code)``'s exit status, as the interpreter computes it."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _run_as_main(
    script: str, args: list[str], cwd: str, env: dict[str, str], out: str, err: str, session: bool
) -> None:
    if session:
        os.setsid()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # A tracker of its own: forget the inherited one (still this test process's).
    tracker = resource_tracker._resource_tracker
    if tracker._fd is not None:
        os.close(tracker._fd)
        tracker._fd, tracker._pid = None, None
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    for fd, path in ((1, out), (2, err)):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(target, fd)
        os.close(target)
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
    sys.argv = [script, *args]
    sys.path.insert(0, str(Path(script).parent))
    try:
        runpy.run_path(script, run_name="__main__")
        status = 0
    except SystemExit as exit:
        status = _exit_status(exit.code)
    except KeyboardInterrupt:
        traceback.print_exc()
        status = 130
    except BaseException:
        traceback.print_exc()
        status = 1
    threading._shutdown()  # type: ignore[attr-defined]  # as the interpreter: join threads
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


class Launched:
    """A script started by ``start``: what the tests use of ``subprocess.Popen``."""

    def __init__(self, process: mp.process.BaseProcess, out: Path, err: Path) -> None:
        self._process = process
        self._out, self._err = out, err
        self.pid: int = process.pid  # type: ignore[assignment]
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and not self._process.is_alive():
            self.returncode = self._process.exitcode
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        if self.poll() is None:
            raise subprocess.TimeoutExpired(self._process.name, timeout or 0)
        return self.returncode  # type: ignore[return-value]

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """Waits for the end (``TimeoutExpired`` past ``timeout``); then stdout, stderr."""
        self.wait(timeout)
        return self.output()

    def output(self) -> tuple[str, str]:
        """What the script has written so far to stdout and stderr."""

        def read(path: Path) -> str:  # none yet: the child died before opening it
            return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""

        return read(self._out), read(self._err)

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def start(
    script: str,
    *args: str,
    cwd: Path = ROOT,
    env: dict[str, str] | None = None,
    session: bool = True,
) -> Launched:
    """``python <script> args`` forked from the preloaded server; see the module's doc."""
    logs = scratch_dir("launched-")
    out, err = logs / "stdout", logs / "stderr"
    environ = dict(os.environ if env is None else env)
    process = context().Process(
        target=_run_as_main,
        args=(str(ROOT / script), list(args), str(cwd), environ, str(out), str(err), session),
        name=f"{script} {' '.join(args)}"[:200],
    )
    process.start()
    return Launched(process, out, err)


def run(
    script: str,
    *args: str,
    timeout: float = 600,
    cwd: Path = ROOT,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess:
    """``start`` and wait, as ``subprocess.run(..., capture_output=True, text=True)``: past
    ``timeout`` the script is killed and ``TimeoutExpired`` raised."""
    started = time.monotonic()
    proc = start(script, *args, cwd=cwd, env=env, session=False)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(60)
        raise subprocess.TimeoutExpired(script, time.monotonic() - started) from None
    out, err = proc.output()
    return subprocess.CompletedProcess([script, *args], proc.returncode, out, err)
