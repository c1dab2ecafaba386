"""Scenario files: TOML -> validated :class:`Scenario` of one or more :class:`Config`.

A scenario is read with :mod:`tomllib` (:func:`mcsim.scenario.toml.read_toml`), command-line
overrides (``--set KEY=VALUE``, :mod:`mcsim.scenario.overrides`) are applied to the raw tables,
every section is validated against its declaration (:mod:`mcsim.scenario.schema`,
:mod:`mcsim.scenario.validation`) and the keys against each other
(:mod:`mcsim.scenario.consistency`). A ``[sweep]`` table turns dotted keys into dimensions:
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
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from mcsim.errors import ScenarioError
from mcsim.scenario.catalog import GpuSpec, check_type_prices, lookup_gpu
from mcsim.scenario.consistency import FAILURE_NAME, check_configuration
from mcsim.scenario.frozen import hash_once
from mcsim.scenario.interruptions import FLEET_KINDS, FailureClass, RestartSection, SchedulerSection, StaffingSection
from mcsim.scenario.limits import check_sweep_size
from mcsim.scenario.overrides import Override, apply_overrides, plain_value, set_dotted, with_keys_set
from mcsim.scenario.provenance import provenance_entries
from mcsim.scenario.schema import (
    DEFAULT_GPU,
    DEFAULT_STEP_MODEL,
    PLAN_TABLES,
    REQUIRED_SECTIONS,
    SECTIONS,
    TOP_LEVEL_KEYS,
    CarbonSection,
    CheckpointSection,
    ComputeSection,
    CostSection,
    EnergySection,
    HardwareSection,
    Interval,
    ModelSection,
    NetworkSection,
    ParallelismSection,
    PhasesSection,
    RunSection,
    StragglerSection,
    key_meta,
)
from mcsim.scenario.shard import Shard
from mcsim.scenario.shipped import (  # noqa: F401  (REFERENCE_SCENARIO, shipped_scenarios_folder: public here too)
    REFERENCE_SCENARIO,
    reference_scenario_path,
    resolve_scenario,
    shipped_scenarios_folder,
)
from mcsim.scenario.software import profile_defaults
from mcsim.scenario.toml import check_depth, dumps_toml, read_toml
from mcsim.scenario.uncertain import UncertainInput
from mcsim.scenario.uncertain_table import parse_uncertain
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
    staffing: StaffingSection
    energy: EnergySection
    cost: CostSection
    carbon: CarbonSection
    run: RunSection
    scheduler: SchedulerSection = SchedulerSection()

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
    uncertain: tuple[UncertainInput, ...] = ()  # the [uncertain] table (mcsim.scenario.uncertain)
    overrides: tuple[str, ...] = ()  # "KEY = VALUE" (TOML) of each override load_scenario applied, in order
    provenance: tuple[tuple[str, str], ...] = ()  # [provenance]: (key, where its borrowed value comes from)

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


def load_scenario(
    path: str | Path | None = None,
    overrides: Iterable[str | Override] | Mapping[str, Any] = (),
    *,
    shard: Shard | None = None,
    **run_overrides: Any,
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
    shard : Shard, optional
        The part of the sweep that will be simulated (``mcsim run --shard i/n``): the memory check
        counts the runs of the configurations it holds only (:func:`mcsim.scenario.limits.check_sweep_size`),
        so a part of a sweep too large for one machine is not refused.
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
    applied = apply_overrides(raw, overrides, run_overrides, source)
    return dataclasses.replace(scenario_from_dict(raw, source, shard), overrides=tuple(applied))


def scenario_from_dict(raw: dict, source: str = "<scenario>", shard: Shard | None = None) -> Scenario:
    """Validate the tables of a scenario (as :func:`tomllib.loads` returns them).

    numpy scalars and arrays among the values are taken as Python numbers and lists. ``shard``: the
    part of the sweep that will be simulated, whose share alone the memory check counts
    (:func:`mcsim.scenario.limits.check_sweep_size`).
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
        tuple(len(axis.values) for axis in axes), base.run.runs * max(1, base.run.draws), source, shard
    )  # before expanding
    configs = [
        _build_config(with_keys_set(raw, _point_values(axes, combo), source), source, context=_combo_text(axes, combo))
        for combo in itertools.product(*(axis.values for axis in axes))
    ]
    check_prices(configs, (axis.key for axis in axes), (entry.key for entry in uncertain), source)
    check_ignored_keys(raw, configs, source)
    provenance = provenance_entries(raw, source, tuple(fclass.name for fclass in base.failures))
    return Scenario(
        source=source,
        raw=raw,
        base=base,
        axes=tuple(axes),
        configs=tuple(configs),
        uncertain=uncertain,
        provenance=provenance,
    )


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

    Used for the parameter draws of the ``[uncertain]`` inputs (:mod:`mcsim.scenario.uncertain`).
    """
    indices = np.unravel_index(flat, scenario.shape) if scenario.axes else ()
    combo = tuple(axis.values[i] for axis, i in zip(scenario.axes, indices, strict=False))
    assigned = _point_values(scenario.axes, combo) + [(key, float(value)) for key, value in values.items()]
    context = ", ".join(t for t in (_combo_text(scenario.axes, combo), context) if t)
    return _build_config(with_keys_set(scenario.raw, assigned, scenario.source), scenario.source, context=context)


def _point_values(axes: Sequence[SweepAxis], combo: tuple) -> list[tuple[str, Any]]:
    """The (key, value) of each axis at a sweep point, values as the raw tables hold them."""
    return [(axis.key, _as_raw(value)) for axis, value in zip(axes, combo, strict=False)]


def _combo_text(axes: Sequence[SweepAxis], combo: tuple) -> str:
    return ", ".join(f"{axis.dim}={coord}" for axis, coord in zip(axes, (_coord(v) for v in combo), strict=False))


def _as_raw(value: Any) -> Any:
    if isinstance(value, Interval):
        return value.kind if value.kind in ("young_daly", "optimize") else {value.kind: value.value}
    return value


def _coord(value: Any) -> Any:
    return value.label if isinstance(value, Interval) else value


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
    raw = _with_software_defaults(raw)
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
    hardware: HardwareSection = sections["hardware"]
    gpu = _gpu_of(hardware)
    check_configuration(sections, gpu, failures, where)
    failures = tuple(in_fleet(f, hardware.failure_rate_factor) for f in failures)
    return Config(name=name, gpu=gpu, failures=failures, **sections)


def _with_software_defaults(raw: dict) -> dict:
    """``raw`` with the keys it leaves to its software profile set from it (a copy; ``raw`` when none)."""
    defaults = profile_defaults(raw, DEFAULT_GPU, DEFAULT_STEP_MODEL)
    if not defaults:
        return raw
    filled = dict(raw)
    for (section_name, key), value in defaults.items():
        filled[section_name] = {**filled.get(section_name, {}), key: value}
    return filled


def _gpu_of(hardware: HardwareSection) -> GpuSpec:
    """The catalog entry of ``hardware.gpu`` with the ``[hardware]`` table's figures that are set."""
    overrides = {
        f.name: getattr(hardware, f.name)
        for f in dataclasses.fields(GpuSpec)
        if f.name != "sources" and getattr(hardware, f.name) is not None
    }
    return dataclasses.replace(lookup_gpu(hardware.gpu), **overrides)


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
    prefix = f"failures.{fclass.name}"
    if not durations:
        if "recovery_durations_minutes" in table:  # [] would leave recovery_minutes in force without a word
            raise ScenarioError(
                where,
                f"{prefix}.recovery_durations_minutes",
                "expected at least one measured duration, got [] (leave the key out to use recovery_minutes)",
            )
        return fclass
    if "recovery_minutes" in table:
        raise ScenarioError(
            where, f"{prefix}.recovery_minutes", "expected one of recovery_minutes and recovery_durations_minutes"
        )
    if fclass.recovery_sigma > 0:
        raise ScenarioError(
            where, f"{prefix}.recovery_sigma", "expected 0 with recovery_durations_minutes (the list is the law)"
        )
    return dataclasses.replace(fclass, recovery_minutes=sum(durations) / len(durations))


