"""Candidate spaces for the selection tests and benchmark (tests/planning/test_selection.py,
benchmarks/bench_selection.py).

A small, fast scenario: a 1.3B-parameter model on 64 A100 (TP 2, PP 2), one exponential
GPU failure class, ten candidates: a checkpoint every 7, 10, 14, 20 or 30 iterations,
sync or async. Exhaustive means (seed 11, 2,000 runs each, cost in USD):

* ``quiet``: 4e9 tokens (3,800 iterations of 0.93 s), GPU MTBF 8 h, 1 min recovery
  (about 11 failures per run). Sync every 10, 14 and 20 are within 0.25 % of each other
  (inside a 0.5 % zone), sync every 7 and 30 are 0.7 % and 1.1 % worse, the async ones
  4.7-15 % worse; paired standard errors of the differences 0.01-0.04 %, a coefficient of
  variation of the cost of 0.045.
* ``noisy``: 4e8 tokens, 10 min recovery (about 3.5 failures per run, a coefficient of
  variation of the cost of 0.93): sync every 7, 10, 14 and 20 within 0.33 % of each
  other, sync every 30 1.1 % worse, the async ones 4.4-16 % worse; paired standard errors
  0.1-0.9 %, so that a 0.5 % zone takes thousands of runs to settle (and exhaustive
  simulation with 2,000 runs cannot resolve it either).
"""

from __future__ import annotations

import copy

from builders import SMALL_SCENARIO

INTERVALS = (7, 10, 14, 20, 30)
STRATEGIES = ("sync", "async")


def space_raw(runs: int, seed: int, kind: str = "quiet") -> dict:
    """Scenario tables of the ten candidates (a sweep), ``runs`` runs on ``seed``, fast mode."""
    quiet = kind == "quiet"
    raw = copy.deepcopy(SMALL_SCENARIO)  # its model, hardware, layout, stragglers and sync checkpoints
    raw["name"] = f"selection-{kind}"
    raw["model"]["tokens"] = 4e9 if quiet else 4e8
    raw["failures"][0].update(mtbf_hours=8.0, recovery_minutes=1.0 if quiet else 10.0)
    raw["run"].update(runs=runs, seed=seed, mode="fast")
    raw["sweep"] = {
        "checkpoint.interval": [{"iterations": k} for k in INTERVALS],
        "checkpoint.strategy": list(STRATEGIES),
    }
    return raw
