"""Overrides of a scenario's values: ``--set KEY=VALUE`` and their Python forms, applied to the raw tables.

An override is ``KEY=VALUE`` text (the value's text read as TOML, or a list of bare strings) or
a ``(key, value)`` pair from Python (numpy scalars and arrays made plain numbers and lists):
:func:`override_items`. :func:`apply_override` applies one to a scenario's raw tables (a list
sets a sweep axis), :func:`apply_run_override` sets a ``[run]`` value given outside the file
(``load_scenario(runs=...)``), and :func:`set_dotted` sets a dotted key in the raw tables, as the
sweep's points and the parameter draws do too.
"""

from __future__ import annotations

import copy
import json
import re
import tomllib
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from mcsim.errors import ScenarioError
from mcsim.scenario.schema import RUN_KEYS, SECTIONS, field_meta, key_meta, run_option
from mcsim.scenario.toml import MAX_DEPTH, check_depth, toml_value

# A list item written without TOML quotes (``[sync, async]``) is read as this bare string.
_BARE_ITEM = re.compile(r"[A-Za-z0-9_.:+-]+")


Override = tuple[str, Any]


def _toml_value_of(text: str) -> Any:
    """``text`` read as one TOML value (raises TOMLDecodeError, RecursionError)."""
    return tomllib.loads(f"value = {text}")["value"]


def _split_list_items(inner: str) -> list[str]:
    """Items of a list's inside, split at commas outside brackets, braces and quotes."""
    items, depth, quote, start = [], 0, "", 0
    for i, char in enumerate(inner):
        if quote:
            quote = "" if char == quote and inner[i - 1] != "\\" else quote
        elif char in "\"'":
            quote = char
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
        elif char == "," and depth == 0:
            items.append(inner[start:i])
            start = i + 1
    items.append(inner[start:])
    if items and not items[-1].strip() and len(items) > 1:
        items.pop()  # a trailing comma, as TOML allows
    return [item.strip() for item in items]


# numpy >= 2 writes its scalars as np.float64(0.5), np.int64(8), np.str_('x'), np.True_: what
# f"{key}={value!r}" or f"{key}={list(array)}" puts in an override's text.
_NUMPY_REPR = re.compile(r"\b(?:np|numpy)\.(?:float|int|uint|str_|bool_)\w*\(([^()]*)\)")


_NUMPY_BOOL = re.compile(r"\b(?:np|numpy)\.(True|False)_")
# Python's own booleans, as f"{key}={value!r}" writes a bool and numpy < 2 writes np.True_: a value, or a
# list's item, that is True or False alone (not inside a quoted string, not part of a word).
_PYTHON_BOOL = re.compile(r"(?:(?<=^)|(?<=[\[,]))\s*(True|False)\s*(?=$|[,\]])")


def _without_numpy_reprs(text: str, key: str) -> str:
    """``text`` with numpy scalar reprs replaced by the TOML of their value, and for a key declared boolean
    Python's ``True``/``False`` too (a string key keeps the text ``True``)."""
    text = _NUMPY_REPR.sub(lambda m: m.group(1), text)
    text = _NUMPY_BOOL.sub(lambda m: m.group(1).lower(), text)
    meta = key_meta(key)
    if meta is None or meta.get("kind") is not bool:
        return text
    return _PYTHON_BOOL.sub(lambda m: m.group(0).replace(m.group(1), m.group(1).lower()), text)


def _parse_override_value(key: str, text: str) -> Any:
    """VALUE of ``--set KEY=VALUE``: a TOML value, a list with bare strings, or a bare string."""
    text = _without_numpy_reprs(text.strip(), key)
    try:
        return _toml_value_of(text)
    except RecursionError:
        raise ScenarioError("--set", key, f"expected a value nested at most {MAX_DEPTH} deep") from None
    except tomllib.TOMLDecodeError:
        pass
    if not text.startswith("["):
        return text  # a bare string: --set checkpoint.strategy=sync
    closed = text.endswith("]")
    items = _split_list_items(text[1:-1] if closed else text[1:])
    values = [_list_item(key, item) for item in items]
    if closed and all(v is not None for v in values):
        return values
    quoted = ", ".join(item if _is_toml(item) else json.dumps(item) for item in items)
    raise ScenarioError(
        "--set", key, f"cannot read the list {text}; write it as TOML, strings in quotes: {key}=[{quoted}]"
    )


