"""The law of a short block's factor sum: fast mode below the normal law's threshold.

Fast mode draws the sum of a block's K rank factors at once from the normal law when K is
at least :meth:`mcsim.model.stragglers.FactorLaw.fast_min_block` (``K_min``); shorter
blocks were drawn one iteration at a time. Where checkpoints are frequent (1,024 GPUs with
the reference's straggler noise: a 3-iteration interval against ``K_min`` = 25) those walks
were most of fast mode's time: the cycles before each failure are walked so that every
restore point a failure can reach is exact (docs/model.md §4 "Whole stretches").

This module gives the law of ``S_K = F_1 + ... + F_K`` for one such K exactly enough to be
drawn at once with the same one uniform per block. ``F = exp(sigma M)``, M the maximum of G
standard normals, has the distribution function ``Phi(ln x / sigma)^G``; the law of S_K is
computed by numerical convolution (the factor's mass on a grid of cells, the K-fold
convolution by FFT), and its quantile function, written as a function of a standard normal
deviate (``S_K = Q(Phi(z))``), is projected onto the probabilists' Hermite polynomials of
degree at most :data:`DEGREE` (the projection in L2 of the normal law, by Gauss-Hermite
quadrature). The kernel draws ``z`` and evaluates the polynomial ``P(z) = sum_j c_j z^j``.
The projection onto ``He_0`` is the mean, so the block's mean is the exact ``K E[F]`` (to
the grid's and the quadrature's 1e-7).

The law is used only where its error is within fast mode's tolerance (the same W1 rule as
the normal law, ``FAST_W1_TOLERANCE`` of the block's mean): the coupling through the same
``z`` bounds the Wasserstein-1 distance between the drawn law and the exact one by

* ``int |P(z) - Q_N(Phi(z))| phi(z) dz`` (the polynomial against the numerical quantile),
* plus ``int |Q_N - Q_{N/2}|`` (the grid's own error, estimated from half as many cells:
  the mass-at-centre rule converges as ``N^-2``, so this overstates it about threefold),
* plus the mass cut off beyond the grid's ends (bounded in closed form, below).

Measured (``benchmarks/fast_mode_error.py``): the bound and the W1 of 200,000 exact K-sums
agree within the estimator's noise floor. Computing one law takes about 1-5 ms; it is
cached per (G, sigma, K).
"""

from __future__ import annotations

import functools
import math
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.polynomial import hermite_e
from threadpoolctl import threadpool_limits

from mcsim._lazy import lazy_module
from mcsim.model.stragglers import FAST_W1_TOLERANCE, factor_law

if TYPE_CHECKING:
    from scipy import special
else:  # SciPy at its first use: a command that simulates nothing never needs it
    special = lazy_module("scipy.special")

# Degree of the polynomial in z: 6 keeps the W1 share below 1e-5 for the shipped straggler
# laws (G 1,024 .. 131,072, sigma 0.01 .. 0.05, K 2 .. 24; 1.4e-6 at G = 1, sigma = 0.3, K = 3),
# degree 8 gains nothing the grid resolves.
DEGREE = 6
# Cells of the factor's grid: the grid error (estimated above) is below 1e-6 of the block's
# mean for the shipped laws.
CELLS = 4096
# The grid covers the factor's quantiles TAIL .. 1 - TAIL; what lies beyond is in the error.
TAIL = 1e-16
# Largest K * CELLS convolved (K <= 64, at most ~40 ms): longer blocks than that, below K_min, are walked.
MAX_SUM_CELLS = 2**18
# Gauss-Hermite nodes of the projection (120), and the z grid of the error integral (a uniform
# of the kernel's generator, 53 bits, gives |z| <= 8.2).
QUADRATURE_NODES = 120
Z_MAX = 8.3
# Two threads making the grids at once would nest the BLAS thread limit and restore it wrongly.
_GRIDS_LOCK = threading.Lock()


@functools.cache
def _grids() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Gauss-Hermite nodes and weights (normalised), and the z grid with its weights ``phi(z) dz``
    (made on first use: a run whose intervals are all long never needs them).

    The nodes are eigenvalues (LAPACK), computed on one BLAS thread: OpenBLAS's other threads spin for
    about 0.1 s of CPU after the call otherwise, CPU that the simulation's own threads need; one thread
    gives the same nodes to the bit.
    """
    with _GRIDS_LOCK, threadpool_limits(limits=1, user_api="blas"):  # the limit is process-wide: one at a time
        nodes, weights = hermite_e.hermegauss(QUADRATURE_NODES)
    z = np.linspace(-Z_MAX, Z_MAX, 8001)
    return nodes, weights / weights.sum(), z, np.exp(-0.5 * z**2) / math.sqrt(2.0 * math.pi) * (z[1] - z[0])


@dataclass(frozen=True)
class ShortBlockLaw:
    """The factor sum of a block of ``block`` iterations as ``sum_j coefficients[j] z^j``, z ~ N(0, 1)."""

    block: int
    coefficients: tuple[float, ...]  # power series in z, lowest degree first (DEGREE + 1 of them)
    w1_share: float  # bound on W1(drawn law, exact law) as a share of the block's mean K E[F]


def _factor_range(n_ranks: float, sigma: float) -> tuple[float, float]:
    """The factor's quantiles TAIL and 1 - TAIL (``F = exp(sigma M)``, ``P(M <= z) = Phi(z)^G``)."""
    z_low = special.ndtri(math.exp(math.log(TAIL) / n_ranks))
    z_high = -special.ndtri(-math.expm1(math.log1p(-TAIL) / n_ranks))
    return math.exp(sigma * z_low), math.exp(sigma * z_high)


