"""``mcsim run``: simulate a scenario, print its summary table, write its result file."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

from mcsim.cli.output import lock_output, output_problem, write_and_clear, write_failed
from mcsim.cli.parser import EXIT_USAGE
from mcsim.report.tables import summary_table


def cmd_run_within_limits(args: argparse.Namespace) -> int:
    """``mcsim run`` under the memory and time limits of ``--max-memory`` and ``--max-hours``."""
    from mcsim.scenario.limits import limits, parse_bytes

    try:
        max_memory = None if args.max_memory is None else parse_bytes(args.max_memory)
    except ValueError as err:
        print(f"mcsim: error: --max-memory: {err}", file=sys.stderr)
        return EXIT_USAGE
    if args.max_hours is not None and not args.max_hours > 0:
        print(f"mcsim: error: --max-hours: expected a number of hours > 0, got {args.max_hours:g}", file=sys.stderr)
        return EXIT_USAGE
    with limits(max_memory, args.max_hours):
        return cmd_run(args)


def cmd_run(args: argparse.Namespace) -> int:
    from mcsim.engine.backends import BackendUnavailable, usable_cpus
    from mcsim.engine.resume import PieceStore, PieceWriteError
    from mcsim.engine.simulate import simulate
    from mcsim.engine.tasks import DEFAULT_CHUNK_RUNS
    from mcsim.io.netcdf import is_result_file
    from mcsim.scenario.config import load_scenario
    from mcsim.scenario.schema import run_option

    for name in ("runs", "seed"):  # blamed on the option, not on the scenario file
        if getattr(args, name) is not None:
            run_option(name, getattr(args, name), f"--{name}")
    scenario = load_scenario(args.scenario, args.overrides, runs=args.runs, seed=args.seed, mode=args.mode)
    output = Path(args.output) if args.output is not None else Path("results") / f"{scenario.file_stem}.nc"
    inputs = [args.scenario] if args.scenario else []
    problem = output_problem(args.output if args.output is not None else output, inputs, is_result_file)
    if problem:
        print(
            f"mcsim: error: -o: {output}: {problem}" if args.output != "" else f"mcsim: error: -o: {problem}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    for option, value in (("--workers", args.workers), ("--chunk-runs", args.chunk_runs)):
        if value is not None and value < 1:
            print(f"mcsim: error: {option}: expected a whole number >= 1, got {value}", file=sys.stderr)
            return EXIT_USAGE
    if args.workers is not None and args.scheduler:
        print("mcsim: error: --workers and --scheduler: give one of them", file=sys.stderr)
        return EXIT_USAGE
    if args.workers is not None and args.workers > (cpus := usable_cpus()):
        print(
            f"mcsim: error: --workers: expected at most {cpus} (the CPUs this process may use; more "
            f"worker processes only add memory), got {args.workers}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    check_feasible(scenario)
    chunk = args.chunk_runs or DEFAULT_CHUNK_RUNS

    def notify(message: str) -> None:
        if not args.quiet:
            print(f"mcsim: {message}", file=sys.stderr)

    store = None if args.no_resume else PieceStore(output, scenario, chunk, notify=notify)
    if store is not None and (problem := store.problem()):
        print(f"mcsim: error: -o: {output}: {problem}", file=sys.stderr)
        return EXIT_USAGE
    with contextlib.ExitStack() as held:
        if (status := lock_output(held, output)) is not None:
            return status
        try:
            ds = simulate(
                scenario,
                progress=False if args.quiet else None,
                chunk_runs=chunk,
                workers=args.workers,
                scheduler=args.scheduler,
                store=store,
                notify=notify,
            )
        except BackendUnavailable as err:
            print(f"mcsim: error: {err}", file=sys.stderr)
            return EXIT_USAGE
        except PieceWriteError as err:
            return write_failed(err.path, err.error, "the pieces finished before it are kept; rerun to resume")
        except (OSError, TimeoutError) as err:
            if not args.scheduler:
                raise
            print(f"mcsim: error: --scheduler: {args.scheduler}: lost the scheduler ({err})", file=sys.stderr)
            return EXIT_USAGE
        except KeyboardInterrupt:  # the backend (and any dask cluster) is closed by now
            kept = (
                f"; finished tasks are kept in {store.folder}: rerun the same command to resume"
                if store is not None and store.folder.is_dir()
                else ""
            )
            print(f"mcsim: interrupted; no output written{kept}", file=sys.stderr)
            return 130
        if problem := output_problem(output, inputs, is_result_file):  # something put there meanwhile
            print(f"mcsim: error: -o: {output}: {problem}", file=sys.stderr)
            return EXIT_USAGE
        if (status := write_and_clear(ds, output, store, notify)) is not None:
            return status
    if not args.quiet:
        print(summary_table(ds))
        print(f"wrote {output}")
    return 0


def check_feasible(scenario) -> None:
    """A lone infeasible configuration, or a sweep with none feasible, is a user error."""
    from mcsim.model.workload import workload
    from mcsim.scenario.schema import ScenarioError

    results = [workload(cfg) for cfg in scenario.configs]
    if not scenario.axes and not results[0].feasible:
        raise ScenarioError(scenario.source, results[0].infeasible_key, results[0].infeasible_reason)
    if not any(wl.feasible for wl in results):
        raise ScenarioError(
            scenario.source,
            "sweep",
            f"no configuration of the sweep is feasible; first reason: {results[0].infeasible_reason}",
        )