def _failure_prefix(table: Any, index: int) -> str:
    """How errors name a failure class: ``failures.<name>`` (as sweep keys and --set do), or
    ``failures[<index>]`` while it has no usable name."""
    name = table.get("name") if isinstance(table, dict) else None
    return f"failures.{name}" if isinstance(name, str) and FAILURE_NAME.fullmatch(name) else f"failures[{index}]"


# [restart] keys that count only with restart.from_parts = true
_RESTART_PARTS = (
    *("reschedule_s", "reschedule_ms_per_gpu", "process_start_s", "communicator_ms_per_gpu"),
    *("warmup_iterations", "warmup_throughput"),
)
# [cost] keys that count only with cost.model = "rental" and are refused otherwise: a per-type price is
# given for renting; one flat gpu_hour_usd stays allowed (shipped scenarios keep theirs when --set makes
# them owned)
_RENTAL_KEYS = ("gpu_hour_usd_by_type",)


def _restart_paths_given(raw: dict) -> list[str]:
    """The failure classes' ``requeue_share`` keys given in ``raw`` (a restart path is a sum of the parts)."""
    failures = raw.get("failures", [])
    return [
        f"{_failure_prefix(table, i)}.requeue_share"
        for i, table in enumerate(failures if isinstance(failures, list) else [])
        if isinstance(table, dict) and "requeue_share" in table
    ]


def check_ignored_keys(raw: dict, configs: Sequence[Config], source: str) -> None:
    """Refuse a key that no configuration would use: a part of ``[restart]`` when ``restart.from_parts``
    is false everywhere, a per-type rental price when every configuration is ``cost.model = "owned"``, a
    staffing calendar without a team (each was ignored without a word). A sweep that turns the switch on
    somewhere uses them there."""
    restart, cost = raw.get("restart", {}), raw.get("cost", {})
    if isinstance(restart, dict) and not any(cfg.restart.from_parts for cfg in configs):
        if given := [f"restart.{key}" for key in _RESTART_PARTS if key in restart] + _restart_paths_given(raw):
            raise ScenarioError(
                source,
                given[0],
                "used only with restart.from_parts = true (the parts are then added to every recovery); "
                "set it, or remove the key",
            )
    if isinstance(cost, dict) and all(cfg.cost.model == "owned" for cfg in configs):
        if given := [key for key in _RENTAL_KEYS if key in cost]:
            raise ScenarioError(
                source,
                f"cost.{given[0]}",
                'a rental price, used only with cost.model = "rental" (owned GPUs cost gpu_capex_usd, '
                "amortised); remove the key or rent",
            )
    _check_staffing_used(raw, configs, source)


def _check_staffing_used(raw: dict, configs: Sequence[Config], source: str) -> None:
    """Refuse a ``[staffing]`` calendar key when every configuration has ``staffing.team = "none"`` (no
    recovery would wait for anyone: the calendar was ignored without a word)."""
    staffing = raw.get("staffing", {})
    if isinstance(staffing, dict) and all(cfg.staffing.team == "none" for cfg in configs):
        if given := [key for key in staffing if key != "team"]:
            raise ScenarioError(
                source,
                f"staffing.{given[0]}",
                'used only with staffing.team = "office" or "24/7" (with "none" no recovery waits for a '
                "person); set the team, or remove the key",
            )
