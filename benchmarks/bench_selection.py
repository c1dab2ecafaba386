"""Runs and time of select_best against exhaustive simulation: ``.venv/bin/python benchmarks/bench_selection.py``.

On the ten-candidate spaces of ``tests/selection_spaces.py`` (``quiet`` and ``noisy``),
the exhaustive search simulates every candidate 2,000 times (:func:`mcsim.simulate`,
seed 11) and ranks the means; :func:`mcsim.planning.selection.select_best` (Kim–Nelson with
common random numbers) then runs on ``--seeds`` other seeds. Prints per space and
indifference zone and first-stage size: how often the recommendation is within the zone of the exhaustive
best, the runs spent (mean and largest) and their ratio to the exhaustive 2,000 per
candidate, and the wall-time ratio, both measured in this one process (the machine
may be loaded: compare ratios, not absolute times).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from mcsim.engine.simulate import simulate
from mcsim.planning.selection import ExecutionOptions, select_best
from mcsim.scenario.config import scenario_from_dict

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from selection_spaces import space_raw  # noqa: E402

EXHAUSTIVE_RUNS = 2000


def exhaustive(kind: str) -> tuple[np.ndarray, float]:
    """Mean cost of every candidate over 2,000 runs (seed 11), and the seconds it took."""
    scenario = scenario_from_dict(space_raw(EXHAUSTIVE_RUNS, 11, kind))
    start = time.perf_counter()
    ds = simulate(scenario, progress=False)
    seconds = time.perf_counter() - start
    return ds["cost"].values.reshape(len(scenario.configs), -1).mean(axis=1), seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10, help="selections per case (default 10)")
    args = parser.parse_args()
    simulate(scenario_from_dict(space_raw(2, 0)), progress=False)  # compile / load the kernels
    for kind, cases in (("quiet", ((0.005, 100), (0.005, 10))), ("noisy", ((0.01, 100), (0.005, 100)))):
        means, exhaustive_s = exhaustive(kind)
        configs = scenario_from_dict(space_raw(100, 0, kind)).configs
        budget = len(configs) * EXHAUSTIVE_RUNS
        for zone, first_runs in cases:
            spent, good, decided, start = [], 0, 0, time.perf_counter()
            for seed in range(1000, 1000 + args.seeds):
                result = select_best(
                    configs,
                    "cost",
                    seed=seed,
                    indifference=zone,
                    first_runs=first_runs,
                    execution=ExecutionOptions(progress=False),
                )
                good += bool(means[result.best] - means.min() <= result.delta)
                decided += result.decided
                spent.append(result.total_runs)
            seconds = (time.perf_counter() - start) / args.seeds
            print(
                f"{kind:5s} zone {zone:.1%}, n0 {first_runs:3d}: "
                f"{good}/{args.seeds} within the zone of the exhaustive best, "
                f"{decided}/{args.seeds} decided; runs {np.mean(spent):,.0f} mean, {max(spent):,} max "
                f"vs {budget:,} exhaustive ({budget / np.mean(spent):.1f}x fewer); "
                f"time {seconds:.2f} s vs {exhaustive_s:.2f} s ({exhaustive_s / seconds:.1f}x)"
            )


if __name__ == "__main__":
    main()
