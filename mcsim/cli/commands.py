"""The commands that read result files, logs or the shipped scenarios.

``summary``, ``validate``, ``sensitivity``, ``fit-failures``, ``fit-power``, ``plot``, ``report`` and ``scenarios``.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import xarray as xr

from mcsim.cli.declarations import EXIT_USAGE, usage_error
from mcsim.cli.output import output_error, output_problem, path_text_problem, same_path, write_failed
from mcsim.errors import BackendUnavailable, ScenarioError
from mcsim.io.atomic import folder_problem, write_atomic
from mcsim.io.netcdf import open_results, result_attributes
from mcsim.io.variables import sweep_dims
from mcsim.report.tables import sensitivity_table, summary_table


def cmd_validate(args: argparse.Namespace) -> int:
    """Exit 0 when every comparison is within its accepted range or outside for its recorded reason, else 1."""
    from mcsim.analysis.validation import validate, validation_table
    from mcsim.scenario.schema import run_option

    for name in ("runs", "seed"):  # blamed on the option, not on the reference scenarios
        run_option(name, getattr(args, name), f"--{name}")
    if args.runs < 2:
        return usage_error(f"--runs: expected a whole number >= 2, got {args.runs}")
    for flag, name in ((args.step_time, "--step-time"), (args.moe, "--moe")):
        if flag and args.format != "text":
            return usage_error(f"--format: json and csv apply to the comparison with published runs, not {name}")
    if args.step_time:
        from mcsim.analysis.steptime_validation import leave_one_out, step_time_table, step_times_pass, verdict_lines

        results = leave_one_out()
        print(step_time_table(results))
        print("\n".join(verdict_lines(results)))
        return 0 if step_times_pass(results) else 1
    if args.moe:
        from mcsim.analysis import moe_validation

        moe_results = moe_validation.leave_one_out()
        print(moe_validation.moe_table(moe_results))
        return 0 if moe_validation.moe_passes(moe_results) else 1
    if args.memory:
        from mcsim.analysis import memory_validation

        measured = memory_validation.leave_one_out()
        print(memory_validation.memory_table(measured))
        return 0 if memory_validation.memory_passes(measured) else 1
    rows = validate(runs=args.runs, seed=args.seed)
    if args.format == "text":
        print(validation_table(rows))
    else:
        from mcsim.report.frames import render, validation_frame

        print(render(validation_frame(rows), args.format))
    return 0 if all(row.passes for row in rows) else 1


def option_error(args: argparse.Namespace) -> str | None:
    """What is wrong with ``--deadline``, ``--probability`` or ``--resamples`` (None when nothing)."""
    from mcsim.analysis.configurations import check_days, check_probability
    from mcsim.analysis.sensitivity import check_resamples

    checks = (
        ("--deadline", getattr(args, "deadline", None), check_days),
        ("--probability", getattr(args, "probability", None), check_probability),
        ("--resamples", getattr(args, "resamples", None), check_resamples),
    )
    for option, value, check in checks:
        if value is None:
            continue
        try:
            check(value)
        except ValueError as err:
            return f"{option}: {str(err).partition(': ')[2]}"
    return None


def cmd_summary(args: argparse.Namespace) -> int:
    if message := option_error(args):
        return usage_error(message)
    if args.probability is not None and args.deadline is None:
        return usage_error("--probability: applies with --deadline DAYS")
    ds = open_result_file(args.file)
    if ds is None:
        return EXIT_USAGE
    if args.format != "text":
        return _summary_for_programs(ds, args)
    try:
        text = summary_table(
            ds,
            show_all=args.show_all,
            sort=args.sort,
            deadline=args.deadline,
            probability=0.9 if args.probability is None else args.probability,
        )
    except ValueError as err:
        return usage_error(str(err))
    print(text)
    return 0


def _summary_for_programs(ds: xr.Dataset, args: argparse.Namespace) -> int:
    """``mcsim summary --format json|csv``: every configuration's statistics (``--sort``: ordered by its
    mean, best first; ``--deadline``: with the probability of finishing in time, ``p_within``)."""
    from mcsim.analysis.deadline import prob_within
    from mcsim.analysis.summary import TABLE_VARIABLES, summary_frame
    from mcsim.io.variables import PER_RUN, VARIABLES
    from mcsim.report.frames import render

    if args.sort is not None and args.sort not in PER_RUN:
        return usage_error(f"--sort: expected a per-run variable ({', '.join(PER_RUN)}), got {args.sort!r}")
    variables = TABLE_VARIABLES if args.sort in (None, *TABLE_VARIABLES) else (*TABLE_VARIABLES, args.sort)
    try:
        frame = summary_frame(ds, variables)
        if args.deadline is not None:
            within = prob_within(ds, args.deadline)["p_within"]
            frame["p_within"] = np.asarray(within.transpose(*sweep_dims(ds)).values, dtype=float).ravel()
            frame.attrs["units"]["p_within"] = "1"
    except ValueError as err:
        return usage_error(f"{args.file}: {err}")
    if args.sort is not None:
        frame = frame.sort_values(f"{args.sort}_mean", ascending=VARIABLES[args.sort].direction != "higher")
    print(render(frame, args.format))
    return 0


def cmd_sensitivity(args: argparse.Namespace) -> int:
    """``mcsim sensitivity``: :func:`mcsim.sensitivity` of a result file, as a table."""
    from mcsim.analysis.sensitivity import sensitivity

    if message := option_error(args):
        return usage_error(message)
    ds = open_result_file(args.file)
    if ds is None:
        return EXIT_USAGE
    try:
        result = sensitivity(ds, args.output, resamples=args.resamples)
    except ValueError as err:
        return usage_error(f"{args.file}: {err}")
    print(sensitivity_table(result=result))
    return 0


def cmd_fit_failures(args: argparse.Namespace) -> int:
    """``mcsim fit-failures``: :func:`mcsim.fit_failures`, its table printed, the table and figure written."""
    from mcsim.fitting.failure_table import fit_failures, fit_options

    source = str(args.log)
    # the options first, then the outputs, then the log (which may be long to read)
    fit_options(source, scope=args.scope, recovery_minutes=args.recovery_minutes, confidence=args.confidence)
    output = _fit_output(source, "-o", args.output)
    figure_path = _fit_output(source, "--plot", args.plot)
    if output is not None and figure_path is not None and same_path(output, figure_path):
        raise ScenarioError(source, "--plot", f"{figure_path}: the same file as -o; give two names")
    if figure_path is not None:
        _fit_plot_backend()
    found = fit_failures(
        source,
        name=args.name,
        scope=args.scope,
        recovery_minutes=args.recovery_minutes,
        confidence=args.confidence,
        uncertain=args.uncertain,
        failure_states=tuple(state for state in args.failure_states.split(",") if state.strip()),
    )
    fit = found.fit
    figure = _fit_figure(source, found.log, fit) if figure_path is not None else None
    level = f"{100 * found.confidence:g} % CI"
    rows = [
        ("shape k", f"{fit.shape:.4g}", f"[{fit.shape_low:.4g}, {fit.shape_high:.4g}]"),
        ("MTBF [h]", f"{fit.mtbf_hours:.4g}", f"[{fit.mtbf_low:.4g}, {fit.mtbf_high:.4g}]"),
        ("scale λ [h]", f"{fit.scale_hours:.4g}", ""),
        ("units (lifetimes)", str(fit.n_units), ""),
        ("left-truncated", str(fit.n_truncated), ""),
        ("failures", str(fit.n_failures), ""),
        ("total unit-hours", f"{fit.total_hours:,.1f}", ""),
    ]
    censoring = "right-censored, left-truncated" if fit.n_truncated else "right-censored"
    print(f"Weibull fit of {source} (maximum likelihood, {censoring})")
    widths = [max(len(r[k]) for r in rows + [("quantity", "estimate", level)]) for k in range(3)]
    for row in [("quantity", "estimate", level)] + rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)).rstrip())
    print()
    print(found.table, end="")
    return _write_fit_outputs(source, found.table, output, figure, figure_path)


def cmd_fit_power(args: argparse.Namespace) -> int:
    """``mcsim fit-power``: :func:`mcsim.fit_power` of a power log, its states and keys printed."""
    from mcsim.fitting.power_log import fit_power

    found = fit_power(
        args.log,
        gpu_type=args.gpu_type,
        tdp_w=args.tdp_w,
        idle_max_percent=args.idle_max,
        busy_min_percent=args.busy_min,
    )
    print(f"Power by state of {found.source} ({found.samples:,} samples; TDP {found.tdp_w:g} W from {found.tdp_from})")
    print(f"{'state':<8}  {'samples':>9}  {'share':>6}  {'mean [W]':>9}  {'p5 [W]':>8}  {'p95 [W]':>8}")
    for name, state in found.states.items():
        print(
            f"{name:<8}  {state['samples']:>9,}  {100 * state['share']:>5.1f}%  {state['mean_w']:>9.1f}  "
            f"{state['p5_w']:>8.1f}  {state['p95_w']:>8.1f}"
        )
    print("\n# the fitted keys (partial utilization is fitted to none: docs/fitting.md)")
    for key, value in found.settings.items():
        print(f"{key} = {value!r}")
    print(found.set_options())
    return 0


def _fit_output(source: str, option: str, value: str | None) -> Path | None:
    """The checked path of a ``fit-failures`` output option, or None when not given."""
    if value is None:
        return None
    if not value.strip() or "\0" in value:
        raise ScenarioError(source, option, f"expected a file name, got {value[:100]!r}")
    path = Path(value)
    if same_path(path, Path(source)):
        raise ScenarioError(source, option, f"{value}: is the log itself; the log is never overwritten")
    try:
        if path.exists() and not path.is_dir() and not path.is_file():
            raise ScenarioError(source, option, f"{value}: not a regular file")
        problem = output_problem(value, inputs=[source])
    except OSError as err:  # a name too long for the file system, a loop of links
        raise ScenarioError(source, option, f"{value[:100]}: {err.strerror or err}") from None
    if problem:
        raise ScenarioError(source, option, f"{value}: {problem}")
    return path


def _fit_plot_backend() -> None:
    """Fail early, before reading the log, when --plot cannot be drawn."""
    from mcsim.report.style import pyplot

    _use_agg()
    try:
        pyplot()
    except BackendUnavailable as err:
        raise ScenarioError("--plot", "matplotlib", str(err)) from None


def _fit_figure(source: str, log, fit):
    """The Weibull probability plot of ``--plot``; a log it cannot draw is the log's error."""
    from mcsim.report.failures import probability_plot

    try:
        return probability_plot(log, fit)
    except ValueError as err:
        raise ScenarioError(source, "--plot", str(err)) from None