def _list_item(key: str, item: str) -> Any:
    """One item of a ``--set`` list: a TOML value or a bare string; None if neither."""
    try:
        return _toml_value_of(item)
    except RecursionError:
        raise ScenarioError("--set", key, f"expected a value nested at most {MAX_DEPTH} deep") from None
    except tomllib.TOMLDecodeError:
        return item if _BARE_ITEM.fullmatch(item) else None


def _is_toml(text: str) -> bool:
    try:
        _toml_value_of(text)
    except (tomllib.TOMLDecodeError, RecursionError):
        return False
    return True


def parse_override(text: str) -> Override:
    """Split ``KEY=VALUE``; VALUE is read as a TOML value, a list may hold bare strings.

    ``parallelism.gpus=4096``, ``checkpoint.strategy=sync`` (a bare string),
    ``checkpoint.strategy=[sync, async]`` (a list of bare strings, as
    ``["sync", "async"]``), ``checkpoint.interval={ minutes = 30 }``.
    """
    key, sep, value_text = text.partition("=")
    key = normal_key(key)
    if not sep or not key:
        raise ScenarioError("--set", text, "expected KEY=VALUE, e.g. parallelism.gpus=4096")
    return key, _parse_override_value(key, value_text)


def normal_key(key: str) -> str:
    return ".".join(part.strip() for part in key.strip().split("."))


