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
import functools
import hashlib
import itertools
import json
import math
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from mcsim.errors import ScenarioError
from mcsim.scenario.catalog import GpuSpec, check_type_prices, lookup_gpu
from mcsim.scenario.frozen import hash_once
from mcsim.scenario.limits import check_sweep_size
from mcsim.scenario.overrides import Override, normal_key, parse_override, plain_value
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
    PhasesSection,
    RestartSection,
    RunSection,
    StragglerSection,
    field_meta,
    key_meta,
    run_option,
)
from mcsim.scenario.shipped import (  # noqa: F401  (REFERENCE_SCENARIO, shipped_scenarios_folder: public here too)
    REFERENCE_SCENARIO,
    reference_scenario_path,
    resolve_scenario,
    shipped_scenarios_folder,
)
from mcsim.scenario.toml import MAX_DEPTH, dumps_toml, format_number, toml_value
from mcsim.scenario.uncertain import UncertainInput, parse_uncertain
from mcsim.scenario.validation import build_section, check_text, coerce_value


@hash_once
@dataclass(frozen=True)
class Config:
    """One fully specified cluster configuration."""

    name: str
    model: ModelSection
    phases: PhasesSection
    hardware: HardwareSection
    gpu: GpuSpec  # catalog entry with the [hardware] overrides applied
    parallelism: ParallelismSection
    compute: ComputeSection
    network: NetworkSection
    stragglers: StragglerSection
    failures: tuple[FailureClass, ...]
    checkpoint: CheckpointSection
    restart: RestartSection
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


# Configurations (or argument tuples) whose results a cache keyed by configuration keeps.
CONFIG_CACHE_SIZE = 1024
_Result = TypeVar("_Result")


def cached_per_configuration(function: Callable[..., _Result]) -> Callable[..., _Result]:
    """``function`` of a configuration (and other hashable arguments), computed once for each distinct
    arguments among the last :data:`CONFIG_CACHE_SIZE` (:func:`functools.lru_cache`: a :class:`Config` is
    immutable and hashable); computed anew where an argument is not hashable (a configuration that
    holds parameter draws as arrays). Callers share the results, which must be immutable. The
    wrapper's ``cache_clear`` empties the cache."""
    cached = functools.lru_cache(maxsize=CONFIG_CACHE_SIZE)(function)

    @functools.wraps(function)
    def call(*args: Any) -> _Result:
        try:
            hash(args)
        except TypeError:
            return function(*args)
        return cached(*args)

    call.cache_clear = cached.cache_clear  # type: ignore[attr-defined]
    return call


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
    overrides: tuple[str, ...] = ()  # "KEY = VALUE" (TOML) of each override load_scenario applied, in order

    def __repr__(self) -> str:
        """One line: name, file, sweep, runs, seed, mode, uncertain inputs and overrides (not every Config)."""
        run = self.run
        sweep = " x ".join(f"{axis.dim} {len(axis.values)}" for axis in self.axes)
        configurations = len(self.configs)
        parts = [
            f"{configurations} configuration{'s' if configurations != 1 else ''}" + (f" ({sweep})" if sweep else ""),
            f"{run.runs:,} runs"
            + (f" x {run.draws:,} draws of {len(self.uncertain)} uncertain inputs" if run.draws else ""),
            f"seed {run.seed}",
            f"{run.mode} mode",
        ]
        if self.overrides:
            parts.append(f"overrides: {'; '.join(self.overrides)}")
        return f"<Scenario {self.name!r} from {self.source}: {', '.join(parts)}>"

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


def override_items(overrides: Any) -> list[Override]:
    """``(key, value)`` pairs of ``overrides``: ``KEY=VALUE`` text or typed pairs (see :func:`load_scenario`)."""
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
        The TOML file, or the name of a shipped scenario (``"capacity-planning"``; a file of
        that name in the current folder wins, see :func:`mcsim.scenario.shipped.resolve_scenario`);
        the shipped reference scenario when omitted.
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
    path = resolve_scenario(path) if path is not None else reference_scenario_path()
    source = str(path)
    raw = read_toml(path)
    applied = []
    for key, value in override_items(overrides):
        check_depth({key: value}, "--set")
        apply_override(raw, key, value, source)
        applied.append(f"{key} = {toml_value(value)}")
    for key, value in run_overrides.items():
        if value is not None:
            option = f"load_scenario({key}=...)"
            if field_meta("run", key) is None:
                raise ScenarioError(option, key, f"unknown [run] key; expected one of {', '.join(RUN_KEYS)}")
            raw.setdefault("run", {})
            if not isinstance(raw["run"], dict):
                raise ScenarioError(source, "run", "expected a table")
            raw["run"][key] = run_option(key, plain_value(value), option)
            applied.append(f"run.{key} = {toml_value(raw['run'][key])}")
    return dataclasses.replace(scenario_from_dict(raw, source), overrides=tuple(applied))


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
            set_dotted(varied, axis.key, _as_raw(value), source)
        configs.append(_build_config(varied, source, context=_combo_text(axes, combo)))
    check_prices(configs, (axis.key for axis in axes), (entry.key for entry in uncertain), source)
    return Scenario(source=source, raw=raw, base=base, axes=tuple(axes), configs=tuple(configs), uncertain=uncertain)


