"""Execution backends: one code path for local threads and dask clusters.

Each backend takes the same tasks (:mod:`mcsim.engine.tasks`) and the mapping from
a task's key to the object that simulates its rows
(:attr:`mcsim.model.preparation.Prepared.rows`; never a configuration), and yields
``(task, rows)`` as tasks finish, in any order; the caller places the rows by
their run indices, so the result never depends on the backend, the order of
completion, or the chunk size.

* :class:`LocalBackend` (default): tasks one after another in this process;
  each uses all Numba threads over its runs, in kernel calls of bounded work
  (about :data:`CALL_SECONDS`), so that progress is reported and Ctrl-C acts
  between calls rather than after a whole task.
* :class:`DaskBackend`: ``workers=N`` starts a ``dask.distributed.LocalCluster``
  of N single-threaded worker processes (at most the CPUs this process may
  use); ``scheduler=ADDRESS`` connects to a running scheduler, the way a SLURM
  or Kubernetes cluster is reached through dask-jobqueue or dask-kubernetes
  (see the README). The address is checked for its form and the scheduler must
  answer within :func:`scheduler_timeout_s` seconds. Needs the ``dask`` extra.

:class:`BackendLease` keeps one backend open over several simulations (a plan's rounds).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import re
import signal
import threading
import time
import types
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

import numba
import numpy as np

from mcsim._version import DISTRIBUTION
from mcsim.engine.tasks import Task
from mcsim.engine.threads import run_kernel, simulate_task, task_seed
from mcsim.errors import BackendUnavailable  # noqa: F401  (raised here; public from this module too)
from mcsim.model.run_estimate import estimate_run

if TYPE_CHECKING:
    from mcsim.model.preparation import RowSimulator, TaskKey

# Target duration of one local kernel call, s: Ctrl-C acts and the progress bar
# moves at least this often (plus the length of one run, which cannot be split).
CALL_SECONDS = 0.5
# Estimated seconds of work in one dask submission at least: a submission costs the
# client ~3 ms of CPU, so cheap tasks are sent several at a time (:func:`task_batches`).
BATCH_SECONDS = 0.2
# Seconds to wait for a dask scheduler to answer (env MCSIM_SCHEDULER_TIMEOUT overrides).
DEFAULT_SCHEDULER_TIMEOUT_S = 10.0
_ADDRESS = re.compile(r"^(?:(?P<protocol>tcp|tls)://)?(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(?P<port>\d{1,5})$")

OnRuns = Callable[[int], None]
T = TypeVar("T")


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS, Windows
        return os.cpu_count() or 1


def runs_per_call(run_s: float, threads: int, call_s: float = CALL_SECONDS) -> int:
    """Runs per kernel call so that a call takes about ``call_s`` seconds.

    Parameters
    ----------
    run_s : float
        Seconds one run takes on one thread.
    threads : int
        Numba threads sharing the call's runs.
    call_s : float
        Target duration of a call, s.

    Returns
    -------
    int
        A multiple of ``threads`` (at least ``threads``: one run per thread).
    """
    if not (run_s > 0 and math.isfinite(run_s)):
        return threads
    per_thread = max(1, int(call_s / run_s))
    return threads * min(per_thread, 1_000_000)


def contiguous_span(tasks: Sequence[Task], index: int, runs: int) -> list[Task]:
    """``tasks[index]`` and the tasks right after it of the same key whose runs follow on, while they
    hold at most ``runs`` runs in all (the first one always)."""
    first = tasks[index]
    span = [first]
    total = first.runs
    for following in range(index + 1, len(tasks)):
        task = tasks[following]
        if (
            task.config != first.config
            or task.optimize_every != first.optimize_every
            or task.start != span[-1].stop
            or total + task.runs > runs
        ):
            break
        span.append(task)
        total += task.runs
    return span


class LocalBackend:
    """Run tasks in this process, the Numba kernel's threads over each task's runs."""

    description = "local"

    def __init__(self, call_s: float = CALL_SECONDS) -> None:
        self.call_s = call_s
        self._ratio = 1.0  # measured / estimated seconds per run, learned from the calls so far

    @property
    def parallelism(self) -> int:
        """Runs simulated at the same time (Numba threads)."""
        return numba.get_num_threads()

    def run(
        self, tasks: Sequence[Task], rows: Mapping[TaskKey, RowSimulator], seed: int, on_runs: OnRuns | None = None
    ) -> Iterator[tuple[Task, np.ndarray]]:
        """Run ``tasks`` in order; ``on_runs(n)`` after every kernel call of ``n`` runs.

        ``rows``: the simulator of each task's key ``(config, optimize_every)``; ``seed``: the scenario's.
        Consecutive tasks of one key whose runs follow on share kernel calls (:func:`contiguous_span`):
        a cheap configuration's 250-run tasks each cost a call's overhead otherwise.
        A run depends only on its index and seed, so the rows are those of one call per task.
        """
        threads = numba.get_num_threads()
        estimates: dict[TaskKey, float] = {}
        index = 0
        while index < len(tasks):
            first = tasks[index]
            key = (first.config, first.optimize_every)
            inputs = rows[key]
            if key not in estimates:
                estimates[key] = max(estimate_run(inputs).seconds, 1e-9)
            estimate_s = estimates[key]
            span = contiguous_span(tasks, index, runs_per_call(estimate_s * self._ratio, threads, self.call_s))
            calls: list[np.ndarray] = []
            start = first.start
            while start < span[-1].stop:
                stop = min(span[-1].stop, start + runs_per_call(estimate_s * self._ratio, threads, self.call_s))
                began = time.perf_counter()
                calls.append(run_kernel(inputs, task_seed(first, seed), start, stop))
                self._learn(time.perf_counter() - began, stop - start, threads, estimate_s)
                if on_runs is not None:
                    on_runs(stop - start)
                start = stop
            out = calls[0] if len(calls) == 1 else np.concatenate(calls)
            for task in span:
                yield task, out[task.start - first.start : task.stop - first.start]
            index += len(span)

    def _learn(self, elapsed_s: float, runs: int, threads: int, estimate_s: float) -> None:
        """Update the measured/estimated ratio from one call (calls too short to time are ignored)."""
        if elapsed_s < 0.02:
            return
        measured = elapsed_s * min(threads, runs) / runs
        self._ratio = min(max(measured / estimate_s, self._ratio / 8.0), self._ratio * 8.0)

    def close(self) -> None:
        """Nothing to release."""


def scheduler_timeout_s() -> float:
    """Seconds to wait for a scheduler: ``MCSIM_SCHEDULER_TIMEOUT`` or 10."""
    text = os.environ.get("MCSIM_SCHEDULER_TIMEOUT", "")
    try:
        value = float(text)
    except ValueError:
        return DEFAULT_SCHEDULER_TIMEOUT_S
    return value if 0 < value < math.inf else DEFAULT_SCHEDULER_TIMEOUT_S


def check_scheduler_address(address: str) -> str:
    """``address`` as ``tcp://HOST:PORT`` (or ``tls://``); raises BackendUnavailable if malformed."""
    match = _ADDRESS.match(address.strip())
    if not match or not 1 <= int(match["port"]) <= 65535:
        raise BackendUnavailable(
            f"--scheduler: {address!r}: expected an address tcp://HOST:PORT (or tls://HOST:PORT) with a port 1-65535"
        )
    return f"{match['protocol'] or 'tcp'}://{match['host']}:{match['port']}"


