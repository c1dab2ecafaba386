"""Speed and error of the planner's screen: ``.venv/bin/python benchmarks/bench_screen.py [--error]``.

Speed: enumerates and screens every candidate of a plan file (default the shipped
``scenarios/plan-llama3-70b.toml``), best of ``--repeat`` passes, and times the baseline
a user would write without the vectorised model: a Python loop calling
:func:`mcsim.model.workload.workload` (iteration time and memory only, less than the screen
computes) on ``--sample`` candidates. Both in this process, one after the other, so the
ratio holds under the machine's load even when the absolute rates do not. ``--step-model``
chooses the iteration-time model (default: both, the aggregate one first, so their rates are
measured one after the other in the same process).

MoE (``--moe``): a mixture-of-experts space (Mixtral-8x7B's shape, Jiang et al. 2024, arXiv
2401.04088: 32 layers, hidden 4096, 32 heads, 8 key/value heads, 8 experts of width 14,336, top-2,
46.7B parameters) in plan-llama3-70b's search (its GPU types, sizes, layouts, recomputation and
strategies) with ``ep`` 1, 2, 4, 8, against its dense twin (the same shape with one MLP of width
14,336 in place of the experts, the same search without ep; as many candidates as the MoE space at
ep 1 only, which isolates the MoE model's cost from the larger arrays) and plan-llama3-70b: each screened
``--repeat`` times, the three alternating, best of each; the rates' ratios hold under load (issue 41:
the screen stays at >= 100,000 candidates per second on MoE spaces).

Error (``--error``): the screen's estimates of wall time, energy and cost against the
mean of ``--runs`` simulated runs for ``--configs`` candidates of each plan (the
finalists first, then candidates that fit in memory, spread over the sizes): the
largest relative error sets the default screen margin (``mcsim.planning.plan_file.DEFAULT_MARGIN``,
docs/model.md §8).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import time
from pathlib import Path

import numpy as np

from mcsim.engine.simulate import run_task
from mcsim.model.workload import workload
from mcsim.planning.candidates import candidate_config, enumerate_candidates
from mcsim.planning.plan_file import Plan, load_plan, plan_from_dict
from mcsim.planning.pool import kept_outputs
from mcsim.planning.screen import screen
from mcsim.scenario.consistency import parameter_counts
from mcsim.scenario.toml import read_toml

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PLANS = ("plan-llama3-70b.toml", "plan-llama3-405b.toml", "plan-bloom-176b.toml", "plan-gpt3-175b.toml")


def speed(path: Path, repeat: int, sample: int, step_model: str) -> None:
    plan = load_plan(path, overrides={"compute.step_model": step_model})
    best = np.inf
    for _ in range(repeat):
        start = time.perf_counter()
        cand = enumerate_candidates(plan)
        screen(plan, cand)
        best = min(best, time.perf_counter() - start)
    rng = np.random.default_rng(0)
    picked = rng.choice(len(cand), min(sample, len(cand)), replace=False)
    configs = [candidate_config(plan, cand, int(i)) for i in picked]
    start = time.perf_counter()
    for cfg in configs:
        workload(cfg)
    loop = time.perf_counter() - start
    screen_rate, loop_rate = len(cand) / best, len(picked) / loop
    print(
        f"{path.name} [{step_model}]: {len(cand):,} candidates ({cand.enumerated:,} combinations): screen {best:.3f} s "
        f"= {screen_rate:,.0f} candidates/s (enumeration included, best of {repeat}); "
        f"Python loop over workload(): {loop_rate:,.0f} candidates/s on {len(picked):,}; "
        f"ratio {screen_rate / loop_rate:,.0f}x"
    )


# Mixtral 8x7B (Jiang et al. 2024, arXiv 2401.04088, Table 1): dim 4096, 32 layers, 32 heads, 8 kv heads,
# hidden_dim 14336, 8 experts, top-2, vocab 32000; 46.7B parameters (§2.1).
MIXTRAL_8X7B = dict(
    params=46.7e9, layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, vocab=32000, gated_mlp=True,
    dropout=False, experts=8, experts_per_token=2, expert_ffn_hidden=14336,
)  # fmt: skip
MOE_EP = [1, 2, 4, 8]


def moe_plans() -> dict[str, Plan]:
    """The MoE space, its dense twin, the MoE space at ep 1 only and plan-llama3-70b (the module docstring)."""
    raw = read_toml(ROOT / "scenarios" / "plan-llama3-70b.toml")
    moe = copy.deepcopy(raw)
    moe["name"] = "mixtral-8x7b-moe"
    moe["model"] = {key: raw["model"][key] for key in ("seq_len", "tokens", "global_batch")} | MIXTRAL_8X7B
    moe["search"]["ep"] = MOE_EP
    dense = copy.deepcopy(moe)
    dense["name"] = "mixtral-8x7b-dense-twin"
    for key in ("experts", "experts_per_token", "expert_ffn_hidden"):
        del dense["model"][key]
    del dense["search"]["ep"]
    moe_plan = plan_from_dict(moe)
    dense_model = dataclasses.replace(moe_plan.scenario.base.model, experts=0, experts_per_token=0, expert_ffn_hidden=0)
    dense["model"]["params"] = parameter_counts(dense_model).shape_total
    moe_ep1 = copy.deepcopy(moe)
    moe_ep1["search"]["ep"] = [1]
    return {
        "dense twin": plan_from_dict(dense),
        "MoE, ep 1 only": plan_from_dict(moe_ep1),
        "MoE": moe_plan,
        "plan-llama3-70b": plan_from_dict(raw),
    }


def moe_speed(repeat: int) -> None:
    """Screen rates of :func:`moe_plans`, alternating, best of ``repeat``; their ratios to the MoE space's."""
    plans = moe_plans()
    best = dict.fromkeys(plans, np.inf)
    sizes = {}
    for _ in range(repeat):
        for name, plan in plans.items():
            start = time.perf_counter()
            cand = enumerate_candidates(plan)
            screen(plan, cand)
            best[name] = min(best[name], time.perf_counter() - start)
            sizes[name] = len(cand)
    rates = {name: sizes[name] / best[name] for name in plans}
    for name in plans:
        print(
            f"{name}: {sizes[name]:,} candidates, screen {best[name]:.3f} s = {rates[name]:,.0f} candidates/s "
            f"(best of {repeat}); MoE rate / this rate: {rates['MoE'] / rates[name]:.2f}"
        )


