"""``open_results(path, chunks=...)``: a lazily opened result is the eagerly opened one (hostile findings of
issue 42, each failed before its fix)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from builders import SMALL_SCENARIO

import mcsim
from mcsim.io.netcdf import open_results, write_results
from mcsim.scenario.config import scenario_from_dict

pytest.importorskip("dask")


@pytest.fixture(scope="module")
def uncertain_file(tmp_path_factory):
    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["run"].update(runs=4, mode="fast", draws=2, design="sobol")
    raw["sweep"] = {"parallelism.gpus": [32, 64]}
    raw["uncertain"] = {"compute.efficiency": {"dist": "uniform", "low": 0.4, "high": 0.6}}
    ds = mcsim.simulate(scenario_from_dict(raw), progress=False)
    assert ds["infeasible_reason"].dtype.kind in "OU"  # text the file stores
    return write_results(ds, tmp_path_factory.mktemp("lazy") / "u.nc")


@pytest.mark.parametrize("chunks", ["auto", {"run": 2}])
def test_a_lazily_opened_result_equals_the_eager_one(chunks, uncertain_file):
    # Found: chunks="auto" (the docstring's own example) raised NotImplementedError on the text variables,
    # and a lazily opened result named its uncertain inputs as stored (compute_efficiency), so sensitivity
    # refused it.
    eager = open_results(uncertain_file)
    lazy = open_results(uncertain_file, chunks=chunks)
    try:
        assert list(lazy.data_vars) == list(eager.data_vars)
        assert "compute.efficiency" in lazy and lazy["wall_time"].chunks is not None
        for name in eager.variables:
            np.testing.assert_array_equal(lazy[name].values, eager[name].values, err_msg=name)
        assert lazy.attrs == eager.attrs
    finally:
        lazy.close()
