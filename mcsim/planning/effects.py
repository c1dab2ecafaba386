"""What the planner's screen adds to Daly's estimate for effects the simulation models (issue 23, item 1).

Each function here is one first-order correction of the screen's expected wall time
(:func:`mcsim.planning.screen.screen`), vectorised over candidates:

* :func:`write_window`: the wait for a checkpoint write (async, gockpt) or replica (in_memory) that
  outlasts the compute between checkpoints, and the extra rollback of a failure while it is in flight;
* :func:`run_mtbf_s`: the job's mean failure rate over the run on a young or aged cluster (Weibull
  classes not stationary at the start);
* :func:`with_spares`: the waits for repaired spare nodes;
* :func:`recovery_s`: a failure class's recovery as Daly's estimate sees it when it is a law
  (lognormal, a share needing a person), not a fixed time.

Slow-node episodes enter the mean iteration time (``screen._iteration_power``). Their measured
errors against simulation are in docs/planning.md ("The screen's error per feature",
``benchmarks/bench_screen_features.py``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from mcsim.model.checkpointing import class_mtbf_hours, class_units, losing_classes, nodes_taken
from mcsim.model.reliability import expected_renewals
from mcsim.model.spares import wall_with_spares_s
from mcsim.planning.plan import Candidates
from mcsim.scenario.config import Config
from mcsim.scenario.schema import FailureClass

# Choice: one mean rate over the whole run. Daly segments at the rate of each piece of the run
# (16 pieces in order) were 20-27 % pessimistic on the young-cluster space of
# benchmarks/bench_screen_features.py (the early failures of a young cluster come in bursts that
# mostly restart recoveries, which Poisson segments at the piece's rate overcount); the mean rate is
# 8.3 % pessimistic at worst there. The wall time T then solves T = Daly(T / failures in [0, T]): by bisection on log T
# (BISECTIONS halvings), since passes of that fixed point oscillate where the rate falls steeply
# (Weibull shape 0.05: a finite T gives a rate at which no run ends, an endless one the stationary rate).
BISECTIONS = 60


def ages_matter(base: Config) -> bool:
    """Whether a failure class's rate changes over the run (Weibull, not stationary at the start)."""
    return any(f.shape != 1.0 and f.initial_age != "stationary" for f in base.failures)


def expected_failures(base: Config, cand: Candidates, t_s: np.ndarray) -> np.ndarray:
    """Expected failures of the job in ``[0, t_s]`` (every class, its units replaced when they fail)."""
    failures = np.zeros(len(cand))
    for f in losing_classes(base.failures):
        units = class_units(f, cand.gpus, base.hardware.gpus_per_node)
        failures = failures + units * expected_renewals(
            t_s, f.shape, float(class_mtbf_hours(f)) * 3600.0, f.initial_age
        )
    return failures


def run_mtbf_s(base: Config, cand: Candidates, wall_s: np.ndarray, mtbf_s: np.ndarray) -> np.ndarray:
    """The job's mean time between failures over a run of ``wall_s``: ``wall / Σ units × expected
    failures of a unit in [0, wall]`` (:func:`mcsim.model.reliability.expected_renewals`); ``mtbf_s``
    (the stationary one) when every class is stationary or exponential, or no failure is expected."""
    if not ages_matter(base):
        return mtbf_s
    horizon = np.where(np.isfinite(wall_s) & (wall_s > 0), wall_s, 0.0)
    failures = expected_failures(base, cand, horizon)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where((horizon > 0) & (failures > 0), horizon / np.where(failures > 0, failures, 1.0), mtbf_s)


