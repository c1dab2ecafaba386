"""The ``mcsim`` command line.

``mcsim run [SCENARIO] [--runs N] [--seed S] [--mode fast|exact] [--set KEY=VALUE]... [-o OUT.nc]``
``mcsim summary OUT.nc [--all] [--sort VAR]``
``mcsim validate [--runs N]``
``mcsim sensitivity OUT.nc [--output VAR]`` (Sobol indices of the uncertain inputs of a run with draws)
``mcsim fit-failures LOG.csv [--name NAME] [--scope gpu|node|cluster] [--recovery-minutes M] [--confidence C] [--uncertain] [-o TABLE.toml] [--plot FIG.png]``
(fit a Weibull failure law to a log of unit lifetimes and print a ``[[failures]]`` table; see docs/fitting.md)
``mcsim plot OUT.nc --kind scaling|cdf|pareto|breakdown|sensitivity -o FIG.png [--x gpus] [--variable wall_time]``
(one figure of a result file; needs matplotlib: ``pip install 'mcsim[plot]'``)
``mcsim report OUT.nc [-o FOLDER]``
(the figures that apply and a Markdown README.md with the best configurations, in OUT-report/ by default;
for a plan file written by ``mcsim plan``, the explanation of its recommendation)
``mcsim plan PLAN.toml [-o PLAN.nc] [--quiet] [--workers N] [--scheduler ADDRESS] [--no-resume]``
(search every cluster configuration of a plan file, screen them analytically, select the best by simulation;
docs/model.md §9; exit 1 with one line when no candidate meets the constraints)

User mistakes (bad scenario, bad option value, unreadable file, an output
path that cannot or must not be written) print one line ``mcsim: error: ...``
naming the file and key, exit with status 2 and write no output file. A write
the machine refuses part-way (disk full, quota, ``ulimit -f``) prints one line
and exits with status 1, leaving no partial file.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import errno
import functools
import math
import os
import stat
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import xarray as xr

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse prints usage too)
        self.exit(EXIT_USAGE, f"mcsim: error: {message}\n")


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="mcsim", description="Monte Carlo reliability simulator for LLM training clusters")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    from .schema import RunSection
    from .tasks import DEFAULT_CHUNK_RUNS

    run_defaults = {f.name: f.default for f in dataclasses.fields(RunSection)}
    run = sub.add_parser(
        "run", help="simulate a scenario and write a netCDF result file",
        description="Simulate a scenario and write a netCDF result file. --runs, --seed and --mode "
                    "override the scenario's [run] table (runs, seed, mode), and --set overrides any "
                    "scenario key; where neither gives a value, the schema's default applies.")
    run.add_argument("scenario", nargs="?", help="scenario TOML (default: the shipped Llama 3 405B reference)")
    run.add_argument("--runs", type=int, metavar="N",
                     help="Monte Carlo runs per configuration; overrides [run] runs "
                          f"(default: the scenario's, else {run_defaults['runs']})")
    run.add_argument("--seed", type=int, metavar="S",
                     help=f"seed of the random streams; overrides [run] seed (default: the scenario's, "
                          f"else {run_defaults['seed']})")
    run.add_argument("--mode", choices=("fast", "exact"),
                     help=f"iteration sampling mode; overrides [run] mode (default: the scenario's, "
                          f"else {run_defaults['mode']})")
    run.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                     help="override a scenario value, e.g. parallelism.gpus=4096; a scalar on a swept key "
                          "removes that sweep axis, a [list] adds or replaces one (strings may go unquoted: "
                          "checkpoint.strategy=[sync, async]); repeatable (default: none)")
    run.add_argument("-o", "--output",
                     help="output file (default: results/NAME.nc, NAME the scenario's name made file-safe, "
                          "see docs/model.md §1)")
    run.add_argument("--quiet", action="store_true", help="no progress bar and no table (default: shown)")
    run.add_argument("--workers", type=int, metavar="N",
                     help="run on a local dask cluster of N worker processes, at most the CPUs available "
                          "(default: in this process)")
    run.add_argument("--scheduler", metavar="ADDRESS",
                     help="run on the dask scheduler at ADDRESS (tcp://host:port); it must answer within "
                          "MCSIM_SCHEDULER_TIMEOUT seconds, default 10 (default: none)")
    run.add_argument("--max-memory", metavar="SIZE", default=None,
                     help="refuse scenarios whose results need more memory than SIZE (e.g. 16G, inf; "
                          "default: half the available memory)")
    run.add_argument("--max-hours", type=float, default=None, metavar="H",
                     help="refuse runs estimated to take longer than H hours (default 24; inf: no limit)")
    run.add_argument("--chunk-runs", type=int, default=None, metavar="N",
                     help=f"runs per task (default {DEFAULT_CHUNK_RUNS}); results do not depend on it")
    run.add_argument("--no-resume", action="store_true",
                     help="do not record finished tasks beside the output, nor reuse recorded ones "
                          "(default: record and reuse)")
    validate = sub.add_parser("validate", help="compare the reference scenarios with published runs")
    validate.add_argument("--runs", type=int, default=1000, help="runs per reference scenario (default 1000)")
    validate.add_argument("--seed", type=int, default=0)
    summary = sub.add_parser("summary", help="print the summary table of a result file")
    summary.add_argument("file", help="netCDF file written by mcsim run")
    summary.add_argument("--all", dest="show_all", action="store_true",
                         help=f"show every configuration (default: the 5 best and 5 worst when more than "
                              f"{MAX_TABLE_ROWS})")
    summary.add_argument("--sort", metavar="VAR", default=None,
                         help="sort by the mean of this per-run variable, best first (default: grid order, "
                              "or by cost when rows are left out)")
    sens = sub.add_parser("sensitivity", help="rank the uncertain inputs of a result with parameter draws "
                                              "(Sobol indices)")
    sens.add_argument("file", help="netCDF file written by mcsim run with run.draws > 0")
    sens.add_argument("--output", default="cost", metavar="VAR",
                      help="per-run variable whose mean per draw is analysed (default cost)")
    fit = sub.add_parser("fit-failures", help="fit a Weibull failure law to a CSV log of unit lifetimes")
    fit.add_argument("log", metavar="LOG.csv",
                     help="CSV with columns unit,start_hours,end_hours,failed[,entry_hours] (see docs/fitting.md)")
    fit.add_argument("--name", help="failure class name (default: the log's file name)")
    fit.add_argument("--scope", choices=("gpu", "node", "cluster"), default="gpu",
                     help="what one unit is (default gpu)")
    fit.add_argument("--recovery-minutes", type=float, default=20.0, metavar="M",
                     help="recovery per failure [min] (default 20)")
    fit.add_argument("--confidence", type=float, default=0.95, metavar="C",
                     help="confidence level of the intervals (default 0.95)")
    fit.add_argument("--uncertain", action="store_true",
                     help="also write the [uncertain] entry of the class's MTBF and shape: their joint "
                          "uncertainty from the fit (a bivariate lognormal, dist = \"mvlognormal\")")
    fit.add_argument("-o", "--output", metavar="TABLE.toml", help="write the [[failures]] table to this TOML file")
    fit.add_argument("--plot", metavar="FIG.png",
                     help="write a Weibull probability plot (PNG; PDF or SVG by suffix; needs matplotlib)")
    plot = sub.add_parser("plot", help="draw one figure of a result file (needs matplotlib)")
    plot.add_argument("file", help="netCDF file written by mcsim run")
    plot.add_argument("--kind", required=True, choices=_PLOT_KINDS, help="which figure")
    plot.add_argument("-o", "--output", required=True, metavar="FIG.png",
                      help="image file to write, in the format its suffix names (png, pdf, svg, jpg, ...)")
    plot.add_argument("--x", default=None, metavar="DIM",
                      help="--kind scaling: sweep dimension on the x axis "
                           "(default gpus, or the only sweep dimension)")
    plot.add_argument("--variable", default=None, metavar="NAME",
                      help="--kind cdf: per-run variable whose distribution is drawn (default wall_time); "
                           "--kind sensitivity: per-run variable whose indices are drawn (default cost)")
    report = sub.add_parser("report",
                            help="write figures and a Markdown summary of a result file (needs matplotlib)")
    report.add_argument("file", help="netCDF file written by mcsim run")
    report.add_argument("-o", "--output", metavar="FOLDER",
                        help="folder to write (default: FILE without .nc + -report)")
    plan = sub.add_parser("plan", help="search cluster configurations: screen every candidate, select the best "
                                       "by simulation")
    plan.add_argument("plan", metavar="PLAN.toml", help="plan file: a scenario plus [search], [constraints], [plan]")
    plan.add_argument("-o", "--output", help="output file (default: results/NAME.nc, NAME the plan's name made "
                                             "file-safe)")
    plan.add_argument("--quiet", action="store_true", help="no progress and no table (default: shown)")
    plan.add_argument("--workers", type=int, metavar="N", help="run on a local dask cluster of N worker processes "
                                                              "(default: in this process)")
    plan.add_argument("--scheduler", metavar="ADDRESS", help="run on the dask scheduler at ADDRESS (default: none)")
    plan.add_argument("--no-resume", action="store_true",
                      help="do not record finished tasks beside the output, nor reuse recorded ones "
                           "(default: record and reuse)")
    return parser


_PLOT_KINDS = ("scaling", "cdf", "pareto", "breakdown", "sensitivity")


def _fmt(value: float, digits: int = 3) -> str:
    if not math.isfinite(value):
        return "nan"
    return f"{value:.{digits}g}" if abs(value) < 1e5 else f"{value:.3e}"


# column title, variable, scale from the stored unit
_COLUMNS = (
    ("wall time [d]", "wall_time", 1 / 24),
    ("energy [MWh]", "energy", 1.0),
    ("cost [MUSD]", "cost", 1e-6),
    ("CO2 [t]", "co2", 1.0),
    ("failures", "n_failures", 1.0),
    ("ETTR", "ettr", 1.0),
)


def _pm(mean: float, half: float, scale: float) -> str:
    """``mean ± half`` in 4 and 2 significant digits; a half-width at the float round-off of
    the mean (identical runs: 1e-12 of it or less) prints as 0."""
    mean, half = mean * scale, half * scale
    if math.isfinite(half) and math.isfinite(mean) and abs(half) <= 1e-12 * abs(mean):
        half = 0.0
    return f"{_fmt(mean, 4)} ± {_fmt(half, 2) if half else '0'}"


def _sort_direction(name: str) -> float:
    from .variables import VARIABLES

    return -1.0 if VARIABLES[name].direction == "higher" else 1.0


def summary_table(ds: xr.Dataset, show_all: bool = False, sort: str | None = None) -> str:
    """Mean and 95 % confidence interval per configuration, as aligned text.

    Parameters
    ----------
    ds : xarray.Dataset
        A result of :func:`mcsim.simulate` (checked by :func:`mcsim.summary.check_results`).
    show_all : bool
        Every configuration; otherwise, with more than ``MAX_TABLE_ROWS``, the 5 best and
        the 5 worst completed ones by ``sort`` (cost by default).
    sort : str, optional
        Per-run variable whose mean orders the rows, best first in its registered
        direction. Configurations with censored runs (values truncated at
        ``max_wall_days``) follow the completed ones, by completed share; infeasible
        ones come last.

    Raises
    ------
    ValueError
        ``sort`` is not a per-run variable.
    """
    from .summary import format_coordinate, summarize
    from .variables import PER_RUN

    if sort is not None and sort not in PER_RUN:
        raise ValueError(f"--sort: expected a per-run variable ({', '.join(PER_RUN)}), got {sort!r}")
    stats = summarize(ds)
    sweep_dims = [d for d in ds["wall_time"].dims if d not in ("run", "draw")]
    draws = ds.sizes.get("draw", 0)
    key_name = sort or "cost"
    sign = _sort_direction(key_name)
    uncertain_columns = _uncertain_columns(key_name) if draws else []
    if draws:
        stats, decision_columns = _with_decisions(ds, stats, key_name)
        uncertain_columns += decision_columns
    header = ["configuration"] + [c[0] for c in _COLUMNS] + [c[0] for c in uncertain_columns] + ["completed"]
    entries = []  # (group, key, row): group 0 completed, 1 censored, 2 infeasible
    for index in np.ndindex(*(ds.sizes[d] for d in sweep_dims)):
        point = dict(zip(sweep_dims, index))
        sel = stats.isel(point)
        if sweep_dims:
            label = " ".join(f"{d}={format_coordinate(ds[d].values[i])}" for d, i in point.items())
        else:
            label = ds.attrs.get("scenario_name", "scenario")
        if not bool(sel["feasible"].all()):
            entries.append((2, 0.0, [label, f"infeasible: {_infeasible_text(sel)}"]))
            continue
        row = [label]
        for _, name, scale in _COLUMNS:
            mean = float(sel[name].sel(stat="mean"))
            row.append(_pm(mean, float(sel[name].sel(stat="ci95_high")) - mean, scale))
        row += [cell(sel) for _, cell in uncertain_columns]
        share = float(sel["completed"].sel(stat="mean"))
        row.append(f"{share:.1%}" + (" *" if share < 1.0 else ""))
        if share < 1.0:
            entries.append((1, -share, row))
        else:
            entries.append((0, sign * float(sel[key_name].sel(stat="mean")), row))
    counts = [sum(1 for e in entries if e[0] == g) for g in range(3)]
    ranked = sorted(entries, key=lambda e: (e[0], e[1]))
    note = []
    if show_all or len(entries) <= MAX_TABLE_ROWS:
        shown = ranked if sort else entries
    else:
        done = [e for e in ranked if e[0] == 0]
        shown = done if len(done) <= 10 else done[:5] + done[-5:]
        left = len(entries) - len(shown)
        what = (f"the 5 best and the 5 worst by mean {key_name}" if len(done) > 10
                else f"the {len(done)} whose runs all completed, by mean {key_name}")
        note = [f"{len(entries)} configurations ({counts[0]} completed, {counts[1]} with censored runs, "
                f"{counts[2]} infeasible): {what}; {left} not shown (--all shows every one; all are in the file)"]
    rows = [e[2] for e in shown]
    widths = [max(len(r[k]) for r in [header] + [r for r in rows if len(r) == len(header)])
              for k in range(len(header))]
    lines = note + ["  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip()]
    for row in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() if len(row) == len(header)
                     else "  ".join(row))
    runs = ds.sizes["run"]
    if draws:
        lines.append(f"mean ± half-width of the 95 % confidence interval of the mean over {draws} parameter draws "
                     f"x {runs} runs (from the spread of the draw means; seed {ds.attrs.get('seed')}, mode "
                     f"{ds.attrs.get('mode')}); {key_name} 5-95 %: predictive interval over draws and runs; "
                     f"epistemic: share of its variance due to the uncertain inputs "
                     f"({ds.attrs.get('uncertain_inputs', '')}), the rest is chance within a draw"
                     + (f"; P(best): share of draws in which its mean {key_name} over the draw's runs is the best, "
                        f"regret: mean over draws of what it loses against the draw's best (docs/model.md)"
                        if "p_best" in stats else ""))
    else:
        lines.append(f"mean ± half-width of the 95 % confidence interval of the mean over {runs} runs "
                     f"(seed {ds.attrs.get('seed')}, mode {ds.attrs.get('mode')})")
    if counts[1]:
        lines.append("* runs censored at max_wall_days: time, energy and cost are truncated (lower bounds), "
                     "so the configuration is never ranked (best, Pareto front, report)")
    lines += _breakdown_lines(stats, sweep_dims)
    return "\n".join(lines)


MAX_TABLE_ROWS = 16


def _infeasible_text(sel: xr.Dataset) -> str:
    """Why a configuration is infeasible (in how many draws, when it has draws)."""
    feasible = np.asarray(sel["feasible"].values, dtype=bool).ravel()
    reasons = [str(r) for r in np.asarray(sel["infeasible_reason"].values, dtype=object).ravel() if str(r)]
    reason = reasons[0] if reasons else "unknown"
    return reason if feasible.size == 1 else f"{reason} (in {int((~feasible).sum())} of {feasible.size} draws)"


def _uncertain_columns(name: str) -> list[tuple[str, Callable[[xr.Dataset], str]]]:
    """Columns of the summary table with parameter draws: ``name``'s predictive 5-95 % and epistemic share."""
    title, scale = next(((t, k) for t, n, k in _COLUMNS if n == name), (name, 1.0))
    unit = title[title.index("["):] if "[" in title else ""
    base = title[:title.index("[")].strip() if "[" in title else title

    def interval(sel: xr.Dataset) -> str:
        low, high = (float(sel[name].sel(stat=s)) * scale for s in ("p5", "p95"))
        return f"{_fmt(low, 4)} to {_fmt(high, 4)}"

    def share(sel: xr.Dataset) -> str:
        value = float(sel[name].sel(stat="epistemic_share"))
        return f"{value:.0%}" if math.isfinite(value) else "-"

    return [(f"{base} 5-95 % {unit}".strip(), interval), (f"{base} epistemic", share)]


