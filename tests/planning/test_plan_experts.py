"""The planner over a mixture of experts' expert layout (issue 41 item 5): ``[search] ep`` and ``expert_tp``.

The enumeration is checked against a brute force over every combination written here from Megatron-Core's
rules (ep divides the experts; expert_tp x ep divides the tp x cp x dp ranks of a pipeline stage), the screen
against ``mcsim run``'s workload of the same candidate (bit for bit), and the plan's file, report and
recommended scenario for the expert layout they record.
"""

from __future__ import annotations

import copy
import itertools
import tomllib

import numpy as np
import pytest
from builders import write_toml

import mcsim
from mcsim.cli.main import main
from mcsim.io.netcdf import open_results
from mcsim.model.workload import workload
from mcsim.planning.candidates import candidate_config, enumerate_candidates
from mcsim.planning.dataset import layout_label
from mcsim.planning.plan_file import plan_from_dict
from mcsim.planning.screen import screen
from mcsim.report.plan.files import recommended_toml
from mcsim.scenario.config import scenario_from_dict

# An OLMoE-1B-7B-like model (arXiv 2409.02060: 16 layers, hidden 2048, 64 experts of width 1024, top-8,
# 6.9B total parameters), shortened in tokens so that a plan's runs take milliseconds.
MOE_PLAN = {
    "name": "moe-plan",
    "model": {
        "params": 6.9e9,
        "layers": 16,
        "hidden": 2048,
        "heads": 16,
        "seq_len": 4096,
        "tokens": 2e10,
        "global_batch": 512,
        "vocab": 50304,
        "gated_mlp": True,
        "dropout": False,
        "experts": 64,
        "experts_per_token": 8,
        "expert_ffn_hidden": 1024,
    },
    "hardware": {"gpus_per_node": 8},
    "failures": [{"name": "gpu", "scope": "gpu", "mtbf_hours": 20000.0, "recovery_minutes": 10.0}],
    "run": {"seed": 3, "mode": "fast"},
    "search": {
        "gpu_types": ["H100-SXM"],
        "gpus": [8, 16, 32],
        "tp": [1, 2, 4],
        "pp": [1, 2, 4],
        "cp": [1, 2],
        "ep": [1, 2, 4, 8, 16, 32, 128],
        "expert_tp": [1, 2],
        "microbatch": [1, 2],
        "interleave": [1, 2],
        "recompute": ["selective"],
        "strategy": ["async"],
    },
    "plan": {"objective": "wall_time", "first_runs": 20, "max_runs": 60, "finalists": 3},
}


