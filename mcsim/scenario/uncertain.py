"""Uncertain inputs: the ``[uncertain]`` table, its distributions and the draws of a design.

A scenario's ``[uncertain]`` table maps scalar keys, by the dotted path a sweep
uses (``"compute.efficiency"``, ``"failures.gpu.mtbf_hours"``), to a
distribution::

    [uncertain]
    "failures.gpu.mtbf_hours" = { dist = "lognormal", median = 79230, p95 = 200000 }
    "compute.efficiency" = { dist = "triangular", low = 0.5, mode = 0.6, high = 0.65 }

Each distribution is a frozen :mod:`scipy.stats` distribution (normal and
lognormal: the same functions of :mod:`scipy.special`, :class:`_NormalLaw`), truncated to
the key's schema bounds (a distribution with no mass inside them is an
error). Several keys can be drawn jointly: a table with ``dist = "mvlognormal"``
names its ``keys``, their ``median`` and log-scale ``sigma`` and a
``correlation`` matrix of their logarithms (:class:`JointGroup`); it is a
Gaussian copula of the keys' truncated lognormal marginals::

    [uncertain.gpu]
    dist = "mvlognormal"
    keys = ["failures.gpu.mtbf_hours", "failures.gpu.shape"]
    median = [79230, 0.8]
    sigma = [0.2, 0.08]
    correlation = [[1, 0.4], [0.4, 1]]
 ``run.draws`` points of a design on the unit cube (scrambled Sobol,
Latin hypercube, or a Saltelli design for Sobol indices) are mapped through
the truncated inverse CDFs to ``draws`` parameter sets; every configuration
of a sweep is simulated with each of them (:mod:`mcsim.draws`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from mcsim.errors import ScenarioError
from mcsim.io.variables import file_units
from mcsim.scenario.schema import key_meta
from mcsim.scenario.toml import format_number
from mcsim.scenario.validation import build_section, param


# The parameters of each distribution, declared like the scenario's keys (mcsim.scenario.validation.param):
# every one a finite number in the uncertain key's unit; a field with a default of None is one of
# alternatives of which exactly one is given (lognormal: p95 or sigma). Relations between parameters
# (high > low, p95 > median) are checked by _check_params.
@dataclass(frozen=True, kw_only=True)
class _Normal:
    mean: float = param(doc="mean")
    sd: float = param(gt=0, doc="standard deviation")


@dataclass(frozen=True, kw_only=True)
class _Lognormal:
    median: float = param(gt=0, doc="median")
    p95: float | None = param(None, gt=0, doc="95th percentile (or sigma)")
    sigma: float | None = param(None, gt=0, doc="log-scale standard deviation (or p95)")


@dataclass(frozen=True, kw_only=True)
class _Uniform:
    low: float = param(doc="lower end")
    high: float = param(doc="upper end")


@dataclass(frozen=True, kw_only=True)
class _Loguniform:
    low: float = param(gt=0, doc="lower end")
    high: float = param(gt=0, doc="upper end")


@dataclass(frozen=True, kw_only=True)
class _Triangular:
    low: float = param(doc="lower end")
    mode: float = param(doc="most likely value")
    high: float = param(doc="upper end")


@dataclass(frozen=True, kw_only=True)
class _Gamma:
    shape: float = param(gt=0, doc="shape")
    scale: float = param(gt=0, doc="scale")


_PARAMETER_TABLES: dict[str, type] = {
    "normal": _Normal,
    "lognormal": _Lognormal,
    "uniform": _Uniform,
    "loguniform": _Loguniform,
    "triangular": _Triangular,
    "gamma": _Gamma,
    "invgamma": _Gamma,
}
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
DESIGNS = ("sobol", "lhs", "saltelli")
Z_95 = 1.6448536269514722  # Phi^-1(0.95): a lognormal's p95 is median * exp(Z_95 * sigma)
# Smallest probability mass a distribution may keep inside its key's bounds.
MIN_MASS = 1e-9
# Salt of the design's random stream (the kernel's streams are seeded otherwise).
DESIGN_STREAM = 0x756E6365  # "unce"
# Smallest eigenvalue a joint group's correlation matrix may have (else it is not positive definite).
MIN_EIGENVALUE = 1e-10
# Design points are kept this far inside (0, 1) before the normal scores of the copula.
_EDGE = 2.0**-53


@dataclass(frozen=True)
class JointGroup:
    """Uncertain keys drawn jointly: a Gaussian copula of their (truncated) marginals.

    ``correlation`` is the correlation matrix of the normal scores, which for
    lognormal marginals is that of the keys' logarithms (before truncation);
    rows and columns in the order of ``keys``.
    """

    name: str
    dist: str
    keys: tuple[str, ...]
    correlation: tuple[tuple[float, ...], ...]

    def cholesky(self) -> np.ndarray:
        """Lower-triangular ``L`` with ``L @ L.T`` = the correlation matrix."""
        return np.linalg.cholesky(np.array(self.correlation, dtype=float))


@dataclass(frozen=True)
class UncertainInput:
    """One uncertain scenario key and its truncated distribution.

    ``low``/``high`` are the key's schema bounds (``-inf``/``inf`` where it has
    none); ``strict_low`` says the lower bound is excluded (``gt``).
    """

    key: str
    dist: str
    params: tuple[tuple[str, float], ...]
    low: float
    high: float
    strict_low: bool
    unit: str
    doc: str
    joint: JointGroup | None = None  # the group it is drawn with, None when independent

    @property
    def frozen(self) -> Any:
        """The untruncated distribution: its ``cdf`` and ``ppf`` (a frozen :mod:`scipy.stats` law, or
        :class:`_NormalLaw` for the normal and lognormal ones)."""
        return _frozen(self.dist, dict(self.params))

    @property
    def text(self) -> str:
        """The specification as TOML inline-table text."""
        inner = ", ".join([f'dist = "{self.dist}"'] + [f"{k} = {format_number(v)}" for k, v in self.params])
        return "{ " + inner + " }"

    def ppf(self, u: np.ndarray) -> np.ndarray:
        """Values at the probabilities ``u`` (in (0, 1)) of the distribution truncated to the bounds."""
        dist = self.frozen
        below = dist.cdf(self.low) if math.isfinite(self.low) else 0.0
        above = dist.cdf(self.high) if math.isfinite(self.high) else 1.0
        values = dist.ppf(below + np.asarray(u, dtype=float) * (above - below))
        low = np.nextafter(self.low, np.inf) if self.strict_low else self.low
        return np.clip(values, low, self.high)

    def mass(self) -> float:
        """Probability the untruncated distribution puts inside the key's bounds."""
        dist = self.frozen
        below = dist.cdf(self.low) if math.isfinite(self.low) else 0.0
        above = dist.cdf(self.high) if math.isfinite(self.high) else 1.0
        return float(above - below)