def _sum_quantile(n_ranks: float, sigma: float, block: int, cells: int, u: np.ndarray) -> tuple[np.ndarray, float]:
    """The quantile function of the K-sum at ``u`` from a grid of ``cells`` cells, and the cell width."""
    low, high = _factor_range(n_ranks, sigma)
    width = (high - low) / (cells - 1)
    edges = low + (np.arange(cells + 1) - 0.5) * width
    cdf = np.exp(n_ranks * special.log_ndtr(np.log(np.maximum(edges, np.finfo(float).tiny)) / sigma))
    mass = np.diff(cdf)
    mass /= mass.sum()
    points = block * (cells - 1) + 1
    size = 1 << (points - 1).bit_length()
    summed = np.maximum(np.fft.irfft(np.fft.rfft(mass, size) ** block, size)[:points], 0.0)
    summed /= summed.sum()
    sum_edges = block * low + (np.arange(points + 1) - 0.5) * width
    sum_cdf = np.concatenate([[0.0], np.cumsum(summed)])
    return np.interp(u, sum_cdf, sum_edges), width


def _tail_bound(n_ranks: float, sigma: float, block: int) -> float:
    """W1 of cutting the factor at its grid's ends, K times: ``K (a TAIL + E[(F - b)^+])``, with
    ``E[(F - b)^+] <= G E[(e^{sigma Z} - b)^+] = G (e^{sigma^2/2} Phi(sigma - z_b) - b Phi(-z_b))``."""
    low, high = _factor_range(n_ranks, sigma)
    z_high = math.log(high) / sigma
    upper = math.exp(0.5 * sigma * sigma + special.log_ndtr(sigma - z_high)) - high * special.ndtr(-z_high)
    return block * (low * TAIL + n_ranks * max(upper, 0.0))


@functools.lru_cache(maxsize=1024)
def short_block_law(n_ranks: float, sigma: float, block: int) -> ShortBlockLaw | None:
    """The polynomial law of a ``block``-iteration factor sum, or None where fast mode walks it.

    Parameters
    ----------
    n_ranks : float
        Ranks G whose slowest sets the pace.
    sigma : float
        Lognormal shape of each rank's factor (median 1).
    block : int
        Iterations in the block, K (the checkpoint interval).

    Returns
    -------
    ShortBlockLaw or None
        None where the normal law applies (``K >= K_min``), where there is nothing to gain
        (``K < 2``, or ``sigma == 0``), where the convolution would be large (``K CELLS >
        MAX_SUM_CELLS``) or where the error bound exceeds ``FAST_W1_TOLERANCE``.
    """
    if sigma <= 0.0 or block < 2 or block * CELLS > MAX_SUM_CELLS:
        return None
    law = factor_law(n_ranks, sigma)
    if block >= law.fast_min_block():
        return None
    nodes, weights, z, phi_dz = _grids()
    u_grid = special.ndtr(z)
    at_nodes, _ = _sum_quantile(n_ranks, sigma, block, CELLS, special.ndtr(nodes))
    hermite = np.array(
        [np.sum(weights * at_nodes * hermite_e.hermeval(nodes, np.eye(DEGREE + 1)[j])) / math.factorial(j)
         for j in range(DEGREE + 1)]
    )  # fmt: skip
    fine, _ = _sum_quantile(n_ranks, sigma, block, CELLS, u_grid)
    coarse, _ = _sum_quantile(n_ranks, sigma, block, CELLS // 2, u_grid)
    poly_error = float(np.sum(np.abs(hermite_e.hermeval(z, hermite) - fine) * phi_dz))
    grid_error = float(np.sum(np.abs(fine - coarse) * phi_dz))
    share = float(poly_error + grid_error + _tail_bound(n_ranks, sigma, block)) / (block * law.mean)
    if not share <= FAST_W1_TOLERANCE:
        return None
    power = np.zeros(DEGREE + 1)
    series = hermite_e.herme2poly(hermite)
    power[: len(series)] = series
    coefficients = tuple(float(c) for c in power)
    return ShortBlockLaw(block, coefficients, share)


def short_block_sum(law: ShortBlockLaw, z: float) -> float:
    """The block's factor sum at the standard normal deviate ``z`` (Horner, highest degree first, as the
    kernel evaluates it), clipped at 0."""
    total = 0.0
    for c in reversed(law.coefficients):
        total = total * z + c
    return max(total, 0.0)
