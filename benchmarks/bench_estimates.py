"""The run-time estimate that gates ``--max-hours`` against the measured time, scenario by scenario.

``mcsim run`` prints an estimate before it starts and refuses a run estimated above ``--max-hours``
(:func:`mcsim.model.run_estimate.time_estimate`); issue 42 asks it to be within 2x of the measured time.
This script computes the estimate the way :func:`mcsim.simulate` does (one thread: parallelism 1) and
measures the process CPU time of the same ``simulate()`` call with one Numba thread, warm kernels, in
one process, for each shipped scenario in fast mode and a few in exact mode. It prints
measured / estimated for each and exits 1 when one falls outside [0.5, 2].

Usage: ``.venv/bin/python benchmarks/bench_estimates.py [--scale S] [--json FILE]`` (``--scale``
multiplies every case's runs; 1 by default, each case a second or more).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ["NUMBA_NUM_THREADS"] = "1"  # before numba is imported: the estimate is one thread's time

from mcsim.engine.optimize import COARSE_POINTS, FINE_POINTS, OPTIMIZE_RUNS  # noqa: E402
from mcsim.engine.simulate import simulate  # noqa: E402
from mcsim.model.preparation import prepare_draws  # noqa: E402
from mcsim.model.run_estimate import time_estimate  # noqa: E402
from mcsim.scenario.config import load_scenario  # noqa: E402
from mcsim.scenario.draws import DrawPlan  # noqa: E402

# (shipped scenario, mode, runs): runs chosen so that each case is estimated at about a second of CPU or more
# (a simulate() call's fixed cost, ~0.1 s of preparation and dataset, is not what the estimate is for).
CASES = (
    ("capacity-planning", "fast", 2000),
    ("llama3-405b", "fast", 6000),
    ("bloom-176b", "fast", 80000),
    ("opt-175b", "fast", 40000),
    ("byterobust-dense", "fast", 2000),
    ("megascale-175b", "fast", 16000),
    ("deepseek-v3-pretraining", "fast", 16000),
    ("bloom-176b", "exact", 200),
    ("llama3-405b", "exact", 12),
)
ACCEPTED = (0.5, 2.0)  # measured / estimated: issue 42, "within 2x of the measured time"


def _estimate_s(name: str, mode: str, runs: int) -> float:
    """The estimate ``simulate()`` checks against ``--max-hours``, on one thread, s."""
    scenario = load_scenario(name, **{"runs": runs, "mode": mode})
    prepared = prepare_draws(DrawPlan(scenario, None), mode)
    grid_runs = min(runs, OPTIMIZE_RUNS) * (COARSE_POINTS + FINE_POINTS)  # as simulate() counts them
    return time_estimate(prepared.inputs, prepared.simulated, prepared.to_optimize, runs, grid_runs, 1).cpu_s


def _measured_s(name: str, mode: str, runs: int) -> float:
    """Process CPU time of ``simulate()`` of the case (one Numba thread), s."""
    scenario = load_scenario(name, **{"runs": runs, "mode": mode})
    start = time.process_time()
    simulate(scenario, progress=False)
    return time.process_time() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies every case's runs")
    parser.add_argument("--json", default=None, help="write the rows to this file")
    args = parser.parse_args()
    for name, mode, _ in CASES:  # compile and warm every kernel the cases use, outside the timings
        _measured_s(name, mode, 2)
    rows = []
    print(f"{'scenario':<26} {'mode':<6} {'runs':>7} {'estimated s':>12} {'measured s':>11} {'measured/est':>13}")
    for name, mode, runs in CASES:
        runs = max(1, int(runs * args.scale))
        estimated, measured = _estimate_s(name, mode, runs), _measured_s(name, mode, runs)
        ratio = measured / estimated
        rows.append(dict(scenario=name, mode=mode, runs=runs, estimated_s=estimated, measured_s=measured, ratio=ratio))
        print(f"{name:<26} {mode:<6} {runs:>7} {estimated:>12.2f} {measured:>11.2f} {ratio:>13.2f}")
    load = os.getloadavg()[0]
    print(f"load average at the end: {load:.1f} (on {os.cpu_count()} CPUs)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(rows=rows, load=load), f, indent=1)
    outside = [r for r in rows if not ACCEPTED[0] <= r["ratio"] <= ACCEPTED[1]]
    for r in outside:
        print(f"outside {ACCEPTED}: {r['scenario']} {r['mode']}: {r['ratio']:.2f}", file=sys.stderr)
    return 1 if outside else 0


if __name__ == "__main__":
    sys.exit(main())