def _brute_force(raw: dict) -> tuple[set[tuple[int, ...]], int]:
    """Every valid (gpus, tp, pp, cp, ep, expert_tp, microbatch, interleave) of ``raw``'s search, and how many
    combinations are valid but for their expert layout: each rule written out from its source."""
    s, m = raw["search"], raw["model"]
    valid, expert_only = set(), 0
    for g, t, p, c, e, et, b, v in itertools.product(
        s["gpus"], s["tp"], s["pp"], s["cp"], s["ep"], s["expert_tp"], s["microbatch"], s["interleave"]
    ):
        if g % (t * p * c) or m["seq_len"] % c or p > m["layers"]:
            continue
        d = g // (t * p * c)
        if m["global_batch"] % (d * b) or not (v == 1 or (p > 1 and v <= m["layers"] // p)):
            continue
        if m["experts"] % e == 0 and (t * c * d) % (et * e) == 0:  # Megatron-Core's expert layout
            valid.add((g, t, p, c, e, et, b, v))
        else:
            expert_only += 1
    return valid, expert_only


def test_enumeration_keeps_exactly_the_valid_expert_layouts():
    plan = plan_from_dict(MOE_PLAN)
    cand = enumerate_candidates(plan)
    names = ("gpus", "tp", "pp", "cp", "ep", "expert_tp", "microbatch", "interleave")
    # sequence parallelism without tensor parallelism, and ZeRO 1 without data- or context-parallel ranks,
    # leave one copy each; with one value each searched here, every layout is one candidate
    got = [tuple(int(getattr(cand, n)[i]) for n in names) for i in range(len(cand))]
    valid, expert_only = _brute_force(MOE_PLAN)
    assert len(got) == len(set(got)) and set(got) == valid
    assert {128} - set(cand.ep.tolist()) == {128}  # ep 128 > 64 experts never survives
    assert {1, 2, 4, 8, 16, 32} == set(cand.ep.tolist())
    assert cand.expert_layout_rejected == expert_only > 0
    assert np.all(cand.dp == cand.gpus // (cand.tp * cand.pp * cand.cp))


def test_zero_stages_are_searched_where_expert_data_parallel_ranks_shard_the_experts():
    # 8 GPUs, tp 8: no data-parallel rank, but edp = 8 / ep ranks hold the same experts and ZeRO shards their
    # state (docs/model.md, "Mixture of experts"): ZeRO 1 is a choice at ep 1 and 2, a copy at ep 8 (edp 1).
    raw = copy.deepcopy(MOE_PLAN)
    raw["search"].update(gpus=[8], tp=[8], pp=[1], cp=[1], ep=[1, 2, 8], expert_tp=[1], microbatch=[1])
    raw["search"].update(interleave=[1], zero_stage=[0, 1], sequence_parallel=[True])
    plan = plan_from_dict(raw)
    cand = enumerate_candidates(plan)
    assert sorted(zip(cand.ep.tolist(), cand.zero_stage.tolist(), strict=True)) == [
        (1, 0),
        (1, 1),
        (2, 0),
        (2, 1),
        (8, 0),
    ]
    scr = screen(plan, cand)
    for ep in (1, 2):
        zero0, zero1 = (int(np.flatnonzero((cand.ep == ep) & (cand.zero_stage == z))[0]) for z in (0, 1))
        assert scr.memory_per_gpu_gb[zero1] < scr.memory_per_gpu_gb[zero0]


def test_a_dense_plan_searches_no_expert_layout():
    dense = copy.deepcopy(MOE_PLAN)
    for key in ("experts", "experts_per_token", "expert_ffn_hidden"):
        del dense["model"][key]
    dense["model"]["params"] = 1.5e9
    dense["search"] = {k: v for k, v in dense["search"].items() if k not in ("ep", "expert_tp")}
    cand = enumerate_candidates(plan_from_dict(dense))
    assert set(cand.ep.tolist()) == set(cand.expert_tp.tolist()) == {1} and cand.expert_layout_rejected == 0
    dense["search"]["ep"] = [1]  # the dense default, allowed
    assert len(enumerate_candidates(plan_from_dict(dense))) == len(cand)


def test_the_screen_and_mcsim_run_compute_the_same_moe_iteration_bit_for_bit():
    plan = plan_from_dict(MOE_PLAN)
    cand = enumerate_candidates(plan)
    scr = screen(plan, cand)
    rng = np.random.default_rng(5)
    moe = np.flatnonzero(cand.ep > 1)
    picked = np.concatenate([rng.choice(moe, 120, replace=False), rng.choice(len(cand), 30, replace=False)])
    for i in picked:
        cfg = candidate_config(plan, cand, int(i))
        assert (cfg.parallelism.ep, cfg.parallelism.expert_tp) == (int(cand.ep[i]), int(cand.expert_tp[i]))
        wl = workload(cfg)
        assert scr.iteration_time_s[i] == wl.iteration_time_s  # bit for bit
        assert scr.memory_per_gpu_gb[i] == wl.memory_per_gpu_gb


def test_the_screen_equals_what_mcsim_run_writes_for_moe_candidates():
    # Three expert-parallel candidates written as scenario files' tables (as a user would), run by mcsim run's
    # API: the iteration time and memory it writes are the screen's, bit for bit.
    plan = plan_from_dict(MOE_PLAN)
    cand = enumerate_candidates(plan)
    scr = screen(plan, cand)
    fits = np.flatnonzero((scr.rejection != 5) & (cand.ep > 1))
    chosen = [fits[0], fits[np.flatnonzero(cand.expert_tp[fits] == 2)[0]], fits[-1]]
    for i in chosen:
        cfg = candidate_config(plan, cand, int(i))
        raw = {k: v for k, v in copy.deepcopy(MOE_PLAN).items() if k not in ("search", "plan")}
        raw["hardware"]["gpu"] = cfg.hardware.gpu
        raw["parallelism"] = {
            name: getattr(cfg.parallelism, name)
            for name in ("gpus", "tp", "pp", "cp", "ep", "expert_tp", "microbatch", "interleave")
        }
        raw["model"]["recompute"] = cfg.model.recompute
        raw["checkpoint"] = {"strategy": cfg.checkpoint.strategy}
        raw["run"] = {"runs": 2, "seed": 0}
        ds = mcsim.simulate(scenario_from_dict(raw, "one.toml"), progress=False)
        assert raw["parallelism"]["ep"] > 1
        assert float(ds["iteration_time"]) == scr.iteration_time_s[i]
        assert float(ds["memory_per_gpu"]) == scr.memory_per_gpu_gb[i]


def test_the_plan_records_the_expert_layout(tmp_path):
    raw = copy.deepcopy(MOE_PLAN)
    raw["search"].update(gpus=[16], tp=[1, 2], pp=[1], cp=[1], ep=[4, 8, 32], expert_tp=[1], interleave=[1])
    out = tmp_path / "moe.nc"
    assert main(["plan", str(write_toml(raw, tmp_path / "moe.toml")), "-o", str(out), "--quiet"]) == 0
    ds = open_results(out)
    cand = enumerate_candidates(plan_from_dict(raw))
    assert ds["ep"].values.tolist() == cand.ep.tolist() and ds["expert_tp"].values.tolist() == cand.expert_tp.tolist()
    # t d = 16 ranks a stage with tp 1 or 2: ep 32 never fits (2 tp x 2 microbatch layouts left out)
    assert 32 not in ds["ep"].values and ds.attrs["candidates_expert_layout_rejected"] == 4
    best = int(ds["recommended"])
    ep = int(ds["ep"][best])
    assert f", ep {ep}," in layout_label(ds, best)
    scenario = tomllib.loads(recommended_toml(ds))
    assert scenario["parallelism"]["ep"] == ep and scenario["parallelism"]["expert_tp"] == 1
    scenario["run"] = {**scenario.get("run", {}), "runs": 2}
    run = mcsim.simulate(scenario_from_dict(scenario, "recommended.toml"), progress=False)
    assert float(run["iteration_time"]) == float(ds["screen_iteration_time"][best])  # mcsim run of recommended.toml
    assert main(["report", str(out), "-o", str(tmp_path / "report")]) == 0
    report = (tmp_path / "report" / "README.md").read_text()
    assert "- 4 combinations left out of the candidates, valid but for their expert layout" in report


def test_a_dense_plan_file_has_no_expert_coordinates(tmp_path):
    dense = copy.deepcopy(MOE_PLAN)
    for key in ("experts", "experts_per_token", "expert_ffn_hidden"):
        del dense["model"][key]
    dense["model"]["params"] = 1.5e9
    dense["search"] = {k: v for k, v in dense["search"].items() if k not in ("ep", "expert_tp")}
    dense["search"].update(gpus=[16], tp=[1, 2], pp=[1], cp=[1], interleave=[1])
    out = tmp_path / "dense.nc"
    assert main(["plan", str(write_toml(dense, tmp_path / "dense.toml")), "-o", str(out), "--quiet"]) == 0
    ds = open_results(out)
    assert "ep" not in ds.variables and "expert_tp" not in ds.variables
    assert "candidates_expert_layout_rejected" not in ds.attrs
    assert "ep" not in tomllib.loads(recommended_toml(ds))["parallelism"]


@pytest.mark.parametrize("key", ["ep", "expert_tp"])
def test_a_dense_model_with_an_expert_layout_searched_is_refused(key, tmp_path, capsys):
    dense = copy.deepcopy(MOE_PLAN)
    for name in ("experts", "experts_per_token", "expert_ffn_hidden"):
        del dense["model"][name]
    dense["model"]["params"] = 1.5e9
    dense["search"] = {k: v for k, v in dense["search"].items() if k not in ("ep", "expert_tp")}
    dense["search"][key] = [1, 2]
    path = write_toml(dense, tmp_path / "dense.toml")
    assert main(["plan", str(path), "-o", str(tmp_path / "o.nc"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"search.{key}: expected [1] where model.experts = 0" in err[0]
    assert not (tmp_path / "o.nc").exists()


def test_each_candidate_is_screened_with_its_own_expert_load_variation():
    # model.expert_imbalance_sigma reaches the straggler sigma as much as a rank of the candidate's ep sees it
    # (none at ep 1: mcsim.model.experts.rank_load_variation): a candidate's expected wall time in a plan that
    # searches ep = [1, 8] from a base at ep 1 equals the same candidate's in a plan based at its own ep.
    raw = copy.deepcopy(MOE_PLAN)
    raw["model"]["expert_imbalance_sigma"] = 0.5
    raw["search"] |= {"gpus": [16], "tp": [1], "pp": [1], "cp": [1], "expert_tp": [1], "microbatch": [1]}
    raw["search"] |= {"interleave": [1], "ep": [1, 8]}
    raw["parallelism"] = {"gpus": 16, "ep": 1}
    both = plan_from_dict(copy.deepcopy(raw))
    cand = enumerate_candidates(both)
    wall = screen(both, cand).wall_s
    for ep in (1, 8):
        alone = copy.deepcopy(raw)
        alone["search"]["ep"], alone["parallelism"]["ep"] = [ep], ep
        own = plan_from_dict(alone)
        i = int(np.flatnonzero(cand.ep == ep)[0])
        assert screen(own, enumerate_candidates(own)).wall_s[0] == wall[i]
    assert wall[cand.ep == 8][0] > wall[cand.ep == 1][0]  # ep 8 ranks wait for the busiest's varying load
