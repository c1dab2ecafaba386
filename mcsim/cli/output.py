"""Output files of the commands: which paths may be written, the writer lock, the write and what a failed write says.

Shared by ``mcsim run`` and ``mcsim plan`` (and the figure and report commands' path checks).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import xarray as xr

from mcsim.cli.parser import EXIT_USAGE


def lock_output(held: contextlib.ExitStack, output: Path) -> int | None:
    """Hold the writer lock of ``output`` in ``held``; the exit status when it cannot be taken, else None.

    One writer per output: a second one would remove the first one's resume pieces.
    """
    from mcsim.errors import OutputBusy
    from mcsim.io.atomic import output_lock

    try:
        held.enter_context(output_lock(output))
    except OutputBusy as err:
        print(f"mcsim: error: -o: {output}: {err}; wait for it or choose another -o", file=sys.stderr)
        return EXIT_USAGE
    except OSError as err:
        what = Path(err.filename) if err.filename else output
        detail = f"{err.strerror or err}" + ("; a folder is in the way of the lock file" if what.is_dir() else "")
        print(f"mcsim: error: -o: {output}: cannot take the writer lock {what}: {detail}", file=sys.stderr)
        return 1 if err.errno in _ENVIRONMENT_ERRORS else EXIT_USAGE
    return None


def write_and_clear(ds: xr.Dataset, output: Path, store, notify, previous=None) -> int | None:
    """Write ``ds`` to ``output``, then drop its resume pieces (and stale ones of earlier runs).

    ``previous``: the identity of the file at ``output`` when the command started
    (:func:`mcsim.io.atomic.file_identity`, taken under the writer lock), None when there was
    none: only that file is replaced, never one created while the command ran. Returns the
    exit status of a failed write (the pieces are kept to resume from), or None.
    """
    from mcsim.io.netcdf import write_results

    try:
        write_results(ds, output, previous)
    except FileExistsError as err:
        kept = "" if store is None else "; the finished pieces are kept: move it away and rerun to resume"
        print(f"mcsim: error: -o: {output}: {err.strerror}; refusing to replace it{kept}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as err:
        return write_failed(
            output, err, None if store is None else "the finished pieces are kept; rerun the same command to resume"
        )
    if store is not None:
        store.clear()
        for stale in store.remove_stale():
            notify(f"removed pieces of an earlier, different run: {stale}")
    return None


# errno values of a write refused by the machine rather than by the path given: exit status 1
_ENVIRONMENT_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})


def write_failed(target: Path, err: OSError, note: str | None = None) -> int:
    """Print the one-line error of a failed write; returns the exit status.

    1 when the machine refused the bytes (disk full, quota, file-size limit,
    I/O error), 2 when the path cannot be written (a user error).
    """
    detail = f"; {note}" if note else ""
    print(f"mcsim: error: cannot write {target}: {err.strerror or err}{detail}", file=sys.stderr)
    return 1 if err.errno in _ENVIRONMENT_ERRORS else EXIT_USAGE


def output_problem(
    output: str | Path, inputs: Sequence[str | Path] = (), may_replace: Callable[[Path], bool] | None = None
) -> str:
    """Why the output file ``output`` cannot be written (checked before any work), or "".

    Refused: an empty name, a name ending in a path separator or longer than
    255 bytes, an existing folder, device, pipe or socket, one of ``inputs``
    (the files the command reads), an existing file that ``may_replace`` does
    not accept, and a folder in which no file can be created.
    """
    from mcsim.io.atomic import NAME_MAX

    text = os.fspath(output)
    if problem := path_text_problem(text):
        return problem
    if text.endswith(("/", os.sep)):
        return "expected a file name, got a folder path (ends with a separator)"
    path = Path(text)
    if len(os.fsencode(path.name)) > NAME_MAX:
        return f"expected a file name of at most {NAME_MAX} bytes, got {len(os.fsencode(path.name))}"
    try:
        info = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):  # a missing folder is examined below
        info = None
    except (OSError, ValueError) as err:
        return f"cannot be examined ({getattr(err, 'strerror', None) or err})"
    if info is not None:
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
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        return f"{folder} is not a directory"
    try:  # the real test (os.access says yes to root even where nothing can be created)
        tempfile.TemporaryFile(dir=folder).close()
    except OSError as err:
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
