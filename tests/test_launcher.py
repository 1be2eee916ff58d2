"""The launcher's children end as ``python script`` would: status, output, threads, atexit,
Ctrl-C, session and resource tracker (what the end-to-end tests rely on it for)."""

from __future__ import annotations

import os
import signal
import textwrap
import time

import pytest

from tests import launcher

SCRIPT = """
import atexit, os, sys, threading, time
from multiprocessing import resource_tracker
print("out", flush=True)
print("err", file=sys.stderr)
atexit.register(lambda: open(sys.argv[1] + "/atexit", "w").write("ran"))
# A non-daemon thread: the interpreter waits for it before exiting.
def late():
    time.sleep(0.5)
    open(sys.argv[1] + "/thread", "w").write("ran")
threading.Thread(target=late).start()
resource_tracker.ensure_running()
open(sys.argv[1] + "/ids", "w").write(f"{os.getpgid(0)} {resource_tracker._resource_tracker._pid}")
sys.exit(int(sys.argv[2]))
"""


def test_a_child_exits_as_the_interpreter_would(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(SCRIPT))
    out = launcher.run(str(script), str(tmp_path), "3")
    assert (out.returncode, out.stdout, out.stderr) == (3, "out\n", "err\n")
    assert (tmp_path / "thread").read_text() == (tmp_path / "atexit").read_text() == "ran"
    group, tracker = (tmp_path / "ids").read_text().split()
    assert int(group) == os.getpgid(0)  # run, not start: this process's group, as subprocess.run
    assert tracker != "None"  # its own tracker, not this process's (whose pid it would not know)


def test_ctrl_c_raises_keyboard_interrupt_in_a_session_of_its_own(tmp_path):
    script = tmp_path / "wait.py"
    script.write_text(
        "import sys, time\n"
        "try:\n"
        "    print('waiting', flush=True)\n"
        "    time.sleep(600)\n"
        "except KeyboardInterrupt:\n"
        "    sys.exit(130)\n"
    )
    proc = launcher.start(str(script))
    deadline = time.monotonic() + 300
    while proc.output()[0] != "waiting\n":
        assert proc.poll() is None and time.monotonic() < deadline, proc.output()
        time.sleep(0.05)
    assert os.getpgid(proc.pid) == proc.pid != os.getpgid(0)
    os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C
    assert proc.wait(60) == 130
    with pytest.raises(ProcessLookupError):  # gone, not left a zombie
        os.kill(proc.pid, 0)
