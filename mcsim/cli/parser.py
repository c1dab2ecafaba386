"""The argument parser of the ``mcsim`` command line, declared as data: every command, option and help text.

:data:`MCSIM` is the table: the program, its subcommands (:class:`Command`) and their options
(:class:`Option`, argparse's keywords by name), in the order ``--help`` lists them;
:func:`build_parser` makes the argparse parser from it.

How a table is declared and made into a parser: :mod:`mcsim.cli.declarations`.
"""

from __future__ import annotations

import argparse
import dataclasses

from mcsim.analysis.sensitivity import MAX_RESAMPLES, MIN_RESAMPLES, RESAMPLES
from mcsim.cli.declarations import FORMATS, Command, Option, parser_of
from mcsim.engine.tasks import DEFAULT_CHUNK_RUNS
from mcsim.report.tables import MAX_TABLE_ROWS
from mcsim.scenario.schema import RunSection

# --------------------------------------------------------------------------- the table

PLOT_KINDS = ("scaling", "cdf", "pareto", "breakdown", "sensitivity")
_RUN_DEFAULTS = {field.name: field.default for field in dataclasses.fields(RunSection)}
_NO_RESUME = Option(
    ("--no-resume",),
    action="store_true",
    help="do not record finished tasks beside the output, nor reuse recorded ones (default: record and reuse)",
)
_RESULT_FILE = Option(("file",), help="netCDF file written by mcsim run")


def _quiet(help: str) -> Option:
    """``-q`` / ``--quiet`` with its help text (what it leaves out)."""
    return Option(("-q", "--quiet"), action="store_true", help=help)


_QUIET_WROTE = _quiet("print only errors, not the line naming what was written (default: printed)")


def _format(what: str) -> Option:
    """``--format text|json|csv``: ``what`` for people (aligned text) or for programs."""
    return Option(
        ("--format",),
        choices=FORMATS,
        default="text",
        help=f"{what}: aligned text for people, or JSON (rows and units) or CSV for programs, numbers in the file's "
        "units (default text)",
    )


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
            help="scenario TOML, - for the standard input, or the name of a shipped scenario (`mcsim scenarios` "
            "lists them; a file of that name in the current folder wins) (default: the shipped Llama 3 405B "
            "reference, llama3-405b)",
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
        _quiet("no progress bar and no table (default: shown)"),
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
        Option(
            ("--max-memory",),
            metavar="SIZE",
            help="refuse parts whose combination needs more memory than SIZE, estimated from their headers "
            "(e.g. 16G, inf; default: half the available memory)",
        ),
        _quiet("print only errors"),
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
        Option(
            ("--memory",),
            action="store_true",
            help="instead: the memory model against published memory per GPU and out-of-memory layouts",
        ),
        Option(
            ("--moe",),
            action="store_true",
            help="instead: the step-time model against published mixture-of-experts throughput (no simulation)",
        ),
        _format("the comparison table"),
        _quiet("print nothing: the exit status says whether every comparison passed"),
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
        _format("the table (json and csv: every configuration, mean, 95 %% CI, 5th and 95th percentiles)"),
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
            "(sacct --parsable2 with JobID, State, Start, End, NodeList: one unit per node) (see docs/fitting.md); "
            "- for the standard input",
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
        _quiet("print only errors: no fit table, no [[failures]] table, no line naming what was written"),
    ),
)

