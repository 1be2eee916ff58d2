"""Suite-wide guards."""

from __future__ import annotations

import signal

import pytest


def pytest_sessionstart(session: pytest.Session) -> None:
    """The launcher's server imports torch and the rest while the tests are collected."""
    from tests import launcher

    launcher.warm()


@pytest.fixture(autouse=True)
def sigint_handler_restored():
    """A test must leave the SIGINT handler as it found it: an ignored SIGINT is inherited
    by every train.py that later tests start, and their Ctrl-C would then do nothing."""
    before = signal.getsignal(signal.SIGINT)
    yield
    after = signal.getsignal(signal.SIGINT)
    assert after is before, f"SIGINT handler left as {after!r} (was {before!r})"
