"""Uncertain inputs: their distributions, and the draws of a design.

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

The table is read and checked by :mod:`mcsim.scenario.uncertain_table` into the
:class:`UncertainInput` records here. ``run.draws`` points of a design on the unit cube
(scrambled Sobol, Latin hypercube, or a Saltelli design for Sobol indices) are mapped through
the truncated inverse CDFs to ``draws`` parameter sets (:func:`draw_values`); every configuration
of a sweep is simulated with each of them (:mod:`mcsim.scenario.draws`).

SciPy's statistics module and SALib are imported when first used (:mod:`mcsim._lazy`): importing
:mod:`scipy.stats` costs ~0.5 s, and most runs have no draws.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from mcsim._lazy import lazy_module
from mcsim.io.variables import file_units
from mcsim.scenario.toml import format_number

if TYPE_CHECKING:
    from SALib.sample import sobol as salib_sobol
    from scipy import special, stats
    from scipy.stats import qmc
else:
    salib_sobol = lazy_module("SALib.sample.sobol")
    special = lazy_module("scipy.special")
    stats = lazy_module("scipy.stats")
    qmc = lazy_module("scipy.stats.qmc")

DESIGNS = ("sobol", "lhs", "saltelli")
Z_95 = 1.6448536269514722  # Phi^-1(0.95): a lognormal's p95 is median * exp(Z_95 * sigma)
# Salt of the design's random stream (the kernel's streams are seeded otherwise).
DESIGN_STREAM = 0x756E6365  # "unce"
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
    import costs ~0.5 s, and every shipped plan has a lognormal ``[uncertain]`` input."""

    def __init__(self, loc: float, scale: float, sigma: float, log_scale: bool) -> None:
        self.loc, self.scale, self.sigma, self.log_scale = loc, scale, sigma, log_scale

    def cdf(self, x: Any) -> Any:
        z = (np.asarray(x, dtype=float) - self.loc) / self.scale
        if not self.log_scale:
            return special.ndtr(z)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(z > 0, special.ndtr(np.log(np.where(z > 0, z, 1.0)) / self.sigma), 0.0)

    def ppf(self, q: Any) -> Any:
        z = special.ndtri(np.asarray(q, dtype=float))
        return (np.exp(self.sigma * z) if self.log_scale else z) * self.scale + self.loc


def _frozen(dist: str, p: Mapping[str, float]) -> Any:
    if dist == "normal":
        return _NormalLaw(p["mean"], p["sd"], 1.0, log_scale=False)
    if dist == "lognormal":
        sigma = p["sigma"] if "sigma" in p else math.log(p["p95"] / p["median"]) / Z_95
        return _NormalLaw(0.0, p["median"], sigma, log_scale=True)
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


def unit_design(dims: int, draws: int, design: str, seed: int) -> np.ndarray:
    """``draws`` points of the design on the unit cube ``(0, 1)^dims``, shape ``(draws, dims)``.

    Scrambled Sobol (``"sobol"``) or Latin hypercube (``"lhs"``) from
    :mod:`scipy.stats.qmc`, randomised from ``seed`` (the scenario's ``run.seed``)
    on a stream of its own. The same seed gives the same points.
    """
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
    problem = {"num_vars": dims, "names": [f"x{i}" for i in range(dims)], "bounds": [[0.0, 1.0]] * dims}
    with warnings.catch_warnings():  # N not a power of 2: less balance, still valid
        warnings.simplefilter("ignore")
        points = salib_sobol.sample(problem, draws // saltelli_block(dims), calc_second_order=False, seed=seed)
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
    points = np.array(points, dtype=float)
    groups: dict[JointGroup, list[int]] = {}
    for i, entry in enumerate(inputs):
        if entry.joint is not None:
            groups.setdefault(entry.joint, []).append(i)
    for group, columns in groups.items():
        by_key = {inputs[c].key: c for c in columns}
        columns = [by_key[key] for key in group.keys]
        # Phi^-1 and Phi, as scipy.stats.norm's ppf and cdf compute them
        scores = special.ndtri(np.clip(points[:, columns], _EDGE, 1.0 - _EDGE))
        points[:, columns] = special.ndtr(scores @ group.cholesky().T)
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
