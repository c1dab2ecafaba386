"""mcsim plan against exhaustive simulation: the recommendation must be in the true
indifference zone, found by simulating every candidate with common random numbers.

The fast space: a deadline at probability 0.9 that binds between two sizes under heavy failures. A 6.7B
model on 128, 256 or 512 H100 (48 layouts, all of which fit in memory), a GPU MTBF of 768 h (system MTBF 6 h
at 128 GPUs, 1.5 h at 512; 18-23 failures per run), 20-minute recoveries, objective cost, deadline
4.55 days at probability 0.9. Every 128-GPU candidate is the cheapest by about 9 % but finishes in
4.53-4.97 days on average: its mean meets the deadline, its 90 % quantile (4.61 days and more) does
not, so none meets the deadline (exhaustively at most 64 % of runs do). Before the pool the plan took
its finalists from the cheap 128-GPU candidates, dropped each of them when simulated, and answered
"no recommendation" although every 256- and 512-GPU candidate meets the deadline.

The second space is the same with a budget that binds instead (objective wall time, mean cost within
125,000 USD): the fastest candidates, 1.9-5 % over the budget, are inside the screening margin. Both
spaces' candidates are simulated once (their runs do not depend on the constraints or the objective).
Before the pool, the plan answered "no recommendation" on every seed of both; each test fails then.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from builders import write_toml
from plans import BUDGET_SPACE, DEADLINE_SPACE, MOE_SPACE, WRITE_SPACE

from mcsim.cli.main import main
from mcsim.engine.simulate import run_task
from mcsim.io.netcdf import open_results
from mcsim.model.run_outputs import run_outputs
from mcsim.planning.candidates import candidate_config, enumerate_candidates
from mcsim.planning.plan_file import plan_from_dict
from mcsim.planning.screen import screen

EXHAUSTIVE_RUNS = 500
EXHAUSTIVE_SEED = 1000  # not one of the plans' seeds


def simulate_every_candidate(raw: dict) -> dict[int, dict[str, np.ndarray]]:
    """Per-run outputs of every candidate of ``raw`` that fits in memory: ``EXHAUSTIVE_RUNS`` runs on the
    same streams (common random numbers)."""
    plan = plan_from_dict(raw)
    cand = enumerate_candidates(plan)
    scr = screen(plan, cand)
    outputs = {}
    for i in np.flatnonzero(scr.rejection != 5):
        cfg = candidate_config(plan, cand, int(i))
        outputs[int(i)] = run_outputs(cfg, run_task(cfg, EXHAUSTIVE_SEED, "fast", 0, EXHAUSTIVE_RUNS))
    return outputs


@pytest.fixture(scope="module")
def exhaustive() -> dict[int, dict[str, np.ndarray]]:
    """:func:`simulate_every_candidate` of DEADLINE_SPACE, which is also BUDGET_SPACE's (they differ only in
    their constraints and objective)."""
    return simulate_every_candidate(DEADLINE_SPACE)


def true_indifference_zone(raw: dict, outputs: dict[int, dict[str, np.ndarray]]) -> tuple[set[int], dict]:
    """Candidate indices inside the indifference zone of the true best, from the exhaustive runs.

    A candidate meets the deadline when its share of runs within it is >= the probability, the budget
    when its mean cost is within it; the best is the one of least mean objective among those that meet
    the constraints; the zone holds every one of those whose mean exceeds the best's by at most the
    indifference zone plus 4 standard errors of the paired difference (|z| < 4: a candidate the runs
    cannot tell from the zone's edge counts as inside).
    """
    plan = plan_from_dict(raw)
    c, name = plan.constraints, plan.objective
    assert isinstance(name, str)
    meets = []
    for i, out in outputs.items():
        ok = bool(np.all(out["completed"]))
        if c.deadline_days is not None:
            ok &= bool(np.mean(out["wall_time"] <= c.deadline_days * 24) >= c.deadline_probability)
        if c.budget_usd is not None:
            ok &= float(np.mean(out["cost"])) <= c.budget_usd
        if ok:
            meets.append(i)
    best = min(meets, key=lambda i: outputs[i][name].mean())
    delta = plan.indifference * outputs[best][name].mean()
    zone = set()
    for i in meets:
        diff = outputs[i][name] - outputs[best][name]
        se = diff.std(ddof=1) / math.sqrt(diff.size) if i != best else 0.0
        if diff.mean() <= delta + 4 * se:
            zone.add(i)
    first = min(outputs, key=lambda i: outputs[i][name].mean())
    return zone, {"fits": len(outputs), "meet": len(meets), "best": best, "unconstrained_best": first}


def _plans_in_zone(raw: dict, zone: set[int], tmp_path, seeds=(0, 1, 2)) -> int:
    """How many of the plans run with ``seeds`` recommend a member of ``zone`` (exit 0)."""
    right = 0
    for seed in seeds:
        seeded = {**raw, "run": {"seed": seed, "mode": "fast"}}
        out = tmp_path / f"{raw['name']}-{seed}.nc"
        path = write_toml(seeded, tmp_path / f"{raw['name']}-{seed}.toml")
        status = main(["plan", str(path), "-o", str(out), "--quiet"])
        right += status == 0 and int(open_results(out)["recommended"]) in zone
    return right


def test_deadline_binding_between_sizes_is_found_on_every_seed(tmp_path, exhaustive):
    zone, facts = true_indifference_zone(DEADLINE_SPACE, exhaustive)
    # The premise (exhaustive, seed 1000): the cheapest candidate misses the deadline, 32 of 48 (every one on
    # 256 or 512 GPUs) meet it.
    assert facts["fits"] == 48 and facts["meet"] == 32 and facts["unconstrained_best"] not in zone, facts
    cand = enumerate_candidates(plan_from_dict(DEADLINE_SPACE))
    assert {int(cand.gpus[i]) for i in zone} == {256}
    assert _plans_in_zone(DEADLINE_SPACE, zone, tmp_path) >= 2, sorted(zone)


def test_budget_met_only_by_the_slower_size_is_found_on_every_seed(tmp_path, exhaustive):
    # Objective wall time, mean cost within 125,000 USD. The fastest candidates (512 GPUs, 1.49-2.1 days)
    # cost 127,000-181,000 USD: the cheapest of them are 1.9-5 % over the budget, inside the 5 % screening
    # margin, and they ruled out as "dominated" every 256-GPU candidate (2.49 days and more: 67 % slower),
    # all of which meet the budget; simulated, every 512-GPU finalist is over it, and the plan answered "no
    # recommendation". The true best is a 256-GPU candidate.
    zone, facts = true_indifference_zone(BUDGET_SPACE, exhaustive)
    cand = enumerate_candidates(plan_from_dict(BUDGET_SPACE))
    assert int(cand.gpus[facts["unconstrained_best"]]) == 512 and facts["unconstrained_best"] not in zone, facts
    assert {int(cand.gpus[i]) for i in zone} == {256}
    assert _plans_in_zone(BUDGET_SPACE, zone, tmp_path) >= 2, sorted(zone)


def test_moe_expert_parallel_degree_is_chosen_as_exhaustive_simulation_chooses_it(tmp_path):
    # Issue 41 item 5: the plan's pick over ep (1 to 8) against every candidate simulated 500 times. Premise: no
    # ep-1 layout fits in memory (so the pick is among expert-parallel layouts), and the true zone leaves some
    # candidates that fit out (a choice to get wrong).
    plan = plan_from_dict(MOE_SPACE)
    cand = enumerate_candidates(plan)
    scr = screen(plan, cand)
    assert np.all(scr.rejection[cand.ep == 1] == 5) and set(cand.ep.tolist()) == {1, 2, 4, 8}
    outputs = simulate_every_candidate(MOE_SPACE)
    zone, facts = true_indifference_zone(MOE_SPACE, outputs)
    assert len(zone) < facts["fits"] and all(int(cand.ep[i]) > 1 for i in zone), facts
    assert _plans_in_zone(MOE_SPACE, zone, tmp_path) >= 2, (sorted(zone), facts)


@pytest.mark.parametrize("probability", [0.9])
def test_screen_quantile_of_the_wall_time_against_simulation(probability):
    # The screen's 90 % quantile of the wall time (gamma on the renewal variance, docs/model.md §9) against
    # the empirical quantile of 2,000 simulated runs, on the 128-GPU candidate of least cost. Tolerance:
    # 4 standard errors of the empirical quantile (sqrt(p (1 - p) / n) / density, the density from the
    # runs' histogram), and 1 % (the claim in docs/model.md §9).
    plan = plan_from_dict(DEADLINE_SPACE)
    cand = enumerate_candidates(plan)
    scr = screen(plan, cand)
    i = int(scr.ranking[0])
    assert int(cand.gpus[i]) == 128
    cfg = candidate_config(plan, cand, i)
    wall_h = run_outputs(cfg, run_task(cfg, EXHAUSTIVE_SEED, "fast", 0, 2000))["wall_time"]
    q = float(np.quantile(wall_h, probability))
    width = float(np.quantile(wall_h, probability + 0.02) - np.quantile(wall_h, probability - 0.02))
    se = math.sqrt(probability * (1 - probability) / wall_h.size) * width / 0.04
    estimate = scr.wall_quantile_s[i] / 3600.0
    assert abs(estimate - q) < 4 * se and abs(estimate / q - 1) < 0.01, (estimate, q, se)


def test_segment_variance_against_a_direct_simulation_of_the_tries():
    # Independent reference: 200,000 segments of x = 1 h under Poisson failures of mean M = 2 h, each failure
    # losing the work since the segment began (exponential truncated at x, drawn by inverting its CDF) plus a
    # fixed restart R = 10 min, tried until a try meets no failure (numpy's geometric law). Tolerance: 4
    # standard errors of the sample variance, sqrt((m4 - s^4) / n).
    from mcsim.model.reliability import segment_variance_s2

    rng = np.random.default_rng(23)
    x, m, r, n = 3600.0, 7200.0, 600.0, 200_000
    failures = rng.geometric(math.exp(-x / m), n) - 1
    total = np.full(n, x)
    lost = -m * np.log1p(-rng.random(int(failures.sum())) * -math.expm1(-x / m))
    np.add.at(total, np.repeat(np.arange(n), failures), lost + r)
    centred = total - total.mean()
    var, m4 = float(np.mean(centred**2)), float(np.mean(centred**4))
    se = math.sqrt((m4 - var**2) / n)
    assert abs(float(segment_variance_s2(x, r, m)) - var) < 4 * se, (float(segment_variance_s2(x, r, m)), var, se)


@pytest.mark.slow
def test_write_bound_space_recommends_sync_on_every_seed(tmp_path):
    plan = plan_from_dict(WRITE_SPACE)
    cand = enumerate_candidates(plan)
    outputs = simulate_every_candidate(WRITE_SPACE)
    zone, facts = true_indifference_zone(WRITE_SPACE, outputs)
    strategies = plan.search.strategy
    assert {strategies[int(cand.strategy[i])] for i in zone} == {"sync"}, facts
    assert _plans_in_zone(WRITE_SPACE, zone, tmp_path) >= 2, sorted(zone)


def _feature_spaces() -> dict:
    """The stress spaces of benchmarks/bench_screen_features.py (objective wall time, 18 candidates each)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_screen_features.py"
    spec = importlib.util.spec_from_file_location("bench_screen_features", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.SPACES


# Spaces where a first-order screen is wrong: slow-node episodes (the screen without them was
# 15 % optimistic), Weibull shape 0.6 on a new cluster (51 % before, 8.3 % pessimistic at 512 GPUs now) and one
# spare node with 12-hour repairs (99.7 % before, 5-13 % optimistic now); docs/planning.md. Each plan, on three
# seeds, must recommend a member of the true indifference zone (every candidate simulated 500 times).
@pytest.mark.slow
@pytest.mark.parametrize("name", ["episodes", "weibull_new", "spares"])
def test_feature_spaces_recommend_the_true_best(tmp_path, name):
    raw = {**_feature_spaces()[name], "name": name}
    zone, facts = true_indifference_zone(raw, simulate_every_candidate(raw))
    assert len(zone) < facts["fits"], facts  # the zone does not hold every candidate: a choice to get wrong
    assert _plans_in_zone(raw, zone, tmp_path) >= 2, (sorted(zone), facts)
