"""Plan files: a scenario plus ``[search]``, ``[constraints]`` and ``[plan]`` (docs/model.md §9).

A plan file is a scenario (every table of ``mcsim run``'s files except
``[sweep]``; ``[parallelism] gpus`` may be left out) plus:

* ``[search]``: the space to search. ``gpu_types`` (catalog names), ``gpus``
  (a list, or ``{ from = A, to = B, factor = 2 }`` / ``{ from, to, step }``), and
  the layout choices ``tp``, ``pp``, ``microbatch``, ``interleave``,
  ``recompute``, ``sequence_parallel``, ``zero_stage``, ``cp``, ``ep`` and
  ``expert_tp`` (a mixture of experts' expert layout), ``strategy``, ``interval``,
  ``freq_mhz``: each a list, or left
  out for its default (:func:`mcsim.planning.candidates.default_values`, the valid values for the model).
* ``[constraints]``: ``deadline_days`` with ``deadline_probability``,
  ``budget_usd``, ``power_mw`` (facility cap), ``min_gpus``, ``max_gpus``.
* ``[plan]``: ``objective`` (``cost``, ``energy``, ``wall_time``, ``co2`` or a
  table of weights), ``indifference`` (relative, 0.005), ``alpha`` (0.05),
  ``first_runs``, ``max_runs``, ``max_total_runs``, ``finalists``, ``pool``, ``margin``,
  ``pilot_runs``, ``pilot_families``.

The keys of the three tables are declared like the scenario's (:func:`~mcsim.scenario.validation.param`
fields of :class:`Search`, :class:`Constraints` and :class:`PlanOptions`) and checked by the
scenario's validator (:func:`~mcsim.scenario.validation.build_section`); what relates two keys is
checked here. Every mistake is a :class:`~mcsim.errors.ScenarioError`: one line naming
file and key. The objective is one home here too: its names (:data:`OBJECTIVES`), the weights
of a plan's (:attr:`Plan.objective_weights`) and the weighted sum of named outputs
(:func:`weighted_objective`), for the screen's estimates and the simulated runs alike.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np

from mcsim.errors import ScenarioError
from mcsim.model.layouts import RECOMPUTE_CODES
from mcsim.model.memory import MEMORY_MODEL_OVER_MEASURED
from mcsim.model.strategies import STRATEGIES
from mcsim.scenario.catalog import GPU_CATALOG, GpuSpec, check_type_prices, lookup_gpu
from mcsim.scenario.config import Scenario, scenario_from_dict
from mcsim.scenario.overrides import Override, override_items, set_dotted
from mcsim.scenario.schema import PLAN_TABLES, TOP_LEVEL_KEYS, Interval
from mcsim.scenario.shipped import resolve_scenario
from mcsim.scenario.toml import check_depth, read_toml
from mcsim.scenario.uncertain import saltelli_block
from mcsim.scenario.uncertain_table import parse_uncertain
from mcsim.scenario.validation import MAX_GPUS, build_section, coerce_value, param

OBJECTIVES = ("cost", "energy", "wall_time", "co2")
# Default relative screen margin: the largest relative error of the screen's cost, energy and
# wall-time estimates against simulated means measured on the shipped plans (docs/planning.md,
# benchmarks/bench_screen.py --error), rounded up.
DEFAULT_MARGIN = 0.05
# The calibration pilot (docs/model.md §9, "Calibration"): tens of runs of one candidate per family, enough
# to measure the screen's error per family before the selection trusts its ranking; 30 runs put the standard
# error of a mean at sd / 5.5, so a family whose wall time varies by 5 % (heavy failures) is measured to
# about +-1 %. At most 24 families: 720 runs, about the first stage of a plan of 6-10 finalists
# (plan-llama3-70b: 6 x 50 + its own layout).
DEFAULT_PILOT_RUNS = 30
DEFAULT_PILOT_FAMILIES = 24
DEFAULT_MICROBATCH = (1, 2, 4, 8)
# run.draws of a plan with [uncertain] inputs that gives none: the plan itself simulates no draws; this
# is what `mcsim run` of its recommendation (written by `mcsim report`) draws. A power of two, as
# scrambled Sobol points balance best; 64 x the runs of one configuration stay a short run.
DEFAULT_PLAN_DRAWS = 64


class GpuCounts:
    """Field kind of ``search.gpus``: a list of GPU counts, or ``{ from, to, factor }`` / ``{ from, to, step }``."""

    ITEMS_TEXT = "GPU counts"
    _COUNT = dict(kind=int, gt=None, ge=1, le=MAX_GPUS, lt=None, choices=None, many=False, unit="", doc="")
    MAX_SIZES = 10_000

    @classmethod
    def from_toml(cls, value: Any, meta: dict, source: str, key: str) -> tuple[int, ...]:
        """The GPU counts ``value`` names, ascending."""
        if isinstance(value, list):
            return tuple(sorted(coerce_value({**cls._COUNT, "many": True}, value, source, key)))
        if not isinstance(value, dict):
            raise ScenarioError(
                source,
                key,
                "expected a list of GPU counts or { from = A, to = B, factor = F } or { from = A, to = B, step = S }",
            )
        bounds = build_section(_GpuRange, value, source, key)
        if (bounds.factor is None) == (bounds.step is None):
            raise ScenarioError(source, key, "expected from, to and one of factor or step")
        if bounds.to < bounds.start:
            raise ScenarioError(source, f"{key}.to", f"expected a value >= from = {bounds.start}, got {bounds.to}")
        if bounds.factor is not None:
            counts = [bounds.start]
            while counts[-1] * bounds.factor <= bounds.to:
                counts.append(counts[-1] * bounds.factor)
            return tuple(counts)
        counts = list(range(bounds.start, bounds.to + 1, bounds.step))
        if len(counts) > cls.MAX_SIZES:
            raise ScenarioError(source, key, f"expected at most {cls.MAX_SIZES} sizes, got {len(counts)}")
        return tuple(counts)


@dataclass(frozen=True)
class _GpuRange:
    """``search.gpus = { from = A, to = B, factor = F }`` or ``{ from = A, to = B, step = S }``."""

    start: int = param(kind=int, ge=1, le=MAX_GPUS, key="from", doc="the smallest GPU count")
    to: int = param(kind=int, ge=1, le=MAX_GPUS, doc="the largest GPU count")
    factor: int | None = param(None, kind=int, ge=2, le=1024, doc="each count this many times the last")
    step: int | None = param(None, kind=int, ge=1, le=MAX_GPUS, doc="each count this many more than the last")


class Objective:
    """Field kind of ``plan.objective``: one of :data:`OBJECTIVES`, or a table of weights."""

    # Weights are relative; below 1e-12 the weighted objective's variances underflow (a weight of 1e-300 made
    # the indifference zone's square 0, and the selection divided by it).
    _WEIGHT = dict(kind=float, gt=None, ge=1e-12, le=1e12, lt=None, choices=None, many=False, unit="", doc="")

    @classmethod
    def from_toml(cls, value: Any, meta: dict, source: str, key: str) -> str | dict[str, float]:
        """The objective's name, or ``{output: weight}``."""
        if isinstance(value, str):
            if value not in OBJECTIVES:
                raise ScenarioError(
                    source, key, f"expected one of {', '.join(OBJECTIVES)} or a table of weights, got {value!r}"
                )
            return value
        if isinstance(value, dict) and value:
            weights = {}
            for name, weight in value.items():
                if name not in OBJECTIVES:
                    raise ScenarioError(source, f"{key}.{name}", f"expected one of {', '.join(OBJECTIVES)}")
                weights[name] = coerce_value(cls._WEIGHT, weight, source, f"{key}.{name}")
            return weights
        raise ScenarioError(
            source,
            key,
            f"expected one of {', '.join(OBJECTIVES)} or a table of weights {{ cost = 1, energy = 100 }}, "
            f"got {value!r}",
        )


