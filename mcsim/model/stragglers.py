"""Laws of the per-iteration compute factor and the fast-mode block size.

The slowest-rank factor is ``M = max over G ranks of exp(sigma Z)``; during a
slow-node episode the factor is ``max(M, s)`` with ``s`` the episode slowdown.
Fast mode draws the sum of K factors from N(K E[F], K Var[F]); the moments
come from one quadrature per configuration over the density of the maximum of
G standard normals, ``f(z) = G phi(z) Phi(z)^(G-1)``, evaluated in log space
(``log_ndtr``) so it stays finite for any G.

The block size from which fast mode uses the normal law is set by an error
bound (see ``docs/model.md`` and ``benchmarks/fast_mode_error.py``): the
Wasserstein-1 distance between the exact law of a K-sum and its normal
approximation is, to first order (Edgeworth), ``0.161 |skew_F| std_F``,
independent of K, so its share of the block's mean duration ``K E[F]`` falls
as 1/K. Fast mode uses the normal law for K >= the smallest K that keeps
this share below :data:`FAST_W1_TOLERANCE`.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import math
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from mcsim._lazy import lazy_module
from mcsim.kernels import interface as kernel
from mcsim.model.experts import expert_share, rank_load_variation
from mcsim.model.operators import shape_of
from mcsim.scenario.config import Config

if TYPE_CHECKING:
    from scipy import integrate, special
else:  # imported at the first quadrature, not with mcsim: a command that simulates nothing never needs it
    integrate = lazy_module("scipy.integrate")
    special = lazy_module("scipy.special")  # SciPy at its first use: a command that simulates nothing never needs it

# W1 distance of a block's duration from its exact law, as a share of its mean.
# By subadditivity of W1 over independent sums, a whole run's wall time is then
# within this share of its exact law (docs/model.md, "Execution modes").
FAST_W1_TOLERANCE = 1e-4
# First-order Edgeworth constant: W1(standardised Edgeworth, normal) = E|Z^2 - 1| / 6 * skew,
# E|Z^2 - 1| = 4 phi(1) = 0.9679; 0.9679 / 6 = 0.1613. Checked by measurement in
# benchmarks/fast_mode_error.py.
EDGEWORTH_W1 = 4.0 * math.exp(-0.5) / math.sqrt(2.0 * math.pi) / 6.0


def straggler_sigma(cfg: Config, ep: int | None = None) -> float:
    """The per-rank, per-iteration log-sd of the compute factor the kernel draws, ``stragglers.sigma``; a
    mixture of experts with ``model.expert_imbalance_sigma`` > 0 adds its routed load's variation on the
    routed experts' share of the compute (:func:`mcsim.model.experts.expert_share`), as an independent
    lognormal part, as much of it as a rank of ``ep`` (default ``parallelism.ep``) sees
    (:func:`mcsim.model.experts.rank_load_variation`, v):
    ``sqrt(sigma^2 + (share x v x expert_imbalance_sigma)^2)`` (docs/model.md, "Mixture of experts").
    The simulation and the planner's screen (per candidate's ep) both take it from here."""
    sigma, expert_sigma = cfg.stragglers.sigma, cfg.model.expert_imbalance_sigma
    if expert_sigma == 0.0:
        return sigma
    variation = rank_load_variation(cfg.model, cfg.parallelism.ep if ep is None else ep)
    share = expert_share(cfg.model, shape_of(cfg.model))
    return math.sqrt(sigma**2 + (share * variation * expert_sigma) ** 2)


@dataclass(frozen=True)
class FactorLaw:
    """Moments of one iteration's compute factor (dimensionless)."""

    mean: float
    std: float
    skew: float

    def fast_min_block(self, tolerance: float = FAST_W1_TOLERANCE) -> int:
        """Smallest block size K whose normal-law W1 error is within ``tolerance`` of K E[F]."""
        if self.std == 0.0:
            return 1
        block = EDGEWORTH_W1 * abs(self.skew) * self.std / (self.mean * tolerance)
        return max(1, math.ceil(block)) if block < MAX_FAST_BLOCK else MAX_FAST_BLOCK


def max_normal_median(n_ranks: float) -> float:
    """Median of the maximum of ``n_ranks`` iid standard normals."""
    return float(-special.ndtri(-math.expm1(math.log(0.5) / n_ranks)))


def _log_max_density(z: float, n_ranks: float) -> float:
    """Log density of the maximum of ``n_ranks`` iid standard normals at ``z``."""
    return math.log(n_ranks) - 0.5 * z * z - 0.5 * math.log(2 * math.pi) + (n_ranks - 1) * special.log_ndtr(z)


# Standard units beyond the last peak of an integrand that the quadrature covers:
# the normal tail there is below exp(-72), far under double precision.
_TAIL_UNITS = 12.0
# Largest fast-mode block size: no run has that many iterations, so a law whose
# error bound asks for more is drawn iteration by iteration (kept within int64).
MAX_FAST_BLOCK = 2**62