def young_cluster_wall_s(
    base: Config, cand: Candidates, daly: Callable[[np.ndarray], np.ndarray], mtbf_s: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The expected wall time ``T`` with ``T = daly(run_mtbf_s(T))``, and that MTBF (s).

    ``daly(mtbf)``: Daly's expected wall time at a job MTBF. Bisection on ``log T`` between the run
    without failures and twice the simulation's horizon (``run.max_wall_days``); inf where even that
    is too short. ``T − daly(run_mtbf(T))`` falls as T grows when the rate falls with age (shape < 1)
    and rises slower than T otherwise, so the root is unique.
    """
    if not ages_matter(base):
        return daly(mtbf_s), mtbf_s
    low = np.log(daly(np.full(len(cand), np.inf)))
    high = np.full(len(cand), np.log(2.0 * base.run.max_wall_days * 86400.0))
    endless = _excess(base, cand, daly, np.exp(high), mtbf_s) > 0
    for _ in range(BISECTIONS):
        middle = 0.5 * (low + high)
        above = _excess(base, cand, daly, np.exp(middle), mtbf_s) > 0  # the root is above the middle
        low, high = np.where(above, middle, low), np.where(above, high, middle)
    wall = np.where(endless, np.inf, np.exp(high))
    return wall, run_mtbf_s(base, cand, wall, mtbf_s)


def _excess(base: Config, cand: Candidates, daly, wall_s: np.ndarray, mtbf_s: np.ndarray) -> np.ndarray:
    """``daly(run_mtbf(T)) − T``: positive where the wall time ``T`` is too short to hold its failures."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.nan_to_num(daly(run_mtbf_s(base, cand, wall_s, mtbf_s)) - wall_s, nan=np.inf)


def with_spares(base: Config, cand: Candidates, wall_s: np.ndarray) -> np.ndarray:
    """``wall_s`` (every node present) stretched by the waits for repaired spare nodes
    (:func:`mcsim.model.spares.wall_with_spares_s`; unchanged without a spare pool)."""
    spares = base.hardware.spare_nodes
    if spares is None:
        return wall_s
    out = np.array(wall_s, dtype=np.float64)
    for gpus in np.unique(cand.gpus):
        idx = np.flatnonzero(cand.gpus == gpus)
        classes = [
            (
                float(class_units(f, int(gpus), base.hardware.gpus_per_node)) / (float(class_mtbf_hours(f)) * 3600.0),
                nodes_taken(f),
                f.repair_hours * 3600.0,
                f.repair_sigma,
            )
            for f in base.failures
        ]
        out[idx] = wall_with_spares_s(out[idx], classes, spares)
    return out


def mean_recovery_s(fclass: FailureClass) -> float:
    """A class's mean recovery before the load, s: ``recovery_minutes`` plus a person's share of ``manual_hours``."""
    return fclass.recovery_minutes * 60.0 + fclass.manual_share * fclass.manual_hours * 3600.0


def fixed_recovery(fclass: FailureClass) -> bool:
    """Whether every recovery of the class is ``recovery_minutes`` (no law, no list, no person)."""
    return fclass.recovery_sigma == 0.0 and fclass.manual_share == 0.0 and not fclass.recovery_durations_minutes


def recovery_s(fclass: FailureClass) -> float:
    """A class's recovery (before the load) as Daly's estimate sees it, s: its mean, whatever its law.

    A failure during a recovery does not cut the recovery under way short (docs/model.md §3): training
    restarts once every incident's own recovery, then the restart's parts and the load, are done. The
    recovery is then the busy period of an M/G/inf queue begun by the first incident (arrivals at the
    job's failure rate ``1/M``, each busy for its draw ``X`` plus the parts and the load ``L``), whose
    mean is ``M (e^{(E[X] + L)/M} - 1)`` with ``e^{(E[X] + L)/M}`` incidents (Takacs 1962): Daly's cost
    of a fixed recovery of ``E[X]``, exactly. Only the mean of the law matters.
    """
    return mean_recovery_s(fclass)


def write_window(every, iteration_s, stall, background) -> tuple[np.ndarray, np.ndarray]:
    """Checkpoint time per cycle and extra loss per failure of a write (or replica) in flight, s.

    After a checkpoint's stall the state is durable (async, gockpt) or restorable from the peer
    (in_memory) only ``background`` seconds later, and the next checkpoint waits for it: a cycle
    of ``every`` iterations of mean length ``iteration_s`` is ``stall + max(every × iteration_s,
    background)``, so the stall per cycle grows by the wait ``max(0, background − every ×
    iteration_s)``. A failure while the write is in flight rolls back one cycle more: with failures
    uniform over a cycle of length ``L = stall + max(compute, background)`` that happens with
    probability ``background / L`` and costs the previous cycle's compute and stall again (its wait
    not: after a restart no write is in flight), so ``background (compute + stall) / L`` more per
    failure on average, carried as part of the restart (``background`` itself when the compute
    covers the write).
    """
    compute = every * iteration_s
    wait = np.maximum(background - compute, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        cycle = stall + np.maximum(compute, background)
        rollback = np.where(cycle > 0, background * (compute + stall) / np.where(cycle > 0, cycle, 1.0), 0.0)
    return stall + wait, rollback
