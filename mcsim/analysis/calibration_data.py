"""The measured iteration times that ``mcsim calibrate`` reads: a CSV of layouts and seconds or MFU.

File format
-----------
A CSV file (UTF-8) with a header row; one row per measured layout::

    gpus,tp,pp,dp,microbatch,global_batch,seconds
    384,8,6,8,4,2048,114.11
    384,4,12,8,4,2048,111.89

Columns, in any order (names case-insensitive):

``gpus`` (required)
    GPUs in the job, ``parallelism.gpus``.
``tp``, ``pp``, ``cp``, ``microbatch``, ``interleave``
    ``parallelism.tp``, ``.pp``, ``.cp``, ``.microbatch`` (sequences), ``.interleave``;
    where a column is absent the scenario's value holds.
``global_batch``
    Sequences per iteration, ``model.global_batch``.
``dp``
    The data-parallel degree, checked: ``gpus`` must equal ``tp x pp x cp x dp``
    (mcsim derives it; the column guards against a mistyped layout).
``seconds`` or ``mfu`` (exactly one of them)
    The measured time of one iteration [s], > 0; or the measured model FLOPs utilisation, in
    (0, 1], turned into seconds with PaLM's count of model FLOPs (Chowdhery et al. 2022,
    arXiv 2204.02311, Appendix B: ``6 N + 12 L h s`` per token, N = ``model.params``,
    L layers, h hidden, s sequence length) over the GPUs' peak (``hardware.peak_tflops``,
    the catalog's dense BF16 figure by default):
    ``seconds = (6 N + 12 L h s) B s / (gpus x peak x mfu)``.
any scenario key, written dotted (``parallelism.overlap_dp``, ``model.layers``)
    That key's value for the row (read as TOML; bare words are strings), so that rows may
    differ in more than the layout (a model of another size, another overlap).

Blank lines and lines whose first non-blank character is ``#`` are ignored. Any other
deviation (missing file, an unknown column, a column twice, a row of the wrong length, a
value that is not a whole number > 0, neither or both of ``seconds`` and ``mfu``, a
``dp`` that does not multiply out, no data row, more than :data:`MAX_ROWS` rows) raises
:class:`mcsim.errors.ScenarioError` naming the file, the line and the column.
"""

from __future__ import annotations

import csv
import math
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcsim.errors import ScenarioError
from mcsim.io.text_input import user_text_file
from mcsim.scenario.schema import key_meta

# Short column names and the scenario keys they set.
LAYOUT_COLUMNS = {
    "gpus": "parallelism.gpus",
    "tp": "parallelism.tp",
    "pp": "parallelism.pp",
    "cp": "parallelism.cp",
    "microbatch": "parallelism.microbatch",
    "interleave": "parallelism.interleave",
    "global_batch": "model.global_batch",
}
DP_COLUMN = "dp"
MEASURED_COLUMNS = ("seconds", "mfu")
MAX_ROWS = 1000  # measured layouts per file: each costs a model evaluation per grid point
_MAX_LINE = 1 << 16  # characters per line


@dataclass(frozen=True)
class Measurement:
    """One measured layout: the scenario keys its row sets, and what was measured.

    Attributes
    ----------
    line : int
        Its line in the file (from 1).
    settings : tuple of (str, Any)
        The scenario keys the row sets, in column order (``parallelism.tp``, 8).
    dp : int or None
        The data-parallel degree the row states (checked against the layout), or None.
    seconds : float or None
        The measured iteration time [s], or None when the row gives MFU.
    mfu : float or None
        The measured model FLOPs utilisation (0 to 1), or None when the row gives seconds.
    """

    line: int
    settings: tuple[tuple[str, Any], ...]
    dp: int | None
    seconds: float | None
    mfu: float | None

    @property
    def label(self) -> str:
        """The layout in short: ``gpus 384 tp 8 pp 6 mb 4 B 2048 dp 8``, and any other key the row sets."""
        short = {value: name for name, value in LAYOUT_COLUMNS.items()}
        short.update({"parallelism.microbatch": "mb", "model.global_batch": "B"})
        parts = [f"{short.get(key, key.split('.')[-1])} {value}" for key, value in self.settings]
        if self.dp is not None:
            parts.append(f"dp {self.dp}")
        return " ".join(parts)


def read_measurements(path: str | Path) -> tuple[Measurement, ...]:
    """Read a file of measured iteration times (format in the module docstring).

    Raises
    ------
    ScenarioError
        If the file is missing, unreadable or malformed; the key names the line and the column.
    """
    source = str(path)
    with user_text_file(path, "a CSV file") as handle:
        rows = _read_rows(source, _lines(source, handle))
    if not rows:
        raise ScenarioError(source, "rows", "no data rows; expected a header and one row per measured layout")
    return tuple(rows)