# Laws computed by earlier processes, one line each ("n_ranks sigma floor mean std skew", exact hexadecimal
# floats) in a file of the kernels' cache folder named by this module's source and SciPy's version: a warm
# run then needs no quadrature, and does not import scipy.integrate (with scipy.optimize and scipy.sparse,
# 0.15-0.3 s of its start-up). Appended a line at a time; unreadable, absent or read-only: computed as before.
_STORE_LOCK = threading.Lock()
_STORE_MAX_BYTES = 8 << 20


@functools.cache
def _law_store() -> tuple[Path | None, dict[str, tuple[float, float, float]]]:
    """The file of stored laws (None: no cache folder) and the laws it holds, read once per process."""
    folder = kernel.CACHE_FOLDER
    if folder is None:
        return None, {}
    stamp = Path(__file__).read_bytes() + importlib.metadata.version("scipy").encode()
    path = Path(folder) / f"factor-laws-{hashlib.sha256(stamp).hexdigest()[:16]}.txt"
    laws: dict[str, tuple[float, float, float]] = {}
    try:
        for line in path.read_text(encoding="ascii").splitlines():
            fields = line.split()
            if len(fields) == 6:
                laws[" ".join(fields[:3])] = (
                    float.fromhex(fields[3]),
                    float.fromhex(fields[4]),
                    float.fromhex(fields[5]),
                )
    except (OSError, ValueError, UnicodeDecodeError):
        pass
    return path, laws


def _store_law(key: str, law: FactorLaw) -> None:
    """Append ``law`` to the store (nothing when it cannot be written)."""
    path, laws = _law_store()
    laws[key] = (law.mean, law.std, law.skew)
    if path is None:
        return
    line = f"{key} {law.mean.hex()} {law.std.hex()} {law.skew.hex()}\n"
    with _STORE_LOCK:
        try:
            if not path.exists() or path.stat().st_size < _STORE_MAX_BYTES:
                with open(path, "a", encoding="ascii") as store:
                    store.write(line)
        except OSError:
            pass


@functools.lru_cache(maxsize=4096)
def factor_law(n_ranks: float, sigma: float, floor: float = 0.0) -> FactorLaw:
    """Moments of ``F = max(M, floor)`` with ``M = max_i exp(sigma Z_i)`` over ``n_ranks`` ranks.

    Parameters
    ----------
    n_ranks : float
        Number of ranks G >= 1.
    sigma : float
        Lognormal shape of each rank's factor (median 1).
    floor : float
        Episode slowdown ``s`` (0: no episode).

    Each moment is one quadrature over z (the maximum's standard-normal
    quantile) of ``(F(z) - E[F])^k f(z)``, evaluated in log space so that it
    neither overflows nor underflows at large ``sigma``. The k-th moment's
    integrand peaks near ``max(median of the maximum, k sigma)`` (``e^{k sigma z}
    phi(z)`` is a normal density centred at ``k sigma``), so the range reaches
    12 standard units beyond ``3 sigma``. Cached: every task of a configuration
    and its energy model ask for the same law, and the quadratures cost a few ms; kept across
    processes in the kernels' cache folder (the exact floats), so that a warm run computes none.
    """
    if sigma == 0.0:
        return FactorLaw(max(1.0, floor), 0.0, 0.0)
    key = f"{float(n_ranks).hex()} {float(sigma).hex()} {float(floor).hex()}"
    stored = _law_store()[1].get(key)
    if stored is not None:
        return FactorLaw(*stored)
    law = _quadrature_law(n_ranks, sigma, floor)
    _store_law(key, law)
    return law


def _quadrature_law(n_ranks: float, sigma: float, floor: float) -> FactorLaw:
    """:func:`factor_law` for ``sigma > 0``, by quadrature."""
    center = max_normal_median(n_ranks)
    lo, hi = center - _TAIL_UNITS, max(center, 3.0 * sigma) + _TAIL_UNITS
    points = [center] + [k * sigma for k in (1, 2, 3) if lo < k * sigma < hi]
    if floor > 0.0 and lo < math.log(floor) / sigma < hi:
        points.append(math.log(floor) / sigma)  # the kink of max(M, s)
    log_floor = math.log(floor) if floor > 0.0 else -math.inf

    def log_factor(z: float) -> float:
        return max(sigma * z, log_floor)

    def moment(k: int, mean: float) -> float:
        def integrand(z: float) -> float:
            log_f = _log_max_density(z, n_ranks)
            if k == 1:
                return math.exp(log_factor(z) + log_f)
            d = math.exp(log_factor(z)) - mean
            if d == 0.0:
                return 0.0
            term = math.exp(k * math.log(abs(d)) + log_f)
            return -term if d < 0.0 and k % 2 else term

        # Relative accuracy 1e-11 is far below any Monte Carlo error; where a kink (the episode
        # floor) keeps quad from certifying it, its roundoff warning is not the user's concern.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", integrate.IntegrationWarning)
            return integrate.quad(integrand, lo, hi, points=sorted(points), limit=400, epsabs=0.0, epsrel=1e-11)[0]

    below = special.ndtr(lo) ** n_ranks if n_ranks < 1e6 else 0.0  # mass under lo (zero in practice)
    mean = moment(1, 0.0) + below * floor
    std = math.sqrt(max(moment(2, mean), 0.0))
    if std <= 1e-12 * abs(mean):  # e.g. an episode floor far above every rank: constant factor
        return FactorLaw(float(mean), 0.0, 0.0)
    skew = moment(3, mean) / std**3
    return FactorLaw(float(mean), std, float(skew))