def _with_decisions(ds: xr.Dataset, stats: xr.Dataset,
                    name: str) -> tuple[xr.Dataset, list[tuple[str, Callable[[xr.Dataset], str]]]]:
    """``stats`` with ``name``'s P(best) and expected regret over draws, and their columns (none when
    ``name`` cannot be ranked: no direction, or no configuration with all its runs completed)."""
    from .analysis import decision_table

    try:
        table = decision_table(ds, name)
    except ValueError:
        return stats, []
    stats = stats.assign(p_best=table["p_best"], expected_regret=table["expected_regret"])
    title, scale = next(((t, k) for t, n, k in _COLUMNS if n == name), (name, 1.0))
    unit = title[title.index("["):] if "[" in title else ""
    base = title[:title.index("[")].strip() if "[" in title else title

    def p_best(sel: xr.Dataset) -> str:
        value = float(sel["p_best"])
        return f"{value:.0%}" if math.isfinite(value) else "-"

    def regret(sel: xr.Dataset) -> str:
        value = float(sel["expected_regret"])
        return _fmt(value * scale, 3) if math.isfinite(value) else "-"

    return stats, [(f"P(best {base})", p_best), (f"{base} regret {unit}".strip(), regret)]


def _breakdown_lines(stats: xr.Dataset, sweep_dims: list[str]) -> list[str]:
    """Mean energy breakdown, cost and carbon split, per configuration (first 12)."""
    from .energy import ENERGY_PARTS
    from .summary import format_coordinate

    if "energy_compute" not in stats or int(np.prod([stats.sizes[d] for d in sweep_dims])) > MAX_TABLE_ROWS:
        return []
    lines = ["energy breakdown [MWh] (facility; parts add up to the total), cost [MUSD] and CO2 [t] splits:"]
    shape = tuple(stats.sizes[d] for d in sweep_dims)
    for n, index in enumerate(np.ndindex(*shape)):
        if n == 12:
            lines.append(f"  ... {int(np.prod(shape)) - 12} more configurations in the file")
            break
        point = stats.isel(dict(zip(sweep_dims, index))).sel(stat="mean")
        if not bool(point["feasible"].all()):  # all draws, with parameter draws
            continue
        label = " ".join(f"{d}={format_coordinate(stats[d].values[i])}" for d, i in zip(sweep_dims, index)) \
            or "all runs"
        parts = "  ".join(f"{k} {_fmt(float(point[f'energy_{k}']), 4)}" for k in ENERGY_PARTS)
        lines.append(f"  {label}: {parts}  = {_fmt(float(point['energy']), 5)}"
                     f"  (GPUs alone, IT: {_fmt(float(point['energy_gpu']), 4)})")
        lines.append(f"  {' ' * len(label)}  cost allocation {_fmt(float(point['cost_allocation']) / 1e6, 4)}"
                     f" + electricity {_fmt(float(point['cost_electricity']) / 1e6, 4)};"
                     f" CO2 operational {_fmt(float(point['co2_operational']), 4)}"
                     f" + embodied {_fmt(float(point['co2_embodied']), 4)}")
    return lines


