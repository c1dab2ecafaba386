"""The deterministic workload model against values worked out by hand."""

from __future__ import annotations

import math

import naive
import pytest

from mcsim.model.checkpointing import checkpoint_plan, daly_interval_s
from mcsim.model.workload import workload
from mcsim.scenario.config import scenario_from_dict

# GPT-3 175B (Brown et al. 2020: 96 layers, d_model 12288, 2048 context, 300B tokens,
# batch 3.2M tokens = 1536 x 2048 sequences) on 1024 A100-80GB (312 TFLOP/s dense BF16),
# TP 8, PP 16, full recomputation, efficiency 0.5, default network (intra 900 GB/s,
# inter 50 GB/s, latency 5 us, overlap_dp 0.8, overlap_tp 0).
GPT3 = {
    "name": "gpt3-175b",
    "model": {
        "params": 175e9,
        "layers": 96,
        "hidden": 12288,
        "seq_len": 2048,
        "tokens": 300e9,
        "global_batch": 1536,
        "recompute": "full",
    },
    "hardware": {"gpu": "A100-80GB"},
    "parallelism": {"gpus": 1024, "tp": 8, "pp": 16},
    "compute": {"efficiency": 0.5, "step_model": "aggregate"},  # §2: the closed forms below
}


def _gpt3(**changes):
    raw = {k: dict(v) if isinstance(v, dict) else v for k, v in GPT3.items()}
    for key, value in changes.items():
        section, name = key.split("__")
        raw[section][name] = value
    return scenario_from_dict(raw).base


# What a GPU holds outside the formulas (docs/model.md §2b): the CUDA context (1,573 MiB, BigScience's
# A100 measurement), cuBLAS's 8 x 4 MiB workspaces and NCCL's 4 communicators x 2 connections x 16
# channels x 4 MiB; Megatron-LM's engine (the default) assumes no allocator reserve (docs/model.md §2b).
OUTSIDE_GB = (1573 + 32 + 512) * 2**20 / 1e9


def _as_read(allocated_gb: float) -> float:
    """Memory per GPU, GB, of ``allocated_gb`` in tensors."""
    return 1.0 * allocated_gb + OUTSIDE_GB


def test_gpt3_175b_by_hand():
    wl = workload(_gpt3())
    assert wl.feasible
    # dp = 1024 / (8 * 16) = 8; m = 1536 / (8 * 1) = 192 microbatches
    assert wl.dp == 8 and wl.microbatches == 192
    # I = ceil(300e9 / (1536 * 2048)) = ceil(95367.43) = 95368
    assert wl.iterations == 95368
    # F = 6 * 175e9 * 1536 * 2048 = 3.3030144e18; full recompute x 4/3 = 4.4040192e18
    assert wl.model_flops == pytest.approx(3.3030144e18, rel=1e-12)
    assert wl.hardware_flops == pytest.approx(4.4040192e18, rel=1e-12)
    # t_comp = 4.4040192e18 / (1024 * 312e12 * 0.5) = 4.4040192e18 / 1.59744e17 = 27.569231 s
    assert wl.t_comp_s == pytest.approx(27.569231, rel=1e-6)
    # bubble = 27.569231 * (16 - 1) / (1 * 192) = 2.1538462 s
    assert wl.bubble_s == pytest.approx(2.1538462, rel=1e-6)
    # TP: activations b s h 2 = 2048 * 12288 * 2 = 50,331,648 B; ring over 8 at 900 GB/s:
    # 2*7/8 * 50331648 / 900e9 + 14 * 5e-6 = 9.7867e-5 + 7e-5 = 1.67867e-4 s;
    # x 4 all-reduces x (96/16 = 6 layers) x 192 microbatches = 0.77353157 s
    assert wl.tp_comm_s == pytest.approx(0.77353157, rel=1e-6)
    # PP: 2 * 192 * 1 * (50331648 / 50e9 + 5e-6) = 384 * 1.01163e-3 = 0.38846706 s
    assert wl.pp_comm_s == pytest.approx(0.38846706, rel=1e-6)
    # DP: gradients 2 * 175e9 / 128 = 2.734375e9 B, ring over 8 at 50 GB/s:
    # 2*7/8 * 2.734375e9 / 50e9 + 14 * 5e-6 = 0.09570313 + 0.00007 = 0.09577313 s; x (1 - 0.8)
    assert wl.dp_comm_s == pytest.approx(0.019154625, rel=1e-6)
    # iteration = 27.569231 + 2.1538462 + 0.77353157 + 0.38846706 + 0.019154625 = 30.904230 s
    assert wl.iteration_time_s == pytest.approx(30.904230, rel=1e-6)
    # memory: state 175e9/128 * (6 + 12/8) = 10.253906 GB (Megatron-LM: bf16 params, fp32 grads);
    # activations (full) 2 s b h / t = 2 * 2048 * 12288 / 8 = 6.291456 MB per layer x 6 layers x
    # min(16, 192) = 0.60398 GB; the recomputed layer's rest s b h (34 + 5 a s / h - 2) / t =
    # 3,145,728 * 112 = 0.35232154 GB; in the allocator's reserve, plus context, cuBLAS and NCCL.
    assert wl.memory_per_gpu_gb == pytest.approx(_as_read(10.25390625 + 0.60397978 + 0.352321536), rel=1e-6)
    # MFU = 6 * 175e9 * 300e9 / (1024 * 312e12 * 95368 * 30.904230) = 0.33453
    assert wl.mfu_ideal == pytest.approx(0.33453025, rel=1e-6)


