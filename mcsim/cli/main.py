"""The ``mcsim`` command line.

``mcsim run [SCENARIO|NAME] [--runs N] [--seed S] [--mode fast|exact] [--set KEY=VALUE]... [-o OUT.nc]``
(NAME: a shipped scenario, e.g. ``capacity-planning``; a file of that name in the current folder wins)
``mcsim scenarios [list]`` (the shipped scenarios and plans) and ``mcsim scenarios copy NAME [DEST]``
(one of them written to a file to edit; never over an existing file)
``mcsim summary OUT.nc [--all] [--sort VAR]``
``mcsim validate [--runs N] [--step-time | --memory]``
``mcsim sensitivity OUT.nc [--output VAR]`` (Sobol indices of the uncertain inputs of a run with draws)
``mcsim fit-failures LOG.csv [--name NAME] [--scope gpu|node|cluster] [--recovery-minutes M] [--confidence C]
[--uncertain] [-o TABLE.toml] [--plot FIG.png]``
(fit a Weibull failure law to a log of unit lifetimes, or to Slurm's ``sacct`` job records, and print a
``[[failures]]`` table; see docs/fitting.md)
``mcsim calibrate MEASURED.csv [SCENARIO] [--set KEY=VALUE]... [--fit KEY [--range LOW:HIGH]] [-o OUT.toml]``
(fit compute.efficiency of the operator step model to measured iteration times; see docs/calibration.md)
``mcsim fit-power LOG [--gpu-type TYPE] [--tdp-w W] [--idle-max PERCENT] [--busy-min PERCENT]``
(the idle power and busy utilization of an nvidia-smi or dcgmi power log, as ``--set`` options)
``mcsim plot OUT.nc --kind scaling|cdf|pareto|breakdown|sensitivity -o FIG.png [--x gpus] [--variable wall_time]``
(one figure of a result file; needs matplotlib: ``pip install 'mcsim-llm[plot]'``)
``mcsim report OUT.nc [-o FOLDER]``
(the figures that apply and a Markdown README.md with the best configurations, in OUT-report/ by default;
for a plan file written by ``mcsim plan``, the explanation of its recommendation and the recommendation as a
runnable scenario, ``recommended.toml``)
``mcsim plan PLAN.toml|NAME [--set KEY=VALUE]... [-o PLAN.nc] [--quiet] [--workers N] [--scheduler ADDRESS]
[--no-resume] [--format text|json|csv]``
(search every cluster configuration of a plan file, screen them analytically, select the best by simulation;
docs/model.md §9; exit 1 with one line when no candidate meets the constraints)

``mcsim schema [--plan] [-o SCHEMA.json]`` (the JSON Schema of scenario or plan files) and
``mcsim completion bash|zsh`` (a shell completion script); ``mcsim --version --verbose`` (the versions
of the scientific stack). ``summary``, ``validate``, ``plan`` and ``report`` take ``--format json|csv``
(tables for programs); ``-`` reads a scenario, a plan file or a failure log from the standard input;
``mcsim --help`` lists the exit statuses.

User mistakes (bad scenario, bad option value, unreadable file, an output
path that cannot or must not be written) print one line ``mcsim: error: ...``
naming the file and key, exit with status 2 and write no output file. A write
the machine refuses part-way (disk full, quota, ``ulimit -f``) prints one line
and exits with status 1, leaving no partial file.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
from collections.abc import Callable

from mcsim._version import __version__, show_versions
from mcsim.cli.commands import (
    cmd_calibrate,
    cmd_fit_failures,
    cmd_fit_power,
    cmd_plot,
    cmd_report,
    cmd_scenarios,
    cmd_sensitivity,
    cmd_summary,
    cmd_validate,
)
from mcsim.cli.declarations import EXIT_USAGE, usage_error
from mcsim.cli.output import ENVIRONMENT_ERRORS
from mcsim.cli.parser import build_parser
from mcsim.cli.plan import cmd_plan
from mcsim.cli.run import cmd_combine, cmd_run_within_limits
from mcsim.cli.tools import cmd_completion, cmd_schema
from mcsim.errors import MachineRefusedWrite, ScenarioError
from mcsim.io.text_input import STDIN

# The function of each command (parser.MCSIM's subcommands), by the name args.command holds.
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "run": cmd_run_within_limits,
    "combine": cmd_combine,
    "validate": cmd_validate,
    "summary": cmd_summary,
    "sensitivity": cmd_sensitivity,
    "fit-failures": cmd_fit_failures,
    "calibrate": cmd_calibrate,
    "fit-power": cmd_fit_power,
    "plot": cmd_plot,
    "report": cmd_report,
    "plan": cmd_plan,
    "scenarios": cmd_scenarios,
    "schema": cmd_schema,
    "completion": cmd_completion,
}
# Commands whose standard output is only what they wrote or found, which -q / --quiet silences whole
# (errors still go to stderr; the exit status still tells). run, combine and plan handle --quiet themselves.
SILENCED_BY_QUIET = ("validate", "fit-failures", "plot", "report", "scenarios", "schema")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``mcsim`` console script; returns the exit status.

    When the reader of standard output goes away (``mcsim run | head``), the
    command stops quietly with status 1 (the recipe of the Python docs for
    SIGPIPE): no traceback, no message. When standard output cannot take the
    bytes (``> /dev/full``, a full disk), one line on stderr and status 1.
    """
    with contextlib.suppress(AttributeError, ValueError):  # a path of bytes that are not UTF-8 in a message
        sys.stderr.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
    try:
        status = _main(argv)
        sys.stdout.flush()  # here, not at exit, so that a closed pipe is caught
    except BrokenPipeError:
        _drop_stdout()
        return 1
    except OSError as err:
        # a write the standard output refused (full disk or device, quota, size limit, I/O error); file
        # writes are reported by the commands themselves, with their path
        if not (_stdout_fails() or (err.filename is None and err.errno in ENVIRONMENT_ERRORS)):
            raise
        _drop_stdout()
        print(f"mcsim: error: cannot write the standard output: {err.strerror or err}", file=sys.stderr)
        return 1
    return status