def _cmd_run_within_limits(args: argparse.Namespace) -> int:
    """``mcsim run`` under the memory and time limits of ``--max-memory`` and ``--max-hours``."""
    from .budget import limits, parse_bytes

    try:
        max_memory = None if args.max_memory is None else parse_bytes(args.max_memory)
    except ValueError as err:
        print(f"mcsim: error: --max-memory: {err}", file=sys.stderr)
        return EXIT_USAGE
    if args.max_hours is not None and not args.max_hours > 0:
        print(f"mcsim: error: --max-hours: expected a number of hours > 0, got {args.max_hours:g}", file=sys.stderr)
        return EXIT_USAGE
    with limits(max_memory, args.max_hours):
        return _cmd_run(args)


def _cmd_run(args: argparse.Namespace) -> int:
    from .backends import BackendUnavailable, usable_cpus
    from .netcdf import is_result_file
    from .resume import PieceStore, PieceWriteError
    from .scenario import load_scenario
    from .schema import run_option
    from .simulate import simulate
    from .tasks import DEFAULT_CHUNK_RUNS

    for name in ("runs", "seed"):  # blamed on the option, not on the scenario file
        if getattr(args, name) is not None:
            run_option(name, getattr(args, name), f"--{name}")
    scenario = load_scenario(args.scenario, args.overrides, runs=args.runs, seed=args.seed, mode=args.mode)
    output = Path(args.output) if args.output is not None else Path("results") / f"{scenario.file_stem}.nc"
    inputs = [args.scenario] if args.scenario else []
    problem = _output_problem(args.output if args.output is not None else output, inputs, is_result_file)
    if problem:
        print(f"mcsim: error: -o: {output}: {problem}" if args.output != "" else f"mcsim: error: -o: {problem}",
              file=sys.stderr)
        return EXIT_USAGE
    for option, value in (("--workers", args.workers), ("--chunk-runs", args.chunk_runs)):
        if value is not None and value < 1:
            print(f"mcsim: error: {option}: expected a whole number >= 1, got {value}", file=sys.stderr)
            return EXIT_USAGE
    if args.workers is not None and args.scheduler:
        print("mcsim: error: --workers and --scheduler: give one of them", file=sys.stderr)
        return EXIT_USAGE
    if args.workers is not None and args.workers > (cpus := usable_cpus()):
        print(f"mcsim: error: --workers: expected at most {cpus} (the CPUs this process may use; more "
              f"worker processes only add memory), got {args.workers}", file=sys.stderr)
        return EXIT_USAGE
    _check_feasible(scenario)
    chunk = args.chunk_runs or DEFAULT_CHUNK_RUNS

    def notify(message: str) -> None:
        if not args.quiet:
            print(f"mcsim: {message}", file=sys.stderr)

    store = None if args.no_resume else PieceStore(output, scenario, chunk, notify=notify)
    if store is not None and (problem := store.problem()):
        print(f"mcsim: error: -o: {output}: {problem}", file=sys.stderr)
        return EXIT_USAGE
    with contextlib.ExitStack() as held:
        if (status := _lock_output(held, output)) is not None:
            return status
        try:
            ds = simulate(scenario, progress=False if args.quiet else None, chunk_runs=chunk, workers=args.workers,
                          scheduler=args.scheduler, store=store, notify=notify)
        except BackendUnavailable as err:
            print(f"mcsim: error: {err}", file=sys.stderr)
            return EXIT_USAGE
        except PieceWriteError as err:
            return _write_failed(err.path, err.error, "the pieces finished before it are kept; rerun to resume")
        except (OSError, TimeoutError) as err:
            if not args.scheduler:
                raise
            print(f"mcsim: error: --scheduler: {args.scheduler}: lost the scheduler ({err})", file=sys.stderr)
            return EXIT_USAGE
        except KeyboardInterrupt:  # the backend (and any dask cluster) is closed by now
            kept = f"; finished tasks are kept in {store.folder}: rerun the same command to resume" \
                if store is not None and store.folder.is_dir() else ""
            print(f"mcsim: interrupted; no output written{kept}", file=sys.stderr)
            return 130
        if problem := _output_problem(output, inputs, is_result_file):  # something put there meanwhile
            print(f"mcsim: error: -o: {output}: {problem}", file=sys.stderr)
            return EXIT_USAGE
        if (status := _write_and_clear(ds, output, store, notify)) is not None:
            return status
    if not args.quiet:
        print(summary_table(ds))
        print(f"wrote {output}")
    return 0


