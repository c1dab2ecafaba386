"""The run loop against its frozen version of before the event functions: ``python benchmarks/bench_kernel.py``.

Both kernels (``mcsim.kernels.montecarlo`` and the frozen copy
``benchmarks/baseline_kernel.py``) run the same configurations with the same
parameters in one process, each warmed up first (compile time excluded), so the
ratio holds on a shared machine. Cases (docs/model.md §4 "Execution modes"):

* ``reference 1,024 GPUs``: the Llama 3 405B reference on 1,024 GPUs (full
  recomputation), its default async checkpoints, Daly interval (3 iterations of
  101 s, below the fast block threshold: the old kernel walks every iteration);
* ``28 days, 30-min sync``: the same model and cluster with a 28-day ideal job,
  blocking checkpoints every 30 minutes and the reference's failure classes
  (about 60 failures per run);
* the reference (16,384 GPUs) for each strategy.

Exact mode is timed too: it must not have slowed down (ratio about 1), and it is
set against the floor of ``benchmarks/run.py`` (a loop that only draws one uniform and
the max-of-G factor per iteration, with the same quantile, relative error below 1e-9:
docs/model.md §4), iterations per CPU second, on the reference (target >= 0.7).

The machine is shared, so the ratio is taken on CPU time with one Numba thread
(best of three, the two kernels alternating); ``2 threads`` is the new kernel's
wall-clock rate with two threads, the figure the kernel's speed targets were stated in.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numba
import numpy as np

import mcsim
from mcsim.engine.threads import run_kernel
from mcsim.kernels import interface as mc
from mcsim.model.checkpointing import checkpoint_plan
from mcsim.model.preparation import KernelInputs, run_params
from mcsim.model.workload import workload
from mcsim.scenario.config import load_scenario

sys.path.insert(0, str(Path(__file__).resolve().parent))
import baseline_kernel  # noqa: E402

SMALL_CLUSTER = ["parallelism.gpus=1024", "model.recompute=full"]
REFERENCE_TOKENS_PER_ITERATION = 2048 * 8192  # the reference's global_batch * seq_len


def _params(overrides: list[str], mode: str):
    cfg = load_scenario(mcsim.reference_scenario_path(), overrides).base
    wl = workload(cfg)
    plan = checkpoint_plan(cfg, wl)
    return run_params(cfg, wl, plan, mode), plan.classes, wl


def _rate(kernel, params, classes, runs: int, threads: int = 1, clock=time.process_time) -> tuple[float, np.ndarray]:
    """Runs per second of ``clock`` (CPU time by default) with ``threads`` Numba threads.

    The new kernel is serial and split over threads by :func:`mcsim.engine.threads.run_kernel`;
    the old one is a ``prange`` kernel.
    """
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    phases = (mc.no_phases(),) if kernel is mc else ()  # the frozen kernel predates training phases
    kernel.simulate_runs(params, classes, *phases, 1, 0, np.empty((2, mc.N_OUT)))  # compile / warm up
    out = np.empty((runs, mc.N_OUT))
    start = clock()
    if kernel is mc:
        inputs = KernelInputs(params, None, SimpleNamespace(classes=classes))
        out = run_kernel(inputs, 1, 0, runs)
    else:
        kernel.simulate_runs(params, classes, *phases, 1, 0, out)
    return runs / (clock() - start), out


def _case(name: str, overrides: list[str], mode: str, runs_new: int, runs_old: int) -> dict:
    params, classes, wl = _params(overrides, mode)
    new = old = 0.0
    for _ in range(3):
        rate, out = _rate(mc, params, classes, runs_new)
        new = max(new, rate)
        old = max(old, _rate(baseline_kernel, params, classes, runs_old)[0])
    wall, _ = _rate(mc, params, classes, 2 * runs_new, threads=2, clock=time.perf_counter)
    row = dict(
        case=name,
        mode=mode,
        new_runs_per_cpu_s=new,
        old_runs_per_cpu_s=old,
        ratio=new / old,
        new_runs_per_s_2_threads=wall,
        failures_per_run=float(out[:, mc.OUT_FAILURES].mean()),
        checkpoints_per_run=float(out[:, mc.OUT_CHECKPOINTS].mean()),
    )
    print(
        f"{name:28s} {mode:5s} per CPU-s: new {new:9.1f} old {old:8.2f} ratio {new / old:6.1f}x | "
        f"2 threads: {wall:9.1f} runs/s | {row['failures_per_run']:.0f} failures, "
        f"{row['checkpoints_per_run']:.0f} checkpoints per run",
        flush=True,
    )
    return row


def _exact_vs_floor(runs: int) -> None:
    """Exact mode's executed iterations per CPU second against the floor's, alternating, best of 3."""
    from run import floor_kernel  # benchmarks/run.py

    params, classes, _ = _params([], "exact")
    inputs = KernelInputs(params, None, SimpleNamespace(classes=classes))
    numba.set_num_threads(1)
    floor_out = np.empty(runs)
    floor_kernel(10, params.n_ranks, params.sigma, 0, floor_out[:1])  # compile
    run_kernel(inputs, 1, 0, 1)
    exact = floor = 0.0
    for _ in range(3):
        start = time.process_time()
        out = run_kernel(inputs, 1, 0, runs)
        exact = max(exact, out[:, mc.OUT_EXECUTED_ITERATIONS].sum() / (time.process_time() - start))
        start = time.process_time()
        floor_kernel(params.iterations, params.n_ranks, params.sigma, 0, floor_out)
        floor = max(floor, runs * params.iterations / (time.process_time() - start))
    print(
        f"{'reference 16,384 exact':28s} exact per CPU-s {exact / 1e6:6.2f} M iterations, floor {floor / 1e6:6.2f} M: "
        f"ratio {exact / floor:.2f} (target >= 0.7)",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer runs")
    args = parser.parse_args()
    q = 0.1 if args.quick else 1.0
    iterations_28d = round(28 * 86400 / _params(SMALL_CLUSTER, "fast")[2].iteration_time_s)
    month = SMALL_CLUSTER + [
        f"model.tokens={iterations_28d * REFERENCE_TOKENS_PER_ITERATION}",
        "checkpoint.strategy=sync",
        "checkpoint.interval={ minutes = 30 }",
    ]
    _case("reference 1,024 GPUs", SMALL_CLUSTER, "fast", int(1000 * q), max(2, int(20 * q)))
    _case("28 days, 30-min sync, 1,024", month, "fast", int(40_000 * q), int(10_000 * q))
    for strategy in ("sync", "async", "gockpt", "in_memory"):
        _case(f"reference 16,384 {strategy}", [f"checkpoint.strategy={strategy}"], "fast", int(3000 * q), int(300 * q))
    _case("28 days, 30-min sync, 1,024", month, "exact", int(200 * q), int(200 * q))
    _case("reference 16,384 async", [], "exact", max(2, int(10 * q)), max(2, int(10 * q)))
    _exact_vs_floor(max(2, int(6 * q)))


if __name__ == "__main__":
    main()
