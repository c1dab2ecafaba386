"""simulate -> Dataset -> netCDF: variables, units, provenance, reproducibility, summaries."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from child_python import outputs_by_thread_count
from netcdf_cache import chunk_cache_during_write

import mcsim
from mcsim.engine.simulate import simulate_config
from mcsim.io.variables import PER_CONFIG, PER_RUN, VARIABLES, Variable, variable_table
from mcsim.scenario.config import scenario_from_dict

REQUIRED_PER_RUN = {
    "wall_time": "h",
    "energy": "MW h",
    "cost": "USD",
    "co2": "t",
    "n_failures": "1",
    "lost_time": "h",
    "checkpoint_time": "h",
    "recovery_time": "h",
    "straggler_time": "h",
    "ettr": "1",
    "completed": "1",
}
REQUIRED_PER_CONFIG = {
    "iteration_time": "s",
    "compute_time": "s",
    "comm_time": "s",
    "iterations": "1",
    "checkpoint_interval": "s",
    "checkpoint_stall": "s",
    "memory_per_gpu": "Gbyte",
    "mfu_ideal": "1",
    "hfu_ideal": "1",
    "feasible": "1",
    "infeasible_reason": "1",
}


@pytest.fixture
def small_ds(small_raw):
    return mcsim.simulate(scenario_from_dict(small_raw, "small.toml"), progress=False)


def test_dataset_has_spec_variables_with_units(small_ds):
    for name, units in {**REQUIRED_PER_RUN, **REQUIRED_PER_CONFIG}.items():
        assert name in small_ds, name
        assert small_ds[name].attrs["units"] == units
        assert small_ds[name].attrs["long_name"]
    for name in REQUIRED_PER_RUN:
        assert small_ds[name].dims == ("run",)
    assert small_ds.sizes["run"] == 200
    assert small_ds["completed"].dtype == bool and small_ds["completed"].all()
    assert small_ds.attrs["seed"] == 7 and small_ds.attrs["mode"] == "exact"
    assert tomllib.loads(small_ds.attrs["scenario_toml"])["name"] == "small"


def test_variable_table_reads_rows_continued_meanings_and_comments():
    """The registry's text table: six cells a row, a line without '|' continues the meaning, '#' a comment."""
    table = """
    # name | per    | units | dtype   | better | meaning
    a      | run    | MW h  | float64 | higher | first line
                                                 and its continuation
    b      | config | 1     | int64   | -      | a count
    """
    assert variable_table(table) == [
        Variable("a", True, "MW h", "first line and its continuation", "float64", "higher"),
        Variable("b", False, "1", "a count", "int64", None),
    ]


def test_netcdf_round_trip_and_atomic_write(small_ds, tmp_path):
    path = mcsim.write_results(small_ds, tmp_path / "r.nc")
    assert [p.name for p in tmp_path.iterdir()] == ["r.nc"]
    back = mcsim.open_results(path)
    for name in VARIABLES:
        if name == "infeasible_reason":
            assert back[name].item() == ""
            continue
        np.testing.assert_array_equal(back[name].values, small_ds[name].values)
        assert back[name].attrs["units"] == VARIABLES[name].units
    assert back.attrs["scenario_toml"] == small_ds.attrs["scenario_toml"]
    # Compressed where it pays (mcsim.io.netcdf.worth_compressing): the run counts compress, the
    # simulated wall times (high-entropy floats) are stored as they are.
    from mcsim.io.netcdf import compression

    flag = "zstd" if compression().get("compression") == "zstd" else "zlib"
    with xr.open_dataset(path) as raw:
        assert raw["n_failures"].encoding.get(flag) is True
        assert not raw["wall_time"].encoding.get(flag)


def test_compression_where_it_pays():
    from mcsim.io.netcdf import worth_compressing

    rng = np.random.default_rng(3)
    assert worth_compressing(np.zeros(10_000))
    assert worth_compressing(rng.integers(0, 5, 10_000).astype(float))  # counts
    assert not worth_compressing(rng.exponential(1000.0, 10_000))  # simulated times: 0.86-0.94
    assert not worth_compressing(np.zeros(0))


