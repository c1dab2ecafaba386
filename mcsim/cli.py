"""The ``mcsim`` command line.

``mcsim run [SCENARIO] [--runs N] [--seed S] [--mode fast|exact] [--set KEY=VALUE]... [-o OUT.nc]``
``mcsim summary OUT.nc``
``mcsim validate [--runs N]``
``mcsim fit-failures LOG.csv [--name NAME] [--scope gpu|node|cluster] [--recovery-minutes M] [--confidence C] [-o TABLE.toml]``
(fit a Weibull failure law to a log of unit lifetimes and print a ``[[failures]]`` table; see docs/fitting.md)
``mcsim plot OUT.nc --kind scaling|cdf|pareto|breakdown -o FIG.png [--x gpus] [--variable wall_time]``
(one figure of a result file; needs matplotlib: ``pip install 'mcsim[plot]'``)
``mcsim report OUT.nc [-o FOLDER]``
(the figures that apply and a Markdown README.md with the best configurations, in OUT-report/ by default)

User mistakes (bad scenario, bad option value, unreadable file) print one
line ``mcsim: error: ...`` naming the file and key, exit with status 2 and
write no output file.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
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
    run = sub.add_parser("run", help="simulate a scenario and write a netCDF result file")
    run.add_argument("scenario", nargs="?", help="scenario TOML (default: the shipped Llama 3 405B reference)")
    run.add_argument("--runs", type=int, help="Monte Carlo runs per configuration")
    run.add_argument("--seed", type=int, help="seed of the random streams")
    run.add_argument("--mode", choices=("fast", "exact"), help="iteration sampling mode")
    run.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                     help="override a scenario value (a [list] adds a sweep axis); repeatable")
    run.add_argument("-o", "--output", help="output file (default: results/<scenario name>.nc)")
    run.add_argument("--quiet", action="store_true", help="no progress bar and no table")
    run.add_argument("--workers", type=int, help="run on a local dask cluster of N worker processes "
                                                 "(at most the CPUs available)")
    run.add_argument("--scheduler", metavar="ADDRESS",
                     help="run on the dask scheduler at ADDRESS (tcp://host:port); it must answer within "
                          "MCSIM_SCHEDULER_TIMEOUT seconds (default 10)")
    run.add_argument("--max-memory", metavar="SIZE", default=None,
                     help="refuse scenarios whose results need more memory than SIZE (e.g. 16G, inf; "
                          "default: half the available memory)")
    run.add_argument("--max-hours", type=float, default=None, metavar="H",
                     help="refuse runs estimated to take longer than H hours (default 24; inf: no limit)")
    run.add_argument("--chunk-runs", type=int, default=None, metavar="N",
                     help="runs per task (default 250); results do not depend on it")
    run.add_argument("--no-resume", action="store_true",
                     help="do not record finished tasks beside the output, nor reuse recorded ones")
    validate = sub.add_parser("validate", help="compare the reference scenarios with published runs")
    validate.add_argument("--runs", type=int, default=1000, help="runs per reference scenario (default 1000)")
    validate.add_argument("--seed", type=int, default=0)
    summary = sub.add_parser("summary", help="print the summary table of a result file")
    summary.add_argument("file", help="netCDF file written by mcsim run")
    fit = sub.add_parser("fit-failures", help="fit a Weibull failure law to a CSV log of unit lifetimes")
    fit.add_argument("log", metavar="LOG.csv", help="CSV with columns unit,start_hours,end_hours,failed (see docs/fitting.md)")
    fit.add_argument("--name", help="failure class name (default: the log's file name)")
    fit.add_argument("--scope", choices=("gpu", "node", "cluster"), default="gpu", help="what one unit is")
    fit.add_argument("--recovery-minutes", type=float, default=20.0, metavar="M", help="recovery per failure [min]")
    fit.add_argument("--confidence", type=float, default=0.95, metavar="C", help="confidence level of the intervals")
    fit.add_argument("-o", "--output", metavar="TABLE.toml", help="write the [[failures]] table to this TOML file")
    plot = sub.add_parser("plot", help="draw one figure of a result file (needs matplotlib)")
    plot.add_argument("file", help="netCDF file written by mcsim run")
    plot.add_argument("--kind", required=True, choices=_PLOT_KINDS, help="which figure")
    plot.add_argument("-o", "--output", required=True, metavar="FIG.png",
                      help="image file to write (PNG; PDF or SVG by suffix)")
    plot.add_argument("--x", default=None, metavar="DIM",
                      help="--kind scaling: sweep dimension on the x axis (default gpus)")
    plot.add_argument("--variable", default=None, metavar="NAME",
                      help="--kind cdf: per-run variable whose distribution is drawn (default wall_time)")
    report = sub.add_parser("report",
                            help="write figures and a Markdown summary of a result file (needs matplotlib)")
    report.add_argument("file", help="netCDF file written by mcsim run")
    report.add_argument("-o", "--output", metavar="FOLDER",
                        help="folder to write (default: FILE without .nc + -report)")
    return parser


_PLOT_KINDS = ("scaling", "cdf", "pareto", "breakdown")


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


def summary_table(ds: xr.Dataset) -> str:
    """Mean and 95 % confidence interval per configuration, as aligned text."""
    from .summary import summarize

    stats = summarize(ds)
    sweep_dims = [d for d in ds["wall_time"].dims if d != "run"]
    header = ["configuration"] + [c[0] for c in _COLUMNS] + ["completed"]
    rows = []
    costs = []
    for index in np.ndindex(*(ds.sizes[d] for d in sweep_dims)):
        point = dict(zip(sweep_dims, index))
        sel = stats.isel(point)
        if sweep_dims:
            label = " ".join(f"{d}={ds[d].values[i]}" for d, i in point.items())
        else:
            label = ds.attrs.get("scenario_name", "scenario")
        if not bool(sel["feasible"]):
            rows.append([label, f"infeasible: {sel['infeasible_reason'].item()}"])
            costs.append(np.inf)
            continue
        costs.append(float(sel["cost"].sel(stat="mean")))
        row = [label]
        for _, name, scale in _COLUMNS:
            mean = float(sel[name].sel(stat="mean")) * scale
            half = (float(sel[name].sel(stat="ci95_high")) - float(sel[name].sel(stat="mean"))) * scale
            row.append(f"{_fmt(mean, 4)} ± {_fmt(half, 2)}")
        row.append(f"{float(sel['completed'].sel(stat='mean')):.1%}")
        rows.append(row)
    note = []
    if len(rows) > MAX_TABLE_ROWS:
        order = np.argsort(costs, kind="stable")
        feasible = [i for i in order if np.isfinite(costs[i])]
        keep = feasible[:5] + feasible[-5:] if len(feasible) > 10 else feasible
        note = [f"{len(rows)} configurations: the 5 cheapest and the 5 dearest by mean cost are shown "
                f"({len(rows) - len(feasible)} infeasible); all are in the file"]
        rows = [rows[i] for i in sorted(set(keep), key=lambda i: costs[i])]
    widths = [max(len(r[k]) for r in [header] + [r for r in rows if len(r) == len(header)])
              for k in range(len(header))]
    lines = note + ["  ".join(h.ljust(w) for h, w in zip(header, widths))]
    for row in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths)) if len(row) == len(header)
                     else "  ".join(row))
    runs = ds.sizes["run"]
    lines.append(f"mean ± half-width of the 95 % confidence interval of the mean over {runs} runs "
                 f"(seed {ds.attrs.get('seed')}, mode {ds.attrs.get('mode')})")
    lines += _breakdown_lines(stats, sweep_dims)
    return "\n".join(lines)


MAX_TABLE_ROWS = 16


def _breakdown_lines(stats: xr.Dataset, sweep_dims: list[str]) -> list[str]:
    """Mean energy breakdown, cost and carbon split, per configuration (first 12)."""
    from .energy import ENERGY_PARTS

    if "energy_compute" not in stats or int(np.prod([stats.sizes[d] for d in sweep_dims])) > MAX_TABLE_ROWS:
        return []
    lines = ["energy breakdown [MWh] (facility; parts add up to the total), cost [MUSD] and CO2 [t] splits:"]
    shape = tuple(stats.sizes[d] for d in sweep_dims)
    for n, index in enumerate(np.ndindex(*shape)):
        if n == 12:
            lines.append(f"  ... {int(np.prod(shape)) - 12} more configurations in the file")
            break
        point = stats.isel(dict(zip(sweep_dims, index))).sel(stat="mean")
        if not bool(point["feasible"]):
            continue
        label = " ".join(f"{d}={stats[d].values[i]}" for d, i in zip(sweep_dims, index)) or "all runs"
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
    from .netcdf import write_results
    from .resume import PieceStore, sweep_key
    from .scenario import load_scenario
    from .simulate import simulate
    from .tasks import DEFAULT_CHUNK_RUNS

    scenario = load_scenario(args.scenario, args.overrides, runs=args.runs, seed=args.seed, mode=args.mode)
    output = Path(args.output) if args.output else Path("results") / f"{scenario.name}.nc"
    problem = _output_problem(output)
    if problem:
        print(f"mcsim: error: -o: {output}: {problem}", file=sys.stderr)
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
    store = None if args.no_resume else PieceStore(output, sweep_key(scenario, chunk))

    def notify(message: str) -> None:
        if not args.quiet:
            print(f"mcsim: {message}", file=sys.stderr)

    try:
        ds = simulate(scenario, progress=False if args.quiet else None, chunk_runs=chunk, workers=args.workers,
                      scheduler=args.scheduler, store=store, notify=notify)
    except BackendUnavailable as err:
        print(f"mcsim: error: {err}", file=sys.stderr)
        return EXIT_USAGE
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
    try:
        write_results(ds, output)
    except OSError as err:
        print(f"mcsim: error: cannot write {output}: {err.strerror or err}", file=sys.stderr)
        return 1
    if store is not None:
        store.clear()
        for stale in store.remove_stale():
            notify(f"removed pieces of an earlier, different run: {stale}")
    if not args.quiet:
        print(summary_table(ds))
        print(f"wrote {output}")
    return 0


def _output_problem(output: Path) -> str:
    """Why ``output`` cannot be written (checked before simulating), or ""."""
    if output.is_dir():
        return "is a directory; expected a file name"
    folder = output.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        return f"{folder} is not a directory"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"folder {folder} is not writable"
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
    print(summary_table(ds))
    return 0


def _cmd_fit_failures(args: argparse.Namespace) -> int:
    import re
    import tempfile

    from .fitting import failures_table_toml, fit_weibull, read_failure_log
    from .schema import ScenarioError

    source = str(args.log)
    if not 0.0 < args.confidence < 1.0:
        raise ScenarioError(source, "--confidence", f"expected a level in (0, 1), got {args.confidence:g}")
    name = args.name if args.name is not None else re.sub(r"[^A-Za-z0-9_-]+", "_", Path(source).stem) or "fitted"
    output = Path(args.output) if args.output else None
    if output is not None and (problem := _output_problem(output)):
        raise ScenarioError(source, "-o", f"{output}: {problem}")
    durations, failed = read_failure_log(source)
    try:
        fit = fit_weibull(durations, failed, confidence=args.confidence)
    except ValueError as err:
        raise ScenarioError(source, "fit", str(err)) from None
    try:
        table = failures_table_toml(fit, name, args.scope, args.recovery_minutes)
    except ValueError as err:  # "name: ...", "shape: ...": an option or a fitted value a scenario rejects
        key, _, message = str(err).partition(": ")
        raise ScenarioError(source, {"name": "--name", "recovery_minutes": "--recovery-minutes"}.get(key, key),
                            message) from None
    level = f"{100 * args.confidence:g} % CI"
    rows = [("shape k", f"{fit.shape:.4g}", f"[{fit.shape_low:.4g}, {fit.shape_high:.4g}]"),
            ("MTBF [h]", f"{fit.mtbf_hours:.4g}", f"[{fit.mtbf_low:.4g}, {fit.mtbf_high:.4g}]"),
            ("scale λ [h]", f"{fit.scale_hours:.4g}", ""),
            ("units (lifetimes)", str(fit.n_units), ""),
            ("failures", str(fit.n_failures), ""),
            ("total unit-hours", f"{fit.total_hours:,.1f}", "")]
    print(f"Weibull fit of {source} (maximum likelihood, right-censored)")
    widths = [max(len(r[k]) for r in rows + [("quantity", "estimate", level)]) for k in range(3)]
    for row in [("quantity", "estimate", level)] + rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    print()
    print(table, end="")
    if output is not None:
        folder = output.parent
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{output.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(table)
            os.replace(tmp, output)
        except OSError as err:
            Path(tmp).unlink(missing_ok=True)
            print(f"mcsim: error: cannot write {output}: {err.strerror or err}", file=sys.stderr)
            return 1
        print(f"wrote {output}")
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
    if "wall_time" not in ds or "run" not in ds["wall_time"].dims:
        print(f"mcsim: error: {path}: not an mcsim result file (no per-run wall_time variable)", file=sys.stderr)
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

    for option, value, kind in (("--x", args.x, "scaling"), ("--variable", args.variable, "cdf")):
        if value is not None and args.kind != kind:
            print(f"mcsim: error: {option}: applies to --kind {kind} only", file=sys.stderr)
            return EXIT_USAGE
    output = Path(args.output)
    if problem := _output_problem(output):
        print(f"mcsim: error: -o: {output}: {problem}", file=sys.stderr)
        return EXIT_USAGE
    ds = _open_result_file(args.file)
    if ds is None:
        return EXIT_USAGE
    _use_agg()
    try:
        from . import plots

        if args.kind == "scaling":
            fig = plots.plot_scaling(ds, x=args.x or "gpus")
        elif args.kind == "cdf":
            fig = plots.plot_cdf(ds, variable=args.variable or "wall_time")
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
        print(f"mcsim: error: cannot write {output}: {err.strerror or err}", file=sys.stderr)
        return 1
    finally:
        plt.close(fig)
    print(f"wrote {output}")
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from .backends import BackendUnavailable

    source = Path(args.file)
    folder = Path(args.output) if args.output else source.with_name(
        (source.name[:-3] if source.name.endswith(".nc") else source.name) + "-report")
    if folder.exists() and not folder.is_dir():
        print(f"mcsim: error: -o: {folder}: exists and is not a folder", file=sys.stderr)
        return EXIT_USAGE
    if problem := _output_problem(folder / "README.md"):
        print(f"mcsim: error: -o: {folder}: {problem}", file=sys.stderr)
        return EXIT_USAGE
    ds = _open_result_file(args.file)
    if ds is None:
        return EXIT_USAGE
    from .report import write_report

    _use_agg()
    try:
        written = write_report(ds, folder, source=source.name)
    except BackendUnavailable as err:
        print(f"mcsim: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except ValueError as err:
        print(f"mcsim: error: {source}: {err}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as err:
        print(f"mcsim: error: cannot write {folder}: {err.strerror or err}", file=sys.stderr)
        return 1
    print(f"wrote {', '.join(p.name for p in written)} in {folder}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``mcsim`` console script; returns the exit status."""
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
        return _cmd_summary(args)
    except ScenarioError as err:
        print(f"mcsim: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("mcsim: interrupted; no output written", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
