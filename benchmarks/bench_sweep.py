"""A sweep end to end against the kernel's own CPU time, and its peak memory.

``.venv/bin/python benchmarks/bench_sweep.py [--runs N] [--prices P ...] [--efficiencies E ...] [-o FILE.nc]``

The capacity-planning scenario swept over 15 checkpoint intervals and the four strategies (480
configurations; ``--prices 0.08 0.12`` sweeps the electricity price too: 960, the target's "1,000",
each configuration's kernel work unchanged; ``--efficiencies 0.54 0.64`` sweeps
``compute.efficiency`` instead, whose lower value makes each run's kernel work about twice as
large), ``--runs`` runs each (default 1,000), simulated with one Numba thread and written to a
netCDF file. Printed: the kernel's own CPU time (the thread time of every kernel call), the CPU
time of ``simulate`` and of the write, their sum over the kernel's, the dataset's size, and the
process's peak resident memory above what it was before the sweep (its baseline: the kernels
loaded by a two-run warm-up) as a multiple of the dataset. To compare two versions, run it in a
checkout of each, back to back (as ``bench_rates.py`` says).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from pathlib import Path

import numba

import mcsim
import mcsim.model.preparation as prepare
from mcsim.io.netcdf import write_results
from mcsim.scenario.config import load_scenario

MINUTES = [5, 7, 10, 14, 20, 28, 40, 56, 80, 113, 160, 226, 320, 452, 640]
STRATEGIES = ["sync", "async", "gockpt", "in_memory"]


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3


def _count_kernel_time(kernel_s: list[float]) -> None:
    """Wrap the row simulators so that every kernel call adds its thread time to ``kernel_s[0]``."""
    for cls in (prepare.KernelInputs, prepare.TableInputs):
        original = cls.simulate_rows

        def timed(self, seed, start, stop, out, _original=original):
            began = time.thread_time()
            _original(self, seed, start, stop, out)
            kernel_s[0] += time.thread_time() - began

        cls.simulate_rows = timed  # type: ignore[method-assign]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("-o", "--output", type=Path, default=None, help="result file (default: a temporary one)")
    parser.add_argument(
        "--efficiencies",
        type=float,
        nargs="+",
        default=None,
        help="also sweep compute.efficiency over these values (two: 960 configurations, the issue's ~1,000)",
    )
    parser.add_argument(
        "--prices",
        type=float,
        nargs="+",
        default=None,
        help="also sweep cost.electricity_usd_per_kwh over these values (two: 960 configurations whose kernel "
        "work is that of the 480)",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line (benchmarks/run.py)")
    args = parser.parse_args()
    numba.set_num_threads(1)
    kernel_s = [0.0]
    _count_kernel_time(kernel_s)
    mcsim.simulate(load_scenario("capacity-planning", runs=2, seed=0), progress=False)  # kernels loaded
    kernel_s[0] = 0.0
    overrides = [
        ("checkpoint.interval", [{"minutes": m} for m in MINUTES]),
        ("checkpoint.strategy", STRATEGIES),
    ]
    if args.efficiencies:
        overrides.append(("compute.efficiency", args.efficiencies))
    if args.prices:
        overrides.append(("cost.electricity_usd_per_kwh", args.prices))
    scenario = load_scenario("capacity-planning", runs=args.runs, seed=0, overrides=overrides)
    baseline = _peak_mb()
    with tempfile.TemporaryDirectory() as folder:
        path = args.output or Path(folder) / "sweep.nc"
        if path.exists():
            os.remove(path)
        began = time.process_time()
        ds = mcsim.simulate(scenario, progress=False)
        simulated = time.process_time()
        write_results(ds, path)
        written = time.process_time()
    total = written - began
    dataset_mb = ds.nbytes / 1e6
    above = _peak_mb() - baseline
    figures = dict(
        configurations=len(scenario.configs),
        runs=args.runs,
        kernel_cpu_s=kernel_s[0],
        simulate_cpu_s=simulated - began,
        write_cpu_s=written - simulated,
        end_to_end_over_kernel=total / kernel_s[0],
        dataset_mb=dataset_mb,
        peak_above_baseline_mb=above,
        peak_over_dataset=above / dataset_mb,
    )
    if args.json:
        print(json.dumps(figures))
        return
    print(
        f"{len(scenario.configs)} configurations x {args.runs} runs: kernel {kernel_s[0]:.2f} s, "
        f"simulate {simulated - began:.2f} s, write {written - simulated:.2f} s (CPU); "
        f"end to end / kernel {total / kernel_s[0]:.2f}"
    )
    print(f"dataset {dataset_mb:.0f} MB; peak memory {above:.0f} MB above the baseline ({above / dataset_mb:.2f}x)")


if __name__ == "__main__":
    main()
