"""What changes in a plan under its uncertain inputs: the finalists re-screened at each input's 5 % and 95 %.

For every ``[uncertain]`` input of the plan's scenario (docs/model.md, "Uncertain
inputs"), the finalists' screen objective is evaluated with that input at the 5th
and at the 95th percentile of its (truncated) distribution, the others at their
scenario values: one-at-a-time, deterministic, and cheap (the screen is exact on
the deterministic parts and within 0.2 % of simulated means on the shipped plans,
docs/planning.md). The report says which finalist would be best at each end, and
how much the recommendation's objective moves (docs/model.md §9).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from mcsim.planning.plan import Candidates, Plan
from mcsim.planning.screen import BEYOND_CAP, DOMINATED, EQUIVALENT, KEPT, screen
from mcsim.scenario.config import config_with_values

QUANTILES = (0.05, 0.95)


def _subset(cand: Candidates, indices: np.ndarray) -> Candidates:
    arrays = {f.name: getattr(cand, f.name)[indices] for f in dataclasses.fields(cand) if f.name != "enumerated"}
    return Candidates(**arrays, enumerated=cand.enumerated)


# Re-screened, a finalist ranked out only by the others (the ranking's codes) is still a candidate.
_STILL_CANDIDATE = (KEPT, DOMINATED, BEYOND_CAP, EQUIVALENT)


def uncertain_objectives(
    plan: Plan, cand: Candidates, finalists: np.ndarray
) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """Input keys, their values at :data:`QUANTILES` (inputs x 2), the finalists' screen objective with
    each input at each quantile (inputs x 2 x finalists; NaN where the re-screen rules the finalist out:
    memory or a constraint), and that rejection code (0 where it is still a candidate)."""
    inputs = plan.scenario.uncertain
    values = np.array([[float(u.ppf(np.array([q]))[0]) for q in QUANTILES] for u in inputs]).reshape(len(inputs), 2)
    objectives = np.full((len(inputs), len(QUANTILES), finalists.size), np.nan)
    rejections = np.zeros(objectives.shape, dtype=np.int8)
    subset = _subset(cand, finalists)
    for i, entry in enumerate(inputs):
        for j in range(len(QUANTILES)):
            base = config_with_values(
                plan.scenario, 0, {entry.key: values[i, j]}, f"{entry.key} at its p{QUANTILES[j]:.0%}"
            )
            varied = dataclasses.replace(
                plan,
                scenario=dataclasses.replace(plan.scenario, base=base),
                constraints=dataclasses.replace(plan.constraints),
            )
            scr = screen(varied, subset)
            out = ~np.isin(scr.rejection, _STILL_CANDIDATE)
            objectives[i, j] = np.where(out, np.nan, scr.objective)
            rejections[i, j] = np.where(out, scr.rejection, KEPT)
    return [u.key for u in inputs], values, objectives, rejections
