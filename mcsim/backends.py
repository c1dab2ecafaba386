"""Execution backends: one code path for local threads and dask clusters.

Each backend takes the same tasks (:mod:`mcsim.tasks`) and yields
``(task, rows)`` as tasks finish, in any order; the caller places the rows by
their run indices, so the result never depends on the backend, the order of
completion, or the chunk size.

* :class:`LocalBackend` (default): tasks one after another in this process;
  each uses all Numba threads over its runs.
* :class:`DaskBackend`: ``workers=N`` starts a ``dask.distributed.LocalCluster``
  of N single-threaded worker processes; ``scheduler=ADDRESS`` connects to a
  running scheduler, the way a SLURM or Kubernetes cluster is reached through
  dask-jobqueue or dask-kubernetes (see the README). Needs the ``dask`` extra.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from .scenario import Config
from .tasks import Task, run_task


class BackendUnavailable(RuntimeError):
    """The requested backend cannot be used (the dask extra is not installed)."""


class LocalBackend:
    """Run tasks in this process, the Numba kernel's threads over each task's runs."""

    description = "local"

    def run(self, tasks: Sequence[Task], configs: Sequence[Config], seed: int,
            mode: str) -> Iterator[tuple[Task, np.ndarray]]:
        for task in tasks:
            yield task, run_task(configs[task.config], seed, mode, task.start, task.stop)

    def close(self) -> None:
        """Nothing to release."""


class DaskBackend:
    """Run tasks on a dask.distributed cluster, started locally or reached by address."""

    def __init__(self, workers: int | None = None, scheduler: str | None = None) -> None:
        try:
            from dask.distributed import Client, LocalCluster
        except ImportError as err:  # pragma: no cover - exercised without the extra only
            raise BackendUnavailable("--workers and --scheduler need dask.distributed: "
                                     "pip install 'mcsim[dask]'") from err
        self._cluster = None
        if scheduler:
            self.client = Client(scheduler)
            self.description = f"dask scheduler {scheduler}"
        else:
            self._cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                         dashboard_address=None)
            self.client = Client(self._cluster)
            self.description = f"dask LocalCluster of {workers} workers"

    def run(self, tasks: Sequence[Task], configs: Sequence[Config], seed: int,
            mode: str) -> Iterator[tuple[Task, np.ndarray]]:
        from dask.distributed import as_completed

        scattered = {}
        futures = {}
        for task in tasks:
            if task.config not in scattered:
                scattered[task.config] = self.client.scatter(configs[task.config], broadcast=False)
            future = self.client.submit(run_task, scattered[task.config], seed, mode, task.start,
                                        task.stop, 1, pure=False)
            futures[future] = task
        for future in as_completed(futures):
            yield futures[future], future.result()

    def close(self) -> None:
        """Close the client and any cluster this backend started."""
        self.client.close()
        if self._cluster is not None:
            self._cluster.close()


def make_backend(workers: int | None = None, scheduler: str | None = None):
    """The backend for the given options: local unless ``workers`` or ``scheduler`` is set."""
    if workers is None and not scheduler:
        return LocalBackend()
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    return DaskBackend(workers=workers, scheduler=scheduler)
