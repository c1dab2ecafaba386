"""How a TOML key is declared and checked: :func:`param` fields, the field kinds, the one validator.

A table of a scenario or a plan file is a frozen dataclass whose fields are made by
:func:`param`: a field's metadata holds what the validator checks (kind, bounds, choices) and
what the documentation prints (unit, doc); a field without a default is required. The
declarations themselves are elsewhere: the scenario's sections in :mod:`mcsim.scenario.schema`,
the plan's tables in :mod:`mcsim.planning.plan_file`, the parameters of ``[uncertain]`` distributions
in :mod:`mcsim.scenario.uncertain_table`, the options of ``mcsim fit-failures`` in
:mod:`mcsim.fitting.failure_table`.

:func:`build_section` validates one TOML table into its dataclass and :func:`coerce_value` one
value against its field: unknown keys, wrong types, NaN/inf and out-of-range values are a
:class:`~mcsim.errors.ScenarioError` with one line that names the file, the key and what was
expected. A field kind other than the built-in ones (float, int, str, bool, :class:`StateOrNumber`)
is a class with a ``from_toml(value, meta, source, key)`` classmethod (:class:`Durations`, and the
scenario's :class:`~mcsim.scenario.schema.Interval` and :class:`~mcsim.scenario.schema.PricesByType`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import field
from typing import Any

from mcsim.errors import ScenarioError
from mcsim.scenario.toml import format_number

MAX_GPUS = 10_000_000  # absurd-size guard on GPU counts: far beyond any cluster built (2026)

_REQUIRED = dataclasses.MISSING


def param(
    default: Any = _REQUIRED,
    *,
    kind: type = float,
    gt: float | None = None,
    ge: float | None = None,
    le: float | None = None,
    lt: float | None = None,
    choices: tuple[str, ...] | None = None,
    many: bool = False,
    unit: str = "",
    doc: str = "",
    key: str | None = None,
) -> Any:
    """A validated field of a TOML table.

    Parameters
    ----------
    default : Any
        The value when the key is absent; left out, the key is required.
    kind : type
        float, int, str, bool, :class:`StateOrNumber`, or a class with a ``from_toml`` classmethod.
    gt, ge, le, lt : float, optional
        Bounds of a number (in ``unit``).
    choices : tuple of str, optional
        The strings a ``str`` (or :class:`StateOrNumber`) value may take.
    many : bool
        The value is a non-empty list of distinct values, each checked as above (typed as a tuple).
    unit, doc : str
        Shown in error messages and the documentation.
    key : str, optional
        The TOML key when it is not the field's name (a Python keyword such as ``from``).
    """
    meta = dict(kind=kind, gt=gt, ge=ge, le=le, lt=lt, choices=choices, many=many, unit=unit, doc=doc, key=key)
    return field(default=default, metadata=meta)


class StateOrNumber:
    """Field kind: one of the field's ``choices`` (a string) or a number within its bounds."""


class Durations:
    """Field kind: a list of durations within the field's bounds, e.g. ``[4, 9, 15, 120]``.

    Typed as a tuple of floats (hashable, in the file's order; at most :data:`MAX_ENTRIES`). It
    cannot be swept (:data:`SWEEPABLE`). Subclasses change what the list holds.
    """

    SWEEPABLE = False
    MAX_ENTRIES = 100_000
    NOUN, EXAMPLE, INTEGER = "durations", "[4, 9, 15, 120]", False

    @classmethod
    def from_toml(cls, value: Any, meta: dict, source: str, key: str) -> tuple:
        """The numbers a TOML array lists (a tuple passes through)."""
        if isinstance(value, tuple):
            return value
        if not isinstance(value, list) or len(value) > cls.MAX_ENTRIES:
            raise ScenarioError(
                source,
                key,
                f"expected a list of at most {cls.MAX_ENTRIES:,} {cls.NOUN}, e.g. {cls.EXAMPLE}, got "
                + (f"{len(value):,} of them" if isinstance(value, list) else type_name(value)),
            )
        kind = int if cls.INTEGER else float
        return tuple(
            kind(coerce_number(meta, number, source, f"{key}[{i}]", integer=cls.INTEGER))
            for i, number in enumerate(value)
        )