def max_lognormal_moments(n_ranks: float, sigma: float) -> tuple[float, float]:
    """Mean and variance of ``M = max_i exp(sigma Z_i)`` over ``n_ranks`` ranks."""
    law = factor_law(n_ranks, sigma)
    return law.mean, law.std**2


def episode_active_share(rate_per_s: ArrayLike, mean_s: float, mtbf_s: ArrayLike) -> np.ndarray:
    """Expected share of the running time during which a slow-node episode is active (first order).

    Episodes arrive as a Poisson process of ``rate_per_s`` (ρ) and last Exp(``mean_s``) (D); one is
    active while any is under way (an M/M/∞ queue is busy), and a restart ends every episode. ``t``
    after a restart the number under way is Poisson of mean ``ρD (1 − e^{−t/D})``, so the queue is busy
    with probability ``1 − exp(−ρD (1 − e^{−t/D}))``. The running time between restarts is taken as
    exponential of mean ``mtbf_s`` (M, the job's MTBF); averaged over it (``u = e^{−t/D}`` is then
    Beta(D/M, 1)) the share is ``1 − e^{−ρD} ₁F₁(D/M; D/M + 1; ρD) = 1 − ₁F₁(1; D/M + 1; −ρD)``
    (Kummer's function and his transformation, which keeps it finite for any ρD), and without failures
    (M inf) the stationary ``1 − e^{−ρD}``. Used by the planner's screen (docs/model.md §9).
    """
    rho_d = np.asarray(rate_per_s, dtype=np.float64) * mean_s
    m = np.asarray(mtbf_s, dtype=np.float64)
    finite = np.isfinite(m) & (m > 0)
    c = mean_s / np.where(finite, m, np.inf)
    idle = special.hyp1f1(1.0, c + 1.0, -rho_d)
    return np.clip(1.0 - idle, 0.0, 1.0)


def degradation_over_run(per_s: float, max_share: float, mtbf_s: ArrayLike, ideal_s: ArrayLike) -> np.ndarray:
    """:func:`degradation_added_share` over the degraded run's own length: the ideal time stretched by
    the share itself (three passes of the fixed point ``T = ideal (1 + share(T))``), since a degraded
    run lasts longer and its ages grow beyond the ideal time."""
    horizon = np.asarray(ideal_s, dtype=float)
    share = degradation_added_share(per_s, max_share, mtbf_s, horizon)
    for _ in range(2):
        share = degradation_added_share(per_s, max_share, mtbf_s, horizon * (1.0 + share))
    return share


def degradation_added_share(per_s: float, max_share: float, mtbf_s: ArrayLike, horizon_s: ArrayLike) -> np.ndarray:
    """Mean share of compute time a throughput degradation adds over a run (first order, for estimates).

    The degradation adds ``min(r a, D)`` at age ``a`` since the attempt began (``r = per_s``,
    ``D = max_share``); restarts come as a Poisson process of mean interval ``M = mtbf_s``, so the
    age at time ``t`` is ``min(t, X)``, ``X ~ Exp(M)``, and
    ``E[min(r min(t, X), D)] = r M (1 - e^(-c/M))`` with ``c = min(t, D/r)``. Averaged over
    ``t`` in ``[0, T]`` (``T = horizon_s``, the run's length) in closed form; ``M = inf``
    (no restarts) gives the limit ``r c`` averaged. The steps of the kernel's staircase take the
    mid-step value, so the staircase averages to the same line.
    """
    mtbf = np.asarray(mtbf_s, dtype=float)
    horizon = np.maximum(np.asarray(horizon_s, dtype=float), 1e-300)
    if per_s <= 0.0 or max_share <= 0.0:
        return np.zeros(np.broadcast(mtbf, horizon).shape)
    c0 = np.minimum(horizon, max_share / per_s)  # age at which the cap is reached, within the run
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        finite = np.isfinite(mtbf) & (mtbf > 0)
        m = np.where(finite, mtbf, 1.0)
        reached = per_s * m * -np.expm1(-c0 / m)  # E at t >= c0
        rising = per_s * m * (c0 - m * -np.expm1(-c0 / m))  # integral over t in [0, c0]
        restarts = (rising + (horizon - c0) * reached) / horizon
        none = (per_s * c0**2 / 2.0 + (horizon - c0) * per_s * c0) / horizon
    return np.where(finite, restarts, none)
