"""`mcsim plan` against exhaustive simulation: runs simulated and time, with and without the pilot (issue 23).

``.venv/bin/python benchmarks/bench_plan.py [--only NAME ...]``

For each shipped plan and each space of ``tests/test_plan_exhaustive.py``, the plan runs twice in this
one process, back to back: as shipped (with the calibration pilot, docs/model.md §9 "Calibration") and
with ``plan.pilot_runs = 0``. Printed per plan: the candidates that pass the exact checks (the screen's
ranking), the runs the plan simulated (pilot plus selection), the runs exhaustive simulation would need
to give every one of those candidates as many runs as the recommendation got, their ratio (issue 23:
at most 5 %), the wall time of each variant and their ratio (the machine may be loaded: compare the
ratio, not the absolute times), and whether the two variants recommend the same candidate.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from mcsim.planning.plan import load_plan, plan_from_dict
from mcsim.planning.planner import plan_dataset, run_plan

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_plan_exhaustive import BUDGET_SPACE, DEADLINE_SPACE, WRITE_SPACE  # noqa: E402

SHIPPED = ("plan-llama3-70b", "plan-gpt3-175b", "plan-bloom-176b", "plan-llama3-405b")
SPACES = {"deadline-space": DEADLINE_SPACE, "budget-space": BUDGET_SPACE, "write-space": WRITE_SPACE}


def _load(name: str, pilot_runs: int | None):
    overrides = {} if pilot_runs is None else {"plan.pilot_runs": pilot_runs}
    if name in SPACES:
        raw = {**SPACES[name], "plan": {**SPACES[name]["plan"], **({"pilot_runs": pilot_runs} if overrides else {})}}
        return plan_from_dict(raw, name)
    return load_plan(name, overrides)


def _once(name: str, pilot_runs: int | None):
    plan = _load(name, pilot_runs)
    start = time.perf_counter()
    ds = plan_dataset(run_plan(plan))
    return ds, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=None, help="plans to run (default: all)")
    args = parser.parse_args()
    names = args.only or [*SHIPPED, *SPACES]
    _once("plan-gpt3-175b", 2)  # compile / load the kernels
    print(
        "| plan | ranked candidates | runs simulated (pilot + selection) | exhaustive runs | share | "
        "time with pilot | without | ratio | same recommendation |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name in names:
        ds, seconds = _once(name, None)
        bare, bare_seconds = _once(name, 0)
        ranked = int(ds.attrs["candidates_simulated"]) + int(ds.attrs["candidates_never_simulated"])
        pilot, selection = int(ds.attrs["pilot_total_runs"]), int(ds.attrs["total_runs"])
        best_runs = int(
            ds["finalist_runs"].values[np.flatnonzero(ds["finalist_candidate"].values == int(ds["recommended"]))[0]]
        )
        exhaustive = ranked * best_runs
        same = int(ds["recommended"]) == int(bare["recommended"])
        print(
            f"| {name} | {ranked:,} | {pilot + selection:,} ({pilot:,} + {selection:,}) | {exhaustive:,} | "
            f"{100 * (pilot + selection) / exhaustive:.2g} % | {seconds:.1f} s | {bare_seconds:.1f} s | "
            f"{seconds / bare_seconds:.2f} | {'yes' if same else 'NO'} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
