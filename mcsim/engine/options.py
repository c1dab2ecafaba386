"""How a simulation is executed: one value for the options that change no result.

:class:`ExecutionOptions` travels from the public entry points (:func:`mcsim.simulate`,
:func:`mcsim.plan`) through the engine and the planner's simulations to the backend and the
progress bar. Run ``r`` always draws from the streams of ``(seed, r)``, so nothing here changes
a number of the results: only how fast they come, where they run and what is said meanwhile.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcsim.engine.backends import BackendLease
    from mcsim.engine.resume import PieceStore

DEFAULT_CHUNK_RUNS = 250


def check_chunk_runs(chunk_runs: int) -> int:
    """``chunk_runs``, or ValueError when it is not a whole number of at least 1."""
    whole = isinstance(chunk_runs, numbers.Integral) and not isinstance(chunk_runs, bool)
    if not whole or chunk_runs < 1:
        raise ValueError(f"chunk_runs: expected a whole number >= 1, got {chunk_runs!r}")
    return int(chunk_runs)


@dataclass(frozen=True)
class ExecutionOptions:
    """How the runs of a simulation are executed (none of it changes a result).

    Attributes
    ----------
    progress : bool, optional
        Show a tqdm bar over all runs; None: only when standard error is a terminal (or a
        Jupyter kernel).
    chunk_runs : int
        Runs per task (default 250).
    workers : int, optional
        Run the tasks on a dask ``LocalCluster`` of this many worker processes.
    scheduler : str, optional
        Run the tasks on the dask scheduler at this address (``tcp://HOST:PORT``).
    store : PieceStore, optional
        Saves each finished task and reuses the saved ones (resume).
    notify : callable, optional
        Called with one-line messages (backend in use, time estimate, tasks resumed).
    lease : BackendLease, optional
        An open backend to run on and leave open (a plan's rounds share one); by default
        each simulation makes its own from ``workers`` and ``scheduler`` and closes it.

    Raises
    ------
    ValueError
        ``chunk_runs`` below 1.
    """

    progress: bool | None = None
    chunk_runs: int = DEFAULT_CHUNK_RUNS
    workers: int | None = None
    scheduler: str | None = None
    store: PieceStore | None = None
    notify: Callable[[str], None] | None = None
    lease: BackendLease | None = None

    def __post_init__(self) -> None:
        check_chunk_runs(self.chunk_runs)

    def say(self, message: str) -> None:
        """Pass ``message`` to :attr:`notify`, when there is one."""
        if self.notify is not None:
            self.notify(message)
