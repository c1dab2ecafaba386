"""The sensitivity ranking (issue 42 item 7): by the variance-based index with its interval, delta as a second
opinion, and where the two disagree, on functions whose indices are known in closed form.

The results are built here from the functions' values (dims ``draw`` and ``run``, the inputs as variables along
``draw``), so the indices are those of the function, not of the simulator.
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from SALib.sample import sobol as salib_sample

from mcsim.analysis.sensitivity import _index_variables, disagreements, sensitivity
from mcsim.report.tables import sensitivity_table

# Ishigami & Homma (1990), a = 7, b = 0.1, inputs uniform on [-pi, pi]: closed-form variances
# (Sobol' & Levitan 1999; Saltelli et al. 2008, Global Sensitivity Analysis. The Primer, §4.9):
A, B = 7.0, 0.1
V1 = 0.5 * (1 + B * np.pi**4 / 5) ** 2
V2 = A**2 / 8
V13 = B**2 * np.pi**8 * (1 / 18 - 1 / 50)
V = V1 + V2 + V13
ISHIGAMI_S1 = np.array([V1, V2, 0.0]) / V  # 0.314, 0.442, 0
ISHIGAMI_ST = np.array([V1 + V13, V2, V13]) / V  # 0.558, 0.442, 0.244


def _ishigami(x: np.ndarray) -> np.ndarray:
    return np.sin(x[:, 0]) + A * np.sin(x[:, 1]) ** 2 + B * x[:, 2] ** 4 * np.sin(x[:, 0])


def _result(x: np.ndarray, y: np.ndarray, design: str) -> xr.Dataset:
    """A result with parameter draws whose mean cost per draw is ``y`` (two identical runs per draw)."""
    names = [f"x{i + 1}" for i in range(x.shape[1])]
    ds = xr.Dataset(
        {"cost": (("draw", "run"), np.repeat(y[:, None], 2, axis=1))},
        coords={"draw": np.arange(len(y)), "run": [0, 1]},
        attrs={"uncertain_inputs": " ".join(names), "design": design, "draws": len(y)},
    )
    for i, name in enumerate(names):
        ds[name] = ("draw", x[:, i])
    return ds


def _within(estimate: float, low: float, high: float, exact: float) -> bool:
    """``exact`` within about 4 standard errors of the estimate (the 95 % half-width is 1.96 of them)."""
    slack = (high - low) / 2 * (4 / 1.959964 - 1)
    return low - slack <= exact <= high + slack


def test_saltelli_ranks_by_the_total_index():
    problem = {"num_vars": 3, "names": ["x1", "x2", "x3"], "bounds": [[-np.pi, np.pi]] * 3}
    x = salib_sample.sample(problem, 512, calc_second_order=False, seed=3)  # SALib's own Saltelli design
    result = sensitivity(_result(x, _ishigami(x), "saltelli"), "cost")
    assert result.attrs["ranked_by"] == "ST"
    for name, exact in (("S1", ISHIGAMI_S1), ("ST", ISHIGAMI_ST)):
        for i in range(3):
            found = (float(result[f"{name}{s}"][i]) for s in ("", "_low", "_high"))
            assert _within(*found, exact[i]), (name, i)
    # x1 has the largest total index (its interaction with x3), x2 the largest first-order one
    assert list(result["rank"].values) == [1, 2, 3]
    assert np.isfinite(result["delta"]).all()  # the second opinion on a Saltelli design too
    assert sensitivity_table(result=result).splitlines()[1].lstrip().startswith("1. x1")


def test_given_data_ranks_by_s1():
    # y = x1 + 2 x2 (+ 0 x3), independent uniforms on [0, 1]: S1 = 1/5, 4/5, 0. (SALib's given-data S1 averages y
    # over about N^(1/4) bins of each input, so a non-monotone effect such as Ishigami's sin^2 x2 is underestimated
    # at a thousand draws: the closed form is checked on a monotone function.)
    x = np.random.default_rng(5).uniform(0.0, 1.0, (1024, 3))
    result = sensitivity(_result(x, x[:, 0] + 2.0 * x[:, 1], "sobol"), "cost")
    assert result.attrs["ranked_by"] == "S1" and np.isnan(result["ST"]).all()
    for i, exact in enumerate((0.2, 0.8)):
        assert _within(*(float(result[f"S1{s}"][i]) for s in ("", "_low", "_high")), exact), i
    assert list(result["rank"].values) == [2, 1, 3]
    text = sensitivity_table(result=result)
    assert text.splitlines()[1].lstrip().startswith("1. x2") and "(delta rank" in text


def test_delta_disagreeing_with_a_clear_s1_ranking_is_said():
    # Indices as in the capacity-planning question (docs/capacity-planning.md): an input without effect (b: S1
    # about 0) that delta, biased upward with few draws, puts first. S1 tells a from b and c from b apart (their
    # intervals do not meet), not a from c ([0.25, 0.35] and [0.15, 0.25] touch).
    arrays = {
        "S1": np.array([0.30, 0.01, 0.20]),
        "S1_conf": np.array([0.05, 0.02, 0.05]),
        "delta": np.array([0.10, 0.20, 0.15]),
        "delta_conf": np.full(3, 0.03),
        "ST": np.full(3, np.nan),
        "ST_conf": np.full(3, np.nan),
    }
    variables = _index_variables(arrays, "sobol", ("input",))
    result = xr.Dataset(variables, coords={"input": ["a", "b", "c"]}, attrs={"ranked_by": "S1"})
    assert list(result["rank"].values) == [1, 3, 2] and list(result["rank_delta"].values) == [3, 1, 2]
    assert result["delta_disagrees"].values.tolist() == [True, True, True]
    assert disagreements(result) == [("a", "b"), ("c", "b")]
    result.attrs.update(output="cost", draws=256, design="sobol", resamples=100, method="delta")
    text = sensitivity_table(result=result)
    assert "delta disagrees: it puts b above a, whose S1 interval lies wholly above b's" in text
    assert "delta disagrees: it puts b above c" in text and "no detectable effect (S1's interval contains 0): b" in text
    # c and a alone: delta orders them against S1, but S1 does not tell them apart: no disagreement
    both = result.isel(input=[0, 2])
    assert disagreements(both) == []


def test_delta_agreeing_with_the_ranking_is_not_flagged():
    x = np.random.default_rng(2).uniform(0.0, 1.0, (512, 2))
    result = sensitivity(_result(x, x[:, 0] + 3.0 * x[:, 1], "sobol"), "cost")  # S1 = 0.1, 0.9
    assert list(result["rank"].values) == [2, 1] and list(result["rank_delta"].values) == [2, 1]
    assert not result["delta_disagrees"].any() and disagreements(result) == []
    assert "disagrees" not in sensitivity_table(result=result)
