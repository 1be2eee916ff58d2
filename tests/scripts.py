"""Running the entry points (train.py, play.py) as a user would, for end-to-end tests."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_script(
    script: str,
    *args: str,
    timeout: float = 240,
    cwd: Path = ROOT,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess:
    """``python <script> args`` from the repository, output captured as text."""
    return subprocess.run(
        [sys.executable, str(ROOT / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=env,
    )


def start_script(script: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    """``python <script> args`` started in its own session, to be interrupted by a test.

    Ctrl-C is restored to Python's default in the child, as a terminal's would be: a suite
    run in the background (``nohup uv run pytest &``) ignores SIGINT, and a child inherits
    that, so the test would wait on a script that never hears its Ctrl-C.
    """
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
