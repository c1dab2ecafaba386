"""Straggler laws at the schema's largest sigma: exact moments, a usable fast mode, sane energy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special

import mcsim
from mcsim.kernels import interface as kernel
from mcsim.model import stragglers
from mcsim.model.energy import ENERGY_PARTS
from mcsim.model.stragglers import factor_law
from mcsim.scenario.config import scenario_from_dict
from mcsim.scenario.schema import StragglerSection

SIGMA_MAX = dict(StragglerSection.__dataclass_fields__["sigma"].metadata)["le"]
SIGMAS = (0.01, 0.5, 1.0, 2.0, 3.0, 4.0, SIGMA_MAX)


@pytest.mark.parametrize("sigma", SIGMAS)
def test_one_rank_law_matches_lognormal_closed_form(sigma):
    # G = 1: F is one lognormal(0, sigma): mean e^{s^2/2}, variance (w - 1) w and skewness
    # (w + 2) sqrt(w - 1) with w = e^{s^2} (standard lognormal moments). The quadrature's
    # stated accuracy is 1e-11 relative; 1e-9 leaves room for the closed forms' own rounding.
    law = factor_law(1.0, sigma)
    w = math.exp(sigma**2)
    assert law.mean == pytest.approx(math.exp(sigma**2 / 2), rel=1e-9)
    assert law.std == pytest.approx(math.sqrt((w - 1) * w), rel=1e-9)
    assert law.skew == pytest.approx((w + 2) * math.sqrt(w - 1), rel=1e-9)


@pytest.mark.parametrize("sigma", SIGMAS)
def test_two_rank_mean_matches_closed_form(sigma):
    # E[max(e^{sZ1}, e^{sZ2})] = 2 e^{s^2/2} Phi(s / sqrt 2): max(X1, X2) = X1 + (X2 - X1)^+,
    # and Z2 - Z1 ~ N(0, 2) (a standard lognormal-difference identity).
    expected = 2 * math.exp(sigma**2 / 2) * special.ndtr(sigma / math.sqrt(2))
    assert factor_law(2.0, sigma).mean == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("ranks", [1.0, 64.0, 16384.0])
def test_fast_block_fits_the_kernel_at_sigma_max(ranks):
    block = factor_law(ranks, SIGMA_MAX).fast_min_block()
    assert 1 <= block < 2**63  # the kernel stores it as int64


def _extreme(small_raw: dict, sigma: float, gpus: int, episodes: bool) -> dict:
    raw = small_raw
    raw["model"].update(params=1e8, tokens=2e5, global_batch=8)
    raw["hardware"]["gpus_per_node"] = 1
    raw["parallelism"].update(gpus=gpus, tp=1, pp=1)  # pp = 1: no bubble, the whole phase computes
    raw["stragglers"] = {"sigma": sigma}
    if episodes:
        raw["stragglers"].update(episode_rate_per_node_day=10.0, episode_hours=1.0, episode_slowdown=3.0)
    raw["run"].update(runs=30, mode="fast", seed=3)
    return raw


@pytest.mark.parametrize(
    "sigma,gpus,episodes",
    [(4.0, 1, False), (SIGMA_MAX, 1, False), (4.0, 1, True), (4.0, 8, True), (SIGMA_MAX, 4, True)],
)
def test_energy_parts_non_negative_and_add_up_at_extreme_sigma(small_raw, sigma, gpus, episodes):
    scenario = scenario_from_dict(_extreme(small_raw, sigma, gpus, episodes), "extreme.toml")
    ds = mcsim.simulate(scenario, progress=False)
    assert bool(ds["feasible"]) and float(ds["completed"].mean()) > 0
    parts = [ds[f"energy_{k}"].values for k in ENERGY_PARTS]
    for name, part in zip(ENERGY_PARTS, parts, strict=False):
        assert np.all(part >= 0.0), name
    # The total is the sum of the parts by definition (docs/model.md §5): to rounding.
    np.testing.assert_allclose(np.sum(parts, axis=0), ds["energy"].values, rtol=1e-12)
    assert np.all(ds["energy_gpu"].values >= 0.0)


def test_a_stored_factor_law_comes_back_bit_for_bit_without_a_quadrature(tmp_path, monkeypatch):
    """A law computed once is read back by a later process (here: with the per-process caches cleared) as the
    very same floats, and no quadrature runs for it."""
    monkeypatch.setattr(kernel, "CACHE_FOLDER", tmp_path)
    stragglers._law_store.cache_clear()
    factor_law.cache_clear()
    try:
        computed = stragglers._quadrature_law(4096, 0.031, 1.7)
        assert factor_law(4096, 0.031, 1.7) == computed  # computed and appended to the store
        assert len(list(tmp_path.glob("factor-laws-*.txt"))) == 1
        stragglers._law_store.cache_clear()
        factor_law.cache_clear()

        def no_quadrature(*args):
            raise AssertionError("the stored law was computed again")

        monkeypatch.setattr(stragglers, "_quadrature_law", no_quadrature)
        stored = factor_law(4096, 0.031, 1.7)
        assert [v.hex() for v in (stored.mean, stored.std, stored.skew)] == [
            v.hex() for v in (computed.mean, computed.std, computed.skew)
        ]
    finally:
        stragglers._law_store.cache_clear()
        factor_law.cache_clear()