@dataclass(frozen=True, kw_only=True)
class Search:
    """The ``[search]`` table: the values of every searched axis (validated; ``None``: the model's default)."""

    gpu_types: tuple[str, ...] = param(
        (), kind=str, many=True, choices=tuple(GPU_CATALOG), doc="catalog names; default: hardware.gpu"
    )
    gpus: tuple[int, ...] = param(kind=GpuCounts, doc="a list of GPU counts or { from, to, factor }")
    tp: tuple[int, ...] | None = param(None, kind=int, many=True, ge=1, le=1_000_000, doc="tensor-parallel degrees")
    pp: tuple[int, ...] | None = param(None, kind=int, many=True, ge=1, le=100_000, doc="pipeline-parallel degrees")
    microbatch: tuple[int, ...] = param(
        DEFAULT_MICROBATCH, kind=int, many=True, ge=1, le=1_000_000, unit="sequences", doc="microbatch sizes"
    )
    interleave: tuple[int, ...] | None = param(None, kind=int, many=True, ge=1, le=1024, doc="virtual stages per GPU")
    recompute: tuple[str, ...] = param(
        tuple(RECOMPUTE_CODES), kind=str, many=True, choices=tuple(RECOMPUTE_CODES), doc="recomputation policies"
    )
    sequence_parallel: tuple[bool, ...] | None = param(
        None, kind=bool, many=True, doc="with and/or without sequence parallelism; default: the scenario's"
    )
    zero_stage: tuple[int, ...] | None = param(
        None, kind=int, many=True, ge=0, le=3, doc="ZeRO stages (0-3); default: the scenario's"
    )
    cp: tuple[int, ...] | None = param(
        None, kind=int, many=True, ge=1, le=1_000_000, doc="context-parallel degrees; default: the scenario's"
    )
    ep: tuple[int, ...] | None = param(
        None, kind=int, many=True, ge=1, le=1_000_000, doc="expert-parallel degrees (MoE); default: the scenario's"
    )
    expert_tp: tuple[int, ...] | None = param(
        None, kind=int, many=True, ge=1, le=1_000_000, doc="expert tensor-parallel degrees; default: the scenario's"
    )
    strategy: tuple[str, ...] = param(
        tuple(STRATEGIES), kind=str, many=True, choices=tuple(STRATEGIES), doc="checkpoint strategies"
    )
    interval: tuple[Interval, ...] = param(
        (Interval("young_daly"),), kind=Interval, many=True, doc="checkpoint intervals (not optimize)"
    )
    freq_mhz: tuple[float, ...] | None = param(
        None, many=True, gt=0, le=1e5, unit="MHz", doc="GPU clocks; default: each GPU type's maximum"
    )


