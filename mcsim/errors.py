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


class MachineRefusedWrite(Exception):
    """The machine refused to create the output before any work (disk full, quota, I/O error): not the
    user's mistake, so exit status 1, not 2 (the message names the folder and the cause)."""


class OutputBusy(RuntimeError):
    """Another process holds the lock of the output (it is writing it now)."""


class NoCandidate(Exception):
    """No candidate passes the screen, or none meets the constraints when simulated (exit status 1)."""


class NoneQualifies(LookupError):
    """No configuration meets a deadline with the required probability (``cheapest_within`` of
    :mod:`mcsim.analysis.deadline`).

    The valid question has no answer; :attr:`closest` says which eligible configuration
    came nearest: its record (as ``cheapest_within`` returns for a pick, with
    ``p_within`` and ``p_within_ci95``), or None when no configuration can be ranked.
    :attr:`days` and :attr:`probability` repeat the question.
    """

    def __init__(self, message: str, closest: dict | None, days: float, probability: float) -> None:
        super().__init__(message)
        self.closest = closest
        self.days = days
        self.probability = probability

    def __str__(self) -> str:
        return str(self.args[0])
