"""The ``[uncertain]`` table of a scenario, read and validated into :class:`~mcsim.scenario.uncertain.UncertainInput`.

Each entry names a scalar scenario key by its dotted path (as a sweep does) and its
distribution; a ``dist = "mvlognormal"`` table names several keys drawn jointly (a
:class:`~mcsim.scenario.uncertain.JointGroup`). The syntax and the laws are described in
:mod:`mcsim.scenario.uncertain`; every mistake is one :class:`~mcsim.errors.ScenarioError`
line naming the file and the entry.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from mcsim.errors import ScenarioError
from mcsim.scenario.schema import key_meta
from mcsim.scenario.toml import format_number
from mcsim.scenario.uncertain import JointGroup, UncertainInput, saltelli_block
from mcsim.scenario.validation import build_section, param

# The parameters of each distribution, declared like the scenario's keys (mcsim.scenario.validation.param):
# every one a finite number in the uncertain key's unit; a parameter with a default of None is one of
# alternatives of which exactly one is given (lognormal: p95 or sigma). Relations between parameters
# (high > low, p95 > median) are checked by _check_params.
_PARAMETERS: dict[str, dict[str, Any]] = {
    "normal": {"mean": param(doc="mean"), "sd": param(gt=0, doc="standard deviation")},
    "lognormal": {
        "median": param(gt=0, doc="median"),
        "p95": param(None, gt=0, doc="95th percentile (or sigma)"),
        "sigma": param(None, gt=0, doc="log-scale standard deviation (or p95)"),
    },
    "uniform": {"low": param(doc="lower end"), "high": param(doc="upper end")},
    "loguniform": {"low": param(gt=0, doc="lower end"), "high": param(gt=0, doc="upper end")},
    "triangular": {
        "low": param(doc="lower end"),
        "mode": param(doc="most likely value"),
        "high": param(doc="upper end"),
    },
    "gamma": {"shape": param(gt=0, doc="shape"), "scale": param(gt=0, doc="scale")},
}
# Each distribution's parameters as the table build_section validates (invgamma takes gamma's).
_PARAMETER_TABLES: dict[str, type] = {
    dist: dataclasses.make_dataclass(
        f"{dist.title()}Parameters", [(name, Any, spec) for name, spec in specs.items()], frozen=True, kw_only=True
    )
    for dist, specs in _PARAMETERS.items()
}
_PARAMETER_TABLES["invgamma"] = _PARAMETER_TABLES["gamma"]
# parameter names of each distribution: (required, alternatives of which exactly one is required)
DISTRIBUTIONS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    dist: (
        tuple(f.name for f in dataclasses.fields(table) if f.default is not None),
        tuple(f.name for f in dataclasses.fields(table) if f.default is None),
    )
    for dist, table in _PARAMETER_TABLES.items()
}
# joint distributions: their parameters (all required); see parse_joint
JOINT_DISTRIBUTIONS: dict[str, tuple[str, ...]] = {"mvlognormal": ("keys", "median", "sigma", "correlation")}
# Smallest probability mass a distribution may keep inside its key's bounds.
MIN_MASS = 1e-9
# Smallest eigenvalue a joint group's correlation matrix may have (else it is not positive definite).
MIN_EIGENVALUE = 1e-10


def _check_params(dist: str, p: Mapping[str, float]) -> str:
    """Why the parameters of ``dist`` contradict each other, or "" (each alone is checked by its declaration)."""
    if dist == "lognormal" and "p95" in p and not p["p95"] > p["median"]:
        return f"expected p95 > median = {format_number(p['median'])}, got {format_number(p['p95'])}"
    if dist in ("uniform", "loguniform", "triangular") and not p["high"] > p["low"]:
        return f"expected high > low = {format_number(p['low'])}, got {format_number(p['high'])}"
    if dist == "triangular" and not p["low"] <= p["mode"] <= p["high"]:
        return f"expected low <= mode <= high, got mode = {format_number(p['mode'])}"
    return ""


def _where(key: str) -> str:
    return f"uncertain.{json.dumps(key)}"


def _key_meta(raw: dict, key: str, swept: set[str], source: str, where: str = "") -> dict:
    """Schema metadata of the uncertain key ``key``, checked to be a continuous, unswept scalar.

    ``where`` names the key in error messages (default ``uncertain."KEY"``).
    """
    where = where or _where(key)
    section = key.split(".")[0]
    meta = key_meta(key)
    if meta is None or section == "run":
        raise ScenarioError(
            source,
            where,
            'not an uncertain scenario key (expected e.g. "compute.efficiency" or "failures.<class>.mtbf_hours")',
        )
    if meta["kind"] is not float:
        kind = getattr(meta["kind"], "__name__", str(meta["kind"]))
        raise ScenarioError(source, where, f"expected a key with a continuous numeric value, got a key of kind {kind}")
    if key in swept:
        raise ScenarioError(source, where, "this key is also swept; make it either swept or uncertain")
    if section == "failures":
        _check_failure_key(raw, key, source, where)
    return meta


def _check_failure_key(raw: dict, key: str, source: str, where: str) -> None:
    """``failures.<class>.<field>`` names a class of the scenario, and no recovery key of a class whose
    recoveries are a measured list."""
    _, class_name, name = key.split(".")
    classes = raw.get("failures", [])
    names = [c.get("name") for c in classes if isinstance(c, dict)] if isinstance(classes, list) else []
    if class_name not in names:
        listed = ", ".join(str(n) for n in names)
        raise ScenarioError(source, where, f"no failure class named {class_name!r} (classes: {listed or 'none'})")
    table = next(c for c in classes if isinstance(c, dict) and c.get("name") == class_name)
    if name in ("recovery_minutes", "recovery_sigma") and table.get("recovery_durations_minutes"):
        raise ScenarioError(
            source, where, f"class {class_name!r} has recovery_durations_minutes: its recoveries are that list"
        )


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def parse_input(raw: dict, key: str, spec: Any, swept: set[str], source: str) -> UncertainInput:
    """Validate one ``[uncertain]`` entry.

    Raises
    ------
    ScenarioError
        Unknown or non-continuous key, a swept key, an unknown distribution, a
        missing, unknown or inconsistent parameter, or a distribution with no
        mass within the key's schema bounds.
    """
    where = _where(key)
    meta = _key_meta(raw, key, swept, source)
    if not isinstance(spec, dict):
        raise ScenarioError(source, where, 'expected a table { dist = "...", ... }')
    dist = spec.get("dist")
    if dist not in DISTRIBUTIONS:
        raise ScenarioError(source, f"{where}.dist", f"expected one of {', '.join(DISTRIBUTIONS)}; got {dist!r}")
    required, alternatives = DISTRIBUTIONS[dist]
    takes = ", ".join(required) + (f" and one of {' or '.join(alternatives)}" if alternatives else "")
    table = build_section(_PARAMETER_TABLES[dist], {k: v for k, v in spec.items() if k != "dist"}, source, where)
    given = [name for name in alternatives if getattr(table, name) is not None]
    if alternatives and len(given) != 1:
        raise ScenarioError(source, where, f"{dist} takes {takes}, got {', '.join(given) or 'neither'}")
    params = {name: float(getattr(table, name)) for name in (*required, *given)}
    problem = _check_params(dist, params)
    if problem:
        raise ScenarioError(source, where, f"{dist}: {problem}")
    return _bounded_entry(key, meta, dist, params, source, where)


def _bounded_entry(
    key: str, meta: dict, dist: str, params: dict[str, float], source: str, where: str, joint: JointGroup | None = None
) -> UncertainInput:
    """The entry of ``key`` truncated to its schema bounds, checked to keep some probability there."""
    lower = meta["gt"] if meta["gt"] is not None else meta["ge"]
    entry = UncertainInput(
        key=key,
        dist=dist,
        params=tuple(params.items()),
        low=-math.inf if lower is None else float(lower),
        high=math.inf if meta["le"] is None else float(meta["le"]),
        strict_low=meta["gt"] is not None,
        unit=str(meta["unit"] or ""),
        doc=str(meta["doc"] or ""),
        joint=joint,
    )
    if not entry.mass() >= MIN_MASS:
        bounds = f"{'>' if entry.strict_low else '>='} {format_number(entry.low)} and <= {format_number(entry.high)}"
        raise ScenarioError(
            source, where, f"the {dist} distribution has no probability within the key's bounds ({bounds})"
        )
    return entry


def _vector(spec: dict, name: str, n: int, source: str, where: str) -> list[float]:
    """The list of ``n`` finite numbers > 0 under ``name`` of a joint entry."""
    value = spec[name]
    if not (isinstance(value, list) and len(value) == n and all(_number(v) and v > 0 for v in value)):
        raise ScenarioError(
            source, f"{where}.{name}", f"expected a list of {n} finite numbers > 0, one per key, got {str(value)[:100]}"
        )
    return [float(v) for v in value]


def _correlation(value: Any, n: int, source: str, where: str) -> tuple[tuple[float, ...], ...]:
    """A valid ``n`` x ``n`` correlation matrix: unit diagonal, symmetric, positive definite."""
    if not (
        isinstance(value, list)
        and len(value) == n
        and all(isinstance(row, list) and len(row) == n and all(_number(v) for v in row) for row in value)
    ):
        raise ScenarioError(
            source,
            where,
            f"expected a {n} x {n} matrix of finite numbers (a list of {n} rows "
            f"of {n}, one per key), got {str(value)[:100]}",
        )
    matrix = np.array(value, dtype=float)
    for i in range(n):
        _check_correlation_row(matrix, i, source, where)
    smallest = float(np.linalg.eigvalsh(matrix).min())
    if not smallest > MIN_EIGENVALUE:
        raise ScenarioError(
            source,
            where,
            f"not positive definite (smallest eigenvalue {smallest:.3g}): the correlations contradict each other",
        )
    return tuple(tuple(float(v) for v in row) for row in matrix)


def _check_correlation_row(matrix: np.ndarray, i: int, source: str, where: str) -> None:
    """Row ``i`` of a correlation matrix up to its diagonal: 1 there, equal to column ``i``, in (-1, 1)."""
    if matrix[i, i] != 1.0:
        raise ScenarioError(
            source, where, f"expected 1 on the diagonal, got {format_number(matrix[i, i])} in row {i + 1}"
        )
    for j in range(i):
        if abs(matrix[i, j] - matrix[j, i]) > 1e-12:
            raise ScenarioError(
                source,
                where,
                f"expected a symmetric matrix, got {format_number(matrix[i, j])} "
                f"in row {i + 1} and {format_number(matrix[j, i])} in row {j + 1}",
            )
        if not -1.0 < matrix[i, j] < 1.0:
            raise ScenarioError(
                source,
                where,
                f"expected correlations in (-1, 1) off the diagonal, got {format_number(matrix[i, j])} in row {i + 1}",
            )


def parse_joint(raw: dict, name: str, spec: dict, swept: set[str], source: str) -> tuple[UncertainInput, ...]:
    """Validate one joint ``[uncertain]`` entry (``dist = "mvlognormal"``): one input per key.

    The keys' marginals are lognormal (``median``, log-scale ``sigma``), truncated to
    each key's schema bounds; ``correlation`` is that of their logarithms.

    Raises
    ------
    ScenarioError
        A name with a ".", an unknown, missing or malformed parameter, fewer than two
        keys or a key twice, an unknown, swept or non-continuous key, or a correlation
        matrix of the wrong size, not symmetric, without a unit diagonal or not
        positive definite.
    """
    where = _where(name)
    dist = spec["dist"]
    takes = ", ".join(JOINT_DISTRIBUTIONS[dist])
    if "." in name:
        raise ScenarioError(
            source,
            where,
            f'a {dist} entry is named by a group name without "." (e.g. '
            f"[uncertain.gpu_fit]); its keys go in keys = [...]",
        )
    for given in spec:
        if given not in ("dist", *JOINT_DISTRIBUTIONS[dist]):
            raise ScenarioError(source, f"{where}.{given}", f"unknown key; expected one of {takes}")
    for required in JOINT_DISTRIBUTIONS[dist]:
        if required not in spec:
            raise ScenarioError(source, f"{where}.{required}", f"required key is missing; {dist} takes {takes}")
    keys = spec["keys"]
    if not (
        isinstance(keys, list)
        and len(keys) >= 2
        and all(isinstance(k, str) for k in keys)
        and len(set(keys)) == len(keys)
    ):
        raise ScenarioError(
            source, f"{where}.keys", f"expected a list of at least 2 different scenario keys, got {str(keys)[:100]}"
        )
    metas = [_key_meta(raw, key, swept, source, f"{where}.keys: {json.dumps(key)}") for key in keys]
    medians, sigmas = (_vector(spec, p, len(keys), source, where) for p in ("median", "sigma"))
    group = JointGroup(
        name=name,
        dist=dist,
        keys=tuple(keys),
        correlation=_correlation(spec["correlation"], len(keys), source, f"{where}.correlation"),
    )
    return tuple(
        _bounded_entry(
            key, meta, "lognormal", {"median": m, "sigma": sd}, source, f"{where}.keys: {json.dumps(key)}", joint=group
        )
        for key, meta, m, sd in zip(keys, metas, medians, sigmas, strict=False)
    )


def _parse_entry(raw: dict, key: str, spec: Any, swept: set[str], source: str) -> tuple[UncertainInput, ...]:
    """The inputs of one ``[uncertain]`` entry: one for a key, several for a joint group."""
    if isinstance(spec, dict) and spec.get("dist") in JOINT_DISTRIBUTIONS:
        return parse_joint(raw, key, spec, swept, source)
    return (parse_input(raw, key, spec, swept, source),)


def parse_uncertain(raw: dict, swept: set[str], draws: int, source: str) -> tuple[UncertainInput, ...]:
    """The validated ``[uncertain]`` table of a scenario (empty when there is none).

    Parameters
    ----------
    raw : dict
        The scenario's TOML tables.
    swept : set of str
        Keys of the sweep (an uncertain key cannot be swept too).
    draws : int
        ``run.draws``: an ``[uncertain]`` table needs draws > 0, and draws > 0 a table.
    source : str
        The scenario file, for error messages.
    """
    table = raw.get("uncertain", {})
    if not isinstance(table, dict):
        raise ScenarioError(source, "uncertain", 'expected a table of "KEY" = { dist = "...", ... }')
    inputs = tuple(entry for key, spec in table.items() for entry in _parse_entry(raw, key, spec, swept, source))
    _check_each_key_once(inputs, source)
    if inputs and draws == 0:
        raise ScenarioError(
            source, "run.draws", "expected the number of parameter draws (e.g. 256) with an [uncertain] table, got 0"
        )
    if draws and not inputs:
        raise ScenarioError(source, "run.draws", f"expected 0 without an [uncertain] table, got {draws}")
    run = raw.get("run", {})
    if inputs and isinstance(run, dict) and run.get("design") == "saltelli":
        _check_saltelli(inputs, draws, source)
    return inputs


def _check_each_key_once(inputs: tuple[UncertainInput, ...], source: str) -> None:
    """No key is uncertain twice (in two entries, or in an entry and a joint group)."""
    seen: dict[str, str] = {}
    for entry in inputs:
        group = entry.joint.name if entry.joint else entry.key
        if entry.key in seen:
            raise ScenarioError(
                source,
                _where(group),
                f"{entry.key} is already uncertain in uncertain.{json.dumps(seen[entry.key])}; give it once",
            )
        seen[entry.key] = group


def _check_saltelli(inputs: tuple[UncertainInput, ...], draws: int, source: str) -> None:
    """A Saltelli design needs independent inputs, and N (inputs + 2) draws with N >= 2."""
    joint = [entry.key for entry in inputs if entry.joint]
    if joint:
        raise ScenarioError(
            source,
            "run.design",
            f"the saltelli design needs independent inputs, but "
            f'{", ".join(joint)} are correlated; use "sobol" or "lhs" '
            "(mcsim sensitivity then uses given-data indices)",
        )
    block = saltelli_block(len(inputs))
    if draws % block or draws < 2 * block:
        raise ScenarioError(
            source,
            "run.draws",
            f"the saltelli design of {len(inputs)} inputs takes N x "
            f"{block} draws (N base points, at least 2; e.g. "
            f"{64 * block} for N = 64), got {draws}",
        )