def _write_fit_outputs(source: str, table: str, output: Path | None, figure, figure_path: Path | None) -> int:
    """Write the figure, then the table (atomically); on failure remove what this call wrote."""
    written: list[Path] = []
    try:
        if figure is not None:
            import matplotlib.pyplot as plt

            from mcsim.report.plots import save_figure

            assert figure_path is not None, "a figure is made only for --plot"
            try:
                written.append(save_figure(figure, figure_path))
            finally:
                plt.close(figure)
        if output is not None:
            write_atomic(output, table)
            written.append(output)
    except OSError as err:
        for path in written:
            path.unlink(missing_ok=True)
        target = figure_path if not written and figure is not None else output
        assert target is not None, "the file whose write failed"
        return write_failed(target, err)
    for path in written:
        print(f"wrote {path}")
    return 0


def open_result_file(name: str, complete: bool = True) -> xr.Dataset | None:
    """The dataset of an mcsim result file, or None after printing the one-line error.

    ``complete``: also refuse a file that is not a complete result
    (:func:`mcsim.analysis.summary.check_results`); False for the parts of a sharded run.
    """
    found = read_result_file(Path(name), complete)
    if isinstance(found, str):
        usage_error(found)
        return None
    return found


def _not_a_file(path: Path) -> str:
    """Why ``path`` is not a file to read (a folder, nothing there), or ""."""
    if path.is_dir():
        return f"{path}: is a directory; expected a result file written by mcsim"
    return "" if path.is_file() else f"{path}: no such file"


