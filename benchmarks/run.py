"""mcsim's speed suite: ``.venv/bin/python benchmarks/run.py [--quick] [-o FILE.json]``.

Every case runs once on 2 runs first (``warmup_seconds``: compiling the kernels,
or loading them from Numba's cache when an earlier process compiled them), then
is timed; the warm-up is never mixed into the steady-state figures, and the
true compile time is the ``cold start`` case. Ratios are measured in this one
process against baselines doing the same work:

* ``fast`` / ``exact``: mcsim on the Llama 3 405B reference and on a 1,024-GPU cluster;
* ``floor``: a minimal Numba loop that only draws what exact mode needs (one
  uniform -> the max-of-G factor per iteration, with mcsim's quantile: relative
  error below 1e-9 as the issue asks, AS 241 in fact), the upper bound for exact mode
  (``benchmarks/bench_kernel.py`` sets the two against each other, alternating);
* ``fast floor``: a minimal Numba loop that only draws what fast mode's failures need (the
  same per-unit Weibull renewal processes and generator, ``mcsim.kernels.renewal``), as many
  failures per run as mcsim's fast case had: the upper bound for fast mode, whose cost
  follows the failures;
* ``numpy`` / ``simpy``: what a user writes without mcsim (``benchmarks/baselines.py``),
  run at a reduced size and compared per simulated run and per iteration-rank;
* ``cold start`` and ``start-up``: a first ``mcsim run`` in a fresh process with an empty Numba
  cache, then with the cache warm, ``import mcsim`` and ``mcsim --help``, as CPU seconds and as ratios
  against ``import xarray`` and ``import xarray, numba``, and the compile time of each kernel entry
  point (``benchmarks/bench_startup.py``, which also sets them against an older commit);
* ``scaling``: fast-mode time versus runs, GPUs and iterations.

It prints one line per case to stderr as the case starts and ends (with its
wall time, warm-up included), then a table, and writes the results as JSON
(default ``benchmarks/results/latest.json``, untracked). ``--quick`` shrinks
every case (the test suite's smoke run, ``pytest -m slow``); the total wall
time is printed at the end.

``--markdown`` also prints the README's speed table of these results, ``--readme README.md``
writes it into the README between its ``speed-table`` marks, and ``--from FILE.json``
renders a saved run instead of running the suite::

    .venv/bin/python benchmarks/run.py --markdown --readme README.md
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import importlib.util
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import numba
import numpy as np

import mcsim
from mcsim.engine.simulate import simulate_config
from mcsim.kernels import interface as mc
from mcsim.kernels.normal import max_lognormal_factor
from mcsim.kernels.renewal import consume_failure, init_failures, next_failure
from mcsim.kernels.rng import seed_stream, uniform
from mcsim.model.checkpointing import checkpoint_plan, failure_classes
from mcsim.model.workload import workload
from mcsim.scenario.config import dumps_toml, load_scenario, scenario_from_dict

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_startup  # noqa: E402  (a script beside this one)

HERE = Path(__file__).resolve().parent
REFERENCE = mcsim.reference_scenario_path()
# The reference's model on 1,024 GPUs: with dp = 8 the selective-recompute activations no
# longer fit next to the larger optimizer shards, so full recomputation.
SMALL_CLUSTER = ["parallelism.gpus=1024", "model.recompute=full"]


# Not cached (a script's module name varies with how it is run); compiled in the warm-up.
@numba.njit(parallel=True, nogil=True, fastmath=False, error_model="numpy")
def floor_kernel(iterations, n_ranks, sigma, seed, out):
    """Only the numbers exact mode draws: one uniform -> max-of-G factor per iteration.

    The factor uses mcsim's sampler (``mcsim.kernels.normal``, quantile relative error
    below 1e-9: the floor the issue states).
    """
    for r in numba.prange(out.shape[0]):
        state = np.empty(4, np.uint64)
        seed_stream(state, seed, r, 0)
        total = 0.0
        for _ in range(iterations):
            total += max_lognormal_factor(uniform(state), n_ranks, sigma)
        out[r] = total


@numba.njit(parallel=True, nogil=True, fastmath=False, error_model="numpy")
def fast_floor_kernel(fc, failures, seed, out):
    """Only the numbers fast mode's failures draw: ``failures`` events of the failure classes ``fc`` per
    run (next failure, the replacement's life), on mcsim's renewal code and streams; ``out`` gets each
    run's last failure time. Runs in parallel over the Numba threads, as mcsim's case and the floor."""
    n = fc.units.shape[0]
    for r in numba.prange(out.shape[0]):
        streams = np.empty((n, 4), np.uint64)
        pools = np.empty((3, n))
        heap_time = np.empty(failures + 1)
        heap_class = np.empty(failures + 1, np.int64)
        for c in range(n):
            seed_stream(streams[c], seed, r, 3 + c)
        init_failures(fc.units, fc.shape, fc.scale_s, fc.start, fc.age_s, streams, pools[0], pools[1], pools[2])
        size = 0
        t = 0.0
        for _ in range(failures):
            t, source = next_failure(pools[2], heap_time, size)
            c, size = consume_failure(
                source, t, pools[0], pools[1], pools[2], heap_time, heap_class, size,
                fc.shape, fc.scale_s, fc.start, fc.age_s, streams, 0.0, 1.0,
            )  # fmt: skip
        out[r] = t


@contextlib.contextmanager
def _progress(name: str):
    """One line to stderr as case ``name`` starts, one as it ends with its wall time."""
    print(f"[run.py] {name}: started", file=sys.stderr, flush=True)
    start = time.perf_counter()
    yield
    print(f"[run.py] {name}: done in {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)


def _timed(fn, *args, **kwargs):
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return time.perf_counter() - start, result


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _feasible(cfg):
    wl = workload(cfg)
    if not wl.feasible:
        raise RuntimeError(f"benchmark configuration is infeasible: {wl.infeasible_reason}")
    return cfg


def _mcsim_case(name: str, overrides: list[str], runs: int, mode: str) -> dict:
    cfg = _feasible(load_scenario(REFERENCE, overrides).base)
    with _progress(name):
        compile_s, _ = _timed(simulate_config, cfg, 2, 0, mode)
        elapsed, (out, wl, _) = _timed(simulate_config, cfg, runs, 0, mode)
    gpu_hours = float(out[:, mc.OUT_WALL_S].sum() / 3600.0 * cfg.parallelism.gpus)
    failures = float(out[:, mc.OUT_FAILURES].mean())
    iterations = float(out[:, mc.OUT_ITERATIONS_DONE].sum() + out[:, mc.OUT_LOST_S].sum() / wl.iteration_time_s)
    return dict(
        case=name,
        mode=mode,
        gpus=cfg.parallelism.gpus,
        runs=runs,
        seconds=elapsed,
        warmup_seconds=compile_s,
        runs_per_s=runs / elapsed,
        gpu_hours_per_cpu_s=gpu_hours / (elapsed * numba.get_num_threads()),
        iterations_per_s=iterations / elapsed,
        failures_per_run=failures,
        peak_rss_mb=_peak_rss_mb(),
    )


def _fast_floor_case(name: str, overrides: list[str], runs: int, failures: float) -> dict:
    """The fast floor with the failure classes of ``overrides``' configuration, ``failures`` per run."""
    cfg = _feasible(load_scenario(REFERENCE, overrides).base)
    classes = failure_classes(cfg)
    count = max(1, round(failures))
    out = np.empty(runs)
    with _progress(name):
        warmup_s, _ = _timed(fast_floor_kernel, classes, 2, 0, out[:2])
        elapsed, _ = _timed(fast_floor_kernel, classes, count, 0, out)
    return dict(
        case=name,
        gpus=cfg.parallelism.gpus,
        runs=runs,
        seconds=elapsed,
        warmup_seconds=warmup_s,
        runs_per_s=runs / elapsed,
        failures_per_run=float(count),
        peak_rss_mb=_peak_rss_mb(),
    )


def _floor_case(overrides: list[str], runs: int, iterations: int) -> dict:
    cfg = load_scenario(REFERENCE, overrides).base
    out = np.empty(runs)
    with _progress("floor"):
        warmup_s, _ = _timed(floor_kernel, 10, float(cfg.parallelism.gpus), cfg.stragglers.sigma, 0, out[:2])
        elapsed, _ = _timed(floor_kernel, iterations, float(cfg.parallelism.gpus), cfg.stragglers.sigma, 0, out)
    return dict(
        case="floor",
        gpus=cfg.parallelism.gpus,
        runs=runs,
        seconds=elapsed,
        warmup_seconds=warmup_s,
        iterations_per_s=runs * iterations / elapsed,
        peak_rss_mb=_peak_rss_mb(),
    )


def _load_baselines():
    spec = importlib.util.spec_from_file_location("mcsim_baselines", HERE / "baselines.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _baseline_params(cfg, iterations: int) -> dict:
    wl = workload(cfg)
    plan = checkpoint_plan(cfg, wl)
    classes = plan.classes
    rate = 1.0 / plan.system_mtbf_s
    return dict(
        I=iterations,
        c=wl.compute_time_s,
        m=wl.comm_time_s,
        G=cfg.parallelism.gpus,
        sigma=cfg.stragglers.sigma,
        K=plan.every_iterations,
        C=plan.stall_s,
        L=plan.load_s,
        U=1,
        mtbf_s=1.0 / rate,
        R=float(classes.recovery_s[0]),
        max_wall_s=cfg.run.max_wall_days * 86400.0,
    )


def _baseline_cases(quick: bool) -> list[dict]:
    """NumPy and SimPy baselines against mcsim on the same (reduced) work.

    The reference's shape (16,384 GPUs, its iteration and failure rate) cut to
    ``iterations`` iterations, with the semantics the baselines implement: sync
    checkpoints at Daly's interval and one exponential failure class with the
    reference's system MTBF.
    """
    baselines = _load_baselines()
    # Sync checkpoints, one exponential class with the reference's system MTBF: the
    # semantics the baselines implement (benchmarks/baselines.py).
    iterations = 2_000 if quick else 20_000
    reference = load_scenario(REFERENCE)
    mtbf_h = 1.0 / sum(
        u / f.mtbf_hours for u, f in zip(failure_classes(reference.base).units, reference.base.failures, strict=False)
    )
    raw = copy.deepcopy(reference.raw)
    raw["model"]["tokens"] = iterations * 2048 * 8192
    raw["checkpoint"]["strategy"] = "sync"
    raw["failures"] = [{"name": "all", "scope": "cluster", "mtbf_hours": mtbf_h, "recovery_minutes": 10.0}]
    cfg = _feasible(scenario_from_dict(raw).base)
    params = _baseline_params(cfg, iterations)
    rows = []
    mcsim_runs = 200 if quick else 1000
    for mode in ("exact", "fast"):
        name = f"mcsim {mode} (baseline work)"
        with _progress(name):
            warmup_s, _ = _timed(simulate_config, cfg, 2, 0, mode)
            elapsed, _ = _timed(simulate_config, cfg, mcsim_runs, 0, mode)
        rows.append(
            dict(
                case=name,
                runs=mcsim_runs,
                seconds=elapsed,
                warmup_seconds=warmup_s,
                seconds_per_run=elapsed / mcsim_runs,
                gpus=params["G"],
                iterations=iterations,
            )
        )
    for name, runs in (("numpy", 2 if quick else 4), ("simpy", 20 if quick else 100)):
        fn = baselines.BASELINES[name]
        with _progress(f"{name} baseline"):
            warmup_s, _ = _timed(fn, params | {"I": 20}, 1, 0)  # warm up imports and quadrature
            elapsed, _ = _timed(fn, params, runs, 0)
        rows.append(
            dict(
                case=f"{name} baseline",
                runs=runs,
                seconds=elapsed,
                warmup_seconds=warmup_s,
                seconds_per_run=elapsed / runs,
                gpus=params["G"],
                iterations=iterations,
                ns_per_iteration_rank=elapsed / (runs * iterations * params["G"]) * 1e9,
            )
        )
    return rows


def _cold_start(quick: bool) -> list[dict]:
    """The start-up figures of ``bench_startup.py`` (this tree only): a first ``mcsim run`` with an empty Numba
    cache and the same run warm, as CPU seconds of the process, the imports, the ratios the issue states, and
    the compile time of each kernel entry point (not with ``quick``: a second cold process, a minute of CPU)."""
    with _progress("start-up: cold and warm run, imports, compile per entry point"):
        startup = bench_startup.measure(
            {"this tree": bench_startup.REPOSITORY}, 100 if quick else 1000, 1 if quick else 3, not quick
        )
    tree = startup["trees"]["this tree"]
    return [
        dict(case="cold start (empty Numba cache)", seconds=tree["cold"], cpu_s=tree["cold"]),
        dict(case="warm cache", seconds=tree["warm"], cpu_s=tree["warm"]),
        dict(
            case="start-up",
            runs=startup["runs"],
            references=startup["references"],
            **{key: tree[key] for key in ("import mcsim", "mcsim --help", "warm", "cold", "compile")},
            ratios=bench_startup.ratios(tree, startup["references"]),
        ),
    ]


def _sweeps(quick: bool) -> list[dict]:
    """The capacity sweep end to end against the kernel's own CPU, and its peak memory,
    each in a process of its own (``bench_sweep.py``: one thread; peak memory is a process's high-water mark).

    Three processes per sweep (one with ``--quick``), the one of median end-to-end ratio reported: the
    system CPU of placing 135 MB in memory and 73 MB in the page cache varies between processes by
    0.04-0.12 s (measured while the sweep's overhead was cut), a twentieth of the kernel's time."""
    rows = []
    variants = [("480", [])] if quick else [("480", []), ("960", ["--prices", "0.08", "0.12"])]
    for label, extra in variants:
        cmd = [sys.executable, str(HERE / "bench_sweep.py"), "--runs", "100" if quick else "1000", "--json", *extra]
        runs = []
        with _progress(f"sweep of {label} configurations"):
            for _ in range(1 if quick else 3):
                # Other cases' files (the cold start's compiled kernels) flushed first: the sweep's
                # fsync would otherwise write them too (ext4 commits a journal's data together).
                os.sync()
                elapsed, proc = _timed(subprocess.run, cmd, capture_output=True, text=True)
                if proc.returncode:
                    raise RuntimeError(proc.stderr)
                runs.append(dict(case=f"sweep {label}", seconds=elapsed, **json.loads(proc.stdout.splitlines()[-1])))
        runs.sort(key=lambda row: row["end_to_end_over_kernel"])
        rows.append(dict(runs[len(runs) // 2], processes=[row["end_to_end_over_kernel"] for row in runs]))
    return rows


def _median_wall_s(cmd: list[str], cwd: str) -> float:
    elapsed, proc = _timed(subprocess.run, cmd, cwd=cwd, capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(proc.stderr)
    return elapsed


def _plan_start(quick: bool) -> list[dict]:
    """A plan's start-up: a warm ``mcsim plan`` of a shipped plan against a warm ``mcsim run`` of the scenario it
    recommends (``mcsim report``'s ``recommended.toml``), alternating, median wall time of each."""
    plan_file = HERE.parent / "scenarios" / "plan-llama3-70b.toml"
    mcsim_cmd = [sys.executable, "-m", "mcsim.cli.main"]
    repeats = 1 if quick else 5
    with tempfile.TemporaryDirectory() as out, _progress("warm plan and run of its recommendation"):
        plan_cmd = [*mcsim_cmd, "plan", str(plan_file), "--quiet", "--no-resume", "-o", "plan.nc"]
        _median_wall_s(plan_cmd, out)  # compiled kernels and bytecode: warm from here on
        _median_wall_s([*mcsim_cmd, "report", "plan.nc", "-o", "report"], out)
        # The recommendation as a scenario, without the parameter draws the report adds for its
        # uncertain inputs: the plan's own simulations have none, so its run is 1,000 runs of one
        # configuration.
        raw = tomllib.loads((Path(out) / "report" / "recommended.toml").read_text())
        raw.pop("uncertain", None)
        raw["run"].pop("draws", None)
        (Path(out) / "recommended.toml").write_text(dumps_toml(raw))
        run_cmd = [*mcsim_cmd, "run", str(Path(out) / "recommended.toml"), "--quiet", "--no-resume"]
        _median_wall_s([*run_cmd, "-o", "run.nc"], out)
        plans, runs = [], []
        for _ in range(repeats):
            plans.append(_median_wall_s(plan_cmd, out))
            runs.append(_median_wall_s([*run_cmd, "-o", "run.nc"], out))
    return [
        dict(
            case="warm plan and run",
            plan_seconds=float(np.median(plans)),
            run_seconds=float(np.median(runs)),
            repeats=repeats,
        )
    ]


def _scaling(quick: bool) -> list[dict]:
    rows = []
    for runs in (100, 1000) if quick else (100, 1000, 10_000):
        rows.append(_mcsim_case(f"scaling: runs={runs}", [], runs, "fast"))
    for gpus in (1024, 16384) if quick else (128, 1024, 16384, 131072):
        rows.append(
            _mcsim_case(f"scaling: gpus={gpus}", [f"parallelism.gpus={gpus}", "model.recompute=full"], 200, "fast")
        )
    # Iterations x10 with the same number of checkpoints and no failures: fast mode's cost
    # follows events (blocks), exact mode's follows iterations.
    failure_free = [f"failures.{f.name}.mtbf_hours=1e9" for f in load_scenario(REFERENCE).base.failures]
    for factor in (0.01, 0.1) if quick else (0.01, 0.1, 1.0):
        tokens = 15.6e12 * factor
        every = max(1, round(tokens / (2048 * 8192) / 100))
        overrides = failure_free + [f"model.tokens={tokens}", f"checkpoint.interval={{ iterations = {every} }}"]
        for mode in ("fast", "exact"):
            runs = 20 if mode == "exact" else 200
            rows.append(_mcsim_case(f"scaling: iterations x{factor} ({mode})", overrides, runs, mode))
    return rows


def run_suite(quick: bool) -> dict:
    """All cases; returns the JSON-able results with ratios."""
    ref_runs, exact_runs = (200, 10) if quick else (1000, 100)
    cases = [
        _mcsim_case("llama3-405b fast", [], ref_runs, "fast"),
        _mcsim_case("llama3-405b exact", [], exact_runs, "exact"),
        _mcsim_case("1024 GPUs fast", SMALL_CLUSTER, ref_runs, "fast"),
        _mcsim_case("1024 GPUs exact", SMALL_CLUSTER, exact_runs, "exact"),
    ]
    floor_iterations = 100_000 if quick else 929_833  # the reference's iterations
    cases.append(_floor_case([], max(2, exact_runs), floor_iterations))
    cases.append(_fast_floor_case("fast floor", [], ref_runs, cases[0]["failures_per_run"]))
    cases.append(_fast_floor_case("1024 GPUs fast floor", SMALL_CLUSTER, ref_runs, cases[2]["failures_per_run"]))
    cases += _baseline_cases(quick)
    cases += _cold_start(quick)
    cases += _sweeps(quick)
    cases += _plan_start(quick)
    cases += _scaling(quick)
    by = {c["case"]: c for c in cases}
    ratios = {
        "exact / floor, iterations per second (target >= 0.7)": by["llama3-405b exact"]["iterations_per_s"]
        / by["floor"]["iterations_per_s"],
        "fast / its floor on the reference, runs per second": by["llama3-405b fast"]["runs_per_s"]
        / by["fast floor"]["runs_per_s"],
        "fast / its floor on 1,024 GPUs, runs per second": by["1024 GPUs fast"]["runs_per_s"]
        / by["1024 GPUs fast floor"]["runs_per_s"],
        "fast / exact on the reference, runs per second": by["llama3-405b fast"]["runs_per_s"]
        / by["llama3-405b exact"]["runs_per_s"],
        "simpy / mcsim fast, time per simulated run (target >= 1000)": by["simpy baseline"]["seconds_per_run"]
        / by["mcsim fast (baseline work)"]["seconds_per_run"],
        "numpy / mcsim fast, time per simulated run (target >= 10000)": by["numpy baseline"]["seconds_per_run"]
        / by["mcsim fast (baseline work)"]["seconds_per_run"],
        "numpy / mcsim exact, time per simulated run": by["numpy baseline"]["seconds_per_run"]
        / by["mcsim exact (baseline work)"]["seconds_per_run"],
        "sweep end to end / kernel CPU, 480 configurations (target <= 1.2)": by["sweep 480"]["end_to_end_over_kernel"],
        "sweep peak memory / dataset (target <= 1.5)": by["sweep 480"]["peak_over_dataset"],
        "warm plan / warm run of its recommendation, median wall (target <= 1.5)": by["warm plan and run"][
            "plan_seconds"
        ]
        / by["warm plan and run"]["run_seconds"],
    }
    if "sweep 960" in by:
        ratios["sweep end to end / kernel CPU, 960 configurations (target <= 1.2)"] = by["sweep 960"][
            "end_to_end_over_kernel"
        ]
    return dict(
        machine=dict(
            platform=platform.platform(),
            processor=platform.processor() or platform.machine(),
            cpus=os.cpu_count(),
            numba_threads=numba.get_num_threads(),
            python=platform.python_version(),
            numba=numba.__version__,
            mcsim=mcsim.__version__,
        ),
        quick=quick,
        cases=cases,
        ratios=ratios,
    )


def _table(results: dict) -> str:
    keys = (
        "seconds",
        "warmup_seconds",
        "runs_per_s",
        "iterations_per_s",
        "gpu_hours_per_cpu_s",
        "seconds_per_run",
        "ns_per_iteration_rank",
        "peak_rss_mb",
    )
    header = ["case", "runs"] + list(keys)
    rows = [
        [c["case"], str(c.get("runs", ""))] + [f"{c[k]:.4g}" if k in c else "" for k in keys] for c in results["cases"]
    ]
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=False)).rstrip() for r in [header] + rows]
    lines.append("")
    lines += [f"{name}: {value:,.3g}" for name, value in results["ratios"].items()]
    lines += _startup_lines(_cases(results).get("start-up"))
    m = results["machine"]
    lines.append(
        f"machine: {m['processor']}, {m['cpus']} CPUs, {m['numba_threads']} Numba threads, "
        f"Python {m['python']}, numba {m['numba']}, mcsim {m['mcsim']}"
    )
    return "\n".join(lines)


# The README's "Speed" table of this suite sits between these two lines; ``--readme`` replaces it.
README_START = "<!-- speed-table: generated by benchmarks/run.py --markdown; do not edit by hand -->"
README_END = "<!-- /speed-table -->"


def _cases(results: dict) -> dict[str, dict]:
    return {c["case"]: c for c in results["cases"]}


def markdown_table(results: dict) -> str:
    """The suite's results as the README's Markdown table: one row per comparison, with its figures."""
    by = _cases(results)
    ratios = results["ratios"]
    command = "`benchmarks/run.py`" + (" `--quick`" if results.get("quick") else "")

    def rate(case: str, key: str, unit: str) -> str:
        c = by[case]
        return f"{c[key]:,.0f} {unit} ({c['runs']:,} runs of {c['gpus']:,} GPUs)"

    def ratio(prefix: str) -> float:
        (value,) = [v for k, v in ratios.items() if k.startswith(prefix)]
        return value

    numpy, simpy, fast = by["numpy baseline"], by["simpy baseline"], by["mcsim fast (baseline work)"]
    rows = [
        (
            "reference (16,384 GPUs), fast mode",
            rate("llama3-405b fast", "runs_per_s", "runs/s")
            + f"; **{ratio('fast / its floor on the reference'):.2f} of its floor** (a loop drawing only the "
            f"failures, {by['fast floor']['failures_per_run']:.0f} a run)",
        ),
        (
            "reference, exact mode",
            rate("llama3-405b exact", "iterations_per_s", "iterations/s")
            + f"; **{ratio('exact / floor'):.2f} of the floor** (a loop drawing only the max-of-G factors)",
        ),
        ("reference, fast / exact", f"**{ratio('fast / exact'):,.0f}×** the runs per second"),
        (
            "1,024 GPUs (full recomputation), fast mode",
            rate("1024 GPUs fast", "runs_per_s", "runs/s") + f"; {ratio('fast / its floor on 1,024'):.2f} of its floor",
        ),
        (
            "NumPy baseline (per iteration, all ranks drawn) / mcsim fast, per run",
            f"**{ratio('numpy / mcsim fast'):,.0f}×** ({numpy['seconds_per_run']:.3g} s against "
            f"{fast['seconds_per_run']:.3g} s per run of {numpy['iterations']:,} iterations)",
        ),
        (
            "SimPy baseline (event level, blocks aggregated) / mcsim fast, per run",
            f"**{ratio('simpy / mcsim fast'):,.0f}×** ({simpy['seconds_per_run']:.3g} s against "
            f"{fast['seconds_per_run']:.3g} s per run)",
        ),
        (
            "first `mcsim run`, empty Numba cache / cache warm",
            f"{by['cold start (empty Numba cache)']['seconds']:.1f} s / {by['warm cache']['seconds']:.1f} s "
            + ("CPU" if "cpu_s" in by["warm cache"] else "wall"),
        ),
    ]
    if "start-up" in by:  # results saved before this case had none
        rows += _startup_rows(by["start-up"])
    if "sweep 480" in by:  # results saved before these cases had none
        rows += _sweep_rows(by, ratios)
    return _markdown(results, command, rows)


def _startup_lines(startup: dict | None) -> list[str]:
    """The start-up case as text lines: CPU seconds, the ratios, each kernel entry point's compile time."""
    if startup is None:
        return []
    lines = [
        f"start-up, CPU seconds: import mcsim {startup['import mcsim']:.2f}, "
        f"mcsim --help {startup['mcsim --help']:.2f}, "
        f"cold run {startup['cold']:.1f}, warm run of {startup['runs']:,} runs {startup['warm']:.2f} "
        f"(import xarray {startup['references']['import xarray']:.2f}, "
        f"import xarray, numba {startup['references']['import xarray, numba']:.2f}, "
        f"stack floor {startup['references']['stack floor']:.2f})"
    ]
    lines += [f"start-up: {name} = {value:.2f}" for name, value in startup["ratios"].items()]
    for row in startup["compile"]:
        if row["function"] in bench_startup.ENTRY_POINTS:
            lines.append(f"compile {row['function']}: {row['cpu_s']:.1f} s CPU ({row['signature'][:80]}...)")
    return lines


def _startup_rows(startup: dict) -> list[tuple[str, str]]:
    """The README's rows of the start-up case: the imports and the warm process as ratios, the compile time."""
    ratios, ref = startup["ratios"], startup["references"]
    compiled = [row for row in startup["compile"] if row["function"] in bench_startup.ENTRY_POINTS]
    return [
        (
            "`import mcsim` / `mcsim --help`, CPU",
            f"{startup['import mcsim']:.2f} s / {startup['mcsim --help']:.2f} s: "
            f"**{ratios['import mcsim / import xarray']:.2f}× / {ratios['mcsim --help / import xarray']:.2f}×** "
            f"`import xarray` ({ref['import xarray']:.2f} s)",
        ),
        (
            f"warm `mcsim run` ({startup['runs']:,} runs) as a process, CPU",
            f"{startup['warm']:.2f} s: **{ratios['warm run / import xarray, numba']:.2f}×** "
            f"`import xarray, numba` ({ref['import xarray, numba']:.2f} s); "
            f"**{ratios['warm run / stack floor']:.2f}×** the stack's floor ({ref['stack floor']:.2f} s: importing "
            f"xarray and Numba, one cached kernel call, a 61-variable file written; "
            f"{ratios['stack floor / import xarray, numba']:.2f}× `import xarray, numba`)",
        ),
        (
            "compiling, per kernel entry point (empty cache), CPU",
            "; ".join(f"`{row['function']}` {row['cpu_s']:.1f} s" for row in compiled),
        ),
    ]


def _processes(sweep: dict) -> str:
    """ "median of 1.18, 1.19, 1.23; " for a sweep measured in several processes (else nothing)."""
    ratios = sweep.get("processes", [])
    return f"median of {', '.join(f'{r:.2f}' for r in ratios)}; " if len(ratios) > 1 else ""


def _sweep_rows(by: dict[str, dict], ratios: dict[str, float]) -> list[tuple[str, str]]:
    sweep = by["sweep 480"]
    rows = [
        (
            f"capacity sweep, {sweep['configurations']} configurations × {sweep['runs']:,} runs, one thread",
            f"end to end (simulate and write) **{sweep['end_to_end_over_kernel']:.2f}× the kernel's own CPU** "
            f"(target 1.2×; {_processes(sweep)}kernel {sweep['kernel_cpu_s']:.2f} s, "
            f"simulate {sweep['simulate_cpu_s']:.2f} s, write "
            f"{sweep['write_cpu_s']:.2f} s); peak memory {sweep['peak_over_dataset']:.2f}× its "
            f"{sweep['dataset_mb']:.0f} MB dataset (target 1.5×)",
        )
    ]
    if "sweep 960" in by:
        wide = by["sweep 960"]
        rows.append(
            (
                f"the same, {wide['configurations']} configurations (two electricity prices: the kernel work of "
                "each as above)",
                f"**{wide['end_to_end_over_kernel']:.2f}×** the kernel's own CPU"
                f"{f' ({_processes(wide)[:-2]})' if _processes(wide) else ''}; peak memory "
                f"{wide['peak_over_dataset']:.2f}× its {wide['dataset_mb']:.0f} MB dataset",
            )
        )
    start = by["warm plan and run"]
    rows.append(
        (
            "warm `mcsim plan plan-llama3-70b` / warm `mcsim run` of its recommendation (1,000 runs)",
            f"**{start['plan_seconds'] / start['run_seconds']:.2f}×** (target 1.5×; {start['plan_seconds']:.2f} s / "
            f"{start['run_seconds']:.2f} s wall, medians of {start['repeats']}, alternating)",
        )
    )
    return rows


def _markdown(results: dict, command: str, rows: list[tuple[str, str]]) -> str:
    m = results["machine"]
    lines = [
        f"Measured by {command} on {m['processor']}, {m['cpus']} CPUs, {m['numba_threads']} Numba "
        f"threads, Python {m['python']}, numba {m['numba']}, mcsim {m['mcsim']}"
        + (f", on {results['date']}" if results.get("date") else "")
        + ".",
        "",
        "| case | result | command |",
        "|---|---|---|",
    ]
    lines += [f"| {case} | {result} | {command} |" for case, result in rows]
    return "\n".join(lines)


def replace_readme_table(readme: Path, table: str) -> None:
    """Put ``table`` between ``README_START`` and ``README_END`` in ``readme``."""
    text = readme.read_text(encoding="utf-8")
    start, end = text.index(README_START) + len(README_START), text.index(README_END)
    readme.write_text(text[:start] + "\n" + table + "\n" + text[end:], encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (CI smoke run)")
    parser.add_argument("-o", "--output", default=str(HERE / "results" / "latest.json"))
    parser.add_argument("--markdown", action="store_true", help="print the README's Markdown table too")
    parser.add_argument(
        "--from", dest="source", metavar="JSON", help="render a saved run (the JSON of -o) instead of running"
    )
    parser.add_argument(
        "--readme", metavar="README.md", help="write the Markdown table into this file, between its speed-table marks"
    )
    args = parser.parse_args()
    if args.source:
        results = json.loads(Path(args.source).read_text())
    else:
        start = time.perf_counter()
        results = run_suite(args.quick)
        results["total_seconds"] = time.perf_counter() - start
        results["date"] = time.strftime("%Y-%m-%d")
        print(_table(results))
        print(f"total wall time: {results['total_seconds']:.0f} s")
        output = Path(args.output)
        output.parent.mkdir(parents=True, exist_ok=True)
        tmp = output.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(results, indent=2))
        os.replace(tmp, output)
        print(f"wrote {output}")
    if args.markdown or args.readme:
        table = markdown_table(results)
        if args.markdown:
            print(table)
        if args.readme:
            replace_readme_table(Path(args.readme), table)
            print(f"wrote the speed table into {args.readme}")


if __name__ == "__main__":
    main()