def _lock_output(held: contextlib.ExitStack, output: Path) -> int | None:
    """Hold the writer lock of ``output`` in ``held``; the exit status when it cannot be taken, else None.

    One writer per output: a second one would remove the first one's resume pieces.
    """
    from .atomic import OutputBusy, output_lock

    try:
        held.enter_context(output_lock(output))
    except OutputBusy as err:
        print(f"mcsim: error: -o: {output}: {err}; wait for it or choose another -o", file=sys.stderr)
        return EXIT_USAGE
    except OSError as err:
        return _write_failed(output, err)
    return None


def _write_and_clear(ds: xr.Dataset, output: Path, store, notify) -> int | None:
    """Write ``ds`` to ``output``, then drop its resume pieces (and stale ones of earlier runs).

    Returns the exit status of a failed write (the pieces are kept to resume from), or None.
    """
    from .netcdf import write_results

    try:
        write_results(ds, output)
    except OSError as err:
        return _write_failed(output, err, None if store is None else
                             "the finished pieces are kept; rerun the same command to resume")
    if store is not None:
        store.clear()
        for stale in store.remove_stale():
            notify(f"removed pieces of an earlier, different run: {stale}")
    return None


# errno values of a write refused by the machine rather than by the path given: exit status 1
_ENVIRONMENT_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})