async def _identity(address: str, timeout_s: float) -> dict:
    from distributed.comm import connect

    comm = await asyncio.wait_for(connect(address, timeout=timeout_s), timeout_s)
    try:
        await asyncio.wait_for(comm.write({"op": "identity", "reply": True}), timeout_s)
        return await asyncio.wait_for(comm.read(), timeout_s)
    finally:
        comm.abort()


def _in_own_thread(call: Callable[[], object]) -> object:
    """``call()`` in a new thread (its own event loop even where one runs here, e.g. Jupyter)."""
    outcome: dict[str, object] = {}

    def target() -> None:
        try:
            outcome["value"] = call()
        except BaseException as err:  # re-raised in the caller's thread
            outcome["error"] = err

    thread = threading.Thread(target=target, name="mcsim scheduler probe", daemon=True)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise cast(BaseException, outcome["error"])  # target() stores only exceptions under "error"
    return outcome["value"]


def probe_scheduler(address: str, timeout_s: float) -> int:
    """Threads of the dask scheduler at ``address``; raises BackendUnavailable unless one answers.

    ``dask.distributed.Client(address, timeout=...)`` waits forever on a peer
    that accepts the connection and never answers (a plain TCP listener, an
    HTTP server): the scheduler's identity is asked for first, every step
    bounded by ``timeout_s``.
    """
    try:
        reply = _in_own_thread(lambda: asyncio.run(_identity(address, timeout_s)))
    except (OSError, TimeoutError) as err:
        raise BackendUnavailable(
            f"--scheduler: {address}: no dask scheduler answered within {timeout_s:g} s "
            f"({type(err).__name__}{': ' + str(err) if str(err) else ''}); "
            "MCSIM_SCHEDULER_TIMEOUT sets the wait"
        ) from None
    except Exception as err:  # garbage from a peer that is not dask (decode errors of any kind)
        raise BackendUnavailable(
            f"--scheduler: {address}: the peer is not a dask scheduler ({type(err).__name__})"
        ) from None
    if not isinstance(reply, dict) or reply.get("type") != "Scheduler":
        kind = reply.get("type") if isinstance(reply, dict) else type(reply).__name__
        raise BackendUnavailable(f"--scheduler: {address}: expected a dask scheduler, got {kind!r}")
    if "total_threads" in reply:
        return int(reply.get("total_threads") or 0)
    workers = reply.get("workers")  # distributed before 2024.x reported the total: its workers' threads
    if not isinstance(workers, dict):
        return 0
    return sum(int(w.get("nthreads") or 0) for w in workers.values() if isinstance(w, dict))


