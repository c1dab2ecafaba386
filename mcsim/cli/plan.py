"""``mcsim plan PLAN.toml``: the command (argument checks, progress, output file, terminal table).

Exit status 0 with a recommendation; 1 with one line when no candidate meets the
constraints (docs/model.md §9, "Outcomes"); 2 for a bad plan file or option (one
line naming the file and key, no output file).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

EXIT_NO_CANDIDATE = 1
EXIT_USAGE = 2


def cmd_plan(args: argparse.Namespace) -> int:
    """Run ``mcsim plan`` (:func:`mcsim.plan`, with a resume store, the output's lock and its file);
    returns the exit status (ScenarioError propagates to the caller's handler)."""
    from mcsim.cli.output import lock_output, output_problem, write_and_clear, write_failed
    from mcsim.engine.resume import PieceStore
    from mcsim.engine.tasks import DEFAULT_CHUNK_RUNS
    from mcsim.errors import BackendUnavailable, NoCandidate, PieceWriteError
    from mcsim.io.atomic import file_identity
    from mcsim.io.netcdf import is_result_file
    from mcsim.planning.plan_file import load_plan
    from mcsim.planning.run import plan as plan_result
    from mcsim.report.plan.table import plan_table

    plan = load_plan(args.plan, args.overrides)
    output = Path(args.output) if args.output is not None else Path("results") / f"{plan.scenario.file_stem}.nc"
    if problem := output_problem(args.output if args.output is not None else output, [plan.source], is_result_file):
        print(f"mcsim: error: -o: {output}: {problem}", file=sys.stderr)
        return EXIT_USAGE
    from mcsim.cli.run import execution_option_error

    if message := execution_option_error(args):
        print(f"mcsim: error: {message}", file=sys.stderr)
        return EXIT_USAGE

    def notify(message: str) -> None:
        if not args.quiet:
            print(f"mcsim: {message}", file=sys.stderr)

    store = None if args.no_resume else PieceStore(output, plan.scenario, DEFAULT_CHUNK_RUNS, notify=notify)
    if store is not None and (problem := store.problem()):
        print(f"mcsim: error: -o: {output}: {problem}", file=sys.stderr)
        return EXIT_USAGE
    with contextlib.ExitStack() as held:
        if (status := lock_output(held, output)) is not None:  # one writer per output, as mcsim run
            return status
        previous = file_identity(output)  # the output is claimed: only this file may be replaced
        try:
            ds = plan_result(
                plan,
                workers=args.workers,
                scheduler=args.scheduler,
                store=store,
                progress=False if args.quiet else None,
                notify=notify,
            )
        except NoCandidate as err:
            if store is not None:  # a finished answer: its pieces would only be litter beside no output
                store.clear()
                store.remove_stale()
            print(f"mcsim: no recommendation: {err}", file=sys.stderr)
            return EXIT_NO_CANDIDATE
        except BackendUnavailable as err:
            print(f"mcsim: error: {err}", file=sys.stderr)
            return EXIT_USAGE
        except PieceWriteError as err:
            return write_failed(err.path, err.error, "the pieces finished before it are kept; rerun to resume")
        if (status := write_and_clear(ds, output, store, notify, previous)) is not None:
            return status
    if not args.quiet:
        print(plan_table(ds))
        print(f"wrote {output}")
    return 0
