"""Running a plan: its stages in order, and :func:`plan`, the Python form of ``mcsim plan`` (docs/model.md §9).

:func:`run_plan` enumerates the plan's search (:mod:`mcsim.planning.candidates`), screens every
candidate analytically (:mod:`mcsim.planning.screen`), measures the screen's error per family of
candidates in the calibration pilot (:mod:`mcsim.planning.calibration`), and simulates the finalists
in Kim–Nelson's ranking-and-selection procedure over a pool brought in from the screen's ranking
(:mod:`mcsim.planning.pool`, :mod:`mcsim.planning.selection`: common random numbers, the same tasks,
backends and resume store as ``mcsim run``), dropping a finalist whose simulated runs miss the
deadline or the budget and selecting again. :func:`plan` returns the dataset
:func:`~mcsim.planning.dataset.plan_dataset` builds of the result: every candidate with its screen
estimates and rejection reason, the finalists' per-run results, the Pareto front of wall time, cost
and energy among the finalists, and the recommendation with its probability of correct selection.
The pilot and every selection round run on one backend (:class:`~mcsim.engine.backends.BackendLease`):
one dask cluster per plan, not one per round.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import numpy as np
import xarray as xr

from mcsim.engine.backends import BackendLease
from mcsim.engine.resume import PieceStore
from mcsim.errors import NoCandidate
from mcsim.planning.calibration import first_order_effects, run_pilot, screen_error_text
from mcsim.planning.candidates import enumerate_candidates
from mcsim.planning.dataset import PlanResult, plan_dataset
from mcsim.planning.plan_file import Plan, load_plan
from mcsim.planning.pool import simulate_pool
from mcsim.planning.screen import no_candidate_message, screen
from mcsim.planning.selection import ExecutionOptions


def run_plan(plan: Plan, execution: ExecutionOptions | None = None) -> PlanResult:
    """Enumerate, screen, measure the screen's error, then select by simulation (the module docstring).

    Raises
    ------
    NoCandidate
        With one line saying which constraint (or memory) rules every candidate out and
        how close the closest candidate comes.
    """
    execution = execution or ExecutionOptions()
    notify = execution.notify
    cand = enumerate_candidates(plan)
    scr = screen(plan, cand)
    if plan.has_reference and scr.reference < 0 and notify:
        notify(
            f"{plan.source}: parallelism: the plan file's own layout is not among the searched candidates "
            "(its GPU type, size, layout, recomputation, strategy, interval or clock is outside [search], or "
            "the layout is not valid for the model): it is not compared with the recommendation"
        )
    if scr.finalists.size == 0:
        raise NoCandidate(no_candidate_message(plan, scr))
    lease = None
    if execution.lease is None:  # one backend (one dask cluster) for the pilot and every round
        lease = BackendLease(execution.workers, execution.scheduler)
        execution = dataclasses.replace(execution, lease=lease)
    try:
        calibration = run_pilot(plan, cand, scr, execution)
        pool = simulate_pool(plan, cand, scr, calibration, execution)
    finally:
        if lease is not None:
            lease.close()
    if notify and pool.margin > plan.margin:
        measured = np.array([*pool.errors.values(), *calibration.bound()], dtype=np.float64)
        largest = float(np.max(measured[~np.isnan(measured)], initial=0.0))
        notify(f"warning: {screen_error_text(largest, plan.margin, first_order_effects(plan.scenario.raw))}")
    return PlanResult(plan, cand, scr, pool)


def plan(
    plan_file: str | Path | Plan,
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    store: PieceStore | None = None,
    progress: bool | None = None,
    notify: Callable[[str], None] | None = None,
) -> xr.Dataset:
    """Search the cluster configurations of a plan file: screen all, select the best by simulation.

    The Python form of ``mcsim plan`` (docs/planning.md, docs/model.md §9).

    Parameters
    ----------
    plan_file : str, Path or Plan
        A plan file (a scenario plus ``[search]``, ``[constraints]``, ``[plan]``), or one
        read already (:func:`mcsim.planning.plan_file.load_plan`).
    workers, scheduler : optional
        Run the simulations on a local dask cluster of ``workers`` processes, or on the
        dask scheduler at ``scheduler`` (default: threads of this process).
    store : PieceStore, optional
        Resume store (finished simulation tasks kept and reused).
    progress : bool, optional
        A progress bar over the simulated runs; by default when standard error is a
        terminal or in a Jupyter kernel.
    notify : callable, optional
        Called with one-line messages (stages, backend).

    Returns
    -------
    xarray.Dataset
        The plan result (:func:`~mcsim.planning.dataset.plan_dataset`): the recommendation, finalists,
        screen; write it with :func:`mcsim.write_results`, explain it with :func:`mcsim.report`.

    Raises
    ------
    ScenarioError
        An invalid plan file (file, key and what was expected).
    NoCandidate
        No candidate meets the constraints (the message says which binds, and how close
        the closest candidate comes).
    """
    loaded = plan_file if isinstance(plan_file, Plan) else load_plan(plan_file)
    execution = ExecutionOptions(progress=progress, workers=workers, scheduler=scheduler, store=store, notify=notify)
    return plan_dataset(run_plan(loaded, execution))
