"""The kernels' interface: the only module of ``mcsim.kernels`` that Python code above imports.

Everything a caller needs, in plain NumPy terms (docs/model.md §4; ARCHITECTURE.md says
why the kernels live inside the package):

* the declarations of :mod:`mcsim.kernels.declarations`: :class:`RunParams`,
  :class:`FailureClasses`, the output columns ``OUT_<NAME>`` (``N_OUT`` of them,
  :data:`OUTPUT_COLUMNS`), the ``STRATEGY_*`` hooks, ``STREAM_*`` streams and
  ``KIND_*`` kinds of failure class, ``STAFF_*`` staffing teams,
  :func:`params_table` and :func:`classes_table`; the phase table's columns ``PH_*``,
  :func:`no_phases` and :func:`phases_table`;
* ``START_*``: the start states of the failure processes (:mod:`mcsim.kernels.renewal`);
* the per-run accounting (:mod:`mcsim.kernels.accounting`): :func:`account_runs` writes the
  floating-point per-run outputs named by :data:`ACCOUNTED` from a configuration's rows and its
  scalars, a vector filled by the names of :data:`PARAMS`;
* the compiled entry points :func:`simulate_runs` (runs of one parameter set) and
  :func:`simulate_runs_table` (one run per row of a parameter table), from
  :mod:`mcsim.kernels.montecarlo`. Importing them compiles nothing: Numba compiles (or
  loads from its cache) at the first call; :func:`compiled` says which it will be, and
  :data:`COMPILE_SECONDS` how long compiling takes, :data:`CACHE_FOLDER` where compiled code is kept.
  Under ``NUMBA_DISABLE_JIT=1`` they run as
  plain Python, about 1000 times slower, with the same results bit for bit
  (``tests/test_plain_python.py``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .declarations import (  # the declarations, re-exported whole
    ACCOUNTED,
    ENERGY_PARTS,
    KIND_FAIL_STOP,
    KIND_HANG,
    KIND_INSTABILITY,
    KIND_PLANNED,
    N_ACCOUNTED,
    N_OUT,
    N_PH,
    OUT_ABANDONED_S,
    OUT_BUSY_S,
    OUT_CHECKPOINT_S,
    OUT_CHECKPOINTS,
    OUT_COMPLETED,
    OUT_EPISODE_PHASE_S,
    OUT_EXECUTED_ITERATIONS,
    OUT_FAILURES,
    OUT_HANG_DETECTION_S,
    OUT_HANG_S,
    OUT_HANGS,
    OUT_INSTABILITIES,
    OUT_INSTABILITY_S,
    OUT_ITERATIONS_DONE,
    OUT_LOAD_S,
    OUT_LOST_S,
    OUT_MEMORY_LOADS,
    OUT_MEMORY_RECOVERIES,
    OUT_PLANNED_S,
    OUT_PLANNED_STOPS,
    OUT_QUEUE_WAIT_S,
    OUT_RECOVERY_S,
    OUT_RELEASE_WAIT_S,
    OUT_RESTART_S,
    OUT_SPARE_WAIT_S,
    OUT_STAFF_WAIT_S,
    OUT_STORAGE_LOADS,
    OUT_STORAGE_WRITES,
    OUT_STRAGGLER_PERSISTENT_S,
    OUT_STRAGGLER_S,
    OUT_STRAGGLER_TRANSIENT_S,
    OUT_TIME_LIMIT_STOPS,
    OUT_WALL_S,
    OUTPUT_COLUMNS,
    PARAMS,
    PH_COMM_S,
    PH_COMPUTE_S,
    PH_START,
    STAFF_ALWAYS,
    STAFF_NONE,
    STAFF_OFFICE,
    START_AGED,
    START_NEW,
    START_STATIONARY,
    STRATEGY_ASYNC,
    STRATEGY_IN_MEMORY,
    STRATEGY_SYNC,
    STREAM_EPISODE,
    STREAM_FIRST_FAILURE_CLASS,
    STREAM_ITERATION,
    STREAM_JOB,
    STREAM_RECOVERY,
    FailureClasses,
    RunParams,
    classes_table,
    no_phases,
    params_table,
    phases_table,
)

if TYPE_CHECKING:
    from .accelerate import CACHE_FOLDER, COMPILE_SECONDS
    from .accounting import account_runs
    from .montecarlo import simulate_runs, simulate_runs_table

# Imported at their first use (PEP 562): the compiled entry points and Numba's settings. What needs only the
# declarations (the model, the reports, summaries of result files) never imports Numba (0.2-0.3 s).
_NUMBA_SIDE = {
    "simulate_runs": ".montecarlo",
    "simulate_runs_table": ".montecarlo",
    "account_runs": ".accounting",
    "COMPILE_SECONDS": ".accelerate",
    "CACHE_FOLDER": ".accelerate",
}


def __getattr__(name: str) -> object:
    if name in _NUMBA_SIDE:
        return getattr(importlib.import_module(_NUMBA_SIDE[name], __package__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def compiled(table: bool = False) -> bool | None:
    """Whether the entry point a simulation calls is in the kernel cache (None: unknown).

    ``table``: the draw-table entry point :func:`simulate_runs_table` rather than
    :func:`simulate_runs`. False means the first call compiles, for about
    :data:`COMPILE_SECONDS` seconds.
    """
    accelerate = importlib.import_module(".accelerate", __package__)
    name = "simulate_runs_table" if table else "simulate_runs"
    dispatcher: Any = globals()[name] if name in globals() else __getattr__(name)
    if accelerate.JIT_DISABLED or dispatcher.signatures:  # plain Python, or compiled (or loaded) already
        return True
    return accelerate.cached(dispatcher)


__all__ = [
    "OUTPUT_COLUMNS",
    "N_OUT",
    "OUT_WALL_S",
    "OUT_FAILURES",
    "OUT_LOST_S",
    "OUT_CHECKPOINT_S",
    "OUT_RECOVERY_S",
    "OUT_STRAGGLER_S",
    "OUT_COMPLETED",
    "OUT_ITERATIONS_DONE",
    "OUT_BUSY_S",
    "OUT_CHECKPOINTS",
    "OUT_STRAGGLER_TRANSIENT_S",
    "OUT_STRAGGLER_PERSISTENT_S",
    "OUT_MEMORY_RECOVERIES",
    "OUT_SPARE_WAIT_S",
    "OUT_EPISODE_PHASE_S",
    "OUT_STORAGE_WRITES",
    "OUT_STORAGE_LOADS",
    "OUT_MEMORY_LOADS",
    "OUT_EXECUTED_ITERATIONS",
    "OUT_HANGS",
    "OUT_INSTABILITIES",
    "OUT_HANG_S",
    "OUT_HANG_DETECTION_S",
    "OUT_INSTABILITY_S",
    "OUT_PLANNED_STOPS",
    "OUT_PLANNED_S",
    "OUT_RESTART_S",
    "OUT_LOAD_S",
    "OUT_ABANDONED_S",
    "OUT_STAFF_WAIT_S",
    "OUT_TIME_LIMIT_STOPS",
    "OUT_QUEUE_WAIT_S",
    "OUT_RELEASE_WAIT_S",
    "STRATEGY_SYNC",
    "STRATEGY_ASYNC",
    "STRATEGY_IN_MEMORY",
    "STREAM_ITERATION",
    "STREAM_JOB",
    "STREAM_EPISODE",
    "STREAM_FIRST_FAILURE_CLASS",
    "STREAM_RECOVERY",
    "KIND_FAIL_STOP",
    "KIND_HANG",
    "KIND_INSTABILITY",
    "KIND_PLANNED",
    "RunParams",
    "FailureClasses",
    "params_table",
    "classes_table",
    "no_phases",
    "phases_table",
    "N_PH",
    "PH_START",
    "PH_COMPUTE_S",
    "PH_COMM_S",
    "START_AGED",
    "START_NEW",
    "START_STATIONARY",
    "STAFF_NONE",
    "STAFF_OFFICE",
    "STAFF_ALWAYS",
    "simulate_runs",
    "simulate_runs_table",
    "ACCOUNTED",
    "ENERGY_PARTS",
    "N_ACCOUNTED",
    "PARAMS",
    "account_runs",
    "COMPILE_SECONDS",
    "CACHE_FOLDER",
    "compiled",
]
