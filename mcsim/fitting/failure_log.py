"""The log of unit lifetimes that ``mcsim fit-failures`` reads, and its reader.

Log format
----------
A CSV file (UTF-8) with a header row and these four columns, in this order, optionally
followed by a fifth, ``entry_hours``::

    unit,start_hours,end_hours,failed,entry_hours
    gpu-0017,0,1830.5,1,2200
    gpu-0017,1830.5,4380,0,0
    node-3,120,4380,0,0

One row per unit lifetime:

``unit``
    Any string id of the unit (a GPU, a node, the cluster). It is not used by the fit;
    a unit that failed and was replaced or repaired has one row per lifetime.
``start_hours``
    When observation of this lifetime started [h] (a clock time: when the log opened,
    or when the unit entered service if that was later).
``end_hours``
    When it ended [h]: the failure time if ``failed`` is true, otherwise the end of
    observation (the lifetime is right-censored: it lasted *at least* this long).
``failed``
    ``1``/``true`` (the lifetime ended in a failure) or ``0``/``false`` (censored),
    case-insensitive.
``entry_hours`` (optional column; 0 when absent)
    Age of the unit at ``start_hours`` [h], >= 0: how long it had already been in
    service when observation began (left truncation). A new or replaced unit has 0.

The unit's age at the end of the row is ``entry_hours + end_hours - start_hours``;
``end_hours - start_hours`` must be > 0. Blank lines and lines whose first non-blank
character is ``#`` are ignored. Any other deviation (missing file, wrong header, wrong
number of fields, a line over 1 MiB, a device or pipe instead of a file, a number that
is not a finite number or whose sum overflows,
``end_hours <= start_hours``, a negative ``entry_hours``, a bad ``failed`` flag, no data
rows, more than :data:`MAX_ROWS` rows, no failure at all) raises
:class:`mcsim.errors.ScenarioError` naming the file, the line and the column.
"""

from __future__ import annotations

import csv
import math
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np

from mcsim.errors import ScenarioError
from mcsim.io.text_input import user_text_file

HEADER = ("unit", "start_hours", "end_hours", "failed")
ENTRY_COLUMN = "entry_hours"
MAX_ROWS = 10_000_000  # lifetimes per log: ~0.25 GB of arrays and a fit of minutes
_MAX_LINE = 1 << 20  # characters per line: a row is short; this bounds the memory per line
_FLAGS = {"1": True, "true": True, "0": False, "false": False}


class FailureLog(NamedTuple):
    """The lifetimes of a failure log, as arrays of one entry per row.

    Attributes
    ----------
    durations_h : np.ndarray of float
        Observed time of each lifetime ``end_hours - start_hours`` [h], all > 0.
    failed : np.ndarray of bool
        True where the lifetime ended in a failure, False where it is right-censored.
    entry_h : np.ndarray of float
        Age of the unit when observation began [h], >= 0 (0: observed from new).
    """

    durations_h: np.ndarray
    failed: np.ndarray
    entry_h: np.ndarray


def read_failure_log(path: str | Path) -> FailureLog:
    """Read a failure log (format in the module docstring), line by line.

    Parameters
    ----------
    path : str or Path
        The CSV file.

    Returns
    -------
    FailureLog
        Observed times [h], failure flags and entry ages [h] (zeros without the
        ``entry_hours`` column); unpacks as ``durations_h, failed, entry_h``.

    Raises
    ------
    ScenarioError
        If the file is missing, unreadable or malformed, or holds no failure; the key
        names the line and the column.
    """
    source = str(path)
    with user_text_file(path, "a CSV file") as handle:  # the standard input by name is read even as a pipe
        columns, durations, flags, entries = _read_rows(source, _lines(source, handle))
    if columns is None:
        raise ScenarioError(source, "line 1", f"empty file; expected the header {','.join(HEADER)!r}")
    if not durations:
        raise ScenarioError(source, "rows", "no data rows after the header")
    failed = np.frombuffer(flags, dtype=np.uint8).astype(bool)
    if not failed.any():
        raise ScenarioError(
            source,
            "failed",
            f"no row has failed = 1 among {failed.size} rows; a failure law cannot be fitted without failures",
        )
    return FailureLog(np.asarray(durations, dtype=float), failed, np.asarray(entries, dtype=float))