class _NormalLaw:
    """The cdf and ppf of a normal law (``log_scale`` False) or of a lognormal one (the law of
    ``exp(X)``, median ``scale``), as :mod:`scipy.stats` ``norm`` and ``lognorm`` compute them (the same
    :mod:`scipy.special` functions, so the same values), without importing :mod:`scipy.stats`: that
    import costs ~0.5 s, and every shipped plan has a lognormal ``[uncertain]`` input (issue 26 item 5)."""

    def __init__(self, loc: float, scale: float, sigma: float, log_scale: bool) -> None:
        self.loc, self.scale, self.sigma, self.log_scale = loc, scale, sigma, log_scale

    def cdf(self, x: Any) -> Any:
        from scipy.special import ndtr

        z = (np.asarray(x, dtype=float) - self.loc) / self.scale
        if not self.log_scale:
            return ndtr(z)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(z > 0, ndtr(np.log(np.where(z > 0, z, 1.0)) / self.sigma), 0.0)

    def ppf(self, q: Any) -> Any:
        from scipy.special import ndtri

        z = ndtri(np.asarray(q, dtype=float))
        return (np.exp(self.sigma * z) if self.log_scale else z) * self.scale + self.loc


def _frozen(dist: str, p: Mapping[str, float]) -> Any:
    if dist == "normal":
        return _NormalLaw(p["mean"], p["sd"], 1.0, log_scale=False)
    if dist == "lognormal":
        sigma = p["sigma"] if "sigma" in p else math.log(p["p95"] / p["median"]) / Z_95
        return _NormalLaw(0.0, p["median"], sigma, log_scale=True)
    from scipy import stats  # here: importing scipy.stats costs ~0.5 s, and most runs have no draws

    if dist == "uniform":
        return stats.uniform(loc=p["low"], scale=p["high"] - p["low"])
    if dist == "loguniform":
        return stats.loguniform(p["low"], p["high"])
    if dist == "triangular":
        width = p["high"] - p["low"]
        return stats.triang(c=(p["mode"] - p["low"]) / width, loc=p["low"], scale=width)
    if dist == "gamma":
        return stats.gamma(a=p["shape"], scale=p["scale"])
    return stats.invgamma(a=p["shape"], scale=p["scale"])


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
    parts = key.split(".")
    section, name = parts[0], parts[-1]
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
        classes = raw.get("failures", [])
        names = [c.get("name") for c in classes if isinstance(c, dict)] if isinstance(classes, list) else []
        if parts[1] not in names:
            listed = ", ".join(str(n) for n in names)
            raise ScenarioError(source, where, f"no failure class named {parts[1]!r} (classes: {listed or 'none'})")
        table = next(c for c in classes if isinstance(c, dict) and c.get("name") == parts[1])
        if name in ("recovery_minutes", "recovery_sigma") and table.get("recovery_durations_minutes"):
            raise ScenarioError(
                source, where, f"class {parts[1]!r} has recovery_durations_minutes: its recoveries are that list"
            )
    return meta


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
                    f"expected correlations in (-1, 1) off the diagonal, got "
                    f"{format_number(matrix[i, j])} in row {i + 1}",
                )
    smallest = float(np.linalg.eigvalsh(matrix).min())
    if not smallest > MIN_EIGENVALUE:
        raise ScenarioError(
            source,
            where,
            f"not positive definite (smallest eigenvalue {smallest:.3g}): the correlations contradict each other",
        )
    return tuple(tuple(float(v) for v in row) for row in matrix)


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
    if inputs and draws == 0:
        raise ScenarioError(
            source, "run.draws", "expected the number of parameter draws (e.g. 256) with an [uncertain] table, got 0"
        )
    if draws and not inputs:
        raise ScenarioError(source, "run.draws", f"expected 0 without an [uncertain] table, got {draws}")
    run = raw.get("run", {})
    joint = [entry.key for entry in inputs if entry.joint]
    if joint and isinstance(run, dict) and run.get("design") == "saltelli":
        raise ScenarioError(
            source,
            "run.design",
            f"the saltelli design needs independent inputs, but "
            f'{", ".join(joint)} are correlated; use "sobol" or "lhs" '
            "(mcsim sensitivity then uses given-data indices)",
        )
    block = saltelli_block(len(inputs))
    if inputs and isinstance(run, dict) and run.get("design") == "saltelli" and (draws % block or draws < 2 * block):
        raise ScenarioError(
            source,
            "run.draws",
            f"the saltelli design of {len(inputs)} inputs takes N x "
            f"{block} draws (N base points, at least 2; e.g. "
            f"{64 * block} for N = 64), got {draws}",
        )
    return inputs


