"""The exceptions of mcsim, in one module that imports nothing from mcsim.

Every layer raises these; the command line turns them into one line and an exit
status (2 for a user's mistake, 1 for what the machine or the model refused).
"""

from __future__ import annotations

from pathlib import Path


class ScenarioError(ValueError):
    """A user mistake in a scenario: reported as one line, exit status 2."""

    def __init__(self, source: str, key: str, message: str) -> None:
        self.source = source
        self.key = key
        self.message = message
        super().__init__(f"{source}: {key}: {message}")


class BackendUnavailable(RuntimeError):
    """The requested backend cannot be used (no dask extra, bad or silent scheduler)."""


class PieceWriteError(Exception):
    """A finished piece could not be saved (disk full, file-size limit, permissions).

    Not an ``OSError``, so that callers can tell it from a backend's errors;
    the cause is in :attr:`error`.
    """

    def __init__(self, path: Path, error: OSError) -> None:
        super().__init__(f"{path}: {error.strerror or error}")
        self.path = path
        self.error = error


class OutputBusy(RuntimeError):
    """Another process holds the lock of the output (it is writing it now)."""


class NoCandidate(Exception):
    """No candidate passes the screen, or none meets the constraints when simulated (exit status 1)."""