def test_compression_is_judged_as_the_filter_sees_the_bytes():
    # netCDF4-python shuffles only with zlib (Variable.filters() of a Zstandard variable: no shuffle),
    # so a variable is judged unshuffled for Zstandard. Whole numbers up to 1e9 stored as float64
    # compress shuffled (their sign, exponent and zero low bytes line up) but less unshuffled: the
    # sample of these measured 0.55 shuffled against 0.64 unshuffled, either side of COMPRESS_BELOW.
    from mcsim.io.netcdf import COMPRESS_BELOW, ZLIB, ZSTD, compression, worth_compressing

    assert COMPRESS_BELOW == 0.6  # the threshold the figures above straddle
    rng = np.random.default_rng(4)
    times = rng.integers(0, 10**9, 100_000).astype(float)
    assert worth_compressing(times, shuffle=True) and not worth_compressing(times, shuffle=False)
    assert ZLIB["shuffle"] and not ZSTD["shuffle"]
    assert worth_compressing(times) == bool(compression().get("shuffle"))
    # The sample is spread over the variable: an infeasible configuration's NaN at its head does not
    # make the simulated times that follow look compressible.
    head_nan = np.concatenate([np.full(20_000, np.nan), rng.exponential(1000.0, 200_000)])
    assert not worth_compressing(head_nan, shuffle=False)
    assert worth_compressing(np.concatenate([np.zeros(200_000), rng.exponential(1000.0, 20)]), shuffle=False)


def test_write_does_not_cache_whole_chunks(small_ds, tmp_path, monkeypatch):
    # The library's default chunk cache (64 MiB per variable) held every compressed
    # variable until the file closed (131 MB more for a 135 MB sweep). During the write the cache is
    # smaller than a per-run variable of 480 configurations x 1,000 runs (HDF5 writes it through), and
    # restored after.
    import netCDF4

    from mcsim.io.netcdf import WRITE_CHUNK_CACHE_BYTES

    before, seen = chunk_cache_during_write(monkeypatch, small_ds, tmp_path / "r.nc")
    assert seen[0][0] == WRITE_CHUNK_CACHE_BYTES < 480_000 * 8
    assert netCDF4.get_chunk_cache() == before


def test_interrupted_write_leaves_nothing(small_ds, tmp_path, monkeypatch):
    target = tmp_path / "r.nc"
    target.write_bytes(b"previous result")

    def broken(self, path, *args, **kwargs):
        Path(path).write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(xr.Dataset, "to_netcdf", broken)
    with pytest.raises(KeyboardInterrupt):
        mcsim.write_results(small_ds, target)
    assert [p.name for p in tmp_path.iterdir()] == ["r.nc"]
    assert target.read_bytes() == b"previous result"


def test_energy_cost_co2_formulas(small_ds, small_raw):
    cfg = scenario_from_dict(small_raw).base
    ds = small_ds
    hours = ds["wall_time"]
    kwh = ds["energy"] * 1000
    # docs/model.md §5, with the default cost and carbon tables (the A100 80GB's on-demand price:
    # AWS p4de.24xlarge, 27.44705 USD/h for 8 GPUs in us-east-1, January 2026; 0.08 USD/kWh,
    # 380 g/kWh, 150 kg/GPU over 5 years of 365.25 days)
    assert cfg.hardware.gpu == "A100-80GB"
    np.testing.assert_allclose(ds["cost"], 64 * hours * (27.44705 / 8) + kwh * 0.08, rtol=1e-12)
    np.testing.assert_allclose(ds["co2"], kwh * 380 / 1e6 + 150 * 64 * hours / (5 * 365.25 * 24) / 1e3, rtol=1e-12)
    # energy is at least idle power for the whole wall time and at most TDP, times PUE 1.1
    nodes = 8
    low = (64 * cfg.gpu.idle_w + nodes * 2500) * hours * 1.1 / 1e6
    high = (64 * cfg.gpu.tdp_w + nodes * 2500) * hours * 1.1 / 1e6
    assert np.all(ds["energy"] > low) and np.all(ds["energy"] < high)


