"""Running the entry points (train.py, play.py) as a user would, for end-to-end tests."""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from unittest import mock

from tests import launcher

ROOT = launcher.ROOT


def run_script(
    script: str,
    *args: str,
    timeout: float = 600,
    cwd: Path = ROOT,
    env: dict[str, str] | None = None,
    fresh: bool = False,
) -> subprocess.CompletedProcess:
    """``python <script> args`` from the repository, output captured as text: a process of
    its own forked from the preloaded server (``tests.launcher``), or with ``fresh`` a new
    interpreter (for tests about the interpreter: what an import loads, what Qt does)."""
    if not fresh:
        return launcher.run(script, *args, timeout=timeout, cwd=cwd, env=env)
    return subprocess.run(
        [sys.executable, str(ROOT / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=env,
    )


def run_main(
    main: Callable[[list[str]], int], *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """An entry point's ``main(argv)`` called in this process as ``run_script`` would run its
    script: the exit status (argparse's ``SystemExit`` included), stdout and stderr as text,
    under ``env`` (os.environ while it runs). For tests of flags, messages and short plays,
    which would each pay a fresh interpreter's imports (torch's alone is ~5 s on 2 cores)."""
    out, err = io.StringIO(), io.StringIO()
    # Without ``env`` the environment is only restored afterwards (the viewer sets Qt's).
    environ = mock.patch.dict(os.environ, env or {}, clear=env is not None)
    with environ, redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exit:
            code = exit.code if isinstance(exit.code, int) else 0 if exit.code is None else 1
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


def train_here(*args: str) -> subprocess.CompletedProcess:
    """train.py's ``train_main`` in this process (``run_main``)."""
    from atari_speed.app.cli import train_main

    return run_main(train_main, *args)


def play_here(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """play.py's ``play_main`` in this process (``run_main``)."""
    from atari_speed.app.play import play_main

    return run_main(play_main, *args, env=env)


def start_script(
    script: str, *args: str, env: dict[str, str] | None = None, fresh: bool = False
) -> subprocess.Popen | launcher.Launched:
    """``python <script> args`` started in its own session, to be interrupted by a test:
    forked from the preloaded server (``tests.launcher``), or with ``fresh`` a new
    interpreter.

    Ctrl-C is Python's default in the child, as a terminal's would be: a suite run in the
    background (``nohup uv run pytest &``) ignores SIGINT, and a child inherits that, so
    the test would wait on a script that never hears its Ctrl-C.
    """
    if not fresh:
        return launcher.start(script, *args, env=env)
    return subprocess.Popen(
        [sys.executable, str(ROOT / script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


# train.py's progress line ("[1m02s] frames 2,048/...") goes to stderr every 30 s when
# stderr is not a terminal: on a slow machine a short run can print one before its error.
PROGRESS_LINE = re.compile(r"^\[[0-9hms]+\] frames ")


def error_lines(stderr: str) -> list[str]:
    """stderr's lines other than progress lines: what a run said went wrong."""
    return [line for line in stderr.strip().splitlines() if not PROGRESS_LINE.match(line)]


def shm_segments() -> set[str]:
    """The shared-memory blocks Python's multiprocessing has open on this machine."""
    shm = Path("/dev/shm")
    return {p.name for p in shm.glob("psm_*")} if shm.is_dir() else set()


def mapped_segments() -> set[str]:
    """The blocks some live process has mapped (another run's, say, on a busy machine)."""
    names: set[str] = set()
    for maps in Path("/proc").glob("[0-9]*/maps"):
        try:
            text = maps.read_text()
        except OSError:
            continue
        names.update(w.rsplit("/", 1)[1] for w in text.split() if w.startswith("/dev/shm/psm_"))
    return names


def assert_no_shm_left(before: set[str], stderr: str) -> None:
    """Every block a run created is unlinked by the run itself: none is left (blocks new
    since ``before`` that a live process still maps belong to something else running),
    and the resource tracker, which would have unlinked them for it, had nothing to
    report."""
    left = shm_segments() - before - mapped_segments()
    assert left == set(), f"shared memory left behind: {left}"
    assert "leaked shared_memory" not in stderr and "resource_tracker" not in stderr, stderr


def run_patched(
    patch: str, script_args: list[str], timeout: float = 600, fresh: bool = False
) -> subprocess.CompletedProcess:
    """``train.py script_args`` in a process of its own (``run_script``; ``fresh``: a new
    interpreter) after running ``patch`` (Python that injects a fault into the training
    process)."""
    script = launcher.scratch_dir("patched-") / "train.py"
    script.write_text(
        "import sys\n"
        f"{patch}\n"
        "from atari_speed.app.cli import train_main\n"
        f"sys.exit(train_main({script_args!r}))\n"
    )
    return run_script(str(script), timeout=timeout, fresh=fresh)
