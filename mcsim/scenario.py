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
import itertools
import json
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from .budget import check_sweep_size
from .catalog import GpuSpec, lookup_gpu
from .schema import (REQUIRED_SECTIONS, SECTIONS, TOP_LEVEL_KEYS, CarbonSection,
                     CheckpointSection, ComputeSection, CostSection, EnergySection,
                     FailureClass, HardwareSection, Interval, ModelSection, NetworkSection,
                     ParallelismSection, RunSection, ScenarioError, StragglerSection,
                     build_section, coerce_value, field_meta)

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

    key: str            # dotted scenario key, e.g. "parallelism.gpus"
    dim: str            # dimension name: the key's last component
    values: tuple       # validated values
    coords: tuple       # coordinate values (labels for intervals)


@dataclass(frozen=True)
class Scenario:
    """A validated scenario: the base configuration and its sweep."""

    source: str
    raw: dict            # the TOML tables after overrides (for provenance)
    base: Config
    axes: tuple[SweepAxis, ...]
    configs: tuple[Config, ...]

    @property
    def name(self) -> str:
        return self.base.name

    @property
    def run(self) -> RunSection:
        return self.base.run

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(axis.values) for axis in self.axes)

    def to_toml(self) -> str:
        """The scenario, overrides applied, as TOML text (round-trips through tomllib)."""
        return dumps_toml(self.raw)


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


def parse_override(text: str) -> tuple[str, Any]:
    """Split ``KEY=VALUE``; VALUE is read as a TOML value, else as a bare string."""
    key, sep, value_text = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ScenarioError("--set", text, "expected KEY=VALUE, e.g. parallelism.gpus=4096")
    try:
        value = tomllib.loads(f"value = {value_text.strip()}")["value"]
    except tomllib.TOMLDecodeError:
        value = value_text.strip()
    return key, value


def load_scenario(path: str | Path | None = None, overrides: list[str] | tuple[str, ...] = (),
                  **run_overrides: Any) -> Scenario:
    """Read, override and validate a scenario file.

    Parameters
    ----------
    path : str or Path, optional
        The TOML file; the shipped reference scenario when omitted.
    overrides : list of str
        ``KEY=VALUE`` items; a list VALUE adds (or replaces) a sweep axis.
    **run_overrides
        Values for the ``[run]`` table (``runs``, ``seed``, ``mode``); None is ignored.

    Raises
    ------
    ScenarioError
        On any invalid input, with the file, the key and what was expected.
    """
    path = Path(path) if path is not None else reference_scenario_path()
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ScenarioError(source, "(file)", f"cannot read: {getattr(err, 'strerror', err)}") from err
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ScenarioError(source, "(syntax)", f"not valid TOML: {err}") from err
    for item in overrides:
        key, value = parse_override(item)
        if isinstance(value, list):
            raw.setdefault("sweep", {})
            if not isinstance(raw["sweep"], dict):
                raise ScenarioError(source, "sweep", "expected a table")
            raw["sweep"][key] = value
        else:
            _set_dotted(raw, key, value, "--set")
    for key, value in run_overrides.items():
        if value is not None:
            raw.setdefault("run", {})
            if isinstance(raw["run"], dict):
                raw["run"][key] = value
    return scenario_from_dict(raw, source)


def scenario_from_dict(raw: dict, source: str = "<scenario>") -> Scenario:
    """Validate the tables of a scenario (as :func:`tomllib.loads` returns them)."""
    for key in raw:
        if key not in TOP_LEVEL_KEYS:
            raise ScenarioError(source, key, f"unknown key; expected one of {', '.join(TOP_LEVEL_KEYS)}")
    for key in REQUIRED_SECTIONS:
        if key not in raw:
            raise ScenarioError(source, f"[{key}]", "required table is missing")
    base = _build_config(raw, source)
    axes = _build_axes(raw, source)
    check_sweep_size(tuple(len(axis.values) for axis in axes), base.run.runs, source)  # before expanding
    configs = []
    for combo in itertools.product(*(axis.values for axis in axes)):
        varied = copy.deepcopy(raw)
        for axis, value in zip(axes, combo):
            _set_dotted(varied, axis.key, _as_raw(value), source)
        configs.append(_build_config(varied, source, context=_combo_text(axes, combo)))
    return Scenario(source=source, raw=raw, base=base, axes=tuple(axes), configs=tuple(configs))


