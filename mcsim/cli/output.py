"""Output files of the commands: which paths may be written, the writer lock, the write and what a failed write says.

Shared by ``mcsim run``, ``mcsim combine`` and ``mcsim plan`` (and the figure and report commands' path checks).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import xarray as xr

from mcsim.cli.declarations import EXIT_USAGE, usage_error
from mcsim.errors import MachineRefusedWrite, OutputBusy
from mcsim.io.atomic import NAME_MAX, file_identity, output_lock
from mcsim.io.netcdf import write_results

if TYPE_CHECKING:
    from mcsim.engine.resume import PieceStore
    from mcsim.scenario.config import Scenario

# errno values of a write refused by the machine rather than by the path given (full disk or device,
# quota, file-size limit, I/O error): exit status 1
ENVIRONMENT_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})
# what a failed write of a resume piece leaves, for the error line
PIECES_KEPT = "the pieces finished before it are kept; rerun to resume"


def _say_nothing(message: str) -> None:
    """The ``notify`` of a command that reports no progress."""


def locked_write(
    output: Path,
    make: Callable[[], xr.Dataset | int],
    table: Callable[[xr.Dataset], str],
    quiet: bool,
    store: PieceStore | None = None,
    notify: Callable[[str], None] = _say_nothing,
    machine: bool = False,
) -> int:
    """Under the writer lock of ``output``, write the dataset ``make()`` returns; then, unless
    ``quiet``, print ``table(ds)`` and ``wrote OUTPUT`` (on stderr when ``machine``: the standard
    output holds only the table a program reads, ``--format json|csv``). Returns the exit status.

    One writer per output (:func:`lock_output`); the file at ``output`` when the lock is taken is
    the only one the write may replace (:func:`write_and_clear`). ``make`` returns the dataset, or
    the exit status of its own failure (reported).
    """
    with contextlib.ExitStack() as held:
        if (status := lock_output(held, output)) is not None:
            return status
        previous = file_identity(output)  # the output is claimed: only this file may be replaced
        ds = make()
        if isinstance(ds, int):
            return ds
        if (status := write_and_clear(ds, output, store, notify, previous)) is not None:
            return status
    if not quiet:
        print(table(ds))
        print(f"wrote {output}", file=sys.stderr if machine else sys.stdout)
    return 0


def write_resumable(
    args: argparse.Namespace,
    output: Path,
    scenario: Scenario,
    chunk_runs: int,
    make: Callable[[PieceStore | None, Callable[[str], None]], xr.Dataset | int],
    table: Callable[[xr.Dataset], str],
) -> int:
    """:func:`locked_write` of the dataset ``make(store, notify)`` computes, for ``mcsim run`` and ``mcsim plan``.

    ``notify`` prints their progress notes (none with ``--quiet``); ``store`` keeps the finished tasks
    (of ``chunk_runs`` runs of ``scenario``) beside ``output`` to resume from (None with ``--no-resume``).
    """
    from mcsim.engine.resume import PieceStore

    def notify(message: str) -> None:
        if not args.quiet:
            print(f"mcsim: {message}", file=sys.stderr)

    store = None if args.no_resume else PieceStore(output, scenario, chunk_runs, notify=notify)
    if store is not None and (problem := store.problem()):
        return usage_error(f"-o: {output}: {problem}")
    machine = getattr(args, "format", "text") != "text"
    return locked_write(output, lambda: make(store, notify), table, args.quiet, store, notify, machine)


def output_error(given: str | None, output: Path, problem: str) -> int:
    """Print the error line of an ``-o`` that cannot be written (the path left out when ``-o ''``)."""
    return usage_error(f"-o: {output}: {problem}" if given != "" else f"-o: {problem}")


def lock_output(held: contextlib.ExitStack, output: Path) -> int | None:
    """Hold the writer lock of ``output`` in ``held``; the exit status when it cannot be taken, else None.

    One writer per output: a second one would remove the first one's resume pieces.
    """
    try:
        held.enter_context(output_lock(output))
    except OutputBusy as err:
        return usage_error(f"-o: {output}: {err}; wait for it or choose another -o")
    except OSError as err:
        what = Path(err.filename) if err.filename else output
        detail = f"{err.strerror or err}" + ("; a folder is in the way of the lock file" if what.is_dir() else "")
        print(f"mcsim: error: -o: {output}: cannot take the writer lock {what}: {detail}", file=sys.stderr)
        return 1 if err.errno in ENVIRONMENT_ERRORS else EXIT_USAGE
    return None


def write_and_clear(
    ds: xr.Dataset,
    output: Path,
    store: PieceStore | None,
    notify: Callable[[str], None],
    previous: tuple[int, int] | None = None,
) -> int | None:
    """Write ``ds`` to ``output``, then drop its resume pieces (and stale ones of earlier runs).

    ``previous``: the identity of the file at ``output`` when the command started
    (:func:`mcsim.io.atomic.file_identity`, taken under the writer lock), None when there was
    none: only that file is replaced, never one created while the command ran. Returns the
    exit status of a failed write (the pieces are kept to resume from), or None.
    """
    try:
        write_results(ds, output, previous)
    except FileExistsError as err:
        kept = "" if store is None else "; the finished pieces are kept: move it away and rerun to resume"
        return usage_error(f"-o: {output}: {err.strerror}; refusing to replace it{kept}")
    except OSError as err:
        return write_failed(
            output, err, None if store is None else "the finished pieces are kept; rerun the same command to resume"
        )
    if store is not None:
        store.clear()
        for stale in store.remove_stale():
            notify(f"removed pieces of an earlier, different run: {stale}")
    return None


def write_failed(target: Path, err: OSError, note: str | None = None) -> int:
    """Print the one-line error of a failed write; returns the exit status.

    1 when the machine refused the bytes (disk full, quota, file-size limit,
    I/O error), 2 when the path cannot be written (a user error).
    """
    detail = f"; {note}" if note else ""
    print(f"mcsim: error: cannot write {target}: {err.strerror or err}{detail}", file=sys.stderr)
    return 1 if err.errno in ENVIRONMENT_ERRORS else EXIT_USAGE


def output_problem(
    output: str | Path, inputs: Sequence[str | Path] = (), may_replace: Callable[[Path], bool] | None = None
) -> str:
    """Why the output file ``output`` cannot be written (checked before any work), or "".

    Refused: an empty name, a name ending in a path separator or longer than
    255 bytes, an existing folder, device, pipe or socket, one of ``inputs``
    (the files the command reads), an existing file that ``may_replace`` does
    not accept, and a folder in which no file can be created.

    Raises
    ------
    MachineRefusedWrite
        When the folder cannot take a file because the machine refuses it (disk full, quota, I/O error):
        exit status 1, not a user's mistake.
    """
    text = os.fspath(output)
    if problem := _name_problem(text):
        return problem
    path = Path(text)
    try:
        info = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):  # a missing folder is examined below
        info = None
    except (OSError, ValueError) as err:
        return f"cannot be examined ({getattr(err, 'strerror', None) or err})"
    if info is not None and (problem := _existing_file_problem(path, info, inputs, may_replace)):
        return problem
    return _unwritable_folder(path.parent)


def _name_problem(text: str) -> str:
    """Why ``text`` cannot name an output file (:func:`path_text_problem`, a folder path, too long), or ""."""
    if problem := path_text_problem(text):
        return problem
    if text.endswith(("/", os.sep)):
        return "expected a file name, got a folder path (ends with a separator)"
    name = os.fsencode(Path(text).name)
    if len(name) > NAME_MAX:
        return f"expected a file name of at most {NAME_MAX} bytes, got {len(name)}"
    return ""


def _existing_file_problem(
    path: Path, info: os.stat_result, inputs: Sequence[str | Path], may_replace: Callable[[Path], bool] | None
) -> str:
    """Why the existing ``path`` (its ``os.stat`` ``info``) may not be replaced, or ""."""
    if stat.S_ISDIR(info.st_mode):
        return "is a directory; expected a file name"
    if not stat.S_ISREG(info.st_mode):
        return "is not a regular file (a device, pipe or socket); refusing to write to it"
    for source in inputs:
        with contextlib.suppress(OSError):
            if os.path.samefile(source, path):
                return f"is the input {source}; refusing to overwrite it"
    if may_replace is not None and not may_replace(path):
        return "exists and is not an mcsim result file; refusing to overwrite it (remove it or choose another name)"
    return ""


def _unwritable_folder(folder: Path) -> str:
    """Why no file can be created in ``folder`` (or, missing, in its nearest existing ancestor), or ""."""
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        return f"{folder} is not a directory"
    try:  # the real test (os.access says yes to root even where nothing can be created)
        tempfile.TemporaryFile(dir=folder).close()
    except OSError as err:
        if err.errno in ENVIRONMENT_ERRORS:  # a full disk or quota: the machine's refusal, exit status 1
            raise MachineRefusedWrite(f"cannot create a file in {folder}: {err.strerror or err}") from err
        return f"folder {folder} is not writable ({err.strerror or err})"
    return ""


def path_text_problem(text: str) -> str:
    """Why ``text`` cannot name an output (bytes that are not UTF-8, a NUL), or "".

    netCDF and the report's links need the name as UTF-8 text; a name given as other bytes
    (``-o $'\\xff.nc'``, decoded by Python with surrogate escapes) would fail late, after the work.
    """
    if not text:
        return "expected a file name, got ''"
    if "\0" in text:
        return "expected a file name, got one with a NUL character"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        shown = os.fsencode(text)[:100]
        return f"expected a file name in UTF-8, got bytes that are not UTF-8 ({shown!r})"
    return ""


def same_path(a: Path, b: Path) -> bool:
    """Whether two paths name the same file: the same resolved path, or the same file through a link."""
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and os.path.samefile(a, b))
    except OSError:
        return False