def check_prices(configs: Sequence[Config], swept: Iterable[str], uncertain: Iterable[str], source: str) -> None:
    """Refuse a rented GPU type without a price, and one explicit price across a sweep of types.

    Parameters
    ----------
    configs : sequence of Config
        The scenario's configurations (one per sweep point).
    swept, uncertain : iterable of str
        The scenario's swept and uncertain keys (``cost.gpu_hour_usd`` among them sets
        that price in every configuration).
    source : str
        The file, for the error message.
    """
    flat_varied = "cost.gpu_hour_usd" in {*swept, *uncertain}
    rented = [cfg for cfg in configs if cfg.cost.model == "rental"]
    for cfg in rented:
        check_type_prices(cfg.cost, (cfg.hardware.gpu,), source, flat_varied=flat_varied)
    types = list(dict.fromkeys(cfg.hardware.gpu for cfg in rented))
    if len(types) > 1:
        check_type_prices(
            rented[0].cost, types, source, flat_varied=flat_varied, compared="the sweep over hardware.gpu"
        )


def config_with_values(scenario: Scenario, flat: int, values: Mapping[str, float], context: str = "") -> Config:
    """Configuration ``flat`` of the sweep with the scenario keys ``values`` set (validated again).

    Used for the parameter draws of the ``[uncertain]`` inputs (:mod:`mcsim.uncertain`).
    """
    varied = copy.deepcopy(scenario.raw)
    combo = np.unravel_index(flat, scenario.shape) if scenario.axes else ()
    for axis, index in zip(scenario.axes, combo, strict=False):
        set_dotted(varied, axis.key, _as_raw(axis.values[index]), scenario.source)
    for key, value in values.items():
        set_dotted(varied, key, float(value), scenario.source)
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


