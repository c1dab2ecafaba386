"""The argument parser of the ``mcsim`` command line, declared as data: every command, option and help text.

:data:`MCSIM` is the table: the program, its subcommands (:class:`Command`) and their options
(:class:`Option`, argparse's keywords by name), in the order ``--help`` lists them;
:func:`build_parser` makes the argparse parser from it.

A user's mistake in the options prints one line ``mcsim: error: ...`` and exits with status 2
(:data:`EXIT_USAGE`); the commands report theirs the same way (:func:`usage_error`).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from mcsim.analysis.sensitivity import MAX_RESAMPLES, MIN_RESAMPLES, RESAMPLES
from mcsim.engine.tasks import DEFAULT_CHUNK_RUNS
from mcsim.report.tables import MAX_TABLE_ROWS
from mcsim.scenario.schema import RunSection

EXIT_USAGE = 2  # the exit status of a user's mistake


def usage_error(message: str) -> int:
    """Print ``mcsim: error: <message>`` on stderr; returns :data:`EXIT_USAGE`."""
    print(f"mcsim: error: {message}", file=sys.stderr)
    return EXIT_USAGE


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2 (argparse prints usage too)
        self.exit(EXIT_USAGE, f"mcsim: error: {message}\n")


@dataclasses.dataclass(frozen=True)
class Option:
    """One argument of a command: its flags (or its positional name) and the keywords of
    :meth:`argparse.ArgumentParser.add_argument` it sets (None: not given)."""

    flags: tuple[str, ...]
    help: str | None = None
    type: Callable[[str], Any] | None = None
    default: Any = None
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    nargs: str | None = None
    action: str | None = None
    dest: str | None = None
    required: bool | None = None

    def keywords(self) -> dict[str, Any]:
        """The keywords given, a list default copied (each parser gets its own)."""
        given = {field.name: getattr(self, field.name) for field in dataclasses.fields(self)[1:]}
        return {
            key: list(value) if isinstance(value, list) else value for key, value in given.items() if value is not None
        }


@dataclasses.dataclass(frozen=True)
class Command:
    """A command: its name, its line in the list of commands, its description, its options and
    its own subcommands (their choice stored in ``args.<dest>``)."""

    name: str
    help: str | None = None
    description: str | None = None
    options: tuple[Option, ...] = ()
    commands: tuple[Command, ...] = ()
    dest: str | None = None


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of the whole command line, :data:`MCSIM`."""
    parser = _Parser(prog=MCSIM.name, description=MCSIM.description)
    _add_arguments(parser, MCSIM)
    return parser


def _add_arguments(parser: argparse.ArgumentParser, command: Command) -> None:
    """Add ``command``'s options and subcommands (recursively) to ``parser``."""
    for option in command.options:
        parser.add_argument(*option.flags, **option.keywords())
    if not command.commands:
        return
    sub = parser.add_subparsers(dest=command.dest, parser_class=_Parser)
    for child in command.commands:
        texts: dict[str, Any] = {"help": child.help, "description": child.description}
        # only the texts given: add_parser(help=None), unlike no help, lists the command without a text
        _add_arguments(sub.add_parser(child.name, **{k: v for k, v in texts.items() if v is not None}), child)


# --------------------------------------------------------------------------- the table

PLOT_KINDS = ("scaling", "cdf", "pareto", "breakdown", "sensitivity")
_RUN_DEFAULTS = {field.name: field.default for field in dataclasses.fields(RunSection)}
_NO_RESUME = Option(
    ("--no-resume",),
    action="store_true",
    help="do not record finished tasks beside the output, nor reuse recorded ones (default: record and reuse)",
)
_RESULT_FILE = Option(("file",), help="netCDF file written by mcsim run")


def _resamples(applies: str = "") -> Option:
    """``--resamples B``, its help starting with ``applies`` (where it applies)."""
    return Option(
        ("--resamples",),
        type=int,
        metavar="B",
        help=f"{applies}bootstrap resamples of the sensitivity indices' 95 %% intervals, {MIN_RESAMPLES} to "
        f"{MAX_RESAMPLES:,}; the time is proportional to B, the half-widths are known to about "
        f"1/sqrt(2B) (default {RESAMPLES}: 7 %%)",
    )