class Shares(Durations):
    """Field kind: a list of shares, e.g. ``[0.01, 0.94, 0.05]`` (one per training phase)."""

    MAX_ENTRIES = 64
    NOUN, EXAMPLE = "shares", "[0.01, 0.94, 0.05]"


class Counts(Durations):
    """Field kind: a list of whole numbers, e.g. ``[512, 2048, 2048]`` (one per training phase)."""

    MAX_ENTRIES = 64
    NOUN, EXAMPLE, INTEGER = "whole numbers", "[512, 2048, 2048]", True


def type_name(value: Any) -> str:
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, str):
        return f"string {value!r}"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "a list"
    return f"{type(value).__name__} {value!r}"


def _bounds_text(meta: dict) -> str:
    parts = [
        f"{sign} {format_number(meta[name])}"
        for name, sign in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<="))
        if meta.get(name) is not None
    ]
    unit = f" {meta['unit']}" if meta["unit"] else ""
    return (" " + " and ".join(parts) if parts else "") + unit


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_integral(value: Any) -> bool:
    return is_number(value) and math.isfinite(value) and float(value).is_integer()


def _coerce_choice_or_number(meta: dict, value: Any, source: str, key: str) -> Any:
    if isinstance(value, str) and value in meta["choices"]:
        return value
    if not is_number(value):
        options = " or ".join(f'"{c}"' for c in meta["choices"])
        raise ScenarioError(source, key, f"expected {options} or a number{_bounds_text(meta)}, got {type_name(value)}")
    return coerce_number(meta, value, source, key, integer=False)


def _coerce_bool(meta: dict, value: Any, source: str, key: str) -> bool:
    if not isinstance(value, bool):
        raise ScenarioError(source, key, f"expected true or false, got {type_name(value)}")
    return value


def _coerce_str(meta: dict, value: Any, source: str, key: str) -> str:
    if not isinstance(value, str):
        raise ScenarioError(source, key, f"expected a string, got {type_name(value)}")
    if meta["choices"] is not None and value not in meta["choices"]:
        options = ", ".join(meta["choices"])
        raise ScenarioError(source, key, f"expected one of {options}; got {value!r}")
    return value


def coerce_number(meta: dict, value: Any, source: str, key: str, *, integer: bool) -> int | float:
    """A finite number (a whole one when ``integer``) within the field's bounds."""
    number = _typed_number(meta, value, source, key, integer=integer)
    if not _within_bounds(meta, number):
        raise ScenarioError(source, key, f"expected a value{_bounds_text(meta)}, got {format_number(number)}")
    return number


def _typed_number(meta: dict, value: Any, source: str, key: str, *, integer: bool) -> int | float:
    """``value`` as a finite float, or as an int that a 64-bit integer holds when ``integer``."""
    if not is_number(value):
        raise ScenarioError(source, key, f"expected a number{_bounds_text(meta)}, got {type_name(value)}")
    if isinstance(value, int) and abs(value) > 2**63 - 1:
        raise ScenarioError(
            source, key, f"expected a value{_bounds_text(meta)}, got a {len(str(abs(value)))}-digit integer"
        )
    if not math.isfinite(value):
        raise ScenarioError(source, key, f"expected a finite number{_bounds_text(meta)}, got {value}")
    if integer and (not float(value).is_integer() or abs(value) > 2**63 - 1):
        raise ScenarioError(source, key, f"expected a whole number{_bounds_text(meta)}, got {value!r}")
    return int(value) if integer else float(value)


def _within_bounds(meta: dict, number: float) -> bool:
    """Whether ``number`` meets each of the field's bounds that is set (``gt``, ``ge``, ``le``, ``lt``)."""
    too_small = (meta["gt"] is not None and not number > meta["gt"]) or (
        meta["ge"] is not None and not number >= meta["ge"]
    )
    too_large = (meta["le"] is not None and not number <= meta["le"]) or (
        meta.get("lt") is not None and not number < meta["lt"]
    )
    return not (too_small or too_large)