def plain_value(value: Any) -> Any:
    """``value`` with numpy scalars and arrays as Python numbers and lists, tuples as lists.

    So that a value passed from Python keeps its type (``np.float64(0.5)`` is the
    number 0.5, ``np.arange(3)`` a list of three integers) and can be written as TOML.
    """
    if isinstance(value, np.ndarray):
        return [plain_value(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [plain_value(v) for v in value]
    if isinstance(value, dict):
        return {k: plain_value(v) for k, v in value.items()}
    return value


def override_items(overrides: Any) -> list[Override]:
    """``(key, value)`` pairs of ``overrides``: ``KEY=VALUE`` text or typed pairs (see
    :func:`mcsim.scenario.config.load_scenario`)."""
    if isinstance(overrides, str):
        overrides = [overrides]
    items = overrides.items() if isinstance(overrides, Mapping) else overrides
    pairs = []
    for item in items:
        if isinstance(item, str):
            pairs.append(parse_override(item))
        elif isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[0], str):
            check_depth(item[1], "--set")
            pairs.append((normal_key(item[0]), plain_value(item[1])))
        else:
            raise TypeError(f"an override is 'KEY=VALUE' or a (key, value) pair, got {item!r}")
    return pairs


def apply_override(raw: dict, key: str, value: Any, source: str) -> None:
    """Apply one override to the raw tables of the file ``source``.

    A list sets the sweep axis ``key`` (added, or its values replaced), unless the key's value is a
    list itself (``phases.token_shares``, ``failures.<class>.recovery_durations_minutes``): then it
    sets the value; a scalar sets the value and removes the axis if ``key`` was swept (the dimension
    disappears).
    """
    sweep = raw.get("sweep", {})
    if not isinstance(sweep, dict):
        raise ScenarioError(source, "sweep", "expected a table of KEY = [values]")
    if isinstance(value, list) and not _holds_a_list(key):
        set_dotted(copy.deepcopy(raw), key, value[0] if value else None, "--set")  # the key must resolve
        raw["sweep"] = {**sweep, key: value}
        return
    set_dotted(raw, key, value, "--set")
    if key in sweep:
        raw["sweep"] = {k: v for k, v in sweep.items() if k != key}


def _holds_a_list(key: str) -> bool:
    """Whether the scenario key ``key`` takes a list as its value (a kind that cannot be swept)."""
    meta = key_meta(key)
    return meta is not None and not getattr(meta["kind"], "SWEEPABLE", True)


def apply_overrides(
    raw: dict, overrides: Iterable[str | Override] | Mapping[str, Any], run_overrides: Mapping[str, Any], source: str
) -> list[str]:
    """Apply ``overrides`` (:func:`override_items`), then the ``[run]`` values ``run_overrides`` (None
    ignored), to the raw tables of the file ``source``; the ``KEY = VALUE`` text (TOML) of each."""
    applied = []
    for key, value in override_items(overrides):
        check_depth({key: value}, "--set")
        apply_override(raw, key, value, source)
        applied.append(f"{key} = {toml_value(value)}")
    for key, value in run_overrides.items():
        if value is not None:
            applied.append(apply_run_override(raw, key, value, source))
    return applied


def apply_run_override(raw: dict, key: str, value: Any, source: str) -> str:
    """Set ``run.<key>`` in the raw tables of the file ``source`` to ``value``, checked (an error names
    the call ``load_scenario(<key>=...)``); its ``run.KEY = VALUE`` text (TOML)."""
    option = f"load_scenario({key}=...)"
    if field_meta("run", key) is None:
        raise ScenarioError(option, key, f"unknown [run] key; expected one of {', '.join(RUN_KEYS)}")
    raw.setdefault("run", {})
    if not isinstance(raw["run"], dict):
        raise ScenarioError(source, "run", "expected a table")
    raw["run"][key] = run_option(key, plain_value(value), option)
    return f"run.{key} = {toml_value(raw['run'][key])}"


def set_dotted(raw: dict, key: str, value: Any, source: str) -> None:
    """Set the scenario key ``key`` (``SECTION.KEY``, ``failures.<class>.<field>``, ``name``,
    ``description``) in the raw tables ``raw`` (raises :class:`ScenarioError` naming ``source``)."""
    parts = key.split(".")
    if parts[0] == "failures":
        _set_failure_key(raw, key, value, source)
        return
    if len(parts) == 1 and parts[0] in ("name", "description"):
        raw[parts[0]] = value
        return
    if len(parts) != 2 or parts[0] not in SECTIONS:
        raise ScenarioError(
            source, key, f"expected SECTION.KEY with SECTION one of {', '.join(SECTIONS)}, or failures.<class>.<field>"
        )
    table = raw.setdefault(parts[0], {})
    if not isinstance(table, dict):
        raise ScenarioError(source, parts[0], "expected a table")
    table[parts[1]] = value


def with_keys_set(raw: dict, values: Iterable[tuple[str, Any]], source: str) -> dict:
    """A copy of the raw tables ``raw`` with each scenario key of ``values``, ``(key, value)`` pairs, set
    in order (:func:`set_dotted`): a point of a sweep, a parameter draw."""
    varied = copy.deepcopy(raw)
    for key, value in values:
        set_dotted(varied, key, value, source)
    return varied


def _set_failure_key(raw: dict, key: str, value: Any, source: str) -> None:
    """Set ``failures.<class>.<field>`` in the ``[[failures]]`` table of that class's name."""
    parts = key.split(".")
    if len(parts) != 3:
        raise ScenarioError(source, key, "expected failures.<class name>.<field>")
    classes = raw.get("failures", [])
    if not isinstance(classes, list):
        raise ScenarioError(source, "failures", "expected an array of tables [[failures]]")
    matches = [c for c in classes if isinstance(c, dict) and c.get("name") == parts[1]]
    if not matches:
        names = ", ".join(str(c.get("name")) for c in classes if isinstance(c, dict))
        raise ScenarioError(source, key, f"no failure class named {parts[1]!r} (classes: {names or 'none'})")
    matches[0][parts[2]] = value