def result_file_problem(name: str | Path) -> str:
    """What is wrong with the result file ``name`` from its header alone (the error line's text), or ""."""
    path = Path(name)
    if problem := _not_a_file(path):
        return problem
    try:
        result_attributes(path)
    except ValueError as err:  # a netCDF file mcsim did not write names the file itself
        return str(err) if str(err).startswith(str(path)) else f"{path}: not a readable netCDF result file ({err})"
    except OSError as err:
        return f"{path}: not a readable netCDF result file ({err})"
    return ""


def read_result_file(path: Path, complete: bool) -> xr.Dataset | str:
    """The dataset of the result file ``path``, or what is wrong with it (the error line's text)."""
    if problem := _not_a_file(path):
        return problem
    try:
        ds = open_results(path)
    except ValueError as err:  # a netCDF file mcsim did not write names the file itself
        return str(err) if str(err).startswith(str(path)) else f"{path}: not a readable netCDF result file ({err})"
    except OSError as err:
        return f"{path}: not a readable netCDF result file ({err})"
    if not complete:
        return ds
    from mcsim.analysis.summary import check_results

    try:
        check_results(ds)
    except ValueError as err:
        hint = " (a plan file: read it with `mcsim report`)" if ds.attrs.get("mcsim_kind") == "plan" else ""
        return f"{path}: {err}{hint}"
    return ds


