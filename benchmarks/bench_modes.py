"""Fast versus exact mode on the reference scenario: runs per second, warm.

Compile time is measured separately (first call on a few runs), then each mode
runs ``--runs`` runs; the speed-up is the ratio of the two, measured in one
process. Usage: ``.venv/bin/python benchmarks/bench_modes.py [--runs N] [--exact-runs N] [--scenario FILE]``.
"""

from __future__ import annotations

import argparse
import time

import numba

from mcsim.engine.simulate import simulate_config
from mcsim.scenario.config import load_scenario


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=1000, help="runs in fast mode")
    parser.add_argument("--exact-runs", type=int, default=100, help="runs in exact mode (slow)")
    parser.add_argument("--scenario", default=None)
    args = parser.parse_args()
    cfg = load_scenario(args.scenario).base
    start = time.perf_counter()
    for mode in ("fast", "exact"):
        simulate_config(cfg, 2, 0, mode)
    print(f"compile/warm-up: {time.perf_counter() - start:.2f} s (threads: {numba.get_num_threads()})")
    rates = {}
    for mode, runs in (("fast", args.runs), ("exact", args.exact_runs)):
        start = time.perf_counter()
        simulate_config(cfg, runs, 0, mode)
        elapsed = time.perf_counter() - start
        rates[mode] = runs / elapsed
        print(f"{mode:5s}: {runs} runs in {elapsed:.3f} s = {rates[mode]:.1f} runs/s")
    print(f"fast / exact speed-up: {rates['fast'] / rates['exact']:.1f}x")


if __name__ == "__main__":
    main()