DEFAULT_MEMORY_HEADROOM = round(1.0 - MEMORY_MODEL_OVER_MEASURED[0], 2)


@dataclass(frozen=True)
class Constraints:
    """The ``[constraints]`` table: what a recommendation must satisfy (None: no such constraint)."""

    deadline_days: float | None = param(None, gt=0, le=36_500, unit="d", doc="the job must end within")
    deadline_probability: float = param(0.9, gt=0, lt=1, doc="with this probability")
    budget_usd: float | None = param(None, gt=0, le=1e15, unit="USD", doc="mean cost at most")
    power_mw: float | None = param(None, gt=0, le=1e6, unit="MW", doc="facility power cap")
    min_gpus: int = param(1, kind=int, ge=1, le=MAX_GPUS, doc="fewest GPUs")
    max_gpus: int = param(MAX_GPUS, kind=int, ge=1, le=MAX_GPUS, doc="most GPUs")
    # Share of the GPU's memory a recommendation leaves free: by default what the memory model
    # under-counted at worst against published measurements (1 - MEMORY_MODEL_OVER_MEASURED's low end).
    memory_headroom: float = param(
        DEFAULT_MEMORY_HEADROOM, ge=0, lt=1, doc="share of GPU memory the model's memory must leave free"
    )


@dataclass(frozen=True)
class PlanOptions:
    """The ``[plan]`` table: the objective and the selection's settings."""

    objective: str | dict[str, float] = param("cost", kind=Objective, doc="cost, energy, wall_time, co2 or weights")
    # at least 1e-6: below, the zone's square underflows where the selection divides by it (1e-200 ended in
    # ZeroDivisionError); a relative zone of 1e-6 already asks more than any Monte Carlo budget can resolve
    indifference: float = param(0.005, ge=1e-6, le=0.5, doc="relative indifference zone of the selection")
    alpha: float = param(0.05, gt=0, lt=0.5, doc="probability of a wrong selection")
    first_runs: int = param(100, kind=int, ge=10, le=1_000_000, doc="runs of each finalist in the first stage")
    max_runs: int = param(5000, kind=int, ge=10, le=10_000_000, doc="runs of one finalist at most")
    max_total_runs: int | None = param(None, kind=int, ge=10, le=1e9, doc="runs of all finalists at most")
    finalists: int = param(10, kind=int, ge=2, le=1000, doc="candidates simulated first, and brought in at a time")
    pool: int | None = param(
        None,
        kind=int,
        ge=2,
        le=100_000,
        doc="candidates simulated in all at most (unset: 100, or 5 x finalists if more)",
    )
    margin: float = param(DEFAULT_MARGIN, ge=0, le=10, doc="relative screen margin")
    pilot_runs: int = param(
        DEFAULT_PILOT_RUNS, kind=int, ge=0, le=100_000, doc="runs of each family's candidate in the pilot (0: none)"
    )
    pilot_families: int = param(
        DEFAULT_PILOT_FAMILIES, kind=int, ge=1, le=100_000, doc="families simulated in the pilot at most"
    )