def test_selective_recompute_adds_attention_scores_only():
    none, sel = workload(_gpt3(model__recompute="none")), workload(_gpt3(model__recompute="selective"))
    # + 4 B s^2 h L = 4 * 1536 * 2048^2 * 12288 * 96 = 3.0399e16 FLOPs
    assert sel.hardware_flops - none.hardware_flops == pytest.approx(4 * 1536 * 2048**2 * 12288 * 96, rel=1e-12)
    assert none.hardware_flops == none.model_flops


def test_no_recompute_does_not_fit_gpt3_on_80gb():
    # Without recomputation: s b h (34 + 5 a s / h) / t per layer with a = 12288/128 = 96 heads:
    # 2048*12288*(34 + 5*96*2048/12288)/8 = 2048*12288*114/8 = 358,612,992 B per layer,
    # x 6 layers x 16 in flight = 34.426847 GB, + 10.2539 GB of state (nothing recomputed): fits in 80 GiB
    wl = workload(_gpt3(model__recompute="none"))
    assert wl.memory_per_gpu_gb == pytest.approx(_as_read(10.25390625 + 34.426847232), rel=1e-6)
    # ...but on 8 GPUs per pipeline stage of 1 x 96 layers at tp 8 it does not.
    small = workload(_gpt3(model__recompute="none", parallelism__gpus=64, parallelism__pp=1, model__global_batch=64))
    assert not small.feasible and "memory per GPU" in small.infeasible_reason


@pytest.mark.parametrize(
    "changes,key",
    [
        ({"parallelism__gpus": 1004}, "parallelism.gpus"),  # not a multiple of 8 GPUs per node
        ({"parallelism__tp": 3, "parallelism__gpus": 1032}, "parallelism.tp"),
        ({"model__global_batch": 1001}, "model.global_batch"),  # 1001 % (dp 8 x b 1) != 0
    ],
)
def test_structural_infeasibility_names_key(changes, key):
    wl = workload(_gpt3(**changes))
    assert not wl.feasible and wl.infeasible_key == key and wl.infeasible_reason


@pytest.mark.parametrize("c,m", [(10.0, 3600.0), (60.0, 11000.0), (500.0, 200.0), (1.3, 11135.0)])
def test_daly_interval(c, m):
    assert daly_interval_s(c, m) == pytest.approx(naive.daly_interval_ref(c, m), rel=1e-12)
    # Young's first-order term: close to sqrt(2CM) when C << M
    if c < 0.01 * m:
        assert daly_interval_s(c, m) == pytest.approx(math.sqrt(2 * c * m), rel=0.1)