def _use_agg() -> None:
    """Files only, never a window: the Agg backend, when matplotlib is there at all."""
    from mcsim.report.writer import use_agg

    use_agg()


def cmd_plot(args: argparse.Namespace) -> int:
    """``mcsim plot``: one figure of a result file (``--kind``), written to ``-o``."""
    if message := option_error(args) or _plot_option_error(args):
        return usage_error(message)
    output = Path(args.output)
    if problem := output_problem(args.output, inputs=[args.file]) or _figure_format_problem(output):
        return output_error(args.output, output, problem)
    ds = open_result_file(args.file)
    if ds is None:
        return EXIT_USAGE
    _use_agg()
    try:
        figure = _draw(args, ds)
    except BackendUnavailable as err:
        return usage_error(str(err))
    except ValueError as err:
        return usage_error(f"{args.file}: {err}")
    return _save_figure(figure, output)


def _plot_option_error(args: argparse.Namespace) -> str | None:
    """Which of ``--x``, ``--variable`` and ``--resamples`` was given to a ``--kind`` it does not apply to."""
    for option, value, kinds in (
        ("--x", args.x, ("scaling",)),
        ("--variable", args.variable, ("cdf", "sensitivity")),
        ("--resamples", args.resamples, ("sensitivity",)),
    ):
        if value is not None and args.kind not in kinds:
            return f"{option}: applies to --kind {' or '.join(kinds)} only"
    return None


def _draw(args: argparse.Namespace, ds: xr.Dataset):
    """The figure ``--kind`` names, of ``ds``."""
    from mcsim.report import plots

    if args.kind == "scaling":
        return plots.plot_scaling(ds, x=args.x)
    if args.kind == "cdf":
        return plots.plot_cdf(ds, variable=args.variable or "wall_time")
    if args.kind == "sensitivity":
        from mcsim.report.tornado import plot_sensitivity

        return plot_sensitivity(ds, output=args.variable or "cost", resamples=args.resamples)
    return getattr(plots, f"plot_{args.kind}")(ds)


def _save_figure(figure, output: Path) -> int:
    """Write ``figure`` to ``output`` and close it; returns the exit status."""
    import matplotlib.pyplot as plt

    from mcsim.report.plots import save_figure

    try:
        save_figure(figure, output)
    except OSError as err:
        return write_failed(output, err)
    finally:
        plt.close(figure)
    print(f"wrote {output}")
    return 0


def _figure_format_problem(output: Path) -> str:
    """Why no figure can be written under ``output``'s suffix, or ""."""
    try:
        from mcsim.report.plots import figure_format

        figure_format(output)
    except ValueError as err:
        return str(err)
    except BackendUnavailable:
        return ""  # reported by the plot itself, with the install hint
    return ""


def cmd_report(args: argparse.Namespace) -> int:
    """``mcsim report``: :func:`mcsim.report` into the checked ``-o`` folder.

    A report goes into a new folder, an empty one, or one an earlier report wrote; the files
    are made in a staging folder and moved into place only when all are written
    (:func:`mcsim.io.atomic.staged_folder`): a failure leaves nothing behind.
    """
    source = Path(args.file)
    folder = report_folder(args)
    if folder is None:
        return EXIT_USAGE
    if message := option_error(args):
        return usage_error(message)
    if problem := folder_problem(folder) or output_problem(folder / "README.md"):
        return usage_error(f"-o: {folder}: {problem}")
    write = _report_writer(args, source, folder)
    if isinstance(write, int):
        return write
    try:
        written = write()
    except BackendUnavailable as err:
        return usage_error(str(err))
    except ValueError as err:
        return usage_error(f"{source}: {err}")
    except FileExistsError as err:
        return usage_error(f"-o: {folder}: {err.strerror}")
    except OSError as err:
        return write_failed(folder, err, "nothing was left behind")
    print(f"wrote {', '.join(p.name for p in written)} in {folder}")
    return 0


def _report_writer(args: argparse.Namespace, source: Path, folder: Path) -> Callable[[], list[Path]] | int:
    """The call that writes the report of ``source`` (a plan file or a result file) into ``folder``,
    or the exit status of the error line."""
    from mcsim.io.netcdf import is_plan_file
    from mcsim.report.writer import report

    tables = None if args.format == "text" else args.format
    if is_plan_file(source):
        if args.deadline is not None or args.resamples is not None:
            given = "--deadline" if args.deadline is not None else "--resamples"
            return usage_error(f"{given}: applies to a result of mcsim run; {source} is a plan file")
        return functools.partial(report, source, folder, tables=tables)
    ds = open_result_file(args.file)
    if ds is None:
        return EXIT_USAGE
    options = {"deadline": args.deadline, "probability": args.probability, "resamples": args.resamples}
    options["tables"] = tables
    return functools.partial(report, ds, folder, name=source.name, **options)


