"""Errors raised for bad user input, each one a single line that names what to fix."""


class ConfigError(ValueError):
    """A pipeline, preset or game name that cannot be used.

    The message names the file (or ``<dict>``), the field, the bad value and what is allowed,
    so the command-line entry points can print it as one line without a traceback.
    """


class WorkerError(RuntimeError):
    """An env worker process failed or died; the message names the worker and its error."""