def _write_failed(target: Path, err: OSError, note: str | None = None) -> int:
    """Print the one-line error of a failed write; returns the exit status.

    1 when the machine refused the bytes (disk full, quota, file-size limit,
    I/O error), 2 when the path cannot be written (a user error).
    """
    detail = f"; {note}" if note else ""
    print(f"mcsim: error: cannot write {target}: {err.strerror or err}{detail}", file=sys.stderr)
    return 1 if err.errno in _ENVIRONMENT_ERRORS else EXIT_USAGE


def _output_problem(output: str | Path, inputs: list[str | Path] = (),
                    may_replace: Callable[[Path], bool] | None = None) -> str:
    """Why the output file ``output`` cannot be written (checked before any work), or "".

    Refused: an empty name, a name ending in a path separator or longer than
    255 bytes, an existing folder, device, pipe or socket, one of ``inputs``
    (the files the command reads), an existing file that ``may_replace`` does
    not accept, and a folder in which no file can be created.
    """
    from .atomic import NAME_MAX

    text = os.fspath(output)
    if not text:
        return "expected a file name, got ''"
    if text.endswith(("/", os.sep)):
        return "expected a file name, got a folder path (ends with a separator)"
    path = Path(text)
    if len(os.fsencode(path.name)) > NAME_MAX:
        return f"expected a file name of at most {NAME_MAX} bytes, got {len(os.fsencode(path.name))}"
    try:
        info = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):  # a missing folder is examined below
        info = None
    except (OSError, ValueError) as err:
        return f"cannot be examined ({getattr(err, 'strerror', None) or err})"
    if info is not None:
        if stat.S_ISDIR(info.st_mode):
            return "is a directory; expected a file name"
        if not stat.S_ISREG(info.st_mode):
            return "is not a regular file (a device, pipe or socket); refusing to write to it"
        for source in inputs:
            with contextlib.suppress(OSError):
                if os.path.samefile(source, path):
                    return f"is the input {source}; refusing to overwrite it"
        if may_replace is not None and not may_replace(path):
            return "exists and is not an mcsim result file; refusing to overwrite it (remove it or choose another name)"
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        return f"{folder} is not a directory"
    try:  # the real test (os.access says yes to root even where nothing can be created)
        tempfile.TemporaryFile(dir=folder).close()
    except OSError as err:
        return f"folder {folder} is not writable ({err.strerror or err})"
    return ""