_OPTIONS = PlanOptions()
SEARCH_KEYS = tuple(f.name for f in dataclasses.fields(Search))
CONSTRAINT_KEYS = tuple(f.name for f in dataclasses.fields(Constraints))
PLAN_KEYS = tuple(f.name for f in dataclasses.fields(PlanOptions))


@dataclass(frozen=True)
class Plan:
    """A validated plan file."""

    source: str
    scenario: Scenario
    search: Search
    constraints: Constraints
    objective: str | dict[str, float]
    indifference: float = _OPTIONS.indifference
    alpha: float = _OPTIONS.alpha
    first_runs: int = _OPTIONS.first_runs
    max_runs: int = _OPTIONS.max_runs
    max_total_runs: int | None = _OPTIONS.max_total_runs
    finalists: int = _OPTIONS.finalists
    pool: int | None = _OPTIONS.pool
    margin: float = _OPTIONS.margin
    pilot_runs: int = _OPTIONS.pilot_runs
    pilot_families: int = _OPTIONS.pilot_families
    has_reference: bool = False  # the file's [parallelism] names a layout (tp or pp): simulated alongside

    @property
    def pool_size(self) -> int:
        """The most candidates the plan simulates in all (``pool``; unset: 100, or 5 x ``finalists`` if more)."""
        return self.pool if self.pool is not None else max(100, 5 * self.finalists)

    @functools.cached_property
    def gpu_specs(self) -> tuple[GpuSpec, ...]:
        """The catalog entry of every searched GPU type, with the scenario's ``[hardware]`` overrides applied
        (to every type); computed once per plan."""
        hardware = self.scenario.base.hardware
        overrides = {
            f.name: getattr(hardware, f.name)
            for f in dataclasses.fields(GpuSpec)
            if f.name != "sources" and getattr(hardware, f.name) is not None
        }
        return tuple(dataclasses.replace(lookup_gpu(name), **overrides) for name in self.search.gpu_types)

    @property
    def objective_weights(self) -> dict[str, float]:
        """The objective as ``{output name: weight}`` (weight 1 for a named objective)."""
        return {self.objective: 1.0} if isinstance(self.objective, str) else self.objective

    @property
    def objective_label(self) -> str:
        """``cost``, or ``1*cost + 0.5*energy`` for weights."""
        if isinstance(self.objective, str):
            return self.objective
        return " + ".join(f"{w:g}*{k}" for k, w in self.objective.items())


def load_plan(path: str | Path, overrides: Iterable[str | Override] | Mapping[str, Any] = ()) -> Plan:
    """Read, override and validate a plan file.

    Parameters
    ----------
    path : str or Path
        The plan file, or the name of a shipped plan (``"plan-llama3-70b"``; a file of that
        name in the current folder wins, see :func:`mcsim.scenario.shipped.resolve_scenario`).
    overrides : iterable of str or (key, value) pairs, or a mapping key -> value
        As ``mcsim plan --set`` takes them (:func:`apply_plan_override`): ``KEY=VALUE`` text or
        typed pairs, for scenario keys and the keys of ``[search]``, ``[constraints]`` and
        ``[plan]``.

    Raises
    ------
    ScenarioError
        On any invalid input, with the file (or ``--set``), the key and what was expected.
    """
    path = resolve_scenario(path)
    raw = read_toml(path)
    for key, value in override_items(overrides):
        check_depth({key: value}, "--set")
        apply_plan_override(raw, key, value)
    return plan_from_dict(raw, str(path))