def dask_setup(worker) -> None:  # noqa: ARG001 - the dask preload interface
    """Preload of mcsim's LocalCluster workers: Ctrl-C is the parent's to handle.

    A terminal's Ctrl-C reaches every process of the foreground group; the
    workers ignore it (also when a nanny restarts one) and are closed by the
    parent, which prints one line.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    """Ignore SIGINT while worker processes start: a spawned process keeps an ignored SIGINT.

    Ctrl-C during the few seconds a LocalCluster takes to start is therefore
    ignored; afterwards the parent handles it (and closes the cluster).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def _interrupts_recorded() -> Iterator[dict[str, bool]]:
    """Record every SIGINT while it still raises KeyboardInterrupt as before.

    Python ignores an exception raised where it cannot propagate (a garbage-collector
    callback of distributed printed "Exception ignored in ... KeyboardInterrupt", and the
    run went on to the end with status 0): the record lets the caller raise it again.
    """
    state = {"interrupted": False}
    if threading.current_thread() is not threading.main_thread():
        yield state
        return
    previous = signal.getsignal(signal.SIGINT)

    def record(signum: int, frame: types.FrameType | None) -> None:
        state["interrupted"] = True
        if _where_exceptions_are_ignored(frame):
            return  # raising here would only print "Exception ignored in ...": the caller raises it
        if callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, record)
    try:
        yield state
    finally:
        signal.signal(signal.SIGINT, previous)


# Functions whose exceptions Python ignores (printing "Exception ignored in"): finalizers and the
# garbage-collector callback of distributed (distributed/gc.py, GCDiagnosis._gc_callback).
_IGNORING_FUNCTIONS = ("__del__", "_gc_callback")


def _where_exceptions_are_ignored(frame: types.FrameType | None) -> bool:
    """Whether ``frame`` runs inside a function whose exceptions Python ignores."""
    while frame is not None:
        if frame.f_code.co_name in _IGNORING_FUNCTIONS:
            return True
        frame = frame.f_back
    return False


def until_interrupted(items: Iterable[T], state: Mapping[str, bool]) -> Iterator[T]:
    """``items``, raising KeyboardInterrupt before the next one (and at the end) once ``state`` records one."""
    for item in items:
        if state["interrupted"]:
            raise KeyboardInterrupt
        yield item
    if state["interrupted"]:
        raise KeyboardInterrupt


