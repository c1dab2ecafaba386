"""`mcsim plan` against exhaustive simulation: runs simulated and time, with and without the pilot.

``.venv/bin/python benchmarks/bench_plan.py [--only NAME ...]``

For each shipped plan and each space of ``tests/planning/test_plan_exhaustive.py``, the plan runs twice in this
one process, back to back: as shipped (with the calibration pilot, docs/model.md §9 "Calibration") and
with ``plan.pilot_runs = 0``, ``--rounds`` times alternating (the least time of each is kept). Printed per
plan: the candidates that pass the exact checks (the screen's ranking); the runs the plan simulated, each
(candidate, run) once (the pilot's among them); their share of exhaustive simulation, as the exhaustive
checks of the plan's answers ran it (2,000 runs of every candidate; the target is at most 5 %) and, stricter, with
as many runs of every candidate as the recommendation got; the wall time of each variant (screen and
start-up included, kernels compiled before) and their ratio (the machine may be loaded: compare the
ratio, not the absolute times); and whether the two variants recommend the same candidate.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from mcsim.planning.dataset import plan_dataset
from mcsim.planning.plan_file import load_plan, plan_from_dict
from mcsim.planning.run import run_plan

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from plans import BUDGET_SPACE, DEADLINE_SPACE, WRITE_SPACE  # noqa: E402

EXHAUSTIVE_RUNS = 2000  # runs of every candidate in the exhaustive checks of the plan's answers
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


def distinct_runs(ds) -> int:
    """Runs the plan simulated, each (candidate, run) once: the pilot's, and the finalists' beyond them (the
    selection reuses the pilot's runs of a finalist it piloted)."""
    pilot_runs = int(ds.attrs["pilot_runs"])
    piloted = {int(i) for i in ds["family_pilot_candidate"].values if i >= 0}
    beyond = sum(
        max(0, int(n) - (pilot_runs if int(i) in piloted else 0))
        for i, n in zip(ds["finalist_candidate"].values, ds["finalist_runs"].values, strict=True)
    )
    return pilot_runs * len(piloted) + beyond


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=None, help="plans to run (default: all)")
    parser.add_argument("--rounds", type=int, default=3, help="timings per variant, alternating; the least is kept")
    args = parser.parse_args()
    names = args.only or [*SHIPPED, *SPACES]
    _once("plan-gpt3-175b", 2)  # compile / load the kernels
    print(
        "| plan | ranked candidates | runs simulated (pilot) | share of 2,000 a candidate | share of the "
        "recommendation's runs a candidate | time with pilot | without | ratio | same recommendation |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name in names:
        times: dict[int | None, list[float]] = {None: [], 0: []}
        for _ in range(args.rounds):
            for variant in (None, 0):
                ds_variant, seconds = _once(name, variant)
                times[variant].append(seconds)
                if variant is None:
                    ds = ds_variant
                else:
                    bare = ds_variant
        ranked = int(ds.attrs["candidates_simulated"]) + int(ds.attrs["candidates_never_simulated"])
        runs = distinct_runs(ds)
        recommended = np.flatnonzero(ds["finalist_candidate"].values == int(ds["recommended"]))[0]
        best_runs = int(ds["finalist_runs"].values[recommended])
        same = int(ds["recommended"]) == int(bare["recommended"])
        with_pilot, without = min(times[None]), min(times[0])
        print(
            f"| {name} | {ranked:,} | {runs:,} ({int(ds.attrs['pilot_total_runs']):,}) | "
            f"{100 * runs / (ranked * EXHAUSTIVE_RUNS):.2g} % | {100 * runs / (ranked * best_runs):.2g} % | "
            f"{with_pilot:.2f} s | {without:.2f} s | {with_pilot / without:.2f} | {'yes' if same else 'NO'} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
