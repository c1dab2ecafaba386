"""Cost of input uncertainty: ``draws x runs`` two-level sampling versus plain runs.

The speed requirement of input uncertainty: 256 parameter draws x 200 runs of the reference
scenario (Llama 3 405B) must cost at most 2x the time of 51,200 plain runs. Both
go through :func:`mcsim.simulate` end to end (tasks, backend, outputs), warm
(the kernel compiled first). The uncertain inputs are the requirement's examples: the
GPU failure class's MTBF, the achieved efficiency, the straggler sigma, the
recovery time and the storage bandwidth.

Usage: ``python benchmarks/bench_uncertain.py [--draws 256] [--runs 200] [--repeat 1]``.
"""

from __future__ import annotations

import argparse
import json
import time

import numba

import mcsim
from mcsim.scenario.config import load_scenario, scenario_from_dict

UNCERTAIN = {
    "failures.faulty_gpu.mtbf_hours": {"dist": "lognormal", "median": 143470, "p95": 400000},
    "compute.efficiency": {"dist": "triangular", "low": 0.55, "mode": 0.64, "high": 0.68},
    "stragglers.sigma": {"dist": "uniform", "low": 0.0, "high": 0.03},
    "failures.software_bug.recovery_minutes": {"dist": "lognormal", "median": 10, "p95": 40},
    "checkpoint.storage_gbps": {"dist": "loguniform", "low": 500, "high": 4000},
}


def _time(scenario) -> float:
    start = time.perf_counter()
    mcsim.simulate(scenario, progress=False)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--draws", type=int, default=256)
    parser.add_argument("--runs", type=int, default=200, help="runs per draw")
    parser.add_argument("--repeat", type=int, default=1, help="timings per case (the fastest is kept)")
    args = parser.parse_args()
    total = args.draws * args.runs
    plain = load_scenario(None, runs=total)
    raw = dict(plain.raw, uncertain=UNCERTAIN)
    raw["run"] = dict(raw["run"], runs=args.runs, draws=args.draws)
    uncertain = scenario_from_dict(raw, plain.source)
    start = time.perf_counter()
    mcsim.simulate(load_scenario(None, runs=8), progress=False)
    warm_s = time.perf_counter() - start
    plain_s = min(_time(plain) for _ in range(args.repeat))
    uncertain_s = min(_time(uncertain) for _ in range(args.repeat))
    result = {
        "threads": numba.get_num_threads(),
        "warmup_seconds": warm_s,
        "plain_runs": total,
        "plain_seconds": plain_s,
        "draws": args.draws,
        "runs_per_draw": args.runs,
        "uncertain_seconds": uncertain_s,
        "ratio": uncertain_s / plain_s,
    }
    print(
        f"plain: {total} runs in {plain_s:.2f} s; uncertain: {args.draws} draws x {args.runs} runs in "
        f"{uncertain_s:.2f} s; ratio {uncertain_s / plain_s:.2f} (required <= 2)"
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