class DaskBackend:
    """Run tasks on a dask.distributed cluster, started locally or reached by address."""

    def __init__(self, workers: int | None = None, scheduler: str | None = None) -> None:
        try:
            from dask.distributed import Client, LocalCluster
        except ImportError as err:  # pragma: no cover - exercised without the extra only
            raise BackendUnavailable(
                f"--workers and --scheduler need dask.distributed: pip install '{DISTRIBUTION}[dask]'"
            ) from err
        self._cluster = None
        self._futures: list = []
        if scheduler:
            address = check_scheduler_address(scheduler)
            timeout_s = scheduler_timeout_s()
            threads = probe_scheduler(address, timeout_s)
            try:
                self.client = Client(address, timeout=timeout_s)
            except (OSError, TimeoutError) as err:
                raise BackendUnavailable(f"--scheduler: {address}: cannot connect ({err})") from None
            self.parallelism = threads  # 0: no workers yet (e.g. a dask-jobqueue cluster still scaling)
            self.description = f"dask scheduler {address} ({threads} worker threads)"
        else:
            # Workers log at CRITICAL only: a closing cluster makes them log heartbeat failures
            # (task errors still reach the caller through the futures).
            with _sigint_ignored():  # the worker processes inherit "ignore" (see dask_setup)
                self._cluster = LocalCluster(
                    n_workers=workers,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=None,
                    # its HTTP server on a free port: the default 8787, taken, printed a warning even under --quiet
                    scheduler_kwargs={"dashboard_address": ":0"},
                    silence_logs=logging.CRITICAL,
                    preload=["mcsim.engine.backends"],
                )
                self.client = Client(self._cluster)
            self.parallelism = cast(int, workers)  # make_backend passes workers whenever no scheduler is given
            self.description = f"dask LocalCluster of {workers} workers"

    def run(
        self, tasks: Sequence[Task], rows: Mapping[TaskKey, RowSimulator], seed: int, on_runs: OnRuns | None = None
    ) -> Iterator[tuple[Task, np.ndarray]]:
        """Submit the tasks in batches (:func:`task_batches`), yield each task as its batch finishes
        (``on_runs`` is not used: tasks are whole).

        Each task key's row simulator (picklable) is sent once; the workers only run the kernel.
        """
        from dask.distributed import as_completed

        scattered: dict[TaskKey, Any] = {}
        futures = {}
        for batch in task_batches(tasks, rows, max(1, self.parallelism)):
            for task in batch:
                key = (task.config, task.optimize_every)
                if key not in scattered:
                    # In a list: a tuple (KernelInputs) given alone would be scattered item by item.
                    scattered[key] = self.client.scatter([rows[key]], broadcast=False)[0]
            simulators = [scattered[(task.config, task.optimize_every)] for task in batch]
            future = self.client.submit(simulate_batch, batch, simulators, seed, pure=False)
            futures[future] = batch
        self._futures = list(futures) + list(scattered.values())
        with _interrupts_recorded() as state:
            for future in until_interrupted(as_completed(futures), state):
                yield from zip(futures[future], future.result(), strict=True)
        self._futures = []  # all done: a reused backend (BackendLease) keeps no results on its workers

    def close(self) -> None:
        """Cancel what is left, close the client and any cluster this backend started, quietly."""
        # An interrupted cluster logs lost futures and closed comms ("distributed"), and asyncio logs the
        # scheduler's handlers that failed on a worker already gone ("Task exception was never retrieved",
        # a KeyError in Scheduler.update_data during a scatter: clean-clone CI, test_ctrl_c_with_workers).
        loggers = [logging.getLogger(name) for name in ("distributed", "asyncio")]
        levels = [logger.level for logger in loggers]
        for logger in loggers:
            logger.setLevel(logging.CRITICAL + 1)
        try:
            if self._futures:
                self.client.cancel(self._futures, force=True)
            if self._cluster is not None:
                self._cluster.close()
            self.client.close()
        finally:
            for logger, level in zip(loggers, levels, strict=True):
                logger.setLevel(level)