def apply_plan_override(raw: dict, key: str, value: Any) -> None:
    """Apply one ``--set KEY=VALUE`` to the raw tables of a plan file.

    ``search.KEY``, ``constraints.KEY`` and ``plan.KEY`` set that key of the plan's table (a
    list is a value there: ``search.gpus=[1024, 2048]``); any other key is a scenario key, set
    as ``mcsim run --set`` sets it, except that a list is refused: a plan searches with
    ``[search]``, it has no sweep.
    """
    table, _, field = key.partition(".")
    if table in PLAN_TABLES:
        if not field or "." in field:
            raise ScenarioError("--set", key, f"expected {table}.KEY with one key of [{table}]")
        target = raw.setdefault(table, {})
        if not isinstance(target, dict):
            raise ScenarioError("--set", table, "expected a table")
        target[field] = value
        return
    if isinstance(value, list):
        raise ScenarioError(
            "--set",
            key,
            "a plan has no sweep: give one value, or search several with the [search] keys "
            "(e.g. search.gpus=[1024, 2048], search.strategy=[sync, async])",
        )
    set_dotted(raw, key, value, "--set")


def plan_from_dict(raw: dict, source: str = "<plan>") -> Plan:
    """Validate the tables of a plan file (as :func:`tomllib.loads` returns them).

    An ``[uncertain]`` table needs no ``run.draws`` here (the plan re-screens its finalists at
    each input's 5th and 95th percentile and simulates no draws): when it is not given it is
    :data:`DEFAULT_PLAN_DRAWS`, what ``mcsim run`` of the recommendation (``mcsim report``) uses.
    """
    check_depth(raw, source)
    raw = copy.deepcopy(raw)
    tables = {name: _table(raw.pop(name, {}), source, name) for name in PLAN_TABLES}
    for key in raw:  # named here, with the plan's own tables among the choices
        if key not in TOP_LEVEL_KEYS and key != "sweep":
            choices = ", ".join((*PLAN_TABLES, *(k for k in TOP_LEVEL_KEYS if k != "sweep")))
            raise ScenarioError(source, key, f"unknown table or key of a plan file; expected one of {choices}")
    if "sweep" in raw:
        raise ScenarioError(source, "sweep", "a plan searches with [search]; remove [sweep]")
    _default_draws(raw, source)
    search = _parse_search(tables["search"], raw, source)
    has_reference = _default_layout(raw, search, source)
    scenario = scenario_from_dict(raw, source)
    check_type_prices(
        scenario.base.cost,
        search.gpu_types,
        source,
        flat_varied=any(entry.key == "cost.gpu_hour_usd" for entry in scenario.uncertain),
        compared="search.gpu_types",
    )
    gpn = scenario.base.hardware.gpus_per_node
    bad = [g for g in search.gpus if g % gpn]
    if bad:
        raise ScenarioError(
            source, "search.gpus", f"expected multiples of hardware.gpus_per_node = {gpn}, got {bad[0]}"
        )
    _check_expert_search(search, scenario, source)
    constraints = _parse_constraints(tables["constraints"], source)
    options = _parse_options(tables["plan"], source)
    return Plan(source, scenario, search, constraints, **options, has_reference=has_reference)


def _default_layout(raw: dict, search: Search, source: str) -> bool:
    """Give the scenario the first searched GPU count and type where the file names none; whether its
    ``[parallelism]`` names a layout of its own (``tp`` or ``pp``: simulated alongside, for comparison)."""
    parallelism = raw.setdefault("parallelism", {})
    if not isinstance(parallelism, dict):
        raise ScenarioError(source, "parallelism", "expected a table")
    parallelism.setdefault("gpus", search.gpus[0])
    hardware = raw.setdefault("hardware", {})
    if isinstance(hardware, dict):
        hardware.setdefault("gpu", search.gpu_types[0])
    return "tp" in parallelism or "pp" in parallelism