def unit_design(dims: int, draws: int, design: str, seed: int) -> np.ndarray:
    """``draws`` points of the design on the unit cube ``(0, 1)^dims``, shape ``(draws, dims)``.

    Scrambled Sobol (``"sobol"``) or Latin hypercube (``"lhs"``) from
    :mod:`scipy.stats.qmc`, randomised from ``seed`` (the scenario's ``run.seed``)
    on a stream of its own. The same seed gives the same points.
    """
    from scipy.stats import qmc  # here, not at import: see _frozen

    sequence = np.random.SeedSequence([seed, DESIGN_STREAM])
    rng = np.random.default_rng(sequence)
    if design == "saltelli":
        return _saltelli_design(dims, draws, int(sequence.generate_state(1)[0]))
    if design == "lhs":
        return qmc.LatinHypercube(d=dims, rng=rng).random(draws)
    if design == "sobol":
        with warnings.catch_warnings():  # a count that is not a power of 2 loses balance, not validity
            warnings.simplefilter("ignore", UserWarning)
            return qmc.Sobol(d=dims, scramble=True, rng=rng).random(draws)
    raise ValueError(f"unknown design {design!r}")


def saltelli_block(dims: int) -> int:
    """Draws per base point of a Saltelli design of ``dims`` inputs (A, the ``dims`` AB_i, B)."""
    return dims + 2


