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
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import xarray as xr

from mcsim.engine.resume import PieceStore
from mcsim.errors import NoCandidate
from mcsim.model.feasibility import FREQUENCY, MEMORY
from mcsim.planning.calibration import run_pilot, screen_error_text
from mcsim.planning.candidates import enumerate_candidates
from mcsim.planning.dataset import PlanResult, plan_dataset
from mcsim.planning.plan_file import Plan, load_plan
from mcsim.planning.pool import simulate_pool
from mcsim.planning.screen import CONSTRAINT_CODES, KEPT, REJECTIONS, WORKLOAD_REJECTION, Screen, screen
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
    calibration = run_pilot(plan, cand, scr, execution)
    pool = simulate_pool(plan, cand, scr, calibration, execution)
    if notify and pool.margin > plan.margin:
        measured = np.array([*pool.errors.values(), *calibration.bound()], dtype=np.float64)
        largest = float(np.max(measured[~np.isnan(measured)], initial=0.0))
        notify(f"warning: {screen_error_text(largest, plan.margin)}")
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


def no_candidate_message(plan: Plan, scr: Screen) -> str:
    """One line: why no candidate passed the screen, and how close the closest came."""
    fits = np.isin(scr.rejection, [KEPT, *CONSTRAINT_CODES.values()])
    if not fits.any():
        return _structural_message(plan, scr)
    c = plan.constraints
    codes = scr.rejection[fits]
    name = max(CONSTRAINT_CODES, key=lambda k: int(np.sum(codes == CONSTRAINT_CODES[k])))
    if name == "max_wall_days":
        closest = float(np.min(scr.wall_s[fits])) / 86400.0
        horizon = plan.scenario.base.run.max_wall_days
        return (
            f"{plan.source}: run.max_wall_days: no candidate finishes within {horizon:g} days, the simulation's "
            f"horizon (the fastest screen estimate is {closest:.3g} days); raise run.max_wall_days"
        )
    if name == "deadline":
        closest = float(np.min(scr.wall_quantile_s[fits])) / 86400.0
        return (
            f"{plan.source}: constraints.deadline_days: no candidate can finish within {c.deadline_days:g} days "
            f"with probability {c.deadline_probability:g} (the smallest screen estimate of that quantile of the "
            f"wall time is {closest:.3g} days, beyond the deadline by more than the {plan.margin:.0%} margin)"
        )
    if name == "budget":
        assert c.budget_usd is not None  # the screen rejects for the budget only when there is one
        closest = float(np.min(scr.cost_usd[fits]))
        budget = f"{c.budget_usd:,.0f}" if c.budget_usd >= 1 else f"{c.budget_usd:.3g}"
        return (
            f"{plan.source}: constraints.budget_usd: no candidate fits the budget of {budget} USD "
            f"(the cheapest screen estimate is {closest:,.0f} USD)"
        )
    if name == "power":
        closest = float(np.min(scr.power_mw[fits]))
        return (
            f"{plan.source}: constraints.power_mw: no candidate fits the {c.power_mw:g} MW power cap "
            f"(the smallest draws {closest:.2f} MW)"
        )
    return (
        f"{plan.source}: constraints: no searched GPU count is within min_gpus..max_gpus = {c.min_gpus}..{c.max_gpus}"
    )


def _structural_message(plan: Plan, scr: Screen) -> str:
    """One line when no candidate passes the structural checks: the most common reason, named."""
    codes, counts = np.unique(scr.rejection, return_counts=True)
    code = int(codes[np.argmax(counts)])
    if code == WORKLOAD_REJECTION[MEMORY]:
        return (
            f"{plan.source}: search: no candidate fits in GPU memory (smallest need "
            f"{np.nanmin(scr.memory_per_gpu_gb):.1f} GB per GPU); search more GPUs, recompute or larger GPUs"
        )
    if code == WORKLOAD_REJECTION[FREQUENCY]:
        ranges = ", ".join(
            f"{name} {spec.freq_min_mhz:g}..{spec.freq_max_mhz:g} MHz"
            for name, spec in zip(plan.search.gpu_types, plan.gpu_specs, strict=True)
        )
        return f"{plan.source}: search.freq_mhz: no searched clock is within the GPU's range ({ranges})"
    return (
        f"{plan.source}: search: no candidate passes the screen; {int(counts.max()):,} of "
        f"{int(counts.sum()):,} are rejected for: {REJECTIONS[code]}"
    )