def _overrides(help: str) -> Option:
    """``--set KEY=VALUE``, repeatable, into ``args.overrides`` (a list, empty when not given)."""
    return Option(("--set",), dest="overrides", action="append", default=[], metavar="KEY=VALUE", help=help)


def _deadline(help: str, probability_default: float | None, probability_help: str) -> tuple[Option, Option]:
    """``--deadline DAYS`` and ``--probability P`` of ``summary`` and ``report``."""
    return (
        Option(("--deadline",), type=float, metavar="DAYS", help=help),
        Option(("--probability",), type=float, metavar="P", default=probability_default, help=probability_help),
    )


RUN = Command(
    "run",
    help="simulate a scenario and write a netCDF result file",
    description="Simulate a scenario and write a netCDF result file. --runs, --seed and --mode "
    "override the scenario's [run] table (runs, seed, mode), and --set overrides any "
    "scenario key; where neither gives a value, the schema's default applies.",
    options=(
        Option(
            ("scenario",),
            nargs="?",
            help="scenario TOML, or the name of a shipped scenario (`mcsim scenarios` lists them; a file of that "
            "name in the current folder wins) (default: the shipped Llama 3 405B reference, llama3-405b)",
        ),
        Option(
            ("--runs",),
            type=int,
            metavar="N",
            help="Monte Carlo runs per configuration; overrides [run] runs "
            f"(default: the scenario's, else {_RUN_DEFAULTS['runs']})",
        ),
        Option(
            ("--seed",),
            type=int,
            metavar="S",
            help="seed of the random streams; overrides [run] seed "
            f"(default: the scenario's, else {_RUN_DEFAULTS['seed']})",
        ),
        Option(
            ("--mode",),
            choices=("fast", "exact"),
            help="iteration sampling mode; overrides [run] mode "
            f"(default: the scenario's, else {_RUN_DEFAULTS['mode']})",
        ),
        _overrides(
            "override a scenario value, e.g. parallelism.gpus=4096; a scalar on a swept key "
            "removes that sweep axis, a [list] adds or replaces one (strings may go unquoted: "
            "checkpoint.strategy=[sync, async]); repeatable (default: none)"
        ),
        Option(
            ("-o", "--output"),
            help="output file (default: results/NAME.nc, NAME the scenario's name made file-safe, "
            "see docs/model.md §1)",
        ),
        Option(("--quiet",), action="store_true", help="no progress bar and no table (default: shown)"),
        Option(
            ("--workers",),
            type=int,
            metavar="N",
            help="run on a local dask cluster of N worker processes, at most the CPUs available "
            "(default: in this process)",
        ),
        Option(
            ("--scheduler",),
            metavar="ADDRESS",
            help="run on the dask scheduler at ADDRESS (tcp://host:port); it must answer within "
            "MCSIM_SCHEDULER_TIMEOUT seconds, default 10 (default: none)",
        ),
        Option(
            ("--max-memory",),
            metavar="SIZE",
            help="refuse scenarios whose results need more memory than SIZE (e.g. 16G, inf; "
            "default: half the available memory)",
        ),
        Option(
            ("--max-hours",),
            type=float,
            metavar="H",
            help="refuse runs estimated to take longer than H hours (default 24; inf: no limit)",
        ),
        Option(
            ("--chunk-runs",),
            type=int,
            metavar="N",
            help=f"runs per task (default {DEFAULT_CHUNK_RUNS}); results do not depend on it",
        ),
        _NO_RESUME,
        Option(
            ("--shard",),
            metavar="I/N",
            help="simulate part I (from 0) of N of the sweep: the configurations whose flat index is I modulo N "
            "(a Slurm array: --shard $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT with --array=0-(N-1)); "
            "default output results/NAME.partIofN.nc; mcsim combine merges the N parts",
        ),
    ),
)

COMBINE = Command(
    "combine",
    help="merge the part files of a sharded run (mcsim run --shard I/N) into the whole result",
    description="Merge the N part files of mcsim run --shard I/N into one result file, identical to the "
    "unsharded run's; it keeps each part's provenance (attribute shard_parts).",
    options=(
        Option(("parts",), nargs="+", metavar="PART.nc", help="every part file, once each, in any order"),
        Option(("-o", "--output"), required=True, metavar="OUT.nc", help="the combined result file"),
        Option(("--quiet",), action="store_true", help="print only errors"),
    ),
)