def test_checkpoint_plan_sync_and_async():
    raw = {k: dict(v) for k, v in GPT3.items() if isinstance(v, dict)}
    raw["name"] = "gpt3"
    raw["failures"] = [{"name": "gpu", "scope": "gpu", "mtbf_hours": 1024 * 10.0}]  # system MTBF 10 h
    raw["checkpoint"] = {
        "strategy": "sync",
        "bytes_per_param": 14,
        "write_gbps_per_node": 10,
        "read_gbps_per_node": 20,
        "storage_gbps": 1000,
    }
    cfg = scenario_from_dict(raw).base
    wl = workload(cfg)
    plan = checkpoint_plan(cfg, wl)
    # S = 175e9 * 14 = 2.45e12 B; W = min(128 nodes * 10, 1000) = 1000 GB/s -> 2.45 s stall;
    # read min(128 * 20, 1000) = 1000 GB/s -> 2.45 s load.
    assert plan.stall_s == pytest.approx(2.45) and plan.write_s == 0.0 and plan.load_s == pytest.approx(2.45)
    assert plan.system_mtbf_s == pytest.approx(36000.0)
    # Daly: tau = sqrt(2 * 2.45 * 36000) * (1 + sqrt(2.45/72000)/3 + (2.45/72000)/9) - 2.45 = 419.95 s
    # = 13.59 iterations of 30.904 s -> 14
    assert plan.every_iterations == 14
    raw["checkpoint"]["strategy"] = "async"
    cfg = scenario_from_dict(raw).base
    plan = checkpoint_plan(cfg, workload(cfg))
    # async stall: S/G over d2h (A100: 25 GB/s) + 1.3 s = 2.45e12/1024/25e9 + 1.3 = 1.3957 s
    assert plan.stall_s == pytest.approx(2.45e12 / 1024 / 25e9 + 1.3)
    assert plan.write_s == pytest.approx(2.45)


@pytest.mark.parametrize(
    "layers,stages,expected",
    [
        (126, 16, [7] + [8] * 14 + [7]),  # Llama 3 405B: one layer fewer on the first and last stage
        (96, 16, [6] * 16),
        (10, 4, [2, 3, 3, 2]),
        (5, 4, [1, 1, 2, 1]),  # three stages short: first, last, then second
    ],
)
def test_stage_layers(layers, stages, expected):
    from mcsim.model.pipeline_stages import stage_layers

    assert stage_layers(layers, stages) == expected and sum(expected) == layers


def test_peak_memory_is_the_fullest_stage_and_dropout_free_is_smaller():
    # GPT-3 shapes with 94 layers on 16 stages: [5, 6 x 14, 5]. Stage 0 holds 5 x 16 = 80
    # layer-microbatches, stage 1 6 x 15 = 90 (the peak), stage 2 6 x 14 = 84.
    # Full recompute: 2 s b h / t = 2 * 2048 * 12288 / 8 = 6,291,456 B each -> 0.56623104 GB;
    # the recomputed layer's rest 352,321,536 B. State 175e9/128 * (6 + 12/8) = 10.25390625 GB.
    wl = workload(_gpt3(model__layers=94))
    assert wl.memory_per_gpu_gb == pytest.approx(_as_read(10.25390625 + (90 * 6_291_456 + 352_321_536) / 1e9))
    # Selective without dropout: 32 s b h / t instead of 34 (Korthikanti §4.1 masks removed):
    # 32 * 2048 * 12288 / 8 = 100,663,296 B x 96 layer-microbatches (6 layers x 16) = 9.6636764 GB;
    # the recomputed scores 2 a s / h s b h / t = 32 * 3,145,728 = 100,663,296 B.
    wl = workload(_gpt3(model__recompute="selective", model__dropout=False))
    assert wl.memory_per_gpu_gb == pytest.approx(_as_read(10.25390625 + 97 * 100_663_296 / 1e9), rel=1e-12)


def test_frequency_outside_gpu_range_is_infeasible_not_fatal_in_a_sweep():
    raw = {k: dict(v) if isinstance(v, dict) else v for k, v in GPT3.items()}
    raw["compute"]["freq_mhz"] = 1900.0
    raw["sweep"] = {"hardware.gpu": ["H100-SXM", "A100-80GB"]}
    configs = scenario_from_dict(raw).configs
    h100, a100 = workload(configs[0]), workload(configs[1])
    assert h100.feasible
    assert not a100.feasible and a100.infeasible_key == "compute.freq_mhz" and "1410" in a100.infeasible_reason