def _check_expert_search(search: Search, scenario: Scenario, source: str) -> None:
    """A dense model (``model.experts = 0``) searches no expert layout: ``search.ep`` and
    ``search.expert_tp`` are then absent or ``[1]``."""
    if scenario.base.model.experts:
        return
    for key in ("ep", "expert_tp"):
        values = getattr(search, key)
        if values and tuple(values) != (1,):
            raise ScenarioError(
                source, f"search.{key}", f"expected [1] where model.experts = 0 (a dense model), got {list(values)}"
            )


def _default_draws(raw: dict, source: str) -> None:
    """Set ``run.draws`` to :data:`DEFAULT_PLAN_DRAWS` base points when ``[uncertain]`` has inputs and
    the plan gives none (with the Saltelli design, that many base points: N x (inputs + 2) draws)."""
    run = raw.get("run", {})
    if not raw.get("uncertain") or not isinstance(run, dict) or "draws" in run:
        return  # the scenario's validator says what is wrong with an odd [run] or [uncertain]
    draws = DEFAULT_PLAN_DRAWS
    if run.get("design") == "saltelli":
        inputs = parse_uncertain({**raw, "run": {**run, "design": "sobol"}}, set(), draws, source)
        draws *= saltelli_block(len(inputs))
    raw["run"] = {**run, "draws": draws}


def _table(value: Any, source: str, name: str) -> dict:
    if not isinstance(value, dict):
        raise ScenarioError(source, name, "expected a table")
    return value


def _parse_search(table: dict, raw: dict, source: str) -> Search:
    search = build_section(Search, table, source, "search")
    if any(v.kind == "optimize" for v in search.interval):
        raise ScenarioError(
            source,
            "search.interval",
            '"optimize" is not searched (it simulates per candidate); use "young_daly" or fixed intervals',
        )
    if not search.gpu_types:
        hardware = raw.get("hardware", {}) if isinstance(raw.get("hardware", {}), dict) else {}
        search = dataclasses.replace(search, gpu_types=(hardware.get("gpu", "H100-SXM"),))
    return search


def _parse_constraints(table: dict, source: str) -> Constraints:
    constraints = build_section(Constraints, table, source, "constraints")
    if "deadline_probability" in table and "deadline_days" not in table:
        raise ScenarioError(source, "constraints.deadline_probability", "needs constraints.deadline_days")
    if constraints.min_gpus > constraints.max_gpus:
        raise ScenarioError(
            source,
            "constraints.min_gpus",
            f"expected <= max_gpus = {constraints.max_gpus}, got {constraints.min_gpus}",
        )
    return constraints


def _parse_options(table: dict, source: str) -> dict[str, Any]:
    options = build_section(PlanOptions, table, source, "plan")
    if options.first_runs > options.max_runs:
        raise ScenarioError(source, "plan.first_runs", f"expected <= max_runs = {options.max_runs}")
    if options.pilot_runs == 1:
        raise ScenarioError(source, "plan.pilot_runs", "expected 0 (no pilot) or at least 2 (a standard error needs 2)")
    if options.pool is not None and options.pool < options.finalists:
        raise ScenarioError(source, "plan.pool", f"expected >= finalists = {options.finalists}, got {options.pool}")
    if options.max_total_runs is not None:
        # The first stage alone simulates first_runs of every finalist and of the plan's own layout.
        first_stage = (options.finalists + 1) * options.first_runs
        if options.max_total_runs < first_stage:
            raise ScenarioError(
                source,
                "plan.max_total_runs",
                f"expected >= (finalists + 1) x first_runs = {first_stage}, the first stage's runs, "
                f"got {options.max_total_runs}",
            )
    return {f.name: getattr(options, f.name) for f in dataclasses.fields(PlanOptions)}


def weighted_objective(outputs: Mapping[str, np.ndarray], weights: Mapping[str, float]) -> np.ndarray:
    """Per-candidate or per-run objective: Σ weight × output of outputs named as :data:`OBJECTIVES`
    (USD, MWh, h, t CO2e; the screen's estimates or a simulation's per-run outputs)."""
    # An array, never the empty sum's 0: every caller's weights have a nonzero one (the selection's check,
    # the plan schema).
    return cast(np.ndarray, sum(weight * outputs[name] for name, weight in weights.items() if weight))