VALIDATE = Command(
    "validate",
    help="compare the reference scenarios with published runs",
    options=(
        Option(("--runs",), type=int, default=1000, help="runs per reference scenario (default 1000)"),
        Option(("--seed",), type=int, default=0),
        Option(
            ("--step-time",),
            action="store_true",
            help="instead: the operator step-time model against published iteration times (no simulation)",
        ),
    ),
)

SUMMARY = Command(
    "summary",
    help="print the summary table of a result file",
    options=(
        _RESULT_FILE,
        Option(
            ("--all",),
            dest="show_all",
            action="store_true",
            help=f"show every configuration (default: the 5 best and 5 worst when more than {MAX_TABLE_ROWS})",
        ),
        Option(
            ("--sort",),
            metavar="VAR",
            help="sort by the mean of this per-run variable, best first (default: grid order, "
            "or by cost when rows are left out)",
        ),
        *_deadline(
            "add each configuration's probability of finishing within DAYS days, and the cheapest "
            "that does so with --probability (default: no deadline)",
            None,
            "with --deadline: required probability of finishing in time, in (0, 1) (default 0.9)",
        ),
    ),
)

SENSITIVITY = Command(
    "sensitivity",
    help="rank the uncertain inputs of a result with parameter draws (Sobol indices)",
    options=(
        Option(("file",), help="netCDF file written by mcsim run with run.draws > 0"),
        Option(
            ("--output",),
            default="cost",
            metavar="VAR",
            help="per-run variable whose mean per draw is analysed (default cost)",
        ),
        _resamples(),
    ),
)

FIT_FAILURES = Command(
    "fit-failures",
    help="fit a Weibull failure law to a CSV log of unit lifetimes",
    options=(
        Option(
            ("log",),
            metavar="LOG.csv",
            help="CSV with columns unit,start_hours,end_hours,failed[,entry_hours], or Slurm job records "
            "(sacct --parsable2 with JobID, State, Start, End, NodeList: one unit per node) (see docs/fitting.md)",
        ),
        Option(("--name",), help="failure class name (default: the log's file name)"),
        Option(("--scope",), choices=("gpu", "node", "cluster"), default="gpu", help="what one unit is (default gpu)"),
        Option(
            ("--recovery-minutes",),
            type=float,
            default=20.0,
            metavar="M",
            help="recovery per failure [min] (default 20)",
        ),
        Option(
            ("--confidence",),
            type=float,
            default=0.95,
            metavar="C",
            help="confidence level of the intervals (default 0.95)",
        ),
        Option(
            ("--uncertain",),
            action="store_true",
            help="also write the [uncertain] entry of the class's MTBF and shape: their joint "
            'uncertainty from the fit (a bivariate lognormal, dist = "mvlognormal")',
        ),
        Option(
            ("--failure-states",),
            metavar="STATES",
            default="NODE_FAIL",
            help="an sacct log: comma-separated job states that end in a node failure (default NODE_FAIL; "
            "e.g. NODE_FAIL,REQUEUED,TIMEOUT)",
        ),
        Option(("-o", "--output"), metavar="TABLE.toml", help="write the [[failures]] table to this TOML file"),
        Option(
            ("--plot",),
            metavar="FIG.png",
            help="write a Weibull probability plot (PNG; PDF or SVG by suffix; needs matplotlib)",
        ),
    ),
)

FIT_POWER = Command(
    "fit-power",
    help="fit the idle power and busy utilization of a GPU power log (nvidia-smi CSV or dcgmi dmon)",
    description="Read a GPU power log with utilization (nvidia-smi --query-gpu=timestamp,index,power.draw,"
    "utilization.gpu --format=csv, or dcgmi dmon -e 155,203), split its samples into idle and busy by "
    "utilization, and print the power by state and the scenario keys as --set options (docs/fitting.md).",
    options=(
        Option(("log",), metavar="LOG", help="nvidia-smi CSV or dcgmi dmon output"),
        Option(("--gpu-type",), metavar="TYPE", help="catalog GPU whose TDP scales the busy power (e.g. H100-SXM)"),
        Option(("--tdp-w",), type=float, metavar="W", help="TDP [W] (default: the log's power.limit, else --gpu-type)"),
        Option(
            ("--idle-max",),
            type=float,
            default=5.0,
            metavar="PERCENT",
            help="utilization at or below which a sample is idle [%%] (default 5)",
        ),
        Option(
            ("--busy-min",),
            type=float,
            default=90.0,
            metavar="PERCENT",
            help="utilization at or above which a sample is busy [%%] (default 90)",
        ),
    ),
)