def task_batches(
    tasks: Sequence[Task], rows: Mapping[TaskKey, RowSimulator], parallelism: int, batch_s: float = BATCH_SECONDS
) -> list[list[Task]]:
    """``tasks`` in order, grouped into dask submissions of at least ``batch_s`` estimated seconds.

    A submission costs the client a few ms, more than a cheap configuration's runs, so
    consecutive tasks are sent together until their estimated work (:func:`estimate_run`, per run,
    times the task's runs) reaches ``batch_s``; where the whole work is small, the target shrinks to
    keep four submissions per worker, so that every worker gets some. A batch never changes a
    result: each task's rows are simulated and placed as when sent alone.
    """
    per_run: dict[TaskKey, float] = {}
    work = []
    for task in tasks:
        key = (task.config, task.optimize_every)
        if key not in per_run:
            per_run[key] = max(estimate_run(rows[key]).seconds, 0.0)
        work.append(per_run[key] * task.runs)
    target = min(batch_s, sum(work) / (4 * parallelism))
    batches: list[list[Task]] = []
    batch_work = math.inf
    for task, seconds in zip(tasks, work, strict=True):
        if batch_work >= target:
            batches.append([])
            batch_work = 0.0
        batches[-1].append(task)
        batch_work += seconds
    return batches


def simulate_batch(tasks: Sequence[Task], simulators: Sequence[RowSimulator], seed: int) -> list[np.ndarray]:
    """Kernel output rows of each of ``tasks`` (what a dask worker runs: one thread, one task after another)."""
    return [simulate_task(task, inputs, seed, 1) for task, inputs in zip(tasks, simulators, strict=True)]


def silence_shutdown_logs() -> None:
    """Silence what an interrupted dask cluster may still log while the process ends (the command is
    about to exit 130 with its one line): distributed's loggers and asyncio's unretrieved-task reports,
    which a task collected at exit can print after :meth:`DaskBackend.close` has returned."""
    for name in ("distributed", "asyncio"):
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)


def make_backend(workers: int | None = None, scheduler: str | None = None) -> LocalBackend | DaskBackend:
    """The backend for the given options: local unless ``workers`` or ``scheduler`` is set.

    Raises
    ------
    ValueError
        ``workers`` below 1 or above :func:`usable_cpus` (more worker processes
        than CPUs only add memory: each holds its own copy of the kernels).
    BackendUnavailable
        No dask extra, a malformed scheduler address, or no scheduler answering.
    """
    if workers is None and not scheduler:
        return LocalBackend()
    if workers is not None:
        check_workers(workers)
    return DaskBackend(workers=workers, scheduler=scheduler)


class BackendLease:
    """One backend for several simulations in a row (a plan's pilot and its selection rounds).

    The backend is made (:func:`make_backend`) at the first :meth:`backend` and closed by :meth:`close`
    only: a dask ``LocalCluster`` takes seconds to start, and a plan that started one per round ran
    14 times slower on ``--workers 2`` than in this process (issue 42).
    """

    def __init__(self, workers: int | None = None, scheduler: str | None = None) -> None:
        self.workers, self.scheduler = workers, scheduler
        self._backend: Backend | None = None

    def backend(self) -> Backend:
        """The backend, made at the first call (ValueError and BackendUnavailable as :func:`make_backend`)."""
        if self._backend is None:
            self._backend = make_backend(self.workers, self.scheduler)
        return self._backend

    def close(self) -> None:
        """Close the backend, when one was made."""
        if self._backend is not None:
            backend, self._backend = self._backend, None
            backend.close()


def check_workers(workers: int) -> None:
    """Raise ValueError unless ``1 <= workers <= usable_cpus()``."""
    cpus = usable_cpus()
    if not 1 <= workers <= cpus:
        raise ValueError(f"expected a whole number from 1 to {cpus} (the CPUs this process may use), got {workers}")


# What :class:`mcsim.engine.execution.Execution` runs tasks on.
Backend = LocalBackend | DaskBackend
