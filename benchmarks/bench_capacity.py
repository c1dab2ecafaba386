"""The capacity-planning sweep (64 configurations x 1,000 runs), local, warm.

Reports total time and configurations per second, compile time apart (a first
call on 2 runs of every configuration). Usage:
``.venv/bin/python benchmarks/bench_capacity.py [--runs N] [--workers N]``. Target (issue 5):
under 60 s on 2 cores at 1,000 runs per configuration.
"""

from __future__ import annotations

import argparse
import time

import numba

import mcsim


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=None, help="dask LocalCluster workers (default: local)")
    args = parser.parse_args()
    path = mcsim.reference_scenario_path().parent / "capacity-planning.toml"
    start = time.perf_counter()
    mcsim.simulate(mcsim.load_scenario(path, runs=2), progress=False)
    print(f"compile/warm-up: {time.perf_counter() - start:.2f} s (numba threads: {numba.get_num_threads()})")
    scenario = mcsim.load_scenario(path, runs=args.runs)
    start = time.perf_counter()
    ds = mcsim.simulate(scenario, progress=False, workers=args.workers)
    elapsed = time.perf_counter() - start
    n = len(scenario.configs)
    print(f"{n} configurations x {args.runs} runs in {elapsed:.2f} s: {n / elapsed:.2f} configurations/s, "
          f"{n * args.runs / elapsed:,.0f} runs/s ({'local' if args.workers is None else f'{args.workers} dask workers'})")
    print(f"simulated GPU-hours: {float((ds['wall_time'] * ds['gpus']).sum()):.3e}")


if __name__ == "__main__":
    main()