PLOT = Command(
    "plot",
    help="draw one figure of a result file (needs matplotlib)",
    options=(
        _RESULT_FILE,
        Option(("--kind",), required=True, choices=PLOT_KINDS, help="which figure"),
        Option(
            ("-o", "--output"),
            required=True,
            metavar="FIG.png",
            help="image file to write, in the format its suffix names (png, pdf, svg, jpg, ...)",
        ),
        Option(
            ("--x",),
            metavar="DIM",
            help="--kind scaling: sweep dimension on the x axis (default gpus, or the only sweep dimension)",
        ),
        Option(
            ("--variable",),
            metavar="NAME",
            help="--kind cdf: per-run variable whose distribution is drawn (default wall_time); "
            "--kind sensitivity: per-run variable whose indices are drawn (default cost)",
        ),
        _resamples("--kind sensitivity: "),
    ),
)

REPORT = Command(
    "report",
    help="write figures and a Markdown summary of a result file (needs matplotlib)",
    options=(
        _RESULT_FILE,
        Option(("-o", "--output"), metavar="FOLDER", help="folder to write (default: FILE without .nc + -report)"),
        *_deadline(
            "name the cheapest configuration finishing within DAYS days with --probability "
            "(default: none; the report invents no deadline)",
            0.9,
            "required probability of finishing within --deadline, in (0, 1) (default 0.9)",
        ),
        _resamples("with parameter draws: "),
    ),
)

PLAN = Command(
    "plan",
    help="search cluster configurations: screen every candidate, select the best by simulation",
    options=(
        Option(
            ("plan",),
            metavar="PLAN.toml",
            help="plan file: a scenario plus [search], [constraints], [plan]; or the name of a shipped plan "
            "(`mcsim scenarios` lists them; a file of that name in the current folder wins)",
        ),
        _overrides(
            "override a value of the plan file, as mcsim run --set does: a scenario key "
            "(compute.efficiency=0.4) or a key of [search], [constraints] or [plan] (search.gpus=[1024, 2048], "
            "constraints.deadline_days=30); a plan has no sweep, so a list is a value only in those three "
            "tables; repeatable (default: none)"
        ),
        Option(("-o", "--output"), help="output file (default: results/NAME.nc, NAME the plan's name made file-safe)"),
        Option(("--quiet",), action="store_true", help="no progress and no table (default: shown)"),
        Option(
            ("--workers",),
            type=int,
            metavar="N",
            help="run on a local dask cluster of N worker processes (default: in this process)",
        ),
        Option(("--scheduler",), metavar="ADDRESS", help="run on the dask scheduler at ADDRESS (default: none)"),
        _NO_RESUME,
    ),
)

SCENARIOS = Command(
    "scenarios",
    help="list the shipped scenarios and plans, or copy one to edit",
    description="List the shipped scenarios and plans (run one by name: mcsim run NAME, mcsim plan NAME), "
    "or copy one to a file to edit.",
    commands=(
        Command("list", help="list them: name, kind (scenario or plan) and description (the default)"),
        Command(
            "copy",
            help="write a shipped scenario or plan to a file to edit (never over an existing file)",
            options=(
                Option(("name",), metavar="NAME", help="a shipped name, as `mcsim scenarios` lists it"),
                Option(
                    ("dest",),
                    metavar="DEST",
                    nargs="?",
                    help="the file to write, or an existing folder to write NAME.toml in (default: NAME.toml here)",
                ),
            ),
        ),
    ),
    dest="scenarios_action",
)

MCSIM = Command(
    "mcsim",
    description="Monte Carlo reliability simulator for LLM training clusters",
    options=(Option(("--version",), action="store_true", help="print the version and exit"),),
    commands=(RUN, COMBINE, VALIDATE, SUMMARY, SENSITIVITY, FIT_FAILURES, FIT_POWER, PLOT, REPORT, PLAN, SCENARIOS),
    dest="command",
)
