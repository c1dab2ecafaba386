"""The mixture-of-experts model (docs/model.md, "Mixture of experts") against counts worked out by hand
and published parameter counts."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from mcsim.model import experts
from mcsim.model.device_rates import Link
from mcsim.model.layouts import RECOMPUTE_FULL, RECOMPUTE_SELECTIVE
from mcsim.model.operators import layout_work, shape_of
from mcsim.model.stragglers import straggler_sigma
from mcsim.model.workload import layouts_of, parallel_degrees, workload, workload_arrays
from mcsim.scenario.config import load_scenario, scenario_from_dict
from mcsim.scenario.consistency import active_parameters, parameter_counts

# DeepSeek-V3 (arXiv 2412.19437 §4.2 and its Hugging Face config.json): 61 layers, the first 3 dense
# (MLP 18,432), hidden 7,168, 128 heads, vocabulary 129,280 (untied), 256 routed experts and 1 shared of
# width 2,048 per MoE layer, 8 per token, SwiGLU; 671B total, 37B active. Multi-head latent attention
# has no key in [model]: it is approximated as 128-head attention (4 h^2 = 205.5M parameters a layer
# against MLA's 187.1M: q 7168x1536 + 1536x128x192, kv 7168x576 + 512x128x256, out 128x128x7168),
# 1.1B (0.17 %) more in all.
DEEPSEEK_V3 = {
    "params": 671e9,
    "layers": 61,
    "hidden": 7168,
    "heads": 128,
    "seq_len": 4096,
    "tokens": 14.8e12,
    "global_batch": 15360,
    "vocab": 129280,
    "ffn_hidden": 18432,
    "gated_mlp": True,
    "experts": 256,
    "experts_per_token": 8,
    "shared_experts": 1,
    "expert_ffn_hidden": 2048,
    "first_dense_layers": 3,
}
# Mixtral 8x7B (Mistral AI, "Mixtral of experts", 2023-12-11: 46.7B total, 12.9B per token; its
# config.json): 32 layers, hidden 4,096, 32 heads, 8 key/value heads, 8 experts of width 14,336, 2 per
# token, SwiGLU, vocabulary 32,000 (untied).
MIXTRAL = {
    "params": 46.7e9,
    "layers": 32,
    "hidden": 4096,
    "heads": 32,
    "kv_heads": 8,
    "seq_len": 4096,
    "tokens": 1e12,
    "global_batch": 1024,
    "vocab": 32000,
    "gated_mlp": True,
    "experts": 8,
    "experts_per_token": 2,
    "expert_ffn_hidden": 14336,
}
# A small MoE for the operator counts: 8 layers of hidden 1,024, 8 experts of width 512, 2 per token,
# one shared expert, no vocabulary; the parameters its shape counts (attention 4h^2 + norms 4h, router
# 8h, 9 experts of 3 x 1024 x 512).
SMALL_LAYER = 4 * 1024**2 + 4 * 1024 + 8 * 1024 + 9 * 3 * 1024 * 512
SMALL = {
    "params": 8 * SMALL_LAYER,
    "layers": 8,
    "hidden": 1024,
    "heads": 8,
    "seq_len": 1024,
    "tokens": 1e9,
    "global_batch": 64,
    "gated_mlp": True,
    "dropout": False,
    "recompute": "none",
    "experts": 8,
    "experts_per_token": 2,
    "shared_experts": 1,
    "expert_ffn_hidden": 512,
    "expert_imbalance": 1.0,
}


def _config(model: dict, **parallelism):
    raw = {
        "name": "moe",
        "model": dict(model),
        "hardware": {"gpu": "H100-SXM", "gpus_per_node": 8},
        "parallelism": {"gpus": 16, **parallelism},
        "failures": [{"name": "gpu", "mtbf_hours": 50000}],
    }
    return scenario_from_dict(raw).base


def _model(raw: dict, **changes):
    return dataclasses.replace(_config(raw, gpus=2048).model, **changes)


def test_deepseek_v3_total_and_active_parameters():
    mdl = _model(DEEPSEEK_V3)
    counts = parameter_counts(mdl)
    one_expert = 3 * 7168 * 2048
    assert counts.moe_layers == 58 and counts.one_expert == one_expert
    assert counts.routed == 58 * 256 * one_expert
    assert counts.shape_total == pytest.approx(671e9, rel=0.005)  # the MLA approximation: +0.17 %
    # Active: every parameter but the 248 of 256 routed experts a token is not sent to. Counted exactly
    # from the published config this is 37.55B; DeepSeek writes 37B.
    active = active_parameters(mdl)
    assert active == 671e9 - 58 * 256 * one_expert * (1 - 8 / 256)
    assert 37e9 <= active < 38e9


def test_mixtral_total_and_active_parameters():
    mdl = _model(MIXTRAL)
    h = 4096
    layer = h * (h + 2 * 1024) + h * h + 4 * h + 8 * h + 8 * 3 * h * 14336
    assert parameter_counts(mdl).shape_total == 32 * layer + 2 * 32000 * h
    assert parameter_counts(mdl).shape_total == pytest.approx(46.7e9, abs=0.05e9)
    assert active_parameters(mdl) == pytest.approx(12.9e9, abs=0.05e9)


def test_moe_layer_operators_against_a_hand_count():
    cfg = _config(SMALL, gpus=8, ep=4)
    lay = layouts_of([cfg])
    deg = parallel_degrees(lay, cfg.model.global_batch)
    work = layout_work(cfg.model, lay, deg, False)
    moe = experts.moe_work(cfg.model, lay, deg, work)
    T, h, F = 1024.0, 1024.0, 512.0  # one sequence per microbatch, tp = cp = 1
    router, shared_in, shared_out = (float(g[0]) for g in moe.layer.gemm_flops[4:])
    assert router == 2 * T * h * 8
    assert (shared_in, shared_out) == (2 * T * h * 2 * F, 2 * T * F * h)
    routed_in, routed_out = (float(f[0]) for f in moe.routed_flops)
    assert (routed_in, routed_out) == (2 * T * 2 * h * 2 * F, 2 * T * 2 * F * h)  # k = 2, imbalance 1
    assert float(moe.local_experts[0]) == 2.0  # 8 experts over ep = 4
    # Model FLOPs per sequence: 3 x (attention 8 T h^2 + 4 T^2 h, router, shared, 2 routed experts).
    attention = 8 * T * h * h + 4 * T * T * h
    forward = 8 * (attention + router + 3 * (2 * T * h * F) + 2 * 3 * (2 * T * h * F))
    model_flops, _ = experts.moe_flops_per_sequence(cfg.model, work.shape, lay.recompute, False)
    assert model_flops == pytest.approx(3 * forward, rel=1e-12)
    assert workload(cfg).model_flops == pytest.approx(64 * 3 * forward, rel=1e-12)


def test_full_recomputation_repeats_the_active_forward():
    cfg = _config(SMALL, gpus=8)
    shape = shape_of(cfg.model)
    model_flops, again = experts.moe_flops_per_sequence(
        cfg.model, shape, np.array([RECOMPUTE_FULL, RECOMPUTE_SELECTIVE]), False
    )
    T, h = 1024.0, 1024.0
    assert again[0] == pytest.approx(model_flops / 3, rel=1e-12)  # no vocabulary: the forward
    assert again[1] == pytest.approx(8 * 4 * T * T * h, rel=1e-12)  # QK^T and AV of 8 layers


def test_a_dense_model_is_computed_as_before():
    cfg = _config({k: v for k, v in SMALL.items() if "expert" not in k} | {"params": 1e8}, gpus=8)
    assert active_parameters(cfg.model) == cfg.model.params
    assert straggler_sigma(dataclasses.replace(cfg, stragglers=dataclasses.replace(cfg.stragglers, sigma=0.03))) == 0.03
    moved = dataclasses.replace(cfg, parallelism=dataclasses.replace(cfg.parallelism, overlap_ep=0.7))
    assert workload(moved) == workload(cfg)  # the expert overlap means nothing to a dense model


def _calculon(gflop: float) -> float:
    """Calculon's matrix efficiency at ``gflop`` (its knots 0, 1, 16, 128 GFLOP: 0.1, 0.6, 0.9, 0.95),
    interpolated in log(1 + GFLOP)."""
    knots, values = [0.0, 1.0, 16.0, 128.0], [0.1, 0.6, 0.9, 0.95]
    return float(np.interp(math.log1p(gflop), [math.log1p(k) for k in knots], values))


@pytest.mark.parametrize("ep", [1, 2, 8])
def test_expert_parallelism_raises_the_one_expert_gemm_and_lowers_its_time(ep):
    cfg = _config(SMALL, gpus=8, ep=ep)
    lay = layouts_of([cfg])
    deg = parallel_degrees(lay, 64)
    moe = experts.moe_work(cfg.model, lay, deg, layout_work(cfg.model, lay, deg, False))
    peak = np.array([989e12])
    seconds = float(experts.routed_forward_s(moe, peak, 1.0, 1.0)[0])
    T, h, F = 1024.0, 1024.0, 512.0
    local = 8 / ep
    expected = sum(
        local * (flops / local) / (989e12 * _calculon(flops / local / 1e9))
        for flops in (2 * T * 2 * h * 2 * F, 2 * T * 2 * F * h)
    )
    assert seconds == pytest.approx(expected, rel=1e-12)
    one = float(
        experts.routed_forward_s(
            experts.moe_work(
                cfg.model, lay, dataclasses.replace(deg, ep=np.array([1])), layout_work(cfg.model, lay, deg, False)
            ),
            peak,
            1.0,
            1.0,
        )[0]
    )
    assert seconds <= one


def test_all_to_all_bytes_and_time_by_hand():
    cfg = _config(SMALL, gpus=16, ep=8)
    lay = layouts_of([cfg])
    deg = parallel_degrees(lay, 64)
    moe = experts.moe_work(cfg.model, lay, deg, layout_work(cfg.model, lay, deg, False))
    # ep = 8 at stride 1 on nodes of 4 GPUs: 4 of the group in each node.
    deg4 = deg
    link, local = experts.expert_link(300e9, 45e9, 5e-6, deg4, 4)
    assert int(local[0]) == 4 and not bool(link.inside[0])
    seconds, intra, inter = experts.all_to_all(moe, deg4, link, local)
    message = 1024 * 2 * 1024 * 2.0  # T k h BF16 elements of one GPU, imbalance 1
    assert float(intra[0]) == message * 3 / 8 and float(inter[0]) == message * 4 / 8
    assert float(seconds[0]) == pytest.approx(max(message * 3 / 8 / 300e9, message * 4 / 8 / 45e9) + 5e-6)
    # Inside one node of 8: 7/8 of the message over NVLink.
    link8, local8 = experts.expert_link(300e9, 45e9, 5e-6, deg4, 8)
    seconds8, intra8, inter8 = experts.all_to_all(moe, deg4, link8, local8)
    assert (float(intra8[0]), float(inter8[0])) == (message * 7 / 8, 0.0)
    assert isinstance(link8, Link) and float(seconds8[0]) == pytest.approx(message * 7 / 8 / 300e9 + 5e-6)
    assert list(experts.all_to_alls(np.array([0, RECOMPUTE_FULL]))) == [4.0, 6.0]


def test_memory_per_gpu_falls_with_expert_parallelism():
    memory = [workload(_config(SMALL, gpus=8, ep=ep)).memory_per_gpu_gb for ep in (1, 2, 4, 8)]
    assert memory == sorted(memory, reverse=True) and len(set(memory)) == 4
    # The experts' model state by hand (ZeRO-1, Megatron's 6 + 12/d bytes a parameter; d = edp = 8 / ep):
    # 8 MoE layers x 8 experts x 3 x 1024 x 512 parameters over ep GPUs.
    routed = 8 * 8 * 3 * 1024 * 512
    expected_drop = routed * (6 + 12 / 8) - routed / 8 * (6 + 12 / 1)
    assert (memory[0] - memory[3]) * 1e9 == pytest.approx(expected_drop, rel=0.02)  # activations move a little


def test_imbalance_scales_the_busiest_rank_and_capacity_caps_it():
    mdl = _model(SMALL, expert_imbalance=1.6)
    assert float(experts.rank_imbalance(mdl, np.array([8]))[0]) == pytest.approx(1.6)  # one expert a rank
    assert float(experts.rank_imbalance(mdl, np.array([1]))[0]) == pytest.approx(1.0)  # every expert on each
    # Two experts a rank: the busiest (1.6) and one of the others, which share 8 - 1.6 evenly.
    assert float(experts.rank_imbalance(mdl, np.array([4]))[0]) == pytest.approx((1.6 + 6.4 / 7) / 2)
    capped = dataclasses.replace(mdl, expert_imbalance=3.0, expert_capacity_factor=1.25)
    assert experts.expert_imbalance(capped) == 1.25
    # Wang et al. 2024 (arXiv 2408.15664) Table 2, MaxVio_global: aux loss 0.72 (1B) and 0.52 (3B),
    # loss-free 0.04 and 0.04.
    assert experts.expert_imbalance(dataclasses.replace(mdl, expert_imbalance=0.0)) == pytest.approx(1.62)
    free = dataclasses.replace(mdl, expert_imbalance=0.0, router_balancing="loss-free")
    assert experts.expert_imbalance(free) == pytest.approx(1.04)


def test_the_default_imbalance_stays_within_experts_over_top_k():
    # An expert gets each token at most once, so its load is at most E / k times the mean: with top-8 of
    # 8 experts every expert gets every token (no imbalance), with top-4 of 8 at most twice the mean
    # load. The sourced default (1.62 with an auxiliary loss) may not exceed that bound.
    every = _model(SMALL, experts_per_token=8, expert_imbalance=0.0)
    assert experts.expert_imbalance(every) == 1.0
    assert float(experts.rank_imbalance(every, np.array([8]))[0]) == pytest.approx(1.0)
    half = _model(SMALL, experts_per_token=4, expert_imbalance=0.0)
    assert experts.expert_imbalance(half) == pytest.approx(1.62)  # below the bound of 2: the default
    five = _model(SMALL, experts_per_token=5, expert_imbalance=0.0)
    assert experts.expert_imbalance(five) == pytest.approx(8 / 5)


def test_imbalance_lengthens_the_routed_experts_time():
    def routed(imbalance):
        cfg = _config(SMALL | {"expert_imbalance": imbalance}, gpus=8, ep=8)
        return workload(cfg).t_comp_s

    balanced, busy, capped = routed(1.0), routed(2.0), None
    assert busy > balanced
    capped_cfg = _config(SMALL | {"expert_imbalance": 2.0, "expert_capacity_factor": 1.0}, gpus=8, ep=8)
    capped = workload(capped_cfg).t_comp_s
    assert capped == balanced


@pytest.mark.parametrize(
    "ep, seen",
    # a rank of n = 8 / ep experts sees (8 - n) / (7 n) of one expert's load variance: every expert on each
    # rank (ep 1) none of it, four (ep 2) 1/7, one (ep 8) all of it
    [(1, 0.0), (2, math.sqrt(1.0 / 7.0)), (8, 1.0)],
)
def test_expert_imbalance_sigma_adds_to_the_straggler_sigma_as_a_rank_sees_it(ep, seen):
    cfg = _config(SMALL | {"expert_imbalance_sigma": 0.2}, gpus=8, ep=ep)
    cfg = dataclasses.replace(cfg, stragglers=dataclasses.replace(cfg.stragglers, sigma=0.03))
    T, h, F = 1024.0, 1024.0, 512.0
    routed = 2 * 3 * 2 * T * h * F
    layer = 8 * T * h * h + 4 * T * T * h + 2 * T * h * 8 + 3 * 2 * T * h * F + routed
    share = routed / layer
    assert straggler_sigma(cfg) == pytest.approx(math.sqrt(0.03**2 + (share * seen * 0.2) ** 2), rel=1e-12)
    assert experts.rank_load_variation(cfg.model, ep) == pytest.approx(seen, rel=1e-12, abs=1e-15)


def test_a_ranks_load_variation_is_sampling_without_replacement():
    """Monte Carlo of the finite-population correction: 64 experts' loads drawn per iteration (lognormal,
    normalised to a fixed total), a rank holding 16 of them at random: the variance of the rank's mean
    load is the experts' (population) variance x (E - n) / ((E - 1) n). 20,000 draws, seed 7; the
    tolerance is 4 standard errors of a variance estimated from 20,000 draws (sqrt(2 / 20,000) = 1 %,
    widened for the lognormal's kurtosis to 1.5 %)."""
    rng = np.random.default_rng(7)
    E, n, draws = 64, 16, 20_000
    loads = rng.lognormal(0.0, 0.1, size=(draws, E))
    loads = loads / loads.mean(axis=1, keepdims=True)
    ranks = np.array([rng.permutation(E)[:n] for _ in range(draws)])
    rank_mean = np.take_along_axis(loads, ranks, axis=1).mean(axis=1)
    population = loads.var(axis=1).mean()
    factor = experts.rank_load_variation(_model(SMALL, experts=E, experts_per_token=2), E // n) ** 2
    assert rank_mean.var() / population == pytest.approx(factor, rel=4 * 0.015)


def test_aggregate_model_counts_six_active_parameters_per_token():
    cfg = _config(SMALL, gpus=8)
    cfg = dataclasses.replace(cfg, compute=dataclasses.replace(cfg.compute, step_model="aggregate"))
    arrays = workload_arrays(cfg, layouts_of([cfg]))
    active = 8 * SMALL_LAYER - 8 * 6 * 3 * 1024 * 512
    assert float(arrays.model_flops[0]) == pytest.approx(6 * active * 64 * 1024, rel=1e-12)


def test_moe_layers_per_pipeline_gpu_follow_the_dense_prefix_and_the_interval():
    mdl = _model(SMALL, first_dense_layers=4)  # layers 0-3 dense, 4-7 MoE
    assert experts.gpu_layer_kinds(mdl, 2, 1) == [(4, 0), (4, 4)]
    # Interleaved: chunks [0, 1] [2, 3] [4, 5] [6, 7] on GPUs 0, 1, 0, 1.
    assert experts.gpu_layer_kinds(mdl, 2, 2) == [(4, 2), (4, 2)]
    every_other = _model(SMALL, moe_layer_interval=2)  # layers 0, 2, 4, 6 MoE
    assert experts.gpu_layer_kinds(every_other, 4, 1) == [(2, 1)] * 4
    # Four stages, the first two dense: the busiest other GPU is stage 2 (both its layers MoE).
    stages = experts.expert_stages_of(mdl, np.array([4]), np.array([1]))
    assert (stages.first[0], stages.last[0], stages.busiest_layers[0], stages.busiest_moe[0]) == (0, 2, 2, 2)


def test_the_pipeline_waits_for_the_stage_with_the_moe_layers():
    # Two stages of 4 layers. With the first 4 dense (MLP of 512: faster than a MoE layer here) the second
    # stage sets the pace and the dense one only fills and drains: the same paced time as all-MoE, a
    # shorter bubble.
    dense_layer = 4 * 1024**2 + 4 * 1024 + 3 * 1024 * 512
    half = _config(
        SMALL | {"first_dense_layers": 4, "ffn_hidden": 512, "params": 4 * (dense_layer + SMALL_LAYER)}, gpus=8, pp=2
    )
    whole = _config(SMALL, gpus=8, pp=2)
    mixed, moe_only = workload(half), workload(whole)
    assert mixed.bubble_s < moe_only.bubble_s
    assert mixed.t_comp_s == pytest.approx(moe_only.t_comp_s, rel=0.01)  # the optimizer steps differ a little


# OLMoE-1B-7B as the shipped scenario olmoe-gh200-ep states it (Megatron-DeepSpeed: a loop over the local
# experts): 64 experts, SwiGLU, 16 layers, all MoE; 32 GPUs, global batch 1,024 of microbatch 1 -> 32
# microbatches a GPU. Kernels of the loop per MoE layer and microbatch, from DeepSpeed-MoE's
# Experts.forward and Megatron-DeepSpeed's ParallelMLP (SwiGLU): forward per expert 2 GEMMs + SiLU +
# product, backward per expert 4 GEMMs + the product's 2 gradients + SiLU's backward + the chunk's gradient
# joined; one torch.cat forward, one join backward.
OLMOE_MICROBATCHES, OLMOE_MOE_LAYERS = 32, 16


def _olmoe(ep: int, **compute):
    sets = [f"parallelism.ep={ep}"] + [f"compute.{key}={str(value).lower()}" for key, value in compute.items()]
    scenario = load_scenario("olmoe-gh200-ep", overrides=sets)
    return next(cfg for cfg in scenario.configs if cfg.parallelism.ep == ep)


def _iteration_s(cfg) -> float:
    w = workload(cfg)
    return w.t_comp_s + w.bubble_s + w.tp_comm_s + w.pp_comm_s + w.dp_comm_s


@pytest.mark.parametrize(
    ("local", "gated", "forward", "backward"), [(64, True, 257, 513), (16, True, 65, 129), (8, False, 25, 41)]
)
def test_expert_loop_kernels_by_hand(local, gated, forward, backward):
    # gated: 64 x (2 + 2) + 1 = 257, 64 x (4 + 4) + 1 = 513; plain (fused bias-GELU): 8 x 3 + 1, 8 x 5 + 1
    counts = experts.loop_kernels(np.array([float(local)]), gated)
    assert (float(counts[0][0]), float(counts[1][0])) == (forward, backward)


def test_host_bound_expert_loop_at_ep_1_costs_the_launches_in_closed_form():
    # Host-bound at both launch times, so each MoE layer and microbatch takes (257 + 513) launches:
    # 20 us - 10 us more is 32 x 16 x 770 x 10 us = 3.9424 s more per iteration.
    slow, fast = (_iteration_s(_olmoe(1, kernel_launch_us=us)) for us in (20.0, 10.0))
    assert slow - fast == pytest.approx(OLMOE_MICROBATCHES * OLMOE_MOE_LAYERS * 770 * 10e-6, rel=1e-9)
    # ... and the MoE layers alone take at least the launches: 32 x 16 x 770 x 10 us = 3.94 s
    assert fast >= OLMOE_MICROBATCHES * OLMOE_MOE_LAYERS * 770 * 10e-6


def test_the_host_wait_counts_as_waiting_not_computing():
    loop, grouped = workload(_olmoe(1)), workload(_olmoe(1, grouped_expert_gemm=True))
    assert loop.t_comp_s == grouped.t_comp_s
    assert loop.comm_time_s > grouped.comm_time_s


def test_no_host_floor_at_ep_4_for_olmoe():
    # 16 local experts of 4 x the tokens: 65 and 129 launches (0.65 and 1.29 ms at 10 us) take less
    # than the GPU's GEMMs, so the loop costs what one grouped GEMM does, exactly.
    assert _iteration_s(_olmoe(4)) == _iteration_s(_olmoe(4, grouped_expert_gemm=True))


def test_a_grouped_expert_gemm_is_today_s_time_whatever_the_launch_time():
    at = {us: _iteration_s(_olmoe(1, grouped_expert_gemm=True, kernel_launch_us=us)) for us in (5.0, 20.0, 1e4)}
    assert at[5.0] == at[20.0] == at[1e4]


def test_software_profiles_set_the_grouped_gemm_and_the_launch_time():
    assert _olmoe(1).compute.grouped_expert_gemm is False  # megatron-deepspeed-2022: DeepSpeed-MoE's loop
    assert _olmoe(1).compute.kernel_launch_us == pytest.approx(10.0)  # HTA: 5-20 us, sqrt(5 x 20)
    core = _olmoe(1, software="megatron-core-2024")
    assert core.compute.grouped_expert_gemm is True  # --moe-grouped-gemm
