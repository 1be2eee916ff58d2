"""Suite-wide guards."""

from __future__ import annotations

import signal

import pytest

# What a test module calls to start a script from the launcher's server (tests.launcher).
LAUNCHING = ("run_script", "start_script", "run_patched", "launcher")


def pytest_collection_finish(session: pytest.Session) -> None:
    """Where a selected test will start a script from the launcher's server, start the
    server now: it imports torch and the rest while the first tests run. Not for a run
    that never uses it (the Ray set's new interpreters, mutmut's unit tests)."""
    from tests import launcher

    if any(
        item.get_closest_marker("ray") is None
        and any(name in vars(item.module) for name in LAUNCHING)
        for item in session.items
        if isinstance(item, pytest.Function)
    ):
        launcher.warm()


@pytest.fixture(autouse=True)
def sigint_handler_restored():
    """A test must leave the SIGINT handler as it found it: an ignored SIGINT is inherited
    by every train.py that later tests start, and their Ctrl-C would then do nothing."""
    before = signal.getsignal(signal.SIGINT)
    yield
    after = signal.getsignal(signal.SIGINT)
    assert after is before, f"SIGINT handler left as {after!r} (was {before!r})"