def _lines(source: str, handle) -> Iterator[tuple[int, str]]:
    """(number, text) of the lines that are not blank nor comments, refusing one too long."""
    n = 0
    while line := handle.readline(_MAX_LINE + 1):
        n += 1
        if len(line) > _MAX_LINE:
            raise ScenarioError(source, f"line {n}", f"longer than {_MAX_LINE:,} characters; expected a CSV row")
        if line.strip() and not line.lstrip().startswith("#"):
            yield n, line


def _fields(source: str, n: int, line: str) -> list[str]:
    try:
        return [f.strip() for f in next(csv.reader([line], strict=True))]
    except (csv.Error, StopIteration) as err:
        raise ScenarioError(source, f"line {n}", f"not a CSV row ({err})") from None


def _read_rows(source: str, lines: Iterator[tuple[int, str]]) -> list[Measurement]:
    columns: list[str] | None = None
    rows: list[Measurement] = []
    for n, line in lines:
        fields = _fields(source, n, line)
        if columns is None:
            columns = _header(source, n, fields)
            continue
        if len(fields) != len(columns):
            raise ScenarioError(
                source, f"line {n}", f"expected {len(columns)} fields ({','.join(columns)}), got {len(fields)}"
            )
        if len(rows) >= MAX_ROWS:
            raise ScenarioError(source, f"line {n}", f"more than {MAX_ROWS:,} measured layouts")
        rows.append(_measurement(source, n, dict(zip(columns, fields, strict=True))))
    return rows


def _header(source: str, n: int, fields: list[str]) -> list[str]:
    """The columns of the header row, checked."""
    names = [f if "." in f else f.lower() for f in fields]
    known = (*LAYOUT_COLUMNS, DP_COLUMN, *MEASURED_COLUMNS)
    for name in names:
        if name not in known and key_meta(name) is None:
            raise ScenarioError(
                source,
                f"line {n}, column {name[:80]!r}",
                f"unknown column; expected one of {', '.join(known)} or a scenario key (section.key)",
            )
    _check_once(source, n, names)
    measured = [name for name in names if name in MEASURED_COLUMNS]
    if len(measured) != 1:
        raise ScenarioError(source, f"line {n}", f"expected exactly one of the columns seconds or mfu, got {measured}")
    if "gpus" not in names and "parallelism.gpus" not in names:
        raise ScenarioError(source, f"line {n}", "expected a column gpus (the GPUs of each measured layout)")
    return names


def _check_once(source: str, n: int, names: list[str]) -> None:
    """Refuse a column given twice, by its name or by its scenario key."""
    if twice := sorted({name for name in names if names.count(name) > 1}):
        raise ScenarioError(source, f"line {n}, column {twice[0]!r}", "given twice; expected each column once")
    for name, key in LAYOUT_COLUMNS.items():
        if name in names and key in names:
            raise ScenarioError(source, f"line {n}, column {key!r}", f"the same key as column {name!r}; give one")


def _measurement(source: str, n: int, cells: dict[str, str]) -> Measurement:
    """One row's keys and measurement, each cell checked."""
    settings: list[tuple[str, Any]] = []
    for name, cell in cells.items():
        if name in LAYOUT_COLUMNS:
            settings.append((LAYOUT_COLUMNS[name], _whole(source, n, name, cell)))
        elif name not in (DP_COLUMN, *MEASURED_COLUMNS):
            settings.append((name, _toml_cell(cell)))
    dp = _whole(source, n, DP_COLUMN, cells[DP_COLUMN]) if DP_COLUMN in cells else None
    seconds = mfu = None
    if "seconds" in cells:
        seconds = _positive(source, n, "seconds", cells["seconds"], "a time in seconds > 0")
    else:
        mfu = _positive(source, n, "mfu", cells["mfu"], "a utilisation in (0, 1]")
        if mfu > 1.0:
            raise ScenarioError(source, f"line {n}, column 'mfu'", f"expected a utilisation in (0, 1], got {mfu:g}")
    return Measurement(n, tuple(settings), dp, seconds, mfu)


def _whole(source: str, n: int, column: str, cell: str) -> int:
    try:
        number = float(cell)
    except ValueError:
        number = math.nan
    if not (math.isfinite(number) and number >= 1 and number == int(number) and number <= 1e12):
        raise ScenarioError(source, f"line {n}, column {column!r}", f"expected a whole number >= 1, got {cell[:40]!r}")
    return int(number)


def _positive(source: str, n: int, column: str, cell: str, expected: str) -> float:
    try:
        number = float(cell)
    except ValueError:
        number = math.nan
    if not (math.isfinite(number) and number > 0):
        raise ScenarioError(source, f"line {n}, column {column!r}", f"expected {expected}, got {cell[:40]!r}")
    return number


def _toml_cell(cell: str) -> Any:
    """A cell of a scenario-key column read as a TOML value; a bare word as the string it is."""
    try:
        return tomllib.loads(f"value = {cell}")["value"]
    except (tomllib.TOMLDecodeError, RecursionError):
        return cell
