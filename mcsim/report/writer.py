"""``mcsim.report``: a report folder of a result file, a plan file or a dataset.

The function behind ``mcsim report`` (the command adds only the checks of its ``-o``
and the printed line): a result of ``mcsim run`` gets the figures that apply and a
``README.md`` (:func:`mcsim.report.result_report.write_report`); a plan file of ``mcsim plan``
gets the explanation of its recommendation (:func:`mcsim.report.plan.files.write_plan_report`).
Figures need matplotlib (the ``plot`` extra). ``tables="json"`` or ``"csv"`` adds the report's table
for programs (``mcsim report --format``).
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import xarray as xr

from mcsim._lazy import lazy_module
from mcsim.analysis.configurations import check_days, check_probability
from mcsim.analysis.deadline import PROBABILITY
from mcsim.analysis.summary import check_results, summary_frame
from mcsim.io.atomic import folder_problem, staged_folder
from mcsim.io.netcdf import is_plan_file, open_results
from mcsim.report.frames import plan_frame, table_file
from mcsim.report.result_report import write_report

if TYPE_CHECKING:
    from mcsim.report.plan import files as plan_files
else:  # the report of a plan file, at its first use: the planner (and the kernels it imports) is not
    # needed for the report of a result file
    plan_files = lazy_module("mcsim.report.plan.files")

TABLE_FORMATS = ("json", "csv")  # the formats of the report's table for programs


def default_folder(source: str | Path) -> Path:
    """The report folder of a file: its name without ``.nc``, plus ``-report``, beside it."""
    source = Path(source)
    stem = source.name[:-3] if source.name.endswith(".nc") else source.name
    return source.with_name(stem + "-report")


def use_agg() -> None:
    """Files only, never a window: the Agg backend, when matplotlib is there at all."""
    try:
        import matplotlib
    except ImportError:
        return  # the figures raise BackendUnavailable with the install hint
    matplotlib.use("Agg")


def report(
    source: str | Path | xr.Dataset,
    folder: str | Path | None = None,
    *,
    deadline: float | None = None,
    probability: float = PROBABILITY,
    resamples: int | None = None,
    progress: bool | None = None,
    name: str | None = None,
    tables: str | None = None,
) -> list[Path]:
    """Write the report of a result (figures and ``README.md``) into ``folder``; returns the files written.

    Parameters
    ----------
    source : str, Path or xarray.Dataset
        A result file of ``mcsim run`` or :func:`mcsim.write_results`, a plan file of
        ``mcsim plan``, a result dataset (:func:`mcsim.simulate`, :func:`mcsim.open_results`), or a
        plan's dataset (:func:`mcsim.plan`: the plan's ``README.md`` and ``recommended.toml``).
    folder : str or Path, optional
        Where to write (created if needed); default: the file's name without ``.nc``
        plus ``-report``, beside it. Required for a dataset.
    deadline : float, optional
        A deadline [days] (finite, > 0): the report then names the cheapest configuration
        finishing within it with ``probability``, or the closest one. Without it the report
        invents none and says how to ask.
    probability : float
        Required probability of finishing within ``deadline``, in (0, 1) (default 0.9).
    resamples : int, optional
        Bootstrap resamples of the sensitivity indices (results with parameter draws;
        default :data:`mcsim.analysis.sensitivity.RESAMPLES`).
    progress : bool, optional
        A progress bar while the sensitivity indices are computed (they take seconds);
        by default when standard error is a terminal or in a Jupyter kernel.
    name : str, optional
        The result file's name shown in the report (default: that of ``source``; none for
        a dataset).
    tables : {"json", "csv"}, optional
        Also write the report's table for programs in this format (:mod:`mcsim.report.frames`):
        ``summary.json`` / ``summary.csv`` of a result (every configuration's statistics),
        ``finalists.json`` / ``finalists.csv`` of a plan (default: none).

    Returns
    -------
    list of Path
        The figures and the ``README.md`` written.

    Raises
    ------
    ValueError
        A file that is not an mcsim result or plan, a result with nothing to report, or
        an argument out of range (one line naming it).
    mcsim.errors.BackendUnavailable
        Without matplotlib (for a result's figures).
    FileExistsError
        ``folder`` holds files mcsim did not write (a report goes into a new folder, an empty
        one, or one an earlier report wrote); nothing is written.
    OSError
        The folder or a file in it cannot be written; nothing is left behind.
    """
    if deadline is not None:
        check_days(deadline)
    check_probability(probability)
    if tables not in (None, *TABLE_FORMATS):
        raise ValueError(f"tables: expected one of {', '.join(TABLE_FORMATS)} or None, got {tables!r}")
    options = (deadline, probability, resamples, progress, tables)
    if isinstance(source, xr.Dataset) and source.attrs.get("mcsim_kind") == "plan":
        if deadline is not None:
            raise ValueError("deadline: applies to a result of mcsim run; the dataset is a plan (mcsim.plan)")
        return _staged(_dataset_folder(folder), lambda staging: plan_files.write_plan_report(source, staging, name))
    if isinstance(source, xr.Dataset):
        return _result_report(source, _dataset_folder(folder), name, *options)
    return _file_report(Path(source), folder, name, *options)


def _dataset_folder(folder: str | Path | None) -> Path:
    """The folder of a dataset's report, which must be given."""
    if folder is None:
        raise ValueError("folder: give the folder to write the report of a dataset into")
    return Path(folder)


def _file_report(
    path: Path,
    folder: str | Path | None,
    name: str | None,
    deadline: float | None,
    probability: float,
    resamples: int | None,
    progress: bool | None,
    tables: str | None,
) -> list[Path]:
    """The report of a plan file or a result file into ``folder`` (default: :func:`default_folder`)."""
    target = default_folder(path) if folder is None else Path(folder)
    if path.is_dir():
        raise ValueError(f"{path}: is a directory; expected a result file written by mcsim")
    if is_plan_file(path):
        if deadline is not None:
            raise ValueError(f"deadline: applies to a result of mcsim run; {path} is a plan file")
        return _staged(
            target, lambda staging: plan_files.write_plan_report(path, staging) + _plan_table(path, staging, tables)
        )
    ds = open_results(path)
    try:
        check_results(ds)
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None
    return _result_report(ds, target, name or path.name, deadline, probability, resamples, progress, tables)


def _staged(folder: Path, write: Callable[[Path], list[Path]]) -> list[Path]:
    """Run ``write`` on a staging folder that becomes the report in ``folder`` when it succeeds.

    ``folder`` must be new, empty, or hold only an earlier report's unchanged files
    (:func:`mcsim.io.atomic.folder_problem`); a failure leaves it as it was
    (:func:`mcsim.io.atomic.staged_folder`).

    Raises
    ------
    FileExistsError
        ``folder`` holds files mcsim did not write (before or while the report is made).
    """
    if problem := folder_problem(folder):
        raise FileExistsError(errno.EEXIST, problem, str(folder))
    with staged_folder(folder) as staging:
        written = write(staging)
    return [folder / p.name for p in written]


def _result_report(
    ds: xr.Dataset,
    folder: Path,
    source: str | None,
    deadline: float | None,
    probability: float,
    resamples: int | None,
    progress: bool | None,
    tables: str | None = None,
) -> list[Path]:
    use_agg()

    def write(staging: Path) -> list[Path]:
        written = write_report(
            ds, staging, source, deadline=deadline, probability=probability, resamples=resamples, progress=progress
        )
        if tables is not None:
            written.append(table_file(staging, "summary", summary_frame(ds), tables))
        return written

    return _staged(folder, write)


def _plan_table(path: Path, staging: Path, tables: str | None) -> list[Path]:
    """The plan's finalists as ``finalists.<tables>`` in ``staging`` (none when ``tables`` is None)."""
    if tables is None:
        return []
    with open_results(path) as ds:
        return [table_file(staging, "finalists", plan_frame(ds), tables)]