def _combo_text(axes: list[SweepAxis], combo: tuple) -> str:
    return ", ".join(f"{axis.dim}={coord}" for axis, coord in
                     zip(axes, (_coord(v) for v in combo)))


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
        raise ScenarioError(source, key, f"expected SECTION.KEY with SECTION one of {', '.join(SECTIONS)}, "
                                         "or failures.<class>.<field>")
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
            raise ScenarioError(source, where, "not a scenario key (expected e.g. \"parallelism.gpus\" "
                                               "or \"failures.<class>.mtbf_hours\")")
        if section == "run" or (section == "failures" and name == "name"):
            raise ScenarioError(source, where, "this key cannot be swept")
        if not isinstance(values, list) or not values:
            raise ScenarioError(source, where, "expected a non-empty list of values")
        typed = tuple(coerce_value(meta, v, source, f"{where}[{i}]") for i, v in enumerate(values))
        coords = tuple(_coord(v) for v in typed)
        if len(set(coords)) != len(coords):
            raise ScenarioError(source, where, f"values must be distinct, got {list(coords)}")
        if name in seen:
            raise ScenarioError(source, where, f"dimension name {name!r} collides with sweep key "
                                               f"{json.dumps(seen[name])}; sweep one of them only")
        seen[name] = key
        _set_dotted(copy.deepcopy(raw), key, values[0], source)  # the key must resolve
        axes.append(SweepAxis(key=key, dim=name, values=typed, coords=coords))
    return axes


def _build_config(raw: dict, source: str, context: str = "") -> Config:
    where = f"{source} ({context})" if context else source
    sections = {name: build_section(cls, raw.get(name, {}), where, name)
                for name, cls in SECTIONS.items()}
    name = raw.get("name", Path(source).stem)
    if not isinstance(name, str) or not name:
        raise ScenarioError(source, "name", "expected a non-empty string")
    if not isinstance(raw.get("description", ""), str):
        raise ScenarioError(source, "description", "expected a string")
    failures_raw = raw.get("failures", [])
    if not isinstance(failures_raw, list):
        raise ScenarioError(source, "failures", "expected an array of tables [[failures]]")
    failures = tuple(build_section(FailureClass, table, where, f"failures[{i}]")
                     for i, table in enumerate(failures_raw))
    names = [f.name for f in failures]
    for i, fname in enumerate(names):
        if not fname or not fname.replace("_", "").replace("-", "").isalnum():
            raise ScenarioError(where, f"failures[{i}].name", f"expected letters, digits, _ or -, got {fname!r}")
        if names.index(fname) != i:
            raise ScenarioError(where, f"failures[{i}].name", f"duplicate failure class name {fname!r}")
    hardware: HardwareSection = sections["hardware"]
    overrides = {f.name: getattr(hardware, f.name) for f in dataclasses.fields(GpuSpec)
                 if f.name != "sources" and getattr(hardware, f.name) is not None}
    gpu = dataclasses.replace(lookup_gpu(hardware.gpu), **overrides)
    if gpu.freq_min_mhz > gpu.freq_max_mhz:
        raise ScenarioError(where, "hardware.freq_min_mhz",
                            f"expected <= freq_max_mhz = {gpu.freq_max_mhz:g}, got {gpu.freq_min_mhz:g}")
    if gpu.idle_w > gpu.tdp_w:
        raise ScenarioError(where, "hardware.idle_w", f"expected <= tdp_w = {gpu.tdp_w:g}, got {gpu.idle_w:g}")
    for i, fclass in enumerate(failures):
        if fclass.domain_nodes > 1 and fclass.scope != "node":
            raise ScenarioError(where, f"failures[{i}].domain_nodes",
                                f"expected 1 for scope {fclass.scope!r}; domains are groups of nodes (scope node)")
    return Config(name=name, gpu=gpu, failures=failures, **sections)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def _toml_key(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() else json.dumps(key)


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