def _items_text(meta: dict) -> str:
    """What each element of a ``many`` field is, for messages: ``whole numbers >= 1``, ``H100-SXM, A100-40GB``."""
    kind = meta["kind"]
    if meta["choices"] is not None:
        return ", ".join(meta["choices"])
    if kind is int:
        return f"whole numbers{_bounds_text(meta)}"
    if kind is float:
        return f"numbers{_bounds_text(meta)}"
    return getattr(kind, "ITEMS_TEXT", kind.__name__)


def _coerce_list(meta: dict, value: Any, source: str, key: str) -> tuple:
    if not isinstance(value, list) or not value:
        raise ScenarioError(source, key, f"expected a non-empty list of {_items_text(meta)}, got {type_name(value)}")
    one = {**meta, "many": False}
    items = tuple(coerce_value(one, item, source, f"{key}[{i}]") for i, item in enumerate(value))
    if len(set(items)) != len(items):
        raise ScenarioError(source, key, f"expected distinct values, got {value!r}")
    return items


def coerce_value(meta: dict, value: Any, source: str, key: str) -> Any:
    """Check one value against its field metadata (:func:`param`) and return it typed.

    Raises :class:`ScenarioError` naming ``source`` and ``key`` and what was expected.
    """
    if meta.get("many"):
        return _coerce_list(meta, value, source, key)
    kind = meta["kind"]
    from_toml = getattr(kind, "from_toml", None)
    if from_toml is not None:
        return from_toml(value, meta, source, key)
    if kind is StateOrNumber:
        return _coerce_choice_or_number(meta, value, source, key)
    if kind is bool:
        return _coerce_bool(meta, value, source, key)
    if kind is str:
        return _coerce_str(meta, value, source, key)
    return coerce_number(meta, value, source, key, integer=kind is int)


def build_section(cls: type, table: Any, source: str, prefix: str) -> Any:
    """Validate one TOML table into the dataclass ``cls``.

    ``prefix`` is the dotted name of the table, used in error messages.
    """
    if not isinstance(table, dict):
        raise ScenarioError(source, prefix, f"expected a table, got {type_name(table)}")
    known = {f.metadata.get("key") or f.name: f for f in dataclasses.fields(cls)}
    for key in table:
        if key not in known:
            raise ScenarioError(source, f"{prefix}.{key}", f"unknown key; expected one of {', '.join(known)}")
    values: dict[str, Any] = {}
    for name, fld in known.items():
        key = f"{prefix}.{name}"
        if name in table:
            value = table[name]
            if value is None and fld.default is None:
                values[fld.name] = None
                continue
            values[fld.name] = coerce_value(dict(fld.metadata), value, source, key)
        elif fld.default is _REQUIRED:
            doc = fld.metadata.get("doc")
            raise ScenarioError(source, key, "required key is missing" + (f"; expected {doc}" if doc else ""))
    return cls(**values)


def _short_repr(text: str, limit: int = 60) -> str:
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}... ({len(text)} characters)"


def check_text(text: Any, source: str, key: str, *, one_line: bool) -> str:
    """A free-text scenario string (``name``, ``description``), checked.

    It must be a string of Unicode text (no lone surrogates, which no file format
    can store); with ``one_line`` also non-empty and free of control characters
    (C0, DEL, C1: a name is a label printed in tables, titles and progress lines).
    """
    if not isinstance(text, str) or (one_line and not text):
        raise ScenarioError(source, key, f"expected a {'non-empty ' if one_line else ''}string, got {type_name(text)}")
    if any(0xD800 <= ord(c) <= 0xDFFF for c in text):
        raise ScenarioError(source, key, f"expected Unicode text, got a lone surrogate in {_short_repr(text)}")
    if one_line and any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in text):
        raise ScenarioError(source, key, f"expected one line without control characters, got {_short_repr(text)}")
    return text
