"""``mcsim run``: simulate a scenario, print its summary table, write its result file; ``mcsim combine``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from mcsim.cli.commands import read_result_file, result_file_problem
from mcsim.cli.declarations import EXIT_USAGE, usage_error
from mcsim.cli.output import (
    PIECES_KEPT,
    locked_write,
    output_error,
    output_problem,
    write_failed,
    write_resumable,
)
from mcsim.errors import BackendUnavailable, PieceWriteError, ScenarioError
from mcsim.io.netcdf import is_result_file, result_attribute
from mcsim.report.tables import summary_table

if TYPE_CHECKING:
    import xarray as xr

    from mcsim.engine.resume import PieceStore
    from mcsim.scenario.config import Scenario
    from mcsim.scenario.shard import Shard


def cmd_run_within_limits(args: argparse.Namespace) -> int:
    """``mcsim run`` under the memory and time limits of ``--max-memory`` and ``--max-hours``."""
    from mcsim.scenario.limits import limits, parse_bytes

    try:
        max_memory = None if args.max_memory is None else parse_bytes(args.max_memory)
    except ValueError as err:
        return usage_error(f"--max-memory: {err}")
    if args.max_hours is not None and not args.max_hours > 0:
        return usage_error(f"--max-hours: expected a number of hours > 0, got {args.max_hours:g}")
    with limits(max_memory, args.max_hours):
        return cmd_run(args)


def cmd_run(args: argparse.Namespace) -> int:
    """Simulate the scenario of ``args``, write its result file and print its summary table.

    Returns the exit status: 0, ``EXIT_USAGE`` for a user error (reported on stderr), 130
    when interrupted, or that of a failed write.
    """
    from mcsim.engine.tasks import DEFAULT_CHUNK_RUNS

    shard = None if args.shard is None else run_shard(args.shard)
    if args.shard is not None and shard is None:
        return EXIT_USAGE
    scenario = _load_scenario(args, shard)  # its memory checked for the part's share
    if shard is not None and (problem := shard_sweep_problem(shard, len(scenario.configs))):
        return usage_error(problem)
    stem = scenario.file_stem if shard is None else f"{scenario.file_stem}.part{shard.index}of{shard.count}"
    output = Path(args.output) if args.output is not None else Path("results") / f"{stem}.nc"
    inputs = [scenario.source] if args.scenario else []  # a shipped scenario's name resolved to its file
    if problem := output_problem(args.output if args.output is not None else output, inputs, is_result_file):
        return output_error(args.output, output, problem)
    if problem := other_part_problem(output, shard):
        return output_error(args.output, output, problem)
    if message := execution_option_error(args):
        return usage_error(message)
    check_feasible(scenario)
    chunk = args.chunk_runs or DEFAULT_CHUNK_RUNS

    def simulated(store: PieceStore | None, notify: Callable[[str], None]) -> xr.Dataset | int:
        ds = simulate_reporting_errors(args, scenario, chunk, store, notify, shard)
        if not isinstance(ds, int) and (
            problem := output_problem(output, inputs, is_result_file) or other_part_problem(output, shard)
        ):
            return usage_error(f"-o: {output}: {problem}")  # something put there meanwhile
        return ds

    return write_resumable(args, output, scenario, chunk, simulated, summary_table if shard is None else part_note)


def part_note(ds: xr.Dataset) -> str:
    """What ``mcsim run --shard`` prints in place of the summary table: a part holds only some
    configurations, and no table or decision is made of it until the parts are combined."""
    from mcsim.engine.shards import part_configurations

    held, total = part_configurations(ds)
    return (
        f"part {ds.attrs.get('shard', '?')} of a sharded run: {held} of {total} configuration entries simulated; "
        "combine every part for the summary (mcsim combine PART.nc... -o OUT.nc)"
    )


def other_part_problem(output: Path, shard: Shard | None) -> str:
    """Why the part ``shard`` of a sweep may not replace the result file at ``output``, or "".

    A part replaces only a file of the same part (a rerun): ``--shard 1/2`` with the ``-o`` of
    ``--shard 0/2`` would lose the first part.
    """
    if shard is None or (held := result_attribute(output, "shard")) is None or held == shard.label:
        return ""
    return (
        f"is part {held} of a sharded run; refusing to replace it with part {shard.label} (give each part its own -o)"
    )


def _load_scenario(args: argparse.Namespace, shard: Shard | None = None) -> Scenario:
    """The scenario of ``mcsim run``'s arguments (its memory checked for the part ``shard`` of the sweep only);
    a bad ``--runs`` or ``--seed`` is blamed on the option."""
    from mcsim.scenario.config import load_scenario
    from mcsim.scenario.schema import run_option

    for name in ("runs", "seed"):  # blamed on the option, not on the scenario file
        if getattr(args, name) is not None:
            run_option(name, getattr(args, name), f"--{name}")
    return load_scenario(args.scenario, args.overrides, shard=shard, runs=args.runs, seed=args.seed, mode=args.mode)


def execution_option_error(args: argparse.Namespace) -> str | None:
    """What is wrong with ``--workers``, ``--chunk-runs`` and ``--scheduler`` (None when nothing).

    Each must be a whole number >= 1; ``--workers`` and ``--scheduler`` exclude each
    other, and ``--workers`` may not exceed the CPUs this process may use.
    """
    from mcsim.engine.backends import usable_cpus

    for option, value in (("--workers", args.workers), ("--chunk-runs", getattr(args, "chunk_runs", None))):
        if value is not None and value < 1:
            return f"{option}: expected a whole number >= 1, got {value}"
    if args.workers is not None and args.scheduler:
        return "--workers and --scheduler: give one of them"
    if args.workers is not None and args.workers > (cpus := usable_cpus()):
        return (
            f"--workers: expected at most {cpus} (the CPUs this process may use; more "
            f"worker processes only add memory), got {args.workers}"
        )
    return None


def simulate_reporting_errors(
    args: argparse.Namespace,
    scenario: Scenario,
    chunk: int,
    store: PieceStore | None,
    notify: Callable[[str], None],
    shard: Shard | None = None,
) -> xr.Dataset | int:
    """The result of simulating ``scenario``, or the exit status of a failure reported on stderr.

    A missing backend is a user error (``EXIT_USAGE``), as is a lost ``--scheduler``; a
    piece that cannot be written is a failed write; an interrupt returns 130 and says
    where the finished tasks are kept. Other errors propagate.
    """
    from mcsim.engine.simulate import simulate

    try:
        return simulate(
            scenario,
            progress=False if args.quiet else None,
            chunk_runs=chunk,
            workers=args.workers,
            scheduler=args.scheduler,
            store=store,
            notify=notify,
            shard=shard,
        )
    except BackendUnavailable as err:
        return usage_error(str(err))
    except PieceWriteError as err:
        return write_failed(err.path, err.error, PIECES_KEPT)
    except (OSError, TimeoutError) as err:
        if not args.scheduler:
            raise
        return usage_error(f"--scheduler: {args.scheduler}: lost the scheduler ({err})")
    except KeyboardInterrupt:  # the backend (and any dask cluster) is closed by now
        from mcsim.engine.backends import silence_shutdown_logs

        silence_shutdown_logs()
        kept = (
            f"; finished tasks are kept in {store.folder}: rerun the same command to resume"
            if store is not None and store.folder.is_dir()
            else ""
        )
        print(f"mcsim: interrupted; no output written{kept}", file=sys.stderr)
        return 130


def check_feasible(scenario: Scenario) -> None:
    """A lone infeasible configuration, or a sweep with none feasible, is a user error."""
    from mcsim.model.workload import workload

    results = [workload(cfg) for cfg in scenario.configs]
    if not scenario.axes and not results[0].feasible:
        raise ScenarioError(scenario.source, results[0].infeasible_key, results[0].infeasible_reason)
    if not any(wl.feasible for wl in results):
        raise ScenarioError(
            scenario.source,
            "sweep",
            f"no configuration of the sweep is feasible; first reason: {results[0].infeasible_reason}",
        )


def run_shard(text: str) -> Shard | None:
    """The :class:`~mcsim.scenario.shard.Shard` of ``--shard``, or None after the error line (read before the
    scenario, whose memory check counts the part's share only)."""
    from mcsim.scenario.shard import parse_shard

    try:
        return parse_shard(text)
    except ValueError as err:
        usage_error(f"--{err}")
        return None


def shard_sweep_problem(shard: Shard, configurations: int) -> str:
    """The error line's text when the part ``shard`` holds none of a sweep's ``configurations``, else ""."""
    try:
        shard.check_sweep(configurations)
    except ValueError as err:
        return f"--{err}"
    return ""


def cmd_combine(args: argparse.Namespace) -> int:
    """``mcsim combine PART.nc... -o OUT.nc``: the whole result of a sharded run (:func:`mcsim.combine`).

    The parts are read one at a time and merged under the writer lock of ``-o``, after the file there (if
    any) is claimed: a file created at ``-o`` while they are merged is never replaced.
    """
    output = Path(args.output)
    if problem := output_problem(args.output, list(args.parts), is_result_file):
        return output_error(args.output, output, problem)
    if (refused := _combine_too_large(args)) is not None:
        return refused

    def combined() -> xr.Dataset | int:
        from mcsim.engine.shards import combine_parts

        if problem := output_problem(output, list(args.parts), is_result_file):
            return usage_error(f"-o: {output}: {problem}")  # something put there before the lock
        for name in args.parts:  # each part is read when its turn comes: only its header now
            if problem := result_file_problem(name):
                return usage_error(problem)
        try:
            return combine_parts(list(args.parts), [Path(name).name for name in args.parts], _read_part)
        except (ValueError, OSError) as err:  # OSError: a part removed or damaged since it was checked
            return usage_error(f"combine: {err}")

    return locked_write(output, combined, summary_table, args.quiet)


def _read_part(path: str | Path) -> xr.Dataset:
    """A part file read for ``mcsim combine`` (:func:`mcsim.cli.commands.open_result_file`'s checks); ValueError
    with its error line otherwise."""
    found = read_result_file(Path(path), complete=False)
    if isinstance(found, str):
        raise ValueError(found)
    return found


def _combine_too_large(args: argparse.Namespace) -> int | None:
    """The exit status of a refusal when the parts' merge would exceed the memory limit (``--max-memory``;
    estimated from the files' headers, none read), else None. A part that cannot be opened is left to the
    merge, which names what is wrong with it."""
    from mcsim.io.netcdf import loaded_bytes
    from mcsim.scenario.limits import check_combine_size, limits, parse_bytes

    try:
        max_memory = None if args.max_memory is None else parse_bytes(args.max_memory)
    except ValueError as err:
        return usage_error(f"--max-memory: {err}")
    sizes = []
    for name in args.parts:
        try:
            sizes.append(loaded_bytes(name))
        except (OSError, ValueError):
            return None
    with limits(max_memory):
        try:
            check_combine_size(sizes, names=[Path(name).name for name in args.parts])
        except ValueError as err:
            return usage_error(f"combine: {err}")
    return None
