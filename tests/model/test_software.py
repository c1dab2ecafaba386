"""Software profiles: one key names a software generation's defaults; held to the published times they came from."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import xarray as xr

from mcsim.analysis import steptime_validation as sv
from mcsim.model.software import SOFTWARE_PROFILES, profile_of
from mcsim.model.workload import workload
from mcsim.report.tables import vocabulary_note
from mcsim.scenario.config import load_scenario

# The Megatron-LM README's H100 weak-scaling table (Megatron-Core r0.8.0): the 177B row, 96 heads,
# hidden 12,288, 96 layers, TP 8, PP 6, DP 48 (2,304 GPUs), batch 1,152, 432.8 TFLOP/s per GPU with
# Megatron's num_floating_point_operations (vocabulary 131,072, sequence 4,096).
README_177B_TFLOPS = 432.8


def _readme_177b_seconds() -> float:
    seq, vocab, layers, hidden, batch, gpus = 4096, 131072, 96, 12288, 1152, 2304
    flops = 12.0 * batch * seq * layers * hidden**2 * ((1 + 1 + seq / hidden) + 4 + vocab / (2 * layers * hidden))
    return flops / (gpus * README_177B_TFLOPS * 1e12)


def test_the_profile_alone_predicts_the_readme_within_ten_percent():
    """Only compute.software names the software: its overlaps, sequence parallelism, fused attention and
    efficiency are the profile's, and the README's 177B iteration time comes out within +-10 %."""
    cfg = load_scenario(
        overrides={
            "compute.software": "megatron-core-2024",
            "hardware.gpu": "H100-SXM",
            "network.intra_gbps": 900.0,
            "network.inter_gbps": 50.0,
            "model.params": 12.0 * 96 * 12288**2 + 2.0 * 131072 * 12288,
            "model.layers": 96,
            "model.hidden": 12288,
            "model.heads": 96,
            "model.kv_heads": 96,
            "model.gated_mlp": False,
            "model.ffn_hidden": 4 * 12288,
            "model.vocab": 131072,
            "model.seq_len": 4096,
            "model.global_batch": 1152,
            "model.tokens": 1152 * 4096.0,
            "model.recompute": "none",
            "parallelism.gpus": 2304,
            "parallelism.tp": 8,
            "parallelism.pp": 6,
            "parallelism.interleave": 1,
            "parallelism.microbatch": 1,
            "parallelism.zero_stage": 1,  # Megatron-Core's distributed optimizer (not the reference scenario's FSDP)
            "hardware.memory_gb": 1e6,
        }
    ).base
    assert (cfg.parallelism.overlap_dp, cfg.parallelism.overlap_tp, cfg.parallelism.overlap_pp) == (1.0, 1.0, 1.0)
    assert cfg.parallelism.sequence_parallel and cfg.compute.fused_attention
    assert cfg.compute.efficiency == SOFTWARE_PROFILES["megatron-core-2024"].efficiency_for("H100-SXM")
    assert workload(cfg).iteration_time_s / _readme_177b_seconds() == pytest.approx(1.0, abs=0.10)


@pytest.mark.parametrize(
    ("software", "source"),
    [
        ("megatron-lm-2021", "narayanan2021"),
        ("megatron-lm-2022", "korthikanti2022"),
        ("megatron-deepspeed-2022", "bigscience2022"),
        ("megatron-core-2024", "megatron_core_2024"),
    ],
)
def test_each_profiles_efficiency_fits_its_sources_published_times(software, source):
    """The profile's efficiency is the one that best fits its source's published iteration times (least squares
    in log time over all its cases, on the validation's 0.001 grid), and lies in the leave-one-out range."""
    profile = SOFTWARE_PROFILES[software]
    gpu = {case.machine["hardware.gpu"] for case in sv.STEP_CASES if case.source == source}
    assert gpu == {profile.reference_gpu} and profile.measured_on(profile.reference_gpu)
    cases = [case for case in sv.STEP_CASES if case.source == source]
    measured = np.array([case.measured_s for case in cases])
    curves = np.array([sv.iteration_times(case) for case in cases])
    squares = (np.log(curves / measured[:, None]) ** 2).sum(axis=0)
    assert sv.EFFICIENCY_GRID[int(np.argmin(squares))] == pytest.approx(profile.efficiency_for(profile.reference_gpu))
    loo = [r.efficiency for r in sv.leave_one_out(tuple(cases))]
    assert min(loo) <= profile.efficiency_for(profile.reference_gpu) <= max(loo)


def test_explicit_keys_win_and_the_aggregate_model_takes_no_profile():
    cfg = load_scenario(overrides={"compute.software": "megatron-deepspeed-2022", "parallelism.overlap_dp": 0.5}).base
    profile = profile_of(cfg)
    assert profile.pipeline_engine == "blocking-1f1b" and profile.unquantified  # says what no source gives
    assert cfg.parallelism.overlap_dp == 0.5 and cfg.parallelism.overlap_tp == profile.overlap_tp == 0.0
    assert not cfg.parallelism.sequence_parallel and not cfg.compute.fused_attention
    # The H100 was not measured with this software: it borrows the A100's value.
    assert cfg.compute.efficiency == dict(profile.efficiency)["A100-80GB"] and not profile.measured_on("H100-SXM")
    aggregate = load_scenario(overrides={"compute.step_model": "aggregate", "compute.software": "megatron-lm-2021"})
    schema = load_scenario(overrides={"compute.step_model": "aggregate", "compute.efficiency": 0.5})
    assert dataclasses.replace(aggregate.base.compute, software="x", efficiency=0.5) == dataclasses.replace(
        schema.base.compute, software="x"
    )
    assert aggregate.base.parallelism == schema.base.parallelism


def test_megatron_core_buckets_grow_with_the_data_parallel_degree():
    """Megatron-Core's DistributedDataParallelConfig: max(40,000,000, 1,000,000 x dp) parameters."""
    profile = SOFTWARE_PROFILES["megatron-core-2024"]
    assert profile.reduce_bucket(8) == 40_000_000 and profile.reduce_bucket(128) == 128_000_000


@pytest.mark.parametrize(("scenario", "noted"), [('[compute]\nstep_model = "operators"\n', True), ("", True),
                                                 ("[model]\nvocab = 32000\n", False),
                                                 ('[compute]\nstep_model = "aggregate"\n', False)])  # fmt: skip
def test_a_result_without_a_vocabulary_says_the_output_layer_is_not_modelled(scenario, noted):
    text = vocabulary_note(xr.Dataset(attrs={"scenario_toml": scenario + "[run]\nruns = 2\n"}))
    assert bool(text) == noted and (not noted or "not modelled" in text)
