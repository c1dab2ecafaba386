"""Plan files: a scenario plus ``[search]``, ``[constraints]`` and ``[plan]`` (docs/model.md §9).

A plan file is a scenario (every table of ``mcsim run``'s files except
``[sweep]``; ``[parallelism] gpus`` may be left out) plus:

* ``[search]``: the space to search. ``gpu_types`` (catalog names), ``gpus``
  (a list, or ``{ from = A, to = B, factor = 2 }`` / ``{ from, to, step }``), and
  the layout choices ``tp``, ``pp``, ``microbatch``, ``interleave``,
  ``recompute``, ``strategy``, ``interval``, ``freq_mhz``: each a list, or left
  out for its default (:func:`default_values`, the valid values for the model).
* ``[constraints]``: ``deadline_days`` with ``deadline_probability``,
  ``budget_usd``, ``power_mw`` (facility cap), ``min_gpus``, ``max_gpus``.
* ``[plan]``: ``objective`` (``cost``, ``energy``, ``wall_time``, ``co2`` or a
  table of weights), ``indifference`` (relative, 0.005), ``alpha`` (0.05),
  ``first_runs``, ``max_runs``, ``max_total_runs``, ``finalists``, ``margin``.

:func:`enumerate_candidates` expands the search into candidate arrays, keeping
only layouts the workload model can run (without a Python loop per candidate).
Every mistake is a :class:`~mcsim.schema.ScenarioError`: one line naming file and key.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mcsim.model.strategies import STRATEGIES
from mcsim.model.workload import RECOMPUTE_CODES
from mcsim.scenario.catalog import GPU_CATALOG, GpuSpec, lookup_gpu
from mcsim.scenario.config import Scenario, check_depth, read_toml, scenario_from_dict
from mcsim.scenario.schema import MAX_GPUS, PLAN_TABLES, Interval, ScenarioError, coerce_value, field_meta

OBJECTIVES = ("cost", "energy", "wall_time", "co2")
SEARCH_KEYS = (
    "gpu_types",
    "gpus",
    "tp",
    "pp",
    "microbatch",
    "interleave",
    "recompute",
    "strategy",
    "interval",
    "freq_mhz",
)
CONSTRAINT_KEYS = ("deadline_days", "deadline_probability", "budget_usd", "power_mw", "min_gpus", "max_gpus")
PLAN_KEYS = ("objective", "indifference", "alpha", "first_runs", "max_runs", "max_total_runs", "finalists", "margin")
# Default relative screen margin: the largest relative error of the screen's cost, energy and
# wall-time estimates against simulated means measured on the shipped plans (docs/planning.md,
# benchmarks/bench_screen.py --error), rounded up.
DEFAULT_MARGIN = 0.05
DEFAULT_MICROBATCH = (1, 2, 4, 8)
MAX_INTERLEAVE = 8
MAX_CANDIDATES = 20_000_000  # the screen's arrays stay within a few GB


@dataclass(frozen=True)
class Search:
    """The values of every searched axis (validated; ``None``: the model's default)."""

    gpu_types: tuple[str, ...]
    gpus: tuple[int, ...]
    tp: tuple[int, ...] | None
    pp: tuple[int, ...] | None
    microbatch: tuple[int, ...]
    interleave: tuple[int, ...] | None
    recompute: tuple[str, ...]
    strategy: tuple[str, ...]
    interval: tuple[Interval, ...]
    freq_mhz: tuple[float, ...] | None  # None: each GPU type's maximum clock


@dataclass(frozen=True)
class Constraints:
    """What a recommendation must satisfy (None: no such constraint)."""

    deadline_days: float | None = None
    deadline_probability: float = 0.9
    budget_usd: float | None = None
    power_mw: float | None = None
    min_gpus: int = 1
    max_gpus: int = MAX_GPUS


@dataclass(frozen=True)
class Plan:
    """A validated plan file."""

    source: str
    scenario: Scenario
    search: Search
    constraints: Constraints
    objective: str | dict[str, float]
    indifference: float = 0.005
    alpha: float = 0.05
    first_runs: int = 100
    max_runs: int = 5000
    max_total_runs: int | None = None
    finalists: int = 10
    margin: float = DEFAULT_MARGIN
    has_reference: bool = False  # the file's [parallelism] names a layout (tp or pp): simulated alongside

    @property
    def objective_label(self) -> str:
        """``cost``, or ``1*cost + 0.5*energy`` for weights."""
        if isinstance(self.objective, str):
            return self.objective
        return " + ".join(f"{w:g}*{k}" for k, w in self.objective.items())


def load_plan(path: str | Path) -> Plan:
    """Read and validate a plan file (raises :class:`ScenarioError` with file and key)."""
    return plan_from_dict(read_toml(path), str(path))


def plan_from_dict(raw: dict, source: str = "<plan>") -> Plan:
    """Validate the tables of a plan file (as :func:`tomllib.loads` returns them)."""
    check_depth(raw, source)
    raw = copy.deepcopy(raw)
    tables = {name: _table(raw.pop(name, {}), source, name) for name in PLAN_TABLES}
    if "sweep" in raw:
        raise ScenarioError(source, "sweep", "a plan searches with [search]; remove [sweep]")
    search = _parse_search(tables["search"], raw, source)
    parallelism = raw.setdefault("parallelism", {})
    if not isinstance(parallelism, dict):
        raise ScenarioError(source, "parallelism", "expected a table")
    has_reference = "tp" in parallelism or "pp" in parallelism
    parallelism.setdefault("gpus", search.gpus[0])
    hardware = raw.setdefault("hardware", {})
    if isinstance(hardware, dict):
        hardware.setdefault("gpu", search.gpu_types[0])
    scenario = scenario_from_dict(raw, source)
    gpn = scenario.base.hardware.gpus_per_node
    bad = [g for g in search.gpus if g % gpn]
    if bad:
        raise ScenarioError(
            source, "search.gpus", f"expected multiples of hardware.gpus_per_node = {gpn}, got {bad[0]}"
        )
    constraints = _parse_constraints(tables["constraints"], source)
    options = _parse_options(tables["plan"], source)
    return Plan(source, scenario, search, constraints, **options, has_reference=has_reference)


def _table(value: Any, source: str, name: str) -> dict:
    if not isinstance(value, dict):
        raise ScenarioError(source, name, "expected a table")
    return value


def _unknown(table: dict, known: tuple[str, ...], source: str, name: str) -> None:
    for key in table:
        if key not in known:
            raise ScenarioError(source, f"{name}.{key}", f"unknown key; expected one of {', '.join(known)}")


def _number(
    value: Any, source: str, key: str, *, low: float, high: float, integer: bool = False, low_open: bool = False
) -> float:
    """A finite number within bounds (an integer when ``integer``)."""
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    ok = is_number and math.isfinite(value) and (value > low if low_open else value >= low) and value <= high
    if ok and integer:
        ok = float(value).is_integer()
    if not ok:
        kind = "a whole number" if integer else "a number"
        bound = f"> {low:g}" if low_open else f">= {low:g}"
        raise ScenarioError(source, key, f"expected {kind} {bound} and <= {high:g}, got {value!r}")
    return int(value) if integer else float(value)


def _int_list(value: Any, source: str, key: str, high: int = MAX_GPUS) -> tuple[int, ...]:
    if not isinstance(value, list) or not value:
        raise ScenarioError(source, key, "expected a non-empty list of whole numbers")
    values = tuple(_number(v, source, f"{key}[{i}]", low=1, high=high, integer=True) for i, v in enumerate(value))
    if len(set(values)) != len(values):
        raise ScenarioError(source, key, f"values must be distinct, got {list(values)}")
    return values


def _choice_list(value: Any, choices: tuple[str, ...], source: str, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise ScenarioError(source, key, f"expected a non-empty list of {', '.join(choices)}")
    for i, v in enumerate(value):
        if v not in choices:
            raise ScenarioError(source, f"{key}[{i}]", f"expected one of {', '.join(choices)}, got {v!r}")
    if len(set(value)) != len(value):
        raise ScenarioError(source, key, f"values must be distinct, got {value}")
    return tuple(value)


def _gpu_counts(value: Any, source: str) -> tuple[int, ...]:
    key = "search.gpus"
    if isinstance(value, list):
        return tuple(sorted(_int_list(value, source, key)))
    if not isinstance(value, dict):
        raise ScenarioError(
            source,
            key,
            "expected a list of GPU counts or { from = A, to = B, factor = F } or { from = A, to = B, step = S }",
        )
    _unknown(value, ("from", "to", "factor", "step"), source, key)
    if "from" not in value or "to" not in value or ("factor" in value) == ("step" in value):
        raise ScenarioError(source, key, "expected from, to and one of factor or step")
    start = _number(value["from"], source, f"{key}.from", low=1, high=MAX_GPUS, integer=True)
    stop = _number(value["to"], source, f"{key}.to", low=start, high=MAX_GPUS, integer=True)
    if "factor" in value:
        factor = _number(value["factor"], source, f"{key}.factor", low=2, high=1024, integer=True)
        counts = [start]
        while counts[-1] * factor <= stop:
            counts.append(counts[-1] * factor)
    else:
        step = _number(value["step"], source, f"{key}.step", low=1, high=MAX_GPUS, integer=True)
        counts = list(range(start, stop + 1, step))
        if len(counts) > 10_000:
            raise ScenarioError(source, key, f"expected at most 10000 sizes, got {len(counts)}")
    return tuple(counts)


def _parse_search(table: dict, raw: dict, source: str) -> Search:
    _unknown(table, SEARCH_KEYS, source, "search")
    hardware = raw.get("hardware", {}) if isinstance(raw.get("hardware", {}), dict) else {}
    gpu_types = (
        _choice_list(table["gpu_types"], tuple(GPU_CATALOG), source, "search.gpu_types")
        if "gpu_types" in table
        else (hardware.get("gpu", "H100-SXM"),)
    )
    if "gpus" not in table:
        raise ScenarioError(source, "search.gpus", "required: a list of GPU counts or { from, to, factor }")
    gpus = _gpu_counts(table["gpus"], source)

    def ints(name: str, high: int) -> tuple[int, ...] | None:
        return _int_list(table[name], source, f"search.{name}", high) if name in table else None

    intervals = None
    if "interval" in table:
        value = table["interval"]
        if not isinstance(value, list) or not value:
            raise ScenarioError(
                source, "search.interval", 'expected a non-empty list, e.g. ["young_daly", { minutes = 60 }]'
            )
        meta = field_meta("checkpoint", "interval")
        intervals = tuple(coerce_value(meta, v, source, f"search.interval[{i}]") for i, v in enumerate(value))
        if any(v.kind == "optimize" for v in intervals):
            raise ScenarioError(
                source,
                "search.interval",
                '"optimize" is not searched (it simulates per candidate); use "young_daly" or fixed intervals',
            )
    freq = None
    if "freq_mhz" in table:
        value = table["freq_mhz"]
        if not isinstance(value, list) or not value:
            raise ScenarioError(source, "search.freq_mhz", "expected a non-empty list of clocks in MHz")
        freq = tuple(
            _number(v, source, f"search.freq_mhz[{i}]", low=0, high=1e5, low_open=True) for i, v in enumerate(value)
        )
    return Search(
        gpu_types=gpu_types,
        gpus=gpus,
        tp=ints("tp", 1_000_000),
        pp=ints("pp", 100_000),
        microbatch=ints("microbatch", 1_000_000) or DEFAULT_MICROBATCH,
        interleave=ints("interleave", 1024),
        recompute=_choice_list(table["recompute"], tuple(RECOMPUTE_CODES), source, "search.recompute")
        if "recompute" in table
        else tuple(RECOMPUTE_CODES),
        strategy=_choice_list(table["strategy"], tuple(STRATEGIES), source, "search.strategy")
        if "strategy" in table
        else tuple(STRATEGIES),
        interval=intervals or (Interval("young_daly"),),
        freq_mhz=freq,
    )


def _parse_constraints(table: dict, source: str) -> Constraints:
    _unknown(table, CONSTRAINT_KEYS, source, "constraints")
    values: dict[str, Any] = {}
    for key, low, high, integer, open_low in (
        ("deadline_days", 0, 36_500, False, True),
        ("budget_usd", 0, 1e15, False, True),
        ("power_mw", 0, 1e6, False, True),
        ("min_gpus", 1, MAX_GPUS, True, False),
        ("max_gpus", 1, MAX_GPUS, True, False),
    ):
        if key in table:
            values[key] = _number(
                table[key], source, f"constraints.{key}", low=low, high=high, integer=integer, low_open=open_low
            )
    if "deadline_probability" in table:
        prob = table["deadline_probability"]
        if not (isinstance(prob, (int, float)) and not isinstance(prob, bool) and 0 < prob < 1):
            raise ScenarioError(
                source, "constraints.deadline_probability", f"expected a number in (0, 1), got {prob!r}"
            )
        if "deadline_days" not in table:
            raise ScenarioError(source, "constraints.deadline_probability", "needs constraints.deadline_days")
        values["deadline_probability"] = float(prob)
    if values.get("min_gpus", 1) > values.get("max_gpus", MAX_GPUS):
        raise ScenarioError(
            source, "constraints.min_gpus", f"expected <= max_gpus = {values['max_gpus']}, got {values['min_gpus']}"
        )
    return Constraints(**values)


def _parse_objective(value: Any, source: str) -> str | dict[str, float]:
    key = "plan.objective"
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
            weights[name] = _number(weight, source, f"{key}.{name}", low=0, high=1e12, low_open=True)
        return weights
    raise ScenarioError(
        source,
        key,
        f"expected one of {', '.join(OBJECTIVES)} or a table of weights {{ cost = 1, energy = 100 }}, got {value!r}",
    )


def _parse_options(table: dict, source: str) -> dict[str, Any]:
    _unknown(table, PLAN_KEYS, source, "plan")
    options: dict[str, Any] = {"objective": _parse_objective(table.get("objective", "cost"), source)}
    for key, low, high, integer, open_low in (
        ("indifference", 0, 0.5, False, True),
        ("alpha", 0, 0.5, False, True),
        ("first_runs", 10, 1_000_000, True, False),
        ("max_runs", 10, 10_000_000, True, False),
        ("max_total_runs", 10, 1e9, True, False),
        ("finalists", 2, 1000, True, False),
        ("margin", 0, 10, False, False),
    ):
        if key in table:
            options[key] = _number(
                table[key], source, f"plan.{key}", low=low, high=high, integer=integer, low_open=open_low
            )
    if options.get("first_runs", 100) > options.get("max_runs", 5000):
        raise ScenarioError(source, "plan.first_runs", f"expected <= max_runs = {options.get('max_runs', 5000)}")
    if "max_total_runs" in options:
        # The first stage alone simulates first_runs of every finalist and of the plan's own layout.
        first_stage = (options.get("finalists", Plan.finalists) + 1) * options.get("first_runs", Plan.first_runs)
        if options["max_total_runs"] < first_stage:
            raise ScenarioError(
                source,
                "plan.max_total_runs",
                f"expected >= (finalists + 1) x first_runs = {first_stage}, the first stage's runs, "
                f"got {options['max_total_runs']}",
            )
    return options


def gpu_specs(plan: Plan) -> list[GpuSpec]:
    """The catalog entry of every searched GPU type, with the scenario's ``[hardware]`` overrides applied
    (to every type)."""
    hardware = plan.scenario.base.hardware
    overrides = {
        f.name: getattr(hardware, f.name)
        for f in dataclasses.fields(GpuSpec)
        if f.name != "sources" and getattr(hardware, f.name) is not None
    }
    return [dataclasses.replace(lookup_gpu(name), **overrides) for name in plan.search.gpu_types]


def _heads(scenario: Scenario) -> int:
    model = scenario.base.model
    return model.heads or max(1, model.hidden // 128)


def default_values(plan: Plan) -> dict[str, tuple[int, ...]]:
    """The default values of ``tp``, ``pp`` and ``interleave`` for the plan's model.

    ``tp``: powers of two within a node that divide the heads. ``pp``: 1 to the layers; where
    it does not divide them the stages are uneven, the outermost ones a layer short, as Llama 3
    (PP 16 for 126 layers) and BLOOM (PP 12 for 70 layers) did (docs/model.md §2); only those
    dividing G / tp survive the enumeration. ``interleave``: 1 to 8 (kept where every virtual
    stage holds a layer, below).
    """
    scenario = plan.scenario
    gpn, layers, heads = scenario.base.hardware.gpus_per_node, scenario.base.model.layers, _heads(scenario)
    tp = tuple(t for t in (2**k for k in range(0, 21)) if t <= gpn and heads % t == 0)
    return {"tp": tp or (1,), "pp": tuple(range(1, layers + 1)), "interleave": tuple(range(1, MAX_INTERLEAVE + 1))}


@dataclass(frozen=True)
class Candidates:
    """The enumerated candidates: one array element each (indices into the search's value tuples)."""

    gpu_type: np.ndarray  # index into search.gpu_types
    gpus: np.ndarray
    tp: np.ndarray
    pp: np.ndarray
    dp: np.ndarray
    microbatch: np.ndarray
    interleave: np.ndarray
    recompute: np.ndarray  # RECOMPUTE_CODES
    strategy: np.ndarray  # index into search.strategy
    interval: np.ndarray  # index into search.interval
    freq_mhz: np.ndarray
    enumerated: int  # combinations before the structural filter

    def __len__(self) -> int:
        return int(self.gpus.size)


def _check_grid(plan: Plan, size: int, what: str) -> None:
    if size > MAX_CANDIDATES:
        raise ScenarioError(
            plan.source,
            "search",
            f"{size:,} combinations of {what} to enumerate; expected at most {MAX_CANDIDATES:,} (narrow the lists)",
        )


def _cross(plan: Plan, columns: tuple[np.ndarray, ...], values: np.ndarray, name: str) -> tuple[np.ndarray, ...]:
    """Every row of ``columns`` with every one of ``values`` (rows outer, values inner)."""
    _check_grid(plan, columns[0].size * values.size, f"the layouts kept so far x {name}")
    rows, k = (g.ravel() for g in np.meshgrid(np.arange(columns[0].size), np.arange(values.size), indexing="ij"))
    return (*(c[rows] for c in columns), values[k])


def enumerate_candidates(plan: Plan) -> Candidates:
    """Every valid combination of the search (vectorised; no Python loop per candidate).

    Kept: ``tp * pp`` divides G; ``global_batch`` divisible by ``dp * microbatch``;
    ``pp <= layers``; ``interleave`` 1, or ``pp > 1`` and at least one layer per virtual
    stage (``interleave <= layers // pp``; uneven splits as for the stages); G within
    ``min_gpus..max_gpus`` is a constraint
    (kept, rejected by the screen with its reason).
    """
    search, model = plan.search, plan.scenario.base.model
    defaults = default_values(plan)
    tp = np.array(search.tp or defaults["tp"], dtype=np.int64)
    pp = np.array(search.pp or defaults["pp"], dtype=np.int64)
    mb = np.array(search.microbatch, dtype=np.int64)
    v = np.array(search.interleave or defaults["interleave"], dtype=np.int64)
    gpus = np.array(search.gpus, dtype=np.int64)
    enumerated_layouts = gpus.size * tp.size * pp.size * mb.size * v.size
    # Axis by axis, each product filtered before the next axis joins (the full product of a legal search
    # can be billions of elements); the order is that of the full product (gpus, tp, pp, microbatch, v).
    _check_grid(plan, gpus.size * tp.size * pp.size, "gpus x tp x pp")
    G, t, p = (g.ravel() for g in np.meshgrid(gpus, tp, pp, indexing="ij"))
    ok = (G % (t * p) == 0) & (p <= model.layers)
    G, t, p = G[ok], t[ok], p[ok]
    G, t, p, b = _cross(plan, (G, t, p), mb, "microbatch")
    d = G // (t * p)
    ok = model.global_batch % (d * b) == 0
    G, t, p, b, d = G[ok], t[ok], p[ok], b[ok], d[ok]
    G, t, p, b, d, iv = _cross(plan, (G, t, p, b, d), v, "interleave")
    ok = (iv == 1) | ((p > 1) & (iv <= model.layers // p))
    G, t, p, b, iv, d = G[ok], t[ok], p[ok], b[ok], iv[ok], d[ok]
    if G.size == 0:
        raise ScenarioError(
            plan.source,
            "search",
            "no combination of the searched values is a valid layout "
            "(tp*pp dividing gpus, dp*microbatch dividing global_batch, "
            "pp <= layers, interleave <= layers // pp)",
        )
    freqs = search.freq_mhz
    n_freq = len(freqs) if freqs else 1
    extra = (len(search.gpu_types), len(search.recompute), len(search.strategy), len(search.interval), n_freq)
    total = G.size * int(np.prod(extra))
    if total > MAX_CANDIDATES:
        raise ScenarioError(
            plan.source, "search", f"{total:,} candidates; expected at most {MAX_CANDIDATES:,} (narrow the lists)"
        )
    layout = np.arange(G.size)
    grids = np.meshgrid(np.arange(extra[0]), layout, *(np.arange(n) for n in extra[1:]), indexing="ij")
    gtype, lay, rec, strat, interval, fidx = (g.ravel() for g in grids)
    recompute_codes = np.array([RECOMPUTE_CODES[r] for r in search.recompute], dtype=np.int64)
    if freqs:
        freq = np.array(freqs, dtype=np.float64)[fidx]
    else:
        freq = np.array([spec.freq_max_mhz for spec in gpu_specs(plan)], dtype=np.float64)[gtype]
    enumerated = enumerated_layouts * int(np.prod(extra))
    return Candidates(
        gtype, G[lay], t[lay], p[lay], d[lay], b[lay], iv[lay], recompute_codes[rec], strat, interval, freq, enumerated
    )