def test_summarize_matches_numpy(small_ds):
    s = mcsim.summarize(small_ds)
    x = small_ds["wall_time"].values
    assert list(s["stat"].values) == ["mean", "std", "p5", "p50", "p95", "ci95_low", "ci95_high"]
    assert float(s["wall_time"].sel(stat="mean")) == pytest.approx(x.mean(), rel=1e-12)
    assert float(s["wall_time"].sel(stat="std")) == pytest.approx(x.std(ddof=1), rel=1e-12)
    assert float(s["wall_time"].sel(stat="p95")) == pytest.approx(np.percentile(x, 95), rel=1e-12)
    half = 1.959963984540054 * x.std(ddof=1) / np.sqrt(len(x))
    assert float(s["wall_time"].sel(stat="ci95_high")) == pytest.approx(x.mean() + half, rel=1e-12)
    assert s["wall_time"].attrs["units"] == "h"
    assert float(s["completed"].sel(stat="mean")) == 1.0
    assert "mfu_ideal" in s


def test_sweep_dims_coords_and_infeasible(small_raw):
    small_raw["sweep"] = {"parallelism.tp": [2, 3], "checkpoint.interval": [{"minutes": 30}, "young_daly"]}
    small_raw["run"]["runs"] = 20
    ds = mcsim.simulate(scenario_from_dict(small_raw, "s.toml"), progress=False)
    assert ds["wall_time"].dims == ("tp", "interval", "run")
    assert list(ds["interval"].values) == ["30min", "young_daly"]
    assert ds["feasible"].sel(tp=2).all() and not ds["feasible"].sel(tp=3).any()
    assert "does not divide" in str(ds["infeasible_reason"].sel(tp=3, interval="30min").item())
    assert np.isnan(ds["wall_time"].sel(tp=3)).all() and np.isfinite(ds["wall_time"].sel(tp=2)).all()


def test_a_plain_to_netcdf_writes_a_result_with_infeasible_text(small_raw, tmp_path):
    # issue 42 item 2: xarray 2024.1 (the declared floor) refuses object-dtype text in to_netcdf ("unsupported
    # dtype for netCDF4 variable: object"); the simulated text is fixed-width Unicode, which every version writes
    small_raw["sweep"] = {"parallelism.tp": [2, 3]}
    small_raw["run"]["runs"] = 5
    ds = mcsim.simulate(scenario_from_dict(small_raw, "s.toml"), progress=False)
    assert ds["infeasible_reason"].dtype.kind == "U"
    ds.to_netcdf(tmp_path / "plain.nc")  # xarray's own writer, not mcsim's
    with xr.open_dataset(tmp_path / "plain.nc") as back:
        assert list(back["infeasible_reason"].values) == list(ds["infeasible_reason"].values)
        assert "does not divide" in str(back["infeasible_reason"].sel(tp=3).item())


def test_common_random_numbers_across_configurations(small_raw):
    # Failure times come from per-class streams named by (seed, run): with checkpoint
    # intervals swept, run r of both configurations meets the same failures, so its
    # failure count and wall time move together across configurations. The GPU MTBF of
    # 10 h (64 GPUs: a job MTBF of 9.4 min over ~0.5 h of work) gives most runs several
    # failures, so the pairing is exercised and not just the failure-free runs.
    small_raw["sweep"] = {"checkpoint.interval": [{"iterations": 20}, {"iterations": 80}]}
    small_raw["stragglers"]["sigma"] = 0.0
    small_raw["failures"][0]["mtbf_hours"] = 10.0
    ds = mcsim.simulate(scenario_from_dict(small_raw), progress=False)
    assert float((ds["n_failures"] > 0).all("interval").mean()) > 0.8
    a, b = ds["n_failures"].isel(interval=0), ds["n_failures"].isel(interval=1)
    wall_a, wall_b = ds["wall_time"].isel(interval=0), ds["wall_time"].isel(interval=1)
    # Paired: correlations of about 0.95 (measured); independent runs would give 0 with a
    # standard error of 1/sqrt(200) = 0.07, so 0.8 is more than 10 standard errors away.
    assert float(np.corrcoef(a, b)[0, 1]) > 0.8
    assert float(np.corrcoef(wall_a, wall_b)[0, 1]) > 0.8
    # The control: the same comparison with the pairing broken (the second configuration
    # from another seed) stays within 4 standard errors of 0, so the test can fail.
    small_raw["run"]["seed"] = 8
    other = mcsim.simulate(scenario_from_dict(small_raw), progress=False)
    assert abs(float(np.corrcoef(a, other["n_failures"].isel(interval=1))[0, 1])) < 4 / np.sqrt(200)


