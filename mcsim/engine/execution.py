"""Stage 5 of :func:`mcsim.simulate`: tasks through the resume store, a backend and one progress bar.

:class:`Execution` runs any tasks (the reported runs, the interval optimiser's grid
points, the selection's stages): saved ones are loaded from the resume store
(:mod:`mcsim.engine.resume`), the others run on the backend
(:mod:`mcsim.engine.backends`) with the prepared mapping from task key to row
simulator, saved, and counted by the progress bar. :func:`completed_configurations` places the
reported tasks' rows by configuration and run.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from mcsim._lazy import lazy_module
from mcsim.engine.backends import Backend
from mcsim.engine.resume import PieceStore
from mcsim.engine.tasks import Piece, Task
from mcsim.kernels import interface as kernel

if TYPE_CHECKING:
    from tqdm import auto as _tqdm_auto
    from tqdm import std as _tqdm_std

    from mcsim.model.preparation import RowSimulator, TaskKey
else:  # the notebook bar's module imports IPython's machinery: loaded when a bar is first made
    _tqdm_auto = lazy_module("tqdm.auto")
    _tqdm_std = lazy_module("tqdm.std")

OnRows = Callable[[Task, np.ndarray], None]


def in_notebook() -> bool:
    """Whether this process is a Jupyter kernel (IPython imported and running as ``IPKernelApp``)."""
    ipython = sys.modules.get("IPython")
    get_ipython = getattr(ipython, "get_ipython", None)
    shell = get_ipython() if callable(get_ipython) else None
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def ipywidgets_installed() -> bool:
    """Whether ipywidgets can be imported (looked up, not imported)."""
    return importlib.util.find_spec("ipywidgets") is not None


def bar_class() -> type:
    """The tqdm class for progress: ``tqdm.auto`` (widgets in a notebook) when ipywidgets is
    importable, else plain ``tqdm.std``.

    ``tqdm.auto`` in a notebook without ipywidgets warns (``TqdmWarning: IProgress not
    found``) and falls back to text; choosing the text bar first gives the same bar
    without the warning.
    """
    return (_tqdm_auto if ipywidgets_installed() else _tqdm_std).tqdm


def progress_bar(progress: bool | None = None, **options: Any) -> Any:
    """A tqdm progress bar, shown as ``progress`` says.

    Parameters
    ----------
    progress : bool, optional
        True: shown; False: hidden; None: shown when standard error is a terminal or
        this is a Jupyter kernel (where standard error is no terminal, yet a bar works:
        a widget with ipywidgets, text without).
    **options
        tqdm's options (``total``, ``unit``, ``desc``, ``delay``, ...).
    """
    if progress is None:
        try:
            progress = sys.stderr.isatty() or in_notebook()
        except (AttributeError, ValueError):  # no stderr, or a closed one
            progress = False
    return bar_class()(disable=not progress, **options)


class Execution:
    """Tasks through the resume store, a backend and one progress bar.

    Parameters
    ----------
    backend : LocalBackend or DaskBackend
        Runs the tasks not found in the store.
    rows : mapping
        Task key ``(config, optimize_every)`` -> row simulator
        (:attr:`mcsim.model.preparation.Prepared.rows`; read when tasks run, so entries added
        later, such as the optimiser's grid points, are seen).
    seed : int
        The scenario's seed.
    store : PieceStore, optional
        Saves each finished task and gives back the saved ones (resume).
    bar : tqdm
        The progress bar (runs).
    notify : callable, optional
        Called with one-line messages (tasks resumed).
    """

    def __init__(
        self,
        backend: Backend,
        rows: Mapping[TaskKey, RowSimulator],
        seed: int,
        store: PieceStore | None,
        bar: Any,
        notify: Callable[[str], None] | None,
    ) -> None:
        self.backend, self.rows, self.seed, self.store, self.bar = backend, rows, seed, store, bar
        self.notify = notify

    def execute(self, tasks: list[Task], on_rows: OnRows, what: str = "tasks") -> None:
        """Call ``on_rows(task, rows)`` for every task: saved ones loaded, the others run and saved."""
        for task, rows in self.results(tasks, what):
            on_rows(task, rows)

    def results(self, tasks: list[Task], what: str = "tasks") -> Iterator[tuple[Task, np.ndarray]]:
        """``(task, rows)`` for every task, as they come: saved ones loaded, the others run and saved."""
        pending = []
        store = self.store
        for task in tasks:
            rows = store.load(task) if store is not None else None
            if rows is None:
                pending.append(task)
            else:
                self.bar.update(task.runs)
                yield task, rows
        if self.notify is not None and store is not None and len(pending) < len(tasks):
            self.notify(f"resuming: {len(tasks) - len(pending)} of {len(tasks)} {what} already done ({store.folder})")
        reported = 0

        def on_runs(n: int) -> None:
            nonlocal reported
            reported += n
            self.bar.update(n)

        for task, rows in self.backend.run(pending, self.rows, self.seed, on_runs=on_runs):
            if store is not None:
                store.save(task, rows)
            # The backend reports its kernel calls' runs; a call may have run several tasks (a span).
            self.bar.update(max(task.runs - reported, 0))
            reported = max(reported - task.runs, 0)
            yield task, rows


def completed_configurations(
    execution: Execution,
    tasks: list[Task],
    placements: Mapping[Task, list[Piece]],
    feasible: list[int],
    runs: int,
    configurations: Iterable[int] = (),
) -> Iterator[tuple[int, np.ndarray]]:
    """Run and place the reported ``tasks``; yield ``(config, rows)``, each feasible configuration's kernel rows
    ``(runs, N_OUT)``, as soon as its last piece is placed (the rows are not kept here after that), then
    each of ``configurations`` (flat indices) that is not among them (an infeasible one) with NaN rows.

    ``placements``: where each task's rows go (:func:`mcsim.engine.tasks.placements`). The progress
    bar's postfix counts the configurations done.
    """
    bar = execution.bar
    left = {i: 0 for i in feasible}
    for task in tasks:
        for piece in placements[task]:
            left[piece[0]] += 1
    done = 0
    outs: dict[int, np.ndarray] = {}
    for task, rows in execution.results(tasks):
        for config, run_start, run_stop, row_start, row_stop in placements[task]:
            if config not in outs:  # every row is placed once before the configuration is yielded
                outs[config] = np.empty((runs, kernel.N_OUT))
            outs[config][run_start:run_stop] = rows[row_start:row_stop]
            left[config] -= 1
            if left[config] == 0:
                done += 1
                yield config, outs.pop(config)
        if not bar.disable:
            bar.set_postfix_str(
                f"{done}/{len(feasible)} configurations, {done / max(bar.format_dict['elapsed'], 1e-9):.2f} configs/s",
                refresh=False,
            )
    simulated = set(feasible)
    for config in configurations:
        if config not in simulated:
            yield config, np.full((runs, kernel.N_OUT), np.nan)