def error(path: Path, configs: int, runs: int) -> float:
    plan = load_plan(path)
    cand = enumerate_candidates(plan)
    scr = screen(plan, cand)
    fits = np.flatnonzero(scr.rejection != 5)
    rng = np.random.default_rng(1)
    others = rng.choice(fits, min(configs, fits.size), replace=False)
    half = configs // 2
    chosen = list(dict.fromkeys([*scr.finalists[:half].tolist(), *others.tolist()]))[:configs]
    worst = 0.0
    for i in chosen:
        cfg = candidate_config(plan, cand, int(i))
        out = kept_outputs(cfg, run_task(cfg, 5, plan.scenario.run.mode, 0, runs))
        errors = [
            scr.wall_s[i] / 3600.0 / out["wall_time"].mean() - 1,
            scr.energy_j[i] / 3.6e9 / out["energy"].mean() - 1,
            scr.cost_usd[i] / out["cost"].mean() - 1,
        ]
        worst = max(worst, *(abs(e) for e in errors))
        print(
            f"  {path.name} #{i}: {cfg.hardware.gpu} x {cfg.parallelism.gpus} tp {cfg.parallelism.tp} "
            f"pp {cfg.parallelism.pp} {cfg.checkpoint.strategy}: screen/simulated - 1: wall {errors[0]:+.4f} "
            f"energy {errors[1]:+.4f} cost {errors[2]:+.4f}"
        )
    print(f"{path.name}: largest relative error {worst:.4f} over {len(chosen)} candidates x {runs} runs")
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plans", nargs="*", help="plan files (default: the shipped plans)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sample", type=int, default=2000, help="candidates in the Python-loop baseline")
    parser.add_argument(
        "--step-model",
        choices=("aggregate", "operators", "both"),
        default="both",
        help="compute.step_model of the screen (docs/model.md §2, §2b); both: one after the other",
    )
    parser.add_argument("--moe", action="store_true", help="only the MoE space against its dense twin (docstring)")
    parser.add_argument("--error", action="store_true", help="also measure the screen's error against simulation")
    parser.add_argument("--configs", type=int, default=8, help="--error: candidates per plan")
    parser.add_argument("--runs", type=int, default=200, help="--error: simulated runs per candidate")
    args = parser.parse_args()
    paths = [Path(p) for p in args.plans] or [
        ROOT / "scenarios" / name for name in DEFAULT_PLANS if (ROOT / "scenarios" / name).is_file()
    ]
    if args.moe:
        moe_speed(args.repeat)
        return
    models = ("aggregate", "operators") if args.step_model == "both" else (args.step_model,)
    for path in paths:
        for model in models:
            speed(path, args.repeat, args.sample, model)
    if args.error:
        worst = max(error(path, args.configs, args.runs) for path in paths)
        print(f"largest relative error over all plans: {worst:.4f}")


if __name__ == "__main__":
    main()
