"""Kernel calls on threads: the rows of a task, split over Numba's threads.

A run depends only on its index and the seed (streams of ``(seed, r)``), so the
split never changes a result. Used by both backends (:mod:`mcsim.engine.backends`):
locally with every Numba thread, on a dask worker with one.
"""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import numba
import numpy as np

from mcsim.engine.tasks import OPTIMIZE_SEED_OFFSET, Task
from mcsim.kernels import interface as kernel

if TYPE_CHECKING:
    from mcsim.model.preparation import RowSimulator


def task_seed(task: Task, seed: int) -> int:
    """Seed of a task's kernel calls: the scenario's, or seed + OPTIMIZE_SEED_OFFSET for a grid point."""
    return seed if task.optimize_every is None else seed + OPTIMIZE_SEED_OFFSET


def run_kernel(inputs: RowSimulator, seed: int, start: int, stop: int, threads: int | None = None) -> np.ndarray:
    """Kernel output rows ``(stop - start, N_OUT)`` for runs (or draw-table rows) ``start .. stop - 1``.

    The runs are split into one contiguous slice per Numba thread
    (``numba.get_num_threads()``, or ``threads``), each simulated by the serial
    kernel on its own thread (the kernel releases the GIL): a run depends only on
    its index, so the split never changes a result. A plain thread split rather
    than a ``prange`` kernel: compiling Numba's parallel loop cost about a fifth of
    the kernels' compile time, for no speed.
    """
    if threads is not None:
        # numba.config sets its NUMBA_* settings at import, from a function into globals(): invisible to mypy.
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))  # type: ignore[attr-defined]
    out = np.empty((stop - start, kernel.N_OUT))
    workers = min(numba.get_num_threads(), stop - start)
    if workers <= 1:
        inputs.simulate_rows(seed, start, stop, out)
        return out
    size = -(-(stop - start) // workers)
    futures = [
        _kernel_threads().submit(inputs.simulate_rows, seed, start + a, min(stop, start + a + size), out[a : a + size])
        for a in range(size, stop - start, size)
    ]
    try:
        inputs.simulate_rows(seed, start, start + size, out[:size])  # this thread's share
    finally:
        for future in futures:
            future.result()
    return out


@functools.lru_cache(maxsize=1)
def _kernel_threads() -> ThreadPoolExecutor:
    """The threads that run kernel slices beside the caller's (one fewer than Numba's maximum)."""
    threads = numba.config.NUMBA_NUM_THREADS  # type: ignore[attr-defined]  # set at import into globals() (see above)
    return ThreadPoolExecutor(max_workers=max(1, threads - 1), thread_name_prefix="mcsim-kernel")


def simulate_task(task: Task, inputs: RowSimulator, seed: int, threads: int | None = None) -> np.ndarray:
    """Kernel output rows of ``task`` in one call (what a dask worker runs).

    Parameters
    ----------
    task : Task
        Its rows ``task.start .. task.stop - 1``.
    inputs : RowSimulator
        The simulator of the task's key (:attr:`mcsim.model.preparation.Prepared.rows`).
    seed : int
        The scenario's seed (a grid point's offset is added here).
    threads : int, optional
        Numba threads for this call (dask workers use 1 each).
    """
    return run_kernel(inputs, task_seed(task, seed), task.start, task.stop, threads)