def _check_feasible(scenario) -> None:
    """A lone infeasible configuration, or a sweep with none feasible, is a user error."""
    from .schema import ScenarioError
    from .workload import workload

    results = [workload(cfg) for cfg in scenario.configs]
    if not scenario.axes and not results[0].feasible:
        raise ScenarioError(scenario.source, results[0].infeasible_key, results[0].infeasible_reason)
    if not any(wl.feasible for wl in results):
        raise ScenarioError(scenario.source, "sweep", "no configuration of the sweep is feasible; "
                                                      f"first reason: {results[0].infeasible_reason}")


def _cmd_validate(args: argparse.Namespace) -> int:
    """Exit 0 when every comparison is within its accepted range, else 1."""
    from .validation import validate, validation_table

    if args.runs < 2:
        print(f"mcsim: error: --runs: expected a whole number >= 2, got {args.runs}", file=sys.stderr)
        return EXIT_USAGE
    rows = validate(runs=args.runs, seed=args.seed)
    print(validation_table(rows))
    return 0 if all(row.within for row in rows) else 1


def _cmd_summary(args: argparse.Namespace) -> int:
    ds = _open_result_file(args.file)
    if ds is None:
        return EXIT_USAGE
    try:
        text = summary_table(ds, show_all=args.show_all, sort=args.sort)
    except ValueError as err:
        print(f"mcsim: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    print(text)
    return 0


def sensitivity_table(ds: xr.Dataset, output: str = "cost") -> str:
    """The inputs of a result with parameter draws, ranked by their Sobol indices, as text.

    Raises
    ------
    ValueError
        No parameter draws, or ``output`` is not a per-run variable.
    """
    from .sensitivity import sensitivity
    from .summary import format_coordinate

    result = sensitivity(ds, output)
    sweep_dims = [d for d in result["rank"].dims if d != "input"]
    method = result.attrs["method"]
    names = ("S1", "ST") if method == "sobol" else ("S1", "delta")
    lines = []
    for index in np.ndindex(*(result.sizes[d] for d in sweep_dims)):
        point = result.isel(dict(zip(sweep_dims, index)))
        label = " ".join(f"{d}={format_coordinate(result[d].values[i])}" for d, i in zip(sweep_dims, index))
        lines.append(f"{label or ds.attrs.get('scenario_name', 'scenario')}:")
        order = np.argsort(point["rank"].values)
        width = max(len(str(k)) for k in point["input"].values)
        for i in order:
            cells = [f"{n} {float(point[n][i]):.3f} [{float(point[f'{n}_low'][i]):.3f}, "
                     f"{float(point[f'{n}_high'][i]):.3f}]" for n in names]
            lines.append(f"  {int(point['rank'][i])}. {str(point['input'].values[i]).ljust(width)}  " + "  ".join(cells))
    how = ("first-order (S1) and total (ST) Sobol indices from the Saltelli design" if method == "sobol" else
           f"first-order index (S1) and delta measure from the given {result.attrs['design']} draws "
           "(a total index needs run.design = \"saltelli\")")
    lines.append(f"{how} of the mean {output} per draw over {result.attrs['draws']} draws, "
                 "[95 % bootstrap interval]; 1 = most influential")
    if result.attrs.get("correlated_inputs"):
        lines.append(f"correlated inputs: {', '.join(result.attrs['correlated_inputs'].split())}; each one's S1 and "
                     "delta include the effect it carries through the others, so they overlap and do not add up")
    return "\n".join(lines)


def _cmd_sensitivity(args: argparse.Namespace) -> int:
    ds = _open_result_file(args.file)
    if ds is None:
        return EXIT_USAGE
    try:
        text = sensitivity_table(ds, args.output)
    except ValueError as err:
        print(f"mcsim: error: {args.file}: {err}", file=sys.stderr)
        return EXIT_USAGE
    print(text)
    return 0


def _cmd_fit_failures(args: argparse.Namespace) -> int:
    import re

    from .fitting import failures_table_toml, fit_weibull, read_failure_log
    from .schema import ScenarioError

    source = str(args.log)
    if not 0.0 < args.confidence < 1.0:
        raise ScenarioError(source, "--confidence", f"expected a level in (0, 1), got {args.confidence:g}")
    name = args.name if args.name is not None else re.sub(r"[^A-Za-z0-9_-]+", "_", Path(source).stem) or "fitted"
    output = _fit_output(source, "-o", args.output)
    figure_path = _fit_output(source, "--plot", args.plot)
    if output is not None and figure_path is not None and _same_path(output, figure_path):
        raise ScenarioError(source, "--plot", f"{figure_path}: the same file as -o; give two names")
    if figure_path is not None:
        _fit_plot_backend()
    log = read_failure_log(source)
    try:
        fit = fit_weibull(*log, confidence=args.confidence)
    except ValueError as err:
        raise ScenarioError(source, "fit", str(err)) from None
    try:
        table = failures_table_toml(fit, name, args.scope, args.recovery_minutes)
    except ValueError as err:  # "name: ...", "shape: ...": an option or a fitted value a scenario rejects
        key, _, message = str(err).partition(": ")
        raise ScenarioError(source, {"name": "--name", "recovery_minutes": "--recovery-minutes",
                                     "scope": "--scope"}.get(key, key), message) from None
    if args.uncertain:
        from .priors import uncertain_table_toml

        try:
            table += "\n" + uncertain_table_toml(fit, name)
        except ValueError as err:
            raise ScenarioError(source, "--uncertain", str(err)) from None
    figure = _fit_figure(source, log, fit) if figure_path is not None else None
    level = f"{100 * args.confidence:g} % CI"
    rows = [("shape k", f"{fit.shape:.4g}", f"[{fit.shape_low:.4g}, {fit.shape_high:.4g}]"),
            ("MTBF [h]", f"{fit.mtbf_hours:.4g}", f"[{fit.mtbf_low:.4g}, {fit.mtbf_high:.4g}]"),
            ("scale λ [h]", f"{fit.scale_hours:.4g}", ""),
            ("units (lifetimes)", str(fit.n_units), ""),
            ("left-truncated", str(fit.n_truncated), ""),
            ("failures", str(fit.n_failures), ""),
            ("total unit-hours", f"{fit.total_hours:,.1f}", "")]
    censoring = "right-censored, left-truncated" if fit.n_truncated else "right-censored"
    print(f"Weibull fit of {source} (maximum likelihood, {censoring})")
    widths = [max(len(r[k]) for r in rows + [("quantity", "estimate", level)]) for k in range(3)]
    for row in [("quantity", "estimate", level)] + rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    print()
    print(table, end="")
    return _write_fit_outputs(source, table, output, figure, figure_path)


def _fit_output(source: str, option: str, value: str | None) -> Path | None:
    """The checked path of a ``fit-failures`` output option, or None when not given."""
    from .schema import ScenarioError

    if value is None:
        return None
    if not value.strip() or "\0" in value:
        raise ScenarioError(source, option, f"expected a file name, got {value[:100]!r}")
    path = Path(value)
    if _same_path(path, Path(source)):
        raise ScenarioError(source, option, f"{value}: is the log itself; the log is never overwritten")
    try:
        if path.exists() and not path.is_dir() and not path.is_file():
            raise ScenarioError(source, option, f"{value}: not a regular file")
        problem = _output_problem(value, inputs=[source])
    except OSError as err:  # a name too long for the file system, a loop of links
        raise ScenarioError(source, option, f"{value[:100]}: {err.strerror or err}") from None
    if problem:
        raise ScenarioError(source, option, f"{value}: {problem}")
    return path


def _same_path(a: Path, b: Path) -> bool:
    """Whether two paths name the same file: the same resolved path, or the same file through a link."""
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and os.path.samefile(a, b))
    except OSError:
        return False