def _stdout_fails() -> bool:
    """Whether standard output cannot take the bytes it holds (``mcsim summary > /dev/full``)."""
    try:
        sys.stdout.flush()
    except OSError:
        return True
    return False


def _drop_stdout() -> None:
    """Point standard output at the null device: Python flushes it again at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no file descriptor (a captured stream)
        return


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        if args.verbose:
            show_versions()
        else:
            print(f"mcsim {__version__}")
        return 0
    if args.verbose:
        return usage_error("--verbose: applies with --version")
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    _read_stdin_where_dash(args)
    try:
        if getattr(args, "quiet", False) and args.command in SILENCED_BY_QUIET:
            with contextlib.redirect_stdout(io.StringIO()):
                return COMMANDS[args.command](args)
        return COMMANDS[args.command](args)
    except ScenarioError as err:
        return usage_error(str(err))
    except MachineRefusedWrite as err:  # the output's folder cannot take a file (disk full, quota): exit 1
        print(f"mcsim: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        _silence_shutdown_logs()
        print("mcsim: interrupted; no output written", file=sys.stderr)
        return 130


def _read_stdin_where_dash(args: argparse.Namespace) -> None:
    """``-`` for the file a command reads: the scenario of ``run``, the plan file of ``plan``, the log of
    ``fit-failures``, read from the standard input (named so in messages: ``/dev/stdin``)."""
    for name in ("scenario", "plan", "log"):
        if getattr(args, name, None) == "-":
            setattr(args, name, STDIN)


def _silence_shutdown_logs() -> None:
    """:func:`mcsim.engine.backends.silence_shutdown_logs`, if the engine was imported at all."""
    backends = sys.modules.get("mcsim.engine.backends")
    if backends is not None:
        backends.silence_shutdown_logs()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