def report_folder(args: argparse.Namespace) -> Path | None:
    """The folder ``mcsim report`` writes (``-o``, else FILE without .nc + -report), or None after the error line."""
    source = Path(args.file)
    if args.output == "":
        usage_error("-o: expected a folder name, got ''")
        return None
    if args.output is not None and (problem := path_text_problem(args.output)):
        usage_error(f"-o: {problem}")
        return None
    return (
        Path(args.output)
        if args.output is not None
        else source.with_name((source.name[:-3] if source.name.endswith(".nc") else source.name) + "-report")
    )


def cmd_scenarios(args: argparse.Namespace) -> int:
    """``mcsim scenarios [list]``: the shipped scenarios and plans; ``mcsim scenarios copy NAME [DEST]``."""
    from mcsim.scenario.shipped import shipped_scenarios

    if args.scenarios_action == "copy":
        return _copy_scenario(args.name, args.dest)
    entries = shipped_scenarios()
    width = max(len(entry.name) for entry in entries)
    for entry in entries:
        print(f"{entry.name:<{width}}  {entry.kind:<8}  {entry.description}")
    print(
        "run one by name: mcsim run NAME (a plan: mcsim plan NAME); copy one to edit: mcsim scenarios copy NAME",
        file=sys.stderr,
    )
    return 0


_EXISTS = "exists; refusing to overwrite it (remove it or give another DEST)"


def _copy_scenario(name: str, dest: str | None) -> int:
    """Write the shipped file ``name`` to ``dest`` (a file, or a folder to hold NAME.toml), never over a file."""
    from mcsim.scenario.shipped import shipped_names, shipped_scenario

    entry = shipped_scenario(name)
    if entry is None:
        return usage_error(
            f"scenarios copy: {name}: not a shipped scenario; expected one of {', '.join(shipped_names())}"
        )
    target = Path(dest) if dest is not None else Path(f"{entry.name}.toml")
    if dest is not None and target.is_dir():
        target = target / f"{entry.name}.toml"
    if os.path.lexists(target):
        return usage_error(f"{target}: {_EXISTS}")
    if problem := output_problem(target):
        return usage_error(f"{target}: {problem}")
    data = entry.path.read_bytes()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # never over a file made meanwhile
    except FileExistsError:
        return usage_error(f"{target}: {_EXISTS}")
    except OSError as err:
        return write_failed(target, err)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
    except OSError as err:
        target.unlink(missing_ok=True)  # ours: created above, and not complete
        return write_failed(target, err)
    command = "plan" if entry.kind == "plan" else "run"
    print(f"wrote {target}: edit it, then mcsim {command} {target}")
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    """``mcsim calibrate``: :func:`mcsim.calibrate`, its table printed, the calibrated scenario written with -o."""
    from mcsim.analysis.calibration import calibrate
    from mcsim.analysis.steptime_validation import REPEATABILITY

    source = str(args.measurements)
    output = Path(args.output) if args.output is not None else None
    if output is not None:  # before any work: never over an existing file, never over an input
        if os.path.lexists(output):
            return usage_error(f"{output}: exists; refusing to overwrite it (remove it or give another -o)")
        inputs = [source] + ([str(args.scenario)] if args.scenario else [])
        if problem := output_problem(output, inputs=inputs):
            return usage_error(f"{output}: {problem}")
    found = calibrate(
        source,
        args.scenario,
        overrides=args.overrides,
        key=args.fit_key,
        key_range=_key_range(args.key_range) if args.key_range is not None else None,
        repeatability=REPEATABILITY if args.repeatability is None else args.repeatability,
    )
    print(found.table())
    if output is None:
        return 0
    try:
        found.write(output)
    except FileExistsError:
        return usage_error(f"{output}: a file was created there meanwhile; refusing to overwrite it")
    except OSError as err:
        return write_failed(output, err)
    print(f"wrote {output}: mcsim run {output}")
    return 0


def _key_range(text: str) -> tuple[float, float]:
    """``--range LOW:HIGH`` as two numbers."""
    parts = text.split(":")
    try:
        low, high = (float(part) for part in parts) if len(parts) == 2 else (None, None)
    except ValueError:
        low = high = None
    if low is None or high is None:
        raise ScenarioError("--range", text[:80], "expected LOW:HIGH, two numbers, e.g. 0:1")
    return low, high