def _saltelli_design(dims: int, draws: int, seed: int) -> np.ndarray:
    """SALib's Saltelli/Sobol design (first and total indices) of ``draws = N (dims + 2)`` points."""
    from SALib.sample import sobol as saltelli

    problem = {"num_vars": dims, "names": [f"x{i}" for i in range(dims)], "bounds": [[0.0, 1.0]] * dims}
    with warnings.catch_warnings():  # N not a power of 2: less balance, still valid
        warnings.simplefilter("ignore")
        points = saltelli.sample(problem, draws // saltelli_block(dims), calc_second_order=False, seed=seed)
    return np.clip(points, 0.0, 1.0)


def draw_values(inputs: tuple[UncertainInput, ...], draws: int, design: str, seed: int) -> np.ndarray:
    """The input values of every draw, shape ``(draws, len(inputs))``, in the inputs' units."""
    if not inputs or not draws:
        return np.empty((draws, len(inputs)))
    points = _correlated(unit_design(len(inputs), draws, design, seed), inputs)
    return np.column_stack([entry.ppf(points[:, i]) for i, entry in enumerate(inputs)])


def _correlated(points: np.ndarray, inputs: tuple[UncertainInput, ...]) -> np.ndarray:
    """Design points with each joint group's columns made dependent through its Gaussian copula.

    The columns of a group (independent uniforms) are mapped to normal scores
    ``z = Phi^-1(u)``, correlated as ``L z`` (``L`` the Cholesky factor of the group's
    correlation) and mapped back by ``Phi``: uniforms whose normal scores have the
    group's correlation. The first key of a group keeps its column.
    """
    from scipy.special import ndtr, ndtri  # Phi and Phi^-1, as scipy.stats.norm's cdf and ppf compute them

    points = np.array(points, dtype=float)
    groups: dict[JointGroup, list[int]] = {}
    for i, entry in enumerate(inputs):
        if entry.joint is not None:
            groups.setdefault(entry.joint, []).append(i)
    for group, columns in groups.items():
        by_key = {inputs[c].key: c for c in columns}
        columns = [by_key[key] for key in group.keys]
        scores = ndtri(np.clip(points[:, columns], _EDGE, 1.0 - _EDGE))
        points[:, columns] = ndtr(scores @ group.cholesky().T)
    return points


def draw_offset(draw: int, runs: int, design: str = "sobol", dims: int = 0) -> int:
    """First global run index of draw ``draw``: run r of draw d uses the streams of run d * runs + r.

    With the Saltelli design the ``dims + 2`` draws of one base point j (rows A_j, AB_i,j,
    B_j) share the streams of j * runs + r, so that the differences f(A) - f(AB_i) the
    Sobol estimators take are paired: an input without effect gives exactly 0.
    """
    if design == "saltelli":
        return (draw // saltelli_block(dims)) * runs
    return draw * runs


def input_variable_attrs(entry: UncertainInput) -> dict[str, str]:
    """``long_name``, ``units`` and the distribution of the variable holding an input's draws."""
    unit = entry.unit
    attrs = {
        "long_name": f"uncertain scenario key {entry.key}" + (f" ({entry.doc})" if entry.doc else ""),
        "units": file_units(unit),
        "distribution": entry.text,
    }
    if entry.joint is not None:
        group = entry.joint
        row = group.correlation[group.keys.index(entry.key)]
        attrs.update(
            joint_group=group.name,
            joint_distribution=group.dist,
            correlated_with=" ".join(k for k in group.keys if k != entry.key),
            correlation=", ".join(
                f"{k}: {format_number(r)}" for k, r in zip(group.keys, row, strict=False) if k != entry.key
            ),
        )
    return attrs
