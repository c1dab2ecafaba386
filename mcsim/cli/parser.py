"""The argument parser of the ``mcsim`` command line: every command, option and help text.

A user's mistake in the options prints one line ``mcsim: error: ...`` and exits with status 2.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import NoReturn

from mcsim.report.tables import MAX_TABLE_ROWS

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2 (argparse prints usage too)
        self.exit(EXIT_USAGE, f"mcsim: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="mcsim", description="Monte Carlo reliability simulator for LLM training clusters")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    from mcsim.engine.tasks import DEFAULT_CHUNK_RUNS
    from mcsim.scenario.schema import RunSection

    run_defaults = {f.name: f.default for f in dataclasses.fields(RunSection)}
    run = sub.add_parser(
        "run",
        help="simulate a scenario and write a netCDF result file",
        description="Simulate a scenario and write a netCDF result file. --runs, --seed and --mode "
        "override the scenario's [run] table (runs, seed, mode), and --set overrides any "
        "scenario key; where neither gives a value, the schema's default applies.",
    )
    run.add_argument(
        "scenario",
        nargs="?",
        help="scenario TOML, or the name of a shipped scenario (`mcsim scenarios` lists them; a file of that "
        "name in the current folder wins) (default: the shipped Llama 3 405B reference, llama3-405b)",
    )
    run.add_argument(
        "--runs",
        type=int,
        metavar="N",
        help="Monte Carlo runs per configuration; overrides [run] runs "
        f"(default: the scenario's, else {run_defaults['runs']})",
    )
    run.add_argument(
        "--seed",
        type=int,
        metavar="S",
        help=f"seed of the random streams; overrides [run] seed (default: the scenario's, else {run_defaults['seed']})",
    )
    run.add_argument(
        "--mode",
        choices=("fast", "exact"),
        help=f"iteration sampling mode; overrides [run] mode (default: the scenario's, else {run_defaults['mode']})",
    )
    run.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a scenario value, e.g. parallelism.gpus=4096; a scalar on a swept key "
        "removes that sweep axis, a [list] adds or replaces one (strings may go unquoted: "
        "checkpoint.strategy=[sync, async]); repeatable (default: none)",
    )
    run.add_argument(
        "-o",
        "--output",
        help="output file (default: results/NAME.nc, NAME the scenario's name made file-safe, see docs/model.md §1)",
    )
    run.add_argument("--quiet", action="store_true", help="no progress bar and no table (default: shown)")
    run.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="run on a local dask cluster of N worker processes, at most the CPUs available (default: in this process)",
    )
    run.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="run on the dask scheduler at ADDRESS (tcp://host:port); it must answer within "
        "MCSIM_SCHEDULER_TIMEOUT seconds, default 10 (default: none)",
    )
    run.add_argument(
        "--max-memory",
        metavar="SIZE",
        default=None,
        help="refuse scenarios whose results need more memory than SIZE (e.g. 16G, inf; "
        "default: half the available memory)",
    )
    run.add_argument(
        "--max-hours",
        type=float,
        default=None,
        metavar="H",
        help="refuse runs estimated to take longer than H hours (default 24; inf: no limit)",
    )
    run.add_argument(
        "--chunk-runs",
        type=int,
        default=None,
        metavar="N",
        help=f"runs per task (default {DEFAULT_CHUNK_RUNS}); results do not depend on it",
    )
    run.add_argument(
        "--no-resume",
        action="store_true",
        help="do not record finished tasks beside the output, nor reuse recorded ones (default: record and reuse)",
    )
    run.add_argument(
        "--shard",
        metavar="I/N",
        default=None,
        help="simulate part I (from 0) of N of the sweep: the configurations whose flat index is I modulo N "
        "(a Slurm array: --shard $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT with --array=0-(N-1)); "
        "default output results/NAME.partIofN.nc; mcsim combine merges the N parts",
    )
    combine = sub.add_parser(
        "combine",
        help="merge the part files of a sharded run (mcsim run --shard I/N) into the whole result",
        description="Merge the N part files of mcsim run --shard I/N into one result file, identical to the "
        "unsharded run's; it keeps each part's provenance (attribute shard_parts).",
    )
    combine.add_argument("parts", nargs="+", metavar="PART.nc", help="every part file, once each, in any order")
    combine.add_argument("-o", "--output", required=True, metavar="OUT.nc", help="the combined result file")
    combine.add_argument("--quiet", action="store_true", help="print only errors")
    validate = sub.add_parser("validate", help="compare the reference scenarios with published runs")
    validate.add_argument("--runs", type=int, default=1000, help="runs per reference scenario (default 1000)")
    validate.add_argument("--seed", type=int, default=0)
    validate.add_argument(
        "--step-time",
        action="store_true",
        help="instead: the operator step-time model against published iteration times (no simulation)",
    )
    summary = sub.add_parser("summary", help="print the summary table of a result file")
    summary.add_argument("file", help="netCDF file written by mcsim run")
    summary.add_argument(
        "--all",
        dest="show_all",
        action="store_true",
        help=f"show every configuration (default: the 5 best and 5 worst when more than {MAX_TABLE_ROWS})",
    )
    summary.add_argument(
        "--sort",
        metavar="VAR",
        default=None,
        help="sort by the mean of this per-run variable, best first (default: grid order, "
        "or by cost when rows are left out)",
    )
    summary.add_argument(
        "--deadline",
        type=float,
        metavar="DAYS",
        default=None,
        help="add each configuration's probability of finishing within DAYS days, and the cheapest "
        "that does so with --probability (default: no deadline)",
    )
    summary.add_argument(
        "--probability",
        type=float,
        metavar="P",
        default=None,
        help="with --deadline: required probability of finishing in time, in (0, 1) (default 0.9)",
    )
    sens = sub.add_parser(
        "sensitivity", help="rank the uncertain inputs of a result with parameter draws (Sobol indices)"
    )
    sens.add_argument("file", help="netCDF file written by mcsim run with run.draws > 0")
    sens.add_argument(
        "--output",
        default="cost",
        metavar="VAR",
        help="per-run variable whose mean per draw is analysed (default cost)",
    )
    _resamples_option(sens)
    fit = sub.add_parser("fit-failures", help="fit a Weibull failure law to a CSV log of unit lifetimes")
    fit.add_argument(
        "log",
        metavar="LOG.csv",
        help="CSV with columns unit,start_hours,end_hours,failed[,entry_hours] (see docs/fitting.md)",
    )
    fit.add_argument("--name", help="failure class name (default: the log's file name)")
    fit.add_argument(
        "--scope", choices=("gpu", "node", "cluster"), default="gpu", help="what one unit is (default gpu)"
    )
    fit.add_argument(
        "--recovery-minutes", type=float, default=20.0, metavar="M", help="recovery per failure [min] (default 20)"
    )
    fit.add_argument(
        "--confidence", type=float, default=0.95, metavar="C", help="confidence level of the intervals (default 0.95)"
    )
    fit.add_argument(
        "--uncertain",
        action="store_true",
        help="also write the [uncertain] entry of the class's MTBF and shape: their joint "
        'uncertainty from the fit (a bivariate lognormal, dist = "mvlognormal")',
    )
    fit.add_argument("-o", "--output", metavar="TABLE.toml", help="write the [[failures]] table to this TOML file")
    fit.add_argument(
        "--plot",
        metavar="FIG.png",
        help="write a Weibull probability plot (PNG; PDF or SVG by suffix; needs matplotlib)",
    )
    plot = sub.add_parser("plot", help="draw one figure of a result file (needs matplotlib)")
    plot.add_argument("file", help="netCDF file written by mcsim run")
    plot.add_argument("--kind", required=True, choices=PLOT_KINDS, help="which figure")
    plot.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="FIG.png",
        help="image file to write, in the format its suffix names (png, pdf, svg, jpg, ...)",
    )
    plot.add_argument(
        "--x",
        default=None,
        metavar="DIM",
        help="--kind scaling: sweep dimension on the x axis (default gpus, or the only sweep dimension)",
    )
    plot.add_argument(
        "--variable",
        default=None,
        metavar="NAME",
        help="--kind cdf: per-run variable whose distribution is drawn (default wall_time); "
        "--kind sensitivity: per-run variable whose indices are drawn (default cost)",
    )
    _resamples_option(plot, "--kind sensitivity: ")
    report = sub.add_parser("report", help="write figures and a Markdown summary of a result file (needs matplotlib)")
    report.add_argument("file", help="netCDF file written by mcsim run")
    report.add_argument(
        "-o", "--output", metavar="FOLDER", help="folder to write (default: FILE without .nc + -report)"
    )
    report.add_argument(
        "--deadline",
        type=float,
        metavar="DAYS",
        default=None,
        help="name the cheapest configuration finishing within DAYS days with --probability "
        "(default: none; the report invents no deadline)",
    )
    report.add_argument(
        "--probability",
        type=float,
        metavar="P",
        default=0.9,
        help="required probability of finishing within --deadline, in (0, 1) (default 0.9)",
    )
    _resamples_option(report, "with parameter draws: ")
    plan = sub.add_parser(
        "plan", help="search cluster configurations: screen every candidate, select the best by simulation"
    )
    plan.add_argument(
        "plan",
        metavar="PLAN.toml",
        help="plan file: a scenario plus [search], [constraints], [plan]; or the name of a shipped plan "
        "(`mcsim scenarios` lists them; a file of that name in the current folder wins)",
    )
    plan.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a value of the plan file, as mcsim run --set does: a scenario key "
        "(compute.efficiency=0.4) or a key of [search], [constraints] or [plan] (search.gpus=[1024, 2048], "
        "constraints.deadline_days=30); a plan has no sweep, so a list is a value only in those three "
        "tables; repeatable (default: none)",
    )
    plan.add_argument(
        "-o", "--output", help="output file (default: results/NAME.nc, NAME the plan's name made file-safe)"
    )
    plan.add_argument("--quiet", action="store_true", help="no progress and no table (default: shown)")
    plan.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="run on a local dask cluster of N worker processes (default: in this process)",
    )
    plan.add_argument("--scheduler", metavar="ADDRESS", help="run on the dask scheduler at ADDRESS (default: none)")
    plan.add_argument(
        "--no-resume",
        action="store_true",
        help="do not record finished tasks beside the output, nor reuse recorded ones (default: record and reuse)",
    )
    _add_scenarios(sub)
    return parser


def _add_scenarios(sub) -> None:
    """``mcsim scenarios [list]`` and ``mcsim scenarios copy NAME [DEST]``."""
    scenarios = sub.add_parser(
        "scenarios",
        help="list the shipped scenarios and plans, or copy one to edit",
        description="List the shipped scenarios and plans (run one by name: mcsim run NAME, mcsim plan NAME), "
        "or copy one to a file to edit.",
    )
    action = scenarios.add_subparsers(dest="scenarios_action", parser_class=_Parser)
    action.add_parser("list", help="list them: name, kind (scenario or plan) and description (the default)")
    copy = action.add_parser(
        "copy", help="write a shipped scenario or plan to a file to edit (never over an existing file)"
    )
    copy.add_argument("name", metavar="NAME", help="a shipped name, as `mcsim scenarios` lists it")
    copy.add_argument(
        "dest",
        metavar="DEST",
        nargs="?",
        help="the file to write, or an existing folder to write NAME.toml in (default: NAME.toml here)",
    )


def _resamples_option(parser: argparse.ArgumentParser, prefix: str = "") -> None:
    from mcsim.analysis.sensitivity import MAX_RESAMPLES, MIN_RESAMPLES, RESAMPLES

    parser.add_argument(
        "--resamples",
        type=int,
        metavar="B",
        default=None,
        help=f"{prefix}bootstrap resamples of the sensitivity indices' 95 %% intervals, {MIN_RESAMPLES} to "
        f"{MAX_RESAMPLES:,}; the time is proportional to B, the half-widths are known to about "
        f"1/sqrt(2B) (default {RESAMPLES}: 7 %%)",
    )


PLOT_KINDS = ("scaling", "cdf", "pareto", "breakdown", "sensitivity")