def set_dotted(raw: dict, key: str, value: Any, source: str) -> None:
    """Set the scenario key ``key`` (``SECTION.KEY``, ``failures.<class>.<field>``, ``name``,
    ``description``) in the raw tables ``raw`` (raises :class:`ScenarioError` naming ``source``)."""
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
        meta = key_meta(key)
        if meta is None:
            raise ScenarioError(
                source, where, 'not a scenario key (expected e.g. "parallelism.gpus" or "failures.<class>.mtbf_hours")'
            )
        if (
            section == "run"
            or (section == "failures" and name == "name")
            or not getattr(meta["kind"], "SWEEPABLE", True)
        ):
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
        set_dotted(copy.deepcopy(raw), key, values[0], source)  # the key must resolve
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
        _with_durations(build_section(FailureClass, table, where, _failure_prefix(table, i)), table, where)
        for i, table in enumerate(failures_raw)
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
    model = sections["model"]
    heads = model.heads or max(1, model.hidden // 128)
    if model.kv_heads and (model.kv_heads > heads or heads % model.kv_heads):
        raise ScenarioError(
            where,
            "model.kv_heads",
            f"expected a divisor of the {heads} attention heads (0: heads), got {model.kv_heads}",
        )
    compute = sections["compute"]
    tables = float(model.vocab) * float(model.hidden) * (1.0 if model.tied_embeddings else 2.0)
    if compute.step_model == "operators" and model.vocab > 0 and model.params <= tables:
        raise ScenarioError(
            where,
            "model.params",
            f"expected more than the {format_number(tables)} parameters of the embedding and output tables "
            f"(vocab x hidden, {'tied' if model.tied_embeddings else 'x 2 untied'}), got {format_number(model.params)}",
        )
    if compute.fp8 and compute.step_model != "operators":
        raise ScenarioError(
            where, "compute.fp8", 'expected false unless compute.step_model = "operators" (FP8 is modelled there only)'
        )
    if gpu.idle_w > gpu.tdp_w:
        raise ScenarioError(
            where, "hardware.idle_w", f"expected <= tdp_w = {format_number(gpu.tdp_w)}, got {format_number(gpu.idle_w)}"
        )
    _check_phases(sections["phases"], where)
    for fclass in failures:
        _check_failure_class(fclass, where)
    failures = tuple(in_fleet(f, hardware.failure_rate_factor) for f in failures)
    return Config(name=name, gpu=gpu, failures=failures, **sections)


def _check_phases(phases: PhasesSection, where: str) -> None:
    """The phases' lists agree: as many batches and sequence lengths (when given) as shares, summing to 1."""
    shares = phases.token_shares
    for key in ("global_batch", "seq_len"):
        given = len(getattr(phases, key))
        if given and given != len(shares):
            raise ScenarioError(
                where,
                f"phases.{key}",
                f"expected one value per phase ({len(shares)}, as phases.token_shares), got {given}",
            )
    if shares and abs(math.fsum(shares) - 1.0) > 1e-6:
        raise ScenarioError(
            where,
            "phases.token_shares",
            f"expected shares that sum to 1, got a sum of {format_number(math.fsum(shares))}",
        )


# The kinds of failure class whose rate is the fleet's (hardware.failure_rate_factor scales it): hardware
# and software faults; a training instability is the model's, a planned stop the operator's.
FLEET_KINDS = ("fail_stop", "hang")


def in_fleet(fclass: FailureClass, failure_rate_factor: float, mtbf_hours: Any = None) -> FailureClass:
    """The failure class as the fleet sees it: a fail-stop or hang class's ``mtbf_hours`` (or the given
    one, a scalar or an array over draws) divided by ``hardware.failure_rate_factor``; others as given."""
    mtbf = fclass.mtbf_hours if mtbf_hours is None else mtbf_hours
    if fclass.kind in FLEET_KINDS:
        mtbf = mtbf / failure_rate_factor
    return dataclasses.replace(fclass, mtbf_hours=mtbf)


def _with_durations(fclass: FailureClass, table: dict, where: str) -> FailureClass:
    """A class with measured recoveries (``recovery_durations_minutes``): its ``recovery_minutes`` is their
    mean (the first-order estimates use it); giving both, or a lognormal law too, is refused."""
    durations = fclass.recovery_durations_minutes
    if not durations:
        return fclass
    prefix = f"failures.{fclass.name}"
    if "recovery_minutes" in table:
        raise ScenarioError(
            where, f"{prefix}.recovery_minutes", "expected one of recovery_minutes and recovery_durations_minutes"
        )
    if fclass.recovery_sigma > 0:
        raise ScenarioError(
            where, f"{prefix}.recovery_sigma", "expected 0 with recovery_durations_minutes (the list is the law)"
        )
    return dataclasses.replace(fclass, recovery_minutes=sum(durations) / len(durations))


def _check_failure_class(fclass: FailureClass, where: str) -> None:
    """The keys of a failure class that only some scopes or kinds use (docs/model.md §3)."""
    prefix = f"failures.{fclass.name}"
    if fclass.domain_nodes > 1 and fclass.scope != "node":
        raise ScenarioError(
            where,
            f"{prefix}.domain_nodes",
            f"expected 1 for scope {fclass.scope!r}; domains are groups of nodes (scope node)",
        )
    if fclass.kind == "planned" and fclass.scope != "cluster":
        raise ScenarioError(
            where, f"{prefix}.scope", "expected 'cluster' for kind 'planned' (a planned stop stops the whole job)"
        )
    if fclass.kind == "hang" and fclass.detection_minutes == 0:
        raise ScenarioError(
            where,
            f"{prefix}.detection_minutes",
            "expected > 0 for kind 'hang' (the watchdog timeout; Megatron-LM's --distributed-timeout-minutes "
            "defaults to 10)",
        )
    if fclass.detection_minutes > 0 and fclass.kind != "hang":
        raise ScenarioError(where, f"{prefix}.detection_minutes", f"expected 0 for kind {fclass.kind!r} (hangs only)")
    if fclass.rollback_checkpoints > 0 and fclass.kind != "instability":
        raise ScenarioError(
            where, f"{prefix}.rollback_checkpoints", f"expected 0 for kind {fclass.kind!r} (instabilities only)"
        )
    if fclass.manual_hours > 0 and fclass.manual_share == 0:
        raise ScenarioError(
            where, f"{prefix}.manual_share", "expected > 0 where manual_hours is set (or manual_hours 0)"
        )
    _check_bad_replacements(fclass, where, prefix)


def _check_bad_replacements(fclass: FailureClass, where: str, prefix: str) -> None:
    """Bad replacements: GPUs and nodes replaced after a hardware failure (fail-stop or hang), with a life."""
    share, hours = fclass.bad_replacement_share, fclass.bad_replacement_hours
    if share > 0 and (fclass.scope == "cluster" or fclass.kind not in FLEET_KINDS):
        raise ScenarioError(
            where,
            f"{prefix}.bad_replacement_share",
            f"expected 0 for scope {fclass.scope!r}, kind {fclass.kind!r} (GPUs and nodes are replaced after "
            "fail-stop failures and hangs)",
        )
    if share > 0 and hours == 0:
        raise ScenarioError(where, f"{prefix}.bad_replacement_hours", "expected > 0 where bad_replacement_share is")
    if hours > 0 and share == 0:
        raise ScenarioError(
            where, f"{prefix}.bad_replacement_share", "expected > 0 where bad_replacement_hours is set (or hours 0)"
        )


_FAILURE_NAME = re.compile(r"[A-Za-z0-9_-]+")


def _failure_prefix(table: Any, index: int) -> str:
    """How errors name a failure class: ``failures.<name>`` (as sweep keys and --set do), or
    ``failures[<index>]`` while it has no usable name."""
    name = table.get("name") if isinstance(table, dict) else None
    return f"failures.{name}" if isinstance(name, str) and _FAILURE_NAME.fullmatch(name) else f"failures[{index}]"