def _fit_plot_backend() -> None:
    """Fail early, before reading the log, when --plot cannot be drawn."""
    from .backends import BackendUnavailable
    from .plots import _pyplot
    from .schema import ScenarioError

    _use_agg()
    try:
        _pyplot()
    except BackendUnavailable as err:
        raise ScenarioError("--plot", "matplotlib", str(err)) from None


def _fit_figure(source: str, log, fit):
    from .fitting import probability_plot
    from .schema import ScenarioError

    try:
        return probability_plot(log, fit)
    except ValueError as err:
        raise ScenarioError(source, "--plot", str(err)) from None


def _write_fit_outputs(source: str, table: str, output: Path | None, figure, figure_path: Path | None) -> int:
    """Write the figure, then the table (atomically); on failure remove what this call wrote."""
    written: list[Path] = []
    try:
        if figure is not None:
            from .plots import save_figure
            import matplotlib.pyplot as plt

            try:
                written.append(save_figure(figure, figure_path))
            finally:
                plt.close(figure)
        if output is not None:
            from .atomic import write_atomic

            write_atomic(output, table)
            written.append(output)
    except OSError as err:
        for path in written:
            path.unlink(missing_ok=True)
        target = figure_path if not written and figure is not None else output
        return _write_failed(target, err)
    for path in written:
        print(f"wrote {path}")
    return 0


