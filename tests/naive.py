"""Naive, slow reference implementations that the kernels are tested against.

Written apart from the kernels and deliberately simple: pure Python integers
for the random generator, brute-force maxima, quadrature in a different
variable, and closed forms from the literature.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import integrate, special

MASK64 = (1 << 64) - 1


def splitmix64_mix(z: int) -> int:
    """SplitMix64 finaliser (Steele, Lea & Flood 2014), Python integers."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def seed_state(seed: int, run: int, stream: int) -> list[int]:
    """xoshiro256** state of stream ``stream`` of run ``run`` (documented in mcsim/kernels/rng.py)."""
    golden = 0x9E3779B97F4A7C15
    key = splitmix64_mix((seed + golden) & MASK64)
    key = splitmix64_mix(((key ^ run) + golden) & MASK64)
    key = splitmix64_mix(((key ^ stream) + golden) & MASK64)
    state = []
    for _ in range(4):
        key = (key + golden) & MASK64
        state.append(splitmix64_mix(key))
    return state


def _rotl(x: int, k: int) -> int:
    return ((x << k) | (x >> (64 - k))) & MASK64


def xoshiro256ss_next(s: list[int]) -> int:
    """Next output of xoshiro256** (Blackman & Vigna's reference C code); advances ``s`` in place."""
    result = (_rotl((s[1] * 5) & MASK64, 7) * 9) & MASK64
    t = (s[1] << 17) & MASK64
    s[2] ^= s[0]
    s[3] ^= s[1]
    s[1] ^= s[2]
    s[0] ^= s[3]
    s[2] ^= t
    s[3] = _rotl(s[3], 45)
    return result


def xoshiro256ss(state: list[int], n: int) -> list[int]:
    """First ``n`` outputs of xoshiro256** from ``state`` (left unchanged)."""
    s = list(state)
    return [xoshiro256ss_next(s) for _ in range(n)]


def max_lognormal_brute(rng: np.random.Generator, n_ranks: int, sigma: float, size: int) -> np.ndarray:
    """Brute force: draw all G rank factors and take the maximum."""
    return np.exp(sigma * rng.standard_normal((size, n_ranks))).max(axis=1)


def max_lognormal_mean_u(n_ranks: float, sigma: float) -> float:
    """E[M] = int_0^1 exp(sigma Phi^-1(u^(1/G))) du, integrated in u (not z)."""

    def integrand(u: float) -> float:
        q = -math.expm1(math.log(u) / n_ranks)  # 1 - u^(1/G), accurately
        return math.exp(-sigma * special.ndtri(q))

    value, _ = integrate.quad(integrand, 0.0, 1.0, points=[0.5, 0.9, 0.99, 0.999999], limit=500, epsabs=0, epsrel=1e-11)
    return value


def max_lognormal_central_moments_u(n_ranks: float, sigma: float) -> tuple[float, float, float]:
    """Mean, variance and third central moment of M = max of G lognormals, integrated in u.

    The same substitution as :func:`max_lognormal_mean_u` (not the z density that
    ``mcsim.stragglers`` integrates), with the central moments integrated about the mean.
    """

    def m_of_u(u: float) -> float:
        return math.exp(-sigma * special.ndtri(-math.expm1(math.log(u) / n_ranks)))

    opts = dict(points=[0.5, 0.9, 0.99, 0.999999], limit=500, epsabs=0, epsrel=1e-11)
    mean = integrate.quad(m_of_u, 0.0, 1.0, **opts)[0]
    var = integrate.quad(lambda u: (m_of_u(u) - mean) ** 2, 0.0, 1.0, **opts)[0]
    third = integrate.quad(lambda u: (m_of_u(u) - mean) ** 3, 0.0, 1.0, **opts)[0]
    return mean, var, third


def edgeworth_w1_constant() -> float:
    """E|Z^2 - 1| / 6 for a standard normal Z, by quadrature (the first-order W1 constant).

    Split at the kinks z = -1 and 1; the tails beyond |z| = 40 carry no mass in double precision.
    """

    def integrand(z: float) -> float:
        return abs(z * z - 1.0) * math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)

    pieces = ((-40.0, -1.0), (-1.0, 1.0), (1.0, 40.0))
    return sum(integrate.quad(integrand, a, b, epsabs=0, epsrel=1e-12)[0] for a, b in pieces) / 6.0


def max_normal_quantile_ref(u: float, n_ranks: float) -> float:
    """Phi^-1(u^(1/G)) with scipy's ndtri on the accurately formed upper tail."""
    return float(-special.ndtri(-math.expm1(math.log(u) / n_ranks)))


def renewal_reward_mean_wall_s(
    iterations: int, iteration_s: float, every: int, stall_s: float, rate_per_s: float, recovery_s: float
) -> float:
    """Expected wall time with exponential failures and synchronous checkpoints.

    A segment of ``s`` seconds of work that must run failure-free, with rate
    ``lambda`` failures and a recovery ``R`` restarted by failures during it,
    costs ``(e^{lambda s} - 1) e^{lambda R} / lambda`` in expectation
    (renewal-reward argument; e.g. Daly 2006 with zero downtime). Full
    segments are ``every`` iterations plus the checkpoint stall; the last
    segment carries no checkpoint.
    """

    def segment(s: float) -> float:
        return math.expm1(rate_per_s * s) * math.exp(rate_per_s * recovery_s) / rate_per_s

    full, last = divmod(iterations, every)
    if last == 0:  # the final checkpoint is not taken: the run ends with the last iteration
        full, last = full - 1, every
    return full * segment(every * iteration_s + stall_s) + segment(last * iteration_s)


def daly_interval_ref(c: float, m: float) -> float:
    """Daly (2006) eq. 37, written out again."""
    if c >= 2 * m:
        return m
    return math.sqrt(2 * c * m) * (1 + (1 / 3) * math.sqrt(c / (2 * m)) + (1 / 9) * (c / (2 * m))) - c


def simulate_run(params, classes, seed: int, run: int, phases=None) -> list[float]:
    """One run of docs/model.md §4 in plain Python, drawing the kernel's random streams.

    The slow twin of ``mcsim.kernels.montecarlo.simulate_runs`` (the reference its rewrite as a loop
    of events was checked against): ``params`` is
    a ``RunParams``, ``classes`` a ``FailureClasses``; returns the run's ``N_OUT``
    outputs in the kernel's column order. Written out in ``tests/naive_run.py``. ``phases``:
    the phase table (rows: start iteration, compute s, comm s; None: one phase).
    """
    import naive_run  # imported here: naive_run builds on this module's generator

    return naive_run.simulate_run(params, classes, seed, run, phases=phases)


def pareto_front_naive(values: np.ndarray) -> np.ndarray:
    """O(n^2) reference: row i is on the front when it is finite and no finite row j has
    values[j] <= values[i] everywhere and < somewhere (all objectives minimised)."""
    values = np.asarray(values, dtype=float)
    finite = [bool(np.all(np.isfinite(row))) for row in values]
    front = np.zeros(len(values), dtype=bool)
    for i, row in enumerate(values):
        if not finite[i]:
            continue
        front[i] = not any(
            finite[j]
            and all(a <= b for a, b in zip(other, row, strict=False))
            and any(a < b for a, b in zip(other, row, strict=False))
            for j, other in enumerate(values)
            if j != i
        )
    return front