def test_sweep_coordinates_carry_units_and_long_name(small_raw):
    small_raw["sweep"] = {
        "parallelism.gpus": [64, 128],
        "checkpoint.strategy": ["sync", "async"],
        "failures.gpu.mtbf_hours": [1000.0, 2000.0],
    }
    small_raw["run"]["runs"] = 4
    ds = mcsim.simulate(scenario_from_dict(small_raw), progress=False)
    assert ds["gpus"].attrs["units"] == "1" and "parallelism.gpus" in ds["gpus"].attrs["long_name"]
    assert ds["mtbf_hours"].attrs["units"] == "h"
    assert "checkpoint.strategy" in ds["strategy"].attrs["long_name"] and "units" not in ds["strategy"].attrs


def test_ettr_long_name_says_how_censored_runs_count():
    assert "censored" in VARIABLES["ettr"].long_name


def test_chunking_and_split_calls_bit_identical(small_raw):
    cfg = scenario_from_dict(small_raw).base
    whole, _, _ = simulate_config(cfg, 1000, 7, "exact", chunk_runs=1000)
    chunked, _, _ = simulate_config(cfg, 1000, 7, "exact", chunk_runs=37)
    first, _, _ = simulate_config(cfg, 500, 7, "exact", first_run=0)
    second, _, _ = simulate_config(cfg, 500, 7, "exact", first_run=500)
    np.testing.assert_array_equal(whole, chunked)
    np.testing.assert_array_equal(whole, np.vstack([first, second]))


def test_bit_identical_for_any_thread_count(small_raw, tmp_path):
    results = outputs_by_thread_count(small_raw, tmp_path)
    assert results["1"] == results["2"]


def test_fast_and_exact_agree_in_mean(small_raw):
    # Preliminary agreement check (the fast-mode issue adds KS tests): means within 4 SE.
    small_raw["checkpoint"]["interval"] = {"iterations": 100}
    small_raw["stragglers"]["sigma"] = 0.2
    cfg = scenario_from_dict(small_raw).base
    exact, _, _ = simulate_config(cfg, 2000, 1, "exact")
    fast, _, _ = simulate_config(cfg, 2000, 2, "fast")
    a, b = exact[:, 0], fast[:, 0]
    se = np.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
    assert abs(a.mean() - b.mean()) < 4 * se


def test_every_registered_variable_is_documented():
    doc = Path(__file__).parents[2].joinpath("docs", "model.md").read_text()
    for name in PER_RUN + PER_CONFIG:
        assert f"`{name}`" in doc, name