CALIBRATE = Command(
    "calibrate",
    help="fit compute.efficiency (operator step model) to your measured iteration times",
    description="Fit compute.efficiency of the operator step-time model (and, with --fit, one more numeric "
    "scenario key where the measurements resolve it) to measured iteration times: a CSV file of layouts and "
    "seconds or MFU (docs/calibration.md). Prints each row's leave-one-out error, how many pairs of layouts the "
    "model orders as measured, and the calibrated keys as --set options; -o writes the scenario with them set.",
    options=(
        Option(
            ("measurements",),
            metavar="MEASURED.csv",
            help="CSV with columns gpus[,tp,pp,cp,dp,microbatch,interleave,global_batch,section.key...] and "
            "seconds or mfu, one row per measured layout (docs/calibration.md)",
        ),
        Option(
            ("scenario",),
            nargs="?",
            help="the scenario the layouts were measured on: a TOML file or a shipped name "
            "(default: the shipped reference, llama3-405b)",
        ),
        _overrides("override a scenario value before fitting, as mcsim run --set does; repeatable (default: none)"),
        Option(
            ("--fit",),
            metavar="KEY",
            dest="fit_key",
            help="also fit this numeric scenario key (e.g. parallelism.overlap_dp); refused when the "
            "measurements do not resolve it (default: compute.efficiency alone)",
        ),
        Option(
            ("--range",),
            metavar="LOW:HIGH",
            dest="key_range",
            help="with --fit: the range of KEY searched (default: its bounds when it is a share in [0, 1])",
        ),
        Option(
            ("--repeatability",),
            type=float,
            metavar="SHARE",
            help="measured times closer than this share are not taken as ordered (default 0.028, "
            "BigScience's repeated layout)",
        ),
        Option(
            ("-o", "--output"),
            metavar="OUT.toml",
            help="write the scenario with the calibrated keys set (never over an existing file) (default: none)",
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
        _QUIET_WROTE,
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
        Option(
            ("--format",),
            choices=FORMATS,
            default="text",
            help="json or csv: also write the summary table as summary.json or summary.csv in the folder, "
            "for programs (default text: the README's tables only)",
        ),
        _QUIET_WROTE,
    ),
)

PLAN = Command(
    "plan",
    help="search cluster configurations: screen every candidate, select the best by simulation",
    options=(
        Option(
            ("plan",),
            metavar="PLAN.toml",
            help="plan file: a scenario plus [search], [constraints], [plan]; - for the standard input; or the name "
            "of a shipped plan (`mcsim scenarios` lists them; a file of that name in the current folder wins)",
        ),
        _overrides(
            "override a value of the plan file, as mcsim run --set does: a scenario key "
            "(compute.efficiency=0.4) or a key of [search], [constraints] or [plan] (search.gpus=[1024, 2048], "
            "constraints.deadline_days=30); a plan has no sweep, so a list is a value only in those three "
            "tables; repeatable (default: none)"
        ),
        Option(("-o", "--output"), help="output file (default: results/NAME.nc, NAME the plan's name made file-safe)"),
        _quiet("no progress and no table (default: shown)"),
        Option(
            ("--workers",),
            type=int,
            metavar="N",
            help="run on a local dask cluster of N worker processes (default: in this process)",
        ),
        Option(("--scheduler",), metavar="ADDRESS", help="run on the dask scheduler at ADDRESS (default: none)"),
        _NO_RESUME,
        _format("the table of finalists"),
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
                _QUIET_WROTE,
            ),
        ),
    ),
    dest="scenarios_action",
)

SCHEMA = Command(
    "schema",
    help="write the JSON Schema of scenario files (or of plan files), for editors to check and complete them",
    description="Write the JSON Schema (draft 2020-12) of scenario files, generated from the one schema "
    "(mcsim/scenario/schema.py), for editors that check and complete TOML against a JSON Schema "
    "(e.g. taplo, Even Better TOML).",
    options=(
        Option(
            ("--plan",),
            action="store_true",
            help="the schema of plan files: a scenario plus [search], "
            "[constraints] and [plan] (default: of scenario files)",
        ),
        Option(("-o", "--output"), metavar="SCHEMA.json", help="the file to write (default: the standard output)"),
        _QUIET_WROTE,
    ),
)

SHELLS = ("bash", "zsh")

COMPLETION = Command(
    "completion",
    help="print a shell completion script for bash or zsh",
    description="Print the completion script of mcsim's commands and options for a shell, generated from "
    'the command table. bash: eval "$(mcsim completion bash)" in ~/.bashrc; zsh: mcsim completion zsh > '
    "a file named _mcsim in a folder of $fpath.",
    options=(Option(("shell",), choices=SHELLS, help="the shell: bash or zsh"),),
)

MCSIM = Command(
    "mcsim",
    description="Monte Carlo reliability simulator for LLM training clusters",
    options=(
        Option(("--version",), action="store_true", help="print the version and exit"),
        Option(
            ("--verbose",),
            action="store_true",
            help="with --version: also Python's, the platform's and the scientific stack's versions",
        ),
    ),
    commands=(
        RUN,
        COMBINE,
        VALIDATE,
        SUMMARY,
        SENSITIVITY,
        FIT_FAILURES,
        CALIBRATE,
        FIT_POWER,
        PLOT,
        REPORT,
        PLAN,
        SCENARIOS,
        SCHEMA,
        COMPLETION,
    ),
    dest="command",
)


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of the whole command line, :data:`MCSIM`."""
    return parser_of(MCSIM)
