"""Scenario files: TOML -> validated :class:`Scenario` of one or more :class:`Config`.

A scenario is read with :mod:`tomllib`, command-line overrides (``--set
KEY=VALUE``) are applied to the raw tables, and every section is validated by
:mod:`mcsim.schema`. A ``[sweep]`` table turns dotted keys into dimensions:
the scenario expands to the Cartesian product of their values, one
:class:`Config` each, in C order (last axis fastest).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import itertools
import json
import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from mcsim.scenario.catalog import GpuSpec, lookup_gpu
from mcsim.scenario.limits import check_sweep_size
from mcsim.scenario.schema import (
    PLAN_TABLES,
    REQUIRED_SECTIONS,
    RUN_KEYS,
    SECTIONS,
    TOP_LEVEL_KEYS,
    CarbonSection,
    CheckpointSection,
    ComputeSection,
    CostSection,
    EnergySection,
    FailureClass,
    HardwareSection,
    Interval,
    ModelSection,
    NetworkSection,
    ParallelismSection,
    RunSection,
    ScenarioError,
    StragglerSection,
    build_section,
    check_text,
    coerce_value,
    field_meta,
    format_number,
    run_option,
)
from mcsim.scenario.uncertain import UncertainInput, parse_uncertain

REFERENCE_SCENARIO = "llama3-405b.toml"


@dataclass(frozen=True)
class Config:
    """One fully specified cluster configuration."""

    name: str
    model: ModelSection
    hardware: HardwareSection
    gpu: GpuSpec  # catalog entry with the [hardware] overrides applied
    parallelism: ParallelismSection
    compute: ComputeSection
    network: NetworkSection
    stragglers: StragglerSection
    failures: tuple[FailureClass, ...]
    checkpoint: CheckpointSection
    energy: EnergySection
    cost: CostSection
    carbon: CarbonSection
    run: RunSection

    @property
    def freq_mhz(self) -> float:
        """GPU core frequency in use, MHz."""
        return self.compute.freq_mhz if self.compute.freq_mhz is not None else self.gpu.freq_max_mhz

    @property
    def nodes(self) -> int:
        """Nodes allocated to the job."""
        return self.parallelism.gpus // self.hardware.gpus_per_node


@dataclass(frozen=True)
class SweepAxis:
    """One dimension of a sweep."""

    key: str  # dotted scenario key, e.g. "parallelism.gpus"
    dim: str  # dimension name: the key's last component
    values: tuple  # validated values
    coords: tuple  # coordinate values (labels for intervals)


@dataclass(frozen=True)
class Scenario:
    """A validated scenario: the base configuration and its sweep."""

    source: str
    raw: dict  # the TOML tables after overrides (for provenance)
    base: Config
    axes: tuple[SweepAxis, ...]
    configs: tuple[Config, ...]
    uncertain: tuple[UncertainInput, ...] = ()  # the [uncertain] table (mcsim.uncertain)

    @property
    def name(self) -> str:
        return self.base.name

    @property
    def file_stem(self) -> str:
        """File name (without suffix) made from :attr:`name`; see :func:`safe_file_stem`."""
        return safe_file_stem(self.name)

    @property
    def run(self) -> RunSection:
        return self.base.run

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(axis.values) for axis in self.axes)

    def to_toml(self) -> str:
        """The scenario, overrides applied, as TOML text (round-trips through tomllib)."""
        return dumps_toml(self.raw)


# A name used unchanged as a file name: ASCII letters, digits, ".", "_", "-", not starting
# with "." or "-" (no hidden files, no "..", nothing an option parser would take).
_SAFE_STEM = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
_UNSAFE_RUN = re.compile(r"[^A-Za-z0-9._-]+")


def safe_file_stem(name: str) -> str:
    """A file name made from a scenario name; the name never chooses a folder.

    A name of at most 100 ASCII letters, digits, ``.``, ``_`` and ``-`` that starts
    with a letter or digit is used as it is. Any other name is mapped to its safe
    characters (every run of others becomes ``_``, leading and trailing ``._-``
    dropped, at most 80 kept, ``scenario`` if none is left) followed by ``-`` and 8
    hex digits of the SHA-256 of the name (UTF-8), so that two names that differ
    only in unsafe characters do not share a file: ``../../escaped`` becomes
    ``escaped-<hash>``, ``/etc/x`` becomes ``etc_x-<hash>``.
    """
    if _SAFE_STEM.fullmatch(name):
        return name
    readable = _UNSAFE_RUN.sub("_", name).strip("._-")[:80].rstrip("._-") or "scenario"
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{readable}-{digest}"


def shipped_scenarios_folder() -> Path:
    """Folder of the shipped scenario files.

    Installed, they are the package data of ``mcsim.scenarios``. From a source
    tree (``import mcsim`` in the repository root, where ``./mcsim`` shadows the
    installed package) they are the repository's ``scenarios/`` folder.
    """
    try:
        return Path(str(resources.files("mcsim.scenarios")))
    except ModuleNotFoundError:
        return Path(__file__).resolve().parent.parent / "scenarios"


def reference_scenario_path() -> Path:
    """Path of the shipped reference scenario (Llama 3 405B)."""
    return shipped_scenarios_folder() / REFERENCE_SCENARIO


# A list item written without TOML quotes (``[sync, async]``) is read as this bare string.
_BARE_ITEM = re.compile(r"[A-Za-z0-9_.:+-]+")
# Deepest nesting a scenario needs: [sweep] -> "key" = [...] -> { minutes = M } -> value.
MAX_DEPTH = 8

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
    key = _normal_key(key)
    if not sep or not key:
        raise ScenarioError("--set", text, "expected KEY=VALUE, e.g. parallelism.gpus=4096")
    return key, _parse_override_value(key, value_text)


def _normal_key(key: str) -> str:
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


def _override_items(overrides: Any) -> list[Override]:
    """``(key, value)`` pairs of ``overrides`` (see :func:`load_scenario`)."""
    if isinstance(overrides, str):
        overrides = [overrides]
    items = overrides.items() if isinstance(overrides, Mapping) else overrides
    pairs = []
    for item in items:
        if isinstance(item, str):
            pairs.append(parse_override(item))
        elif isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[0], str):
            check_depth(item[1], "--set")
            pairs.append((_normal_key(item[0]), plain_value(item[1])))
        else:
            raise TypeError(f"an override is 'KEY=VALUE' or a (key, value) pair, got {item!r}")
    return pairs


def apply_override(raw: dict, key: str, value: Any, source: str) -> None:
    """Apply one override to the raw tables of the file ``source``.

    A list sets the sweep axis ``key`` (added, or its values replaced); a scalar sets
    the value and removes the axis if ``key`` was swept (the dimension disappears).
    """
    sweep = raw.get("sweep", {})
    if not isinstance(sweep, dict):
        raise ScenarioError(source, "sweep", "expected a table of KEY = [values]")
    if isinstance(value, list):
        _set_dotted(copy.deepcopy(raw), key, value[0] if value else None, "--set")  # the key must resolve
        raw["sweep"] = {**sweep, key: value}
        return
    _set_dotted(raw, key, value, "--set")
    if key in sweep:
        raw["sweep"] = {k: v for k, v in sweep.items() if k != key}


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


def load_scenario(
    path: str | Path | None = None, overrides: Iterable[str | Override] | Mapping[str, Any] = (), **run_overrides: Any
) -> Scenario:
    """Read, override and validate a scenario file.

    Parameters
    ----------
    path : str or Path, optional
        The TOML file; the shipped reference scenario when omitted.
    overrides : iterable of str or (key, value) pairs, or a mapping key -> value
        ``"KEY=VALUE"`` text as ``mcsim run --set`` takes it (VALUE read as TOML, bare
        strings allowed), or typed ``(key, value)`` pairs / a ``{key: value}`` mapping,
        whose values keep their type (numpy scalars become Python numbers). A scalar
        replaces the value, and removes ``key``'s sweep axis if the scenario sweeps it;
        a list (or tuple, or array) adds the sweep axis ``key`` or replaces its values.
    **run_overrides
        Values for the ``[run]`` table (``runs``, ``seed``, ``mode``, ``max_wall_days``);
        None is ignored.

    Raises
    ------
    ScenarioError
        On any invalid input, with the file, the key and what was expected.
    """
    path = Path(path) if path is not None else reference_scenario_path()
    source = str(path)
    raw = read_toml(path)
    for key, value in _override_items(overrides):
        check_depth({key: value}, "--set")
        apply_override(raw, key, value, source)
    for key, value in run_overrides.items():
        if value is not None:
            option = f"load_scenario({key}=...)"
            if field_meta("run", key) is None:
                raise ScenarioError(option, key, f"unknown [run] key; expected one of {', '.join(RUN_KEYS)}")
            raw.setdefault("run", {})
            if not isinstance(raw["run"], dict):
                raise ScenarioError(source, "run", "expected a table")
            raw["run"][key] = run_option(key, plain_value(value), option)
    return scenario_from_dict(raw, source)


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


def scenario_from_dict(raw: dict, source: str = "<scenario>") -> Scenario:
    """Validate the tables of a scenario (as :func:`tomllib.loads` returns them).

    numpy scalars and arrays among the values are taken as Python numbers and lists.
    """
    check_depth(raw, source)
    raw = plain_value(raw)
    for key in raw:
        if key not in TOP_LEVEL_KEYS:
            hint = " (a plan file: run it with `mcsim plan`)" if key in PLAN_TABLES else ""
            raise ScenarioError(source, key, f"unknown key; expected one of {', '.join(TOP_LEVEL_KEYS)}{hint}")
    for key in REQUIRED_SECTIONS:
        if key not in raw:
            raise ScenarioError(source, f"[{key}]", "required table is missing")
    base = _build_config(raw, source)
    axes = _build_axes(raw, source)
    uncertain = parse_uncertain(raw, {axis.key for axis in axes}, base.run.draws, source)
    check_sweep_size(
        tuple(len(axis.values) for axis in axes), base.run.runs * max(1, base.run.draws), source
    )  # before expanding
    configs = []
    for combo in itertools.product(*(axis.values for axis in axes)):
        varied = copy.deepcopy(raw)
        for axis, value in zip(axes, combo, strict=False):
            _set_dotted(varied, axis.key, _as_raw(value), source)
        configs.append(_build_config(varied, source, context=_combo_text(axes, combo)))
    return Scenario(source=source, raw=raw, base=base, axes=tuple(axes), configs=tuple(configs), uncertain=uncertain)


def config_with_values(scenario: Scenario, flat: int, values: Mapping[str, float], context: str = "") -> Config:
    """Configuration ``flat`` of the sweep with the scenario keys ``values`` set (validated again).

    Used for the parameter draws of the ``[uncertain]`` inputs (:mod:`mcsim.uncertain`).
    """
    varied = copy.deepcopy(scenario.raw)
    combo = np.unravel_index(flat, scenario.shape) if scenario.axes else ()
    for axis, index in zip(scenario.axes, combo, strict=False):
        _set_dotted(varied, axis.key, _as_raw(axis.values[index]), scenario.source)
    for key, value in values.items():
        _set_dotted(varied, key, float(value), scenario.source)
    axes_text = _combo_text(scenario.axes, tuple(axis.values[i] for axis, i in zip(scenario.axes, combo, strict=False)))
    return _build_config(varied, scenario.source, context=", ".join(t for t in (axes_text, context) if t))


def _combo_text(axes: Sequence[SweepAxis], combo: tuple) -> str:
    return ", ".join(f"{axis.dim}={coord}" for axis, coord in zip(axes, (_coord(v) for v in combo), strict=False))


def _as_raw(value: Any) -> Any:
    if isinstance(value, Interval):
        return value.kind if value.kind in ("young_daly", "optimize") else {value.kind: value.value}
    return value


def _coord(value: Any) -> Any:
    return value.label if isinstance(value, Interval) else value


def _set_dotted(raw: dict, key: str, value: Any, source: str) -> None:
    parts = key.split(".")
    if parts[0] == "failures":
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


def _build_axes(raw: dict, source: str) -> list[SweepAxis]:
    sweep = raw.get("sweep", {})
    if not isinstance(sweep, dict):
        raise ScenarioError(source, "sweep", "expected a table of KEY = [values]")
    axes: list[SweepAxis] = []
    seen: dict[str, str] = {}
    for key, values in sweep.items():
        where = f"sweep.{json.dumps(key)}"
        parts = key.split(".")
        section = parts[0]
        name = parts[-1]
        meta = field_meta(section, name) if len(parts) == (3 if section == "failures" else 2) else None
        if meta is None:
            raise ScenarioError(
                source, where, 'not a scenario key (expected e.g. "parallelism.gpus" or "failures.<class>.mtbf_hours")'
            )
        if section == "run" or (section == "failures" and name == "name"):
            raise ScenarioError(source, where, "this key cannot be swept")
        if not isinstance(values, list) or not values:
            raise ScenarioError(source, where, "expected a non-empty list of values")
        typed = tuple(coerce_value(meta, v, source, f"{where}[{i}]") for i, v in enumerate(values))
        coords = tuple(_coord(v) for v in typed)
        if len(set(coords)) != len(coords):
            raise ScenarioError(source, where, f"values must be distinct, got {list(coords)}")
        if name in seen:
            raise ScenarioError(
                source,
                where,
                f"dimension name {name!r} collides with sweep key {json.dumps(seen[name])}; sweep one of them only",
            )
        seen[name] = key
        _set_dotted(copy.deepcopy(raw), key, values[0], source)  # the key must resolve
        axes.append(SweepAxis(key=key, dim=name, values=typed, coords=coords))
    return axes


def _build_config(raw: dict, source: str, context: str = "") -> Config:
    where = f"{source} ({context})" if context else source
    sections = {name: build_section(cls, raw.get(name, {}), where, name) for name, cls in SECTIONS.items()}
    name = check_text(raw["name"], source, "name", one_line=True) if "name" in raw else Path(source).stem
    check_text(raw.get("description", ""), source, "description", one_line=False)
    failures_raw = raw.get("failures", [])
    if not isinstance(failures_raw, list):
        raise ScenarioError(source, "failures", "expected an array of tables [[failures]]")
    failures = tuple(
        build_section(FailureClass, table, where, _failure_prefix(table, i)) for i, table in enumerate(failures_raw)
    )
    names = [f.name for f in failures]
    for i, fname in enumerate(names):
        if not _FAILURE_NAME.fullmatch(fname):
            raise ScenarioError(where, f"failures[{i}].name", f"expected letters, digits, _ or -, got {fname!r}")
        if names.index(fname) != i:
            raise ScenarioError(where, f"failures[{i}].name", f"duplicate failure class name {fname!r}")
    hardware: HardwareSection = sections["hardware"]
    overrides = {
        f.name: getattr(hardware, f.name)
        for f in dataclasses.fields(GpuSpec)
        if f.name != "sources" and getattr(hardware, f.name) is not None
    }
    gpu = dataclasses.replace(lookup_gpu(hardware.gpu), **overrides)
    if gpu.freq_min_mhz > gpu.freq_max_mhz:
        raise ScenarioError(
            where,
            "hardware.freq_min_mhz",
            f"expected <= freq_max_mhz = {format_number(gpu.freq_max_mhz)}, got {format_number(gpu.freq_min_mhz)}",
        )
    if gpu.idle_w > gpu.tdp_w:
        raise ScenarioError(
            where, "hardware.idle_w", f"expected <= tdp_w = {format_number(gpu.tdp_w)}, got {format_number(gpu.idle_w)}"
        )
    for fclass in failures:
        if fclass.domain_nodes > 1 and fclass.scope != "node":
            raise ScenarioError(
                where,
                f"failures.{fclass.name}.domain_nodes",
                f"expected 1 for scope {fclass.scope!r}; domains are groups of nodes (scope node)",
            )
    return Config(name=name, gpu=gpu, failures=failures, **sections)


_FAILURE_NAME = re.compile(r"[A-Za-z0-9_-]+")


def _failure_prefix(table: Any, index: int) -> str:
    """How errors name a failure class: ``failures.<name>`` (as sweep keys and --set do), or
    ``failures[<index>]`` while it has no usable name."""
    name = table.get("name") if isinstance(table, dict) else None
    return f"failures.{name}" if isinstance(name, str) and _FAILURE_NAME.fullmatch(name) else f"failures[{index}]"


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
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else _toml_string(key)


def dumps_toml(raw: dict) -> str:
    """Write scenario tables as TOML (scalars first, then tables, then arrays of tables)."""
    lines = []
    tables = {k: v for k, v in raw.items() if isinstance(v, dict)}
    arrays = {k: v for k, v in raw.items() if isinstance(v, list) and v and all(isinstance(x, dict) for x in v)}
    for key, value in raw.items():
        if key not in tables and key not in arrays:
            lines.append(f"{_toml_key(key)} = {_toml_value(value)}")
    for key, table in tables.items():
        lines += ["", f"[{_toml_key(key)}]"]
        lines += [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in table.items()]
    for key, array in arrays.items():
        for table in array:
            lines += ["", f"[[{_toml_key(key)}]]"]
            lines += [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"
