"""Scenario and plan files as TOML: read (:func:`read_toml`, nested at most :data:`MAX_DEPTH` deep) and
written so that the text reads back to the same tables (:func:`dumps_toml`: ``Scenario.to_toml``, the
``scenario_toml`` attribute of result files; :func:`format_number`: a number as text that reads back
as the same number).
"""

from __future__ import annotations

import datetime
import math
import re
import tomllib
from pathlib import Path
from typing import Any

from mcsim.errors import ScenarioError

# Deepest nesting a scenario needs: [sweep] -> "key" = [...] -> { minutes = M } -> value.
MAX_DEPTH = 8


# TOML basic strings: these characters must be escaped; the other controls as \\uXXXX.
_TOML_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _toml_string(text: str) -> str:
    """``text`` as a TOML basic string that :mod:`tomllib` reads back as ``text``.

    Raises ValueError for a lone surrogate (not Unicode text; TOML cannot hold it).
    """
    out = []
    for char in text:
        code = ord(char)
        if char in _TOML_ESCAPES:
            out.append(_TOML_ESCAPES[char])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\u{code:04x}")
        elif 0xD800 <= code <= 0xDFFF:
            raise ValueError(f"cannot write {text!r} as TOML: a lone surrogate is not Unicode text")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, (datetime.date, datetime.time)):  # TOML's dates and times (staffing's calendar)
        return value.isoformat()
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else _toml_string(key)


def dumps_toml(raw: dict) -> str:
    """Write scenario tables as TOML (scalars first, then tables, then arrays of tables)."""
    tables = {k: v for k, v in raw.items() if isinstance(v, dict)}
    arrays = {k: v for k, v in raw.items() if isinstance(v, list) and v and all(isinstance(x, dict) for x in v)}
    lines = _key_value_lines({k: v for k, v in raw.items() if k not in tables and k not in arrays})
    for key, table in tables.items():
        lines += ["", f"[{_toml_key(key)}]", *_key_value_lines(table)]
    for key, array in arrays.items():
        for table in array:
            lines += ["", f"[[{_toml_key(key)}]]", *_key_value_lines(table)]
    return "\n".join(lines) + "\n"


def _key_value_lines(table: dict) -> list[str]:
    """``KEY = VALUE`` lines of a table's entries, in its order."""
    return [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in table.items()]


def toml_value(value: Any) -> str:
    """One value (number, string, boolean, list or table) as TOML text."""
    return _toml_value(value)


def format_number(value: float) -> str:
    """``value`` as text that reads back as exactly ``value``.

    Whole numbers below 1e16 in full (``10000001``, not ``1e+07``); others in the
    short ``%g`` form when that is exact (``0.05``, ``1e+18``), else in full precision.
    """
    if isinstance(value, int) or (math.isfinite(value) and float(value).is_integer() and abs(value) < 1e16):
        return str(int(value))
    short = f"{value:g}"
    return short if float(short) == value else repr(float(value))


def read_toml(path: str | Path) -> dict:
    """The tables of the TOML file ``path`` (a scenario or a plan file), nested at most ``MAX_DEPTH`` deep.

    Raises
    ------
    ScenarioError
        When the file cannot be read, is not valid TOML or is nested too deeply.
    """
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ScenarioError(source, "(file)", f"cannot read: {getattr(err, 'strerror', err)}") from err
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ScenarioError(source, "(syntax)", f"not valid TOML: {err}") from err
    except RecursionError:
        raise ScenarioError(
            source, "(syntax)", f"arrays or tables nested too deeply (at most {MAX_DEPTH} levels are accepted)"
        ) from None
    check_depth(raw, source)
    return raw


def check_depth(raw: Any, source: str) -> None:
    """Refuse values nested deeper than :data:`MAX_DEPTH` (iteratively: no recursion limit)."""
    stack = [(raw, 0, "")]
    while stack:
        value, depth, where = stack.pop()
        if depth > MAX_DEPTH:
            raise ScenarioError(
                source, where or "(value)", f"expected a value nested at most {MAX_DEPTH} deep (arrays and tables)"
            )
        if isinstance(value, dict):
            stack.extend((v, depth + 1, f"{where}.{k}" if where else str(k)) for k, v in value.items())
        elif isinstance(value, (list, tuple)):
            stack.extend((v, depth + 1, where) for v in value)
