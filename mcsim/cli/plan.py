"""``mcsim plan PLAN.toml``: the command (argument checks, progress, output file, terminal table, or
the finalists as JSON or CSV with ``--format``).

Exit status 0 with a recommendation; 1 with one line when no candidate meets the
constraints (docs/model.md §9, "Outcomes"); 2 for a bad plan file or option (one
line naming the file and key, no output file).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from mcsim.cli.declarations import usage_error
from mcsim.cli.output import PIECES_KEPT, output_problem, write_failed, write_resumable
from mcsim.cli.run import execution_option_error
from mcsim.errors import BackendUnavailable, NoCandidate, PieceWriteError
from mcsim.io.netcdf import is_result_file

if TYPE_CHECKING:
    import xarray as xr

    from mcsim.engine.resume import PieceStore

EXIT_NO_CANDIDATE = 1  # the plan's constraints rule out every candidate


def cmd_plan(args: argparse.Namespace) -> int:
    """Run ``mcsim plan`` (:func:`mcsim.plan`, with a resume store, the output's lock and its file);
    returns the exit status (ScenarioError propagates to the caller's handler)."""
    from mcsim.engine.tasks import DEFAULT_CHUNK_RUNS
    from mcsim.planning import run as plan_run
    from mcsim.planning.plan_file import load_plan
    from mcsim.report.plan.table import plan_table

    plan = load_plan(args.plan, args.overrides)
    output = Path(args.output) if args.output is not None else Path("results") / f"{plan.scenario.file_stem}.nc"
    if problem := output_problem(args.output if args.output is not None else output, [plan.source], is_result_file):
        return usage_error(f"-o: {output}: {problem}")  # with the path, even for -o ''
    if message := execution_option_error(args):
        return usage_error(message)

    def planned(store: PieceStore | None, notify: Callable[[str], None]) -> xr.Dataset | int:
        try:
            return plan_run.plan(
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
            return usage_error(str(err))
        except PieceWriteError as err:
            return write_failed(err.path, err.error, PIECES_KEPT)

    table: Callable[[xr.Dataset], str] = plan_table
    if args.format != "text":
        from mcsim.report.frames import plan_frame, render

        table = lambda ds: render(plan_frame(ds), args.format)  # noqa: E731  (the finalists for programs)
    return write_resumable(args, output, plan.scenario, DEFAULT_CHUNK_RUNS, planned, table)
