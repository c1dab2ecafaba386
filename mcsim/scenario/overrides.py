"""``--set KEY=VALUE`` overrides of a scenario: the value's text parsed (TOML, or a bare list), and
values passed from Python made plain (numpy scalars and arrays as numbers and lists).
"""

from __future__ import annotations

import json
import re
import tomllib
from typing import Any

import numpy as np

from mcsim.errors import ScenarioError
from mcsim.scenario.toml import MAX_DEPTH

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


def _without_numpy_reprs(text: str) -> str:
    """``text`` with numpy scalar reprs replaced by the TOML of their value."""
    text = _NUMPY_REPR.sub(lambda m: m.group(1), text)
    return _NUMPY_BOOL.sub(lambda m: m.group(1).lower(), text)


def _parse_override_value(key: str, text: str) -> Any:
    """VALUE of ``--set KEY=VALUE``: a TOML value, a list with bare strings, or a bare string."""
    text = _without_numpy_reprs(text.strip())
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