def _lines(source: str, handle) -> Iterator[str]:
    """The lines of an open text file, refusing one longer than ``_MAX_LINE`` characters."""
    n = 0
    while line := handle.readline(_MAX_LINE + 1):
        n += 1
        if len(line) > _MAX_LINE:
            raise ScenarioError(source, f"line {n}", f"longer than {_MAX_LINE:,} characters; expected a CSV row")
        yield line


def _read_rows(source: str, lines: Iterator[str]) -> tuple[tuple[str, ...] | None, array, bytearray, array]:
    """Header and rows of a log's lines: (columns or None, durations, flags, entries)."""
    columns: tuple[str, ...] | None = None
    durations, entries, flags = array("d"), array("d"), bytearray()
    for n, line in enumerate(lines, start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key = f"line {n}"
        try:
            fields = [f.strip() for f in next(csv.reader([line], strict=True))]
        except (csv.Error, StopIteration) as err:
            raise ScenarioError(source, key, f"not a CSV row ({err})") from None
        if columns is None:
            columns = _header(source, key, fields, line)
            continue
        if len(fields) != len(columns):
            raise ScenarioError(source, key, f"expected {len(columns)} fields ({','.join(columns)}), got {len(fields)}")
        if len(durations) >= MAX_ROWS:
            raise ScenarioError(source, key, f"more than {MAX_ROWS:,} lifetimes; aggregate or sample the log")
        duration, flag, entry = _lifetime(source, key, fields)
        durations.append(duration)
        entries.append(entry)
        flags.append(flag)
    return columns, durations, flags, entries


def _lifetime(source: str, key: str, fields: list[str]) -> tuple[float, bool, float]:
    """One row's observed time [h], failure flag and entry age [h] (0 without the column), checked."""
    start, end = (_number(source, key, name, value) for name, value in zip(HEADER[1:3], fields[1:3], strict=False))
    if not end > start:
        raise ScenarioError(source, key, f"end_hours must be > start_hours, got {fields[2]} <= {fields[1]}")
    flag = _FLAGS.get(fields[3].lower())
    if flag is None:
        raise ScenarioError(source, key, f"failed: expected 1, 0, true or false, got {fields[3]!r}")
    entry = _number(source, key, ENTRY_COLUMN, fields[4]) if len(fields) > 4 else 0.0
    if entry < 0:
        raise ScenarioError(source, key, f"{ENTRY_COLUMN}: expected an age >= 0 hours, got {fields[4]!r}")
    duration = end - start
    if not math.isfinite(duration) or not math.isfinite(entry + duration):
        raise ScenarioError(
            source,
            key,
            f"end_hours - start_hours + {ENTRY_COLUMN}: expected a finite "
            f"number of hours, got an overflow ({fields[2]} - {fields[1]})",
        )
    return duration, flag, entry


def _header(source: str, key: str, fields: list[str], line: str) -> tuple[str, ...]:
    names = tuple(f.lower() for f in fields)
    if names not in (HEADER, HEADER + (ENTRY_COLUMN,)):
        raise ScenarioError(
            source,
            key,
            f"expected the header {','.join(HEADER)!r} (optionally "
            f"followed by ',{ENTRY_COLUMN}'), got {line.strip()[:200]!r}",
        )
    return names


def _number(source: str, key: str, column: str, value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise ScenarioError(source, key, f"{column}: expected a number of hours, got {value[:100]!r}") from None
    if not math.isfinite(number):
        raise ScenarioError(source, key, f"{column}: expected a finite number of hours, got {value[:100]!r}")
    return number