def _open_result_file(name: str) -> xr.Dataset | None:
    """The dataset of an mcsim result file, or None after printing the one-line error."""
    from .netcdf import open_results

    path = Path(name)
    if not path.is_file():
        print(f"mcsim: error: {path}: no such file", file=sys.stderr)
        return None
    try:
        ds = open_results(path)
    except (OSError, ValueError) as err:
        print(f"mcsim: error: {path}: not a readable netCDF result file ({err})", file=sys.stderr)
        return None
    from .summary import check_results

    try:
        check_results(ds)
    except ValueError as err:
        hint = " (a plan file: read it with `mcsim report`)" if ds.attrs.get("mcsim_kind") == "plan" else ""
        print(f"mcsim: error: {path}: {err}{hint}", file=sys.stderr)
        return None
    return ds


def _use_agg() -> None:
    """Files only, never a window: the Agg backend, when matplotlib is there at all."""
    try:
        import matplotlib
    except ImportError:
        return  # mcsim.plots raises BackendUnavailable with the install hint
    matplotlib.use("Agg")


def _cmd_plot(args: argparse.Namespace) -> int:
    from .backends import BackendUnavailable

    for option, value, kinds in (("--x", args.x, ("scaling",)), ("--variable", args.variable, ("cdf", "sensitivity"))):
        if value is not None and args.kind not in kinds:
            print(f"mcsim: error: {option}: applies to --kind {' or '.join(kinds)} only", file=sys.stderr)
            return EXIT_USAGE
    output = Path(args.output)
    if problem := _output_problem(args.output, inputs=[args.file]) or _figure_format_problem(output):
        print(f"mcsim: error: -o: {output}: {problem}" if args.output else f"mcsim: error: -o: {problem}",
              file=sys.stderr)
        return EXIT_USAGE
    ds = _open_result_file(args.file)
    if ds is None:
        return EXIT_USAGE
    _use_agg()
    try:
        from . import plots

        if args.kind == "scaling":
            fig = plots.plot_scaling(ds, x=args.x)
        elif args.kind == "cdf":
            fig = plots.plot_cdf(ds, variable=args.variable or "wall_time")
        elif args.kind == "sensitivity":
            from .tornado import plot_sensitivity

            fig = plot_sensitivity(ds, output=args.variable or "cost")
        else:
            fig = getattr(plots, f"plot_{args.kind}")(ds)
    except (BackendUnavailable, ValueError) as err:
        print(f"mcsim: error: {args.file}: {err}" if isinstance(err, ValueError) else f"mcsim: error: {err}",
              file=sys.stderr)
        return EXIT_USAGE
    import matplotlib.pyplot as plt

    try:
        plots.save_figure(fig, output)
    except OSError as err:
        return _write_failed(output, err)
    finally:
        plt.close(fig)
    print(f"wrote {output}")
    return 0


def _figure_format_problem(output: Path) -> str:
    """Why no figure can be written under ``output``'s suffix, or ""."""
    from .backends import BackendUnavailable

    try:
        from .plots import figure_format

        figure_format(output)
    except ValueError as err:
        return str(err)
    except BackendUnavailable:
        return ""  # reported by the plot itself, with the install hint
    return ""


def _cmd_report(args: argparse.Namespace) -> int:
    from .backends import BackendUnavailable

    source = Path(args.file)
    if args.output == "":
        print("mcsim: error: -o: expected a folder name, got ''", file=sys.stderr)
        return EXIT_USAGE
    folder = Path(args.output) if args.output is not None else source.with_name(
        (source.name[:-3] if source.name.endswith(".nc") else source.name) + "-report")
    if folder.exists() and not folder.is_dir():
        print(f"mcsim: error: -o: {folder}: exists and is not a folder", file=sys.stderr)
        return EXIT_USAGE
    if problem := _output_problem(folder / "README.md"):
        print(f"mcsim: error: -o: {folder}: {problem}", file=sys.stderr)
        return EXIT_USAGE
    from .plan_report import is_plan_file, write_plan_report

    if is_plan_file(source):
        write = functools.partial(write_plan_report, source, folder)
    else:
        ds = _open_result_file(args.file)
        if ds is None:
            return EXIT_USAGE
        from .report import write_report

        _use_agg()
        write = functools.partial(write_report, ds, folder, source=source.name)
    try:
        written = write()
    except BackendUnavailable as err:
        print(f"mcsim: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except ValueError as err:
        print(f"mcsim: error: {source}: {err}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as err:
        return _write_failed(folder, err)
    print(f"wrote {', '.join(p.name for p in written)} in {folder}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``mcsim`` console script; returns the exit status.

    When the reader of standard output goes away (``mcsim run | head``), the
    command stops quietly with status 1 (the recipe of the Python docs for
    SIGPIPE): no traceback, no message.
    """
    try:
        status = _main(argv)
        sys.stdout.flush()  # here, not at exit, so that a closed pipe is caught
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)  # Python flushes stdout at exit again
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    return status


def _main(argv: list[str] | None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    if args.version:
        from . import __version__
        print(f"mcsim {__version__}")
        return 0
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    from .schema import ScenarioError

    try:
        if args.command == "run":
            return _cmd_run_within_limits(args)
        if args.command == "validate":
            return _cmd_validate(args)
        if args.command == "fit-failures":
            return _cmd_fit_failures(args)
        if args.command == "plot":
            return _cmd_plot(args)
        if args.command == "report":
            return _cmd_report(args)
        if args.command == "sensitivity":
            return _cmd_sensitivity(args)
        if args.command == "plan":
            from .plan_command import cmd_plan

            return cmd_plan(args)
        return _cmd_summary(args)
    except ScenarioError as err:
        print(f"mcsim: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("mcsim: interrupted; no output written", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