def test_result_file_has_default_permissions(small_ds, tmp_path):
    path = mcsim.write_results(small_ds, tmp_path / "p.nc")
    mask = os.umask(0)
    os.umask(mask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~mask


def test_zlib_where_the_library_lacks_zstandard(monkeypatch, small_ds, tmp_path):
    # netCDF4-python 1.6.5's wheels claim Zstandard and lack its filter (the lowest-versions CI job
    # found it): the trial write then fails and files are written with zlib, read back the same.
    import netCDF4

    from mcsim.io import netcdf

    netcdf.compression.cache_clear()
    monkeypatch.setattr(netCDF4, "__has_zstandard_support__", False)
    try:
        assert netcdf.compression() == netcdf.ZLIB
        path = mcsim.write_results(small_ds, tmp_path / "r.nc")
        with xr.open_dataset(path) as raw:
            assert raw["n_failures"].encoding.get("zlib") is True and not raw["n_failures"].encoding.get("zstd")
        np.testing.assert_array_equal(mcsim.open_results(path)["n_failures"].values, small_ds["n_failures"].values)
    finally:
        netcdf.compression.cache_clear()


def test_ascii_text_is_narrowed_to_the_bytes_numpy_would_encode():
    # NumPy's per-element cast (astype("S")) took 27 ms per 217,800-name variable of a
    # plan; ASCII text is its 4-byte code points narrowed. The bytes must be the cast's, every shape.
    from mcsim.io.netcdf import _ascii_bytes

    for text in (
        np.array(["H100-SXM", "A1", ""]),
        np.array([["ab", "c"], ["", "xyz"]])[:, ::-1],  # not contiguous
        np.array(["x" * 40] * 3),
    ):
        narrowed = _ascii_bytes(text)
        np.testing.assert_array_equal(narrowed, text.astype("S"))
        assert narrowed.dtype == text.astype("S").dtype
    assert _ascii_bytes(np.array(["café"])) is None  # not ASCII: NumPy's cast, then xarray's encoding
    assert _ascii_bytes(np.array(["ab"]).astype(">U2")) is None  # not native byte order
    assert _ascii_bytes(np.array([], dtype="U3")) is None


def _hugepage_advice() -> bool:
    """NumPy's huge-page advice setting (read by setting it and putting it back)."""
    from mcsim.io.pages import _hugepage_setter

    setter = _hugepage_setter()
    assert setter is not None
    value = setter(True)
    setter(value)
    return bool(value)


def test_output_arrays_are_allocated_without_huge_page_advice(monkeypatch):
    # NumPy advises huge pages for arrays of 4 MiB or more; where the kernel then
    # compacts memory on each fault, a 960-configuration sweep spent 0.5-1.1 s more in the system.
    # The advice is off while mcsim allocates its outputs and writes a file, and back afterwards,
    # also when uses overlap across threads.
    import threading

    from mcsim.io.pages import ordinary_pages

    before = _hugepage_advice()
    with ordinary_pages():
        assert _hugepage_advice() is False
        with ordinary_pages():
            assert _hugepage_advice() is False
        assert _hugepage_advice() is False
    assert _hugepage_advice() is before
    entered, release = threading.Event(), threading.Event()

    def other():
        with ordinary_pages():
            entered.set()
            release.wait(10)

    thread = threading.Thread(target=other)
    thread.start()
    entered.wait(10)
    with ordinary_pages():  # this thread's use ends first: the other's still holds the advice off
        pass
    assert _hugepage_advice() is False
    release.set()
    thread.join()
    assert _hugepage_advice() is before
    # ... and the engine allocates its outputs inside it
    import mcsim.engine.outputs as outputs

    prepared = tasks_prepared()
    seen = []
    real_empty = np.empty
    monkeypatch.setattr(outputs.np, "empty", lambda *a, **k: seen.append(_hugepage_advice()) or real_empty(*a, **k))
    outputs.OutputArrays(prepared, {}, 3)
    assert seen and not any(seen)


def tasks_prepared():
    import copy

    from builders import SMALL_SCENARIO

    from mcsim.model.preparation import prepare
    from mcsim.scenario.config import scenario_from_dict

    return prepare(scenario_from_dict(copy.deepcopy(SMALL_SCENARIO)).configs, "fast")


def test_a_variable_kept_alone_keeps_only_itself_alive():
    # A review found that the per-run variables were views of one array, so keeping one (a
    # variable's values, ds[["wall_time"]], drop_vars) kept all 35 alive. Each is its own array.
    import mcsim
    from mcsim.scenario.config import load_scenario

    ds = mcsim.simulate(load_scenario("capacity-planning", runs=50, seed=1), progress=False)
    wall = ds["wall_time"].values
    assert wall.base is None or wall.base.nbytes == wall.nbytes
    assert not np.shares_memory(ds["wall_time"].values, ds["energy"].values)


def test_failure_classes_are_each_callers_own():
    # The failure classes are computed once per distinct classes and cluster shape (a review found them shared);
    # a caller writing into its arrays (a what-if) must not change another configuration's run.
    from mcsim.engine.simulate import run_task
    from mcsim.kernels import interface as kernel
    from mcsim.model.checkpointing import failure_classes
    from mcsim.scenario.config import load_scenario

    scenario = load_scenario(
        "capacity-planning",
        runs=50,
        seed=1,
        overrides=[("parallelism.gpus", 1024), ("checkpoint.strategy", ["async", "gockpt"])],
    )
    a, b = scenario.configs[:2]
    assert (a.failures, a.parallelism.gpus) == (b.failures, b.parallelism.gpus) and a != b
    before = run_task(b, 1, "fast", 0, 50)[:, kernel.OUT_FAILURES].sum()
    mine = failure_classes(a)
    mine.scale_s[:] /= 10.0
    assert run_task(b, 1, "fast", 0, 50)[:, kernel.OUT_FAILURES].sum() == before
    assert not np.array_equal(failure_classes(a).scale_s, mine.scale_s)
