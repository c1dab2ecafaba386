"""The incomplete-gamma kernels (mcsim/kernels/gamma.py) against SciPy.

``scipy.special.gammaincc`` / ``gammainccinv`` / ``gammaincinv`` are the
references (Boost's implementations, double precision). The claim checked is
the module's: about 1e-12 relative or better for shapes a = 1/k with the
Weibull shapes k of the schema (0.05 .. 20), arguments from 1e-12 to where Q
reaches 1e-300, and probabilities down to 1e-300.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special

from mcsim.kernels import gamma

pytestmark = pytest.mark.plain_python  # also run with the kernels as plain Python (CI, for coverage)

RTOL = 1e-12
SHAPES_A = 1.0 / np.geomspace(0.05, 20.0, 25)  # a = 1/k for the schema's k range


@pytest.mark.parametrize("a", SHAPES_A, ids=lambda a: f"a={a:.4g}")
def test_gammaincc_matches_scipy(a):
    xs = np.concatenate([np.geomspace(1e-12, 1e3, 400), [a, a + 1.0, a + 1.0 + 1e-9, 1.0]])
    worst = 0.0
    for x in xs:
        ref = special.gammaincc(a, x)
        if ref < 1e-300:  # SciPy's value is subnormal or 0 there
            continue
        worst = max(worst, abs(gamma.gammaincc(a, x) / ref - 1.0))
    assert worst < RTOL


@pytest.mark.parametrize("a", SHAPES_A, ids=lambda a: f"a={a:.4g}")
def test_gammaincc_inv_matches_scipy(a):
    # Q from 1e-300 (far tail: thousands of failures of a pool) to 1 - 1e-12 (the first failure
    # of a pool of millions of units).
    qs = np.concatenate([np.geomspace(1e-300, 0.5, 400), 1.0 - np.geomspace(1e-12, 0.5, 100)])
    worst = 0.0
    for q in qs:
        ref = special.gammainccinv(a, q)
        worst = max(worst, abs(gamma.gammaincc_inv(a, q) / ref - 1.0))
    assert worst < RTOL


@pytest.mark.parametrize("a", [0.05, 1 / 3, 1.0, 1 / 0.7, 2.0, 20.0])
def test_log_inverse_near_q_one_uses_p(a):
    # h = -log Q tiny: x solves P(a, x) = -expm1(-h) (SciPy's gammaincinv on P, no 1 - Q formed).
    for h in (1e-300, 1e-100, 1e-20, 1e-8, 0.01, 0.3, 0.69):
        ref = special.gammaincinv(a, -math.expm1(-h))
        if ref == 0.0:  # x below the double range: compare logs through P ~ x^a / Gamma(a+1)
            ref_log = (math.log(-math.expm1(-h)) + math.lgamma(a + 1.0)) / a
            assert gamma.log_gammaincc_inv(a, h) == pytest.approx(ref_log, rel=RTOL)
            continue
        assert math.exp(gamma.log_gammaincc_inv(a, h)) == pytest.approx(ref, rel=RTOL)


@pytest.mark.parametrize("a", [0.05, 1 / 3, 1.0, 1 / 0.7, 20.0])
def test_log_inverse_beyond_the_double_range_round_trips(a):
    # e^-h below 1e-308: no SciPy reference; the log-space forward function inverts it.
    for h in (650.0, 740.0, 1000.0, 5000.0):
        y = gamma.log_gammaincc_inv(a, h)
        assert -gamma.log_gammaincc(a, math.exp(y)) == pytest.approx(h, rel=RTOL)


def test_exponential_case_is_the_identity():
    # a = 1: Q(1, x) = e^-x, so the inverse of e^-h is h.
    for h in (1e-12, 0.01, 0.5, 1.0, 7.0, 300.0):
        assert math.exp(gamma.log_gammaincc_inv(1.0, h)) == pytest.approx(h, rel=1e-14)


def test_ends_of_the_range():
    # The documented ends: Q(a, 0) = 1 and Q(a, inf) = 0 in log space, and their inverses (h = 0, h = inf).
    for a in (0.05, 1.0, 20.0):
        assert gamma.log_gamma_pq(a, -math.inf) == (-math.inf, 0.0)
        assert gamma.log_gamma_pq(a, math.inf) == (0.0, -math.inf)
        assert gamma.log_gammaincc_inv(a, 0.0) == -math.inf
        assert gamma.log_gammaincc_inv(a, math.inf) == math.inf
