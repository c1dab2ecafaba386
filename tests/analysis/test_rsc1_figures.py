"""Meta's RSC-1 study (Kokolis et al., arXiv 2410.21680) in `mcsim validate`: the scenario carries the
paper's numbers, its ETTR is the paper's ratio, and the simulated mean agrees with a renewal closed form."""

from __future__ import annotations

import math

import numpy as np
import pytest

import mcsim
from mcsim.analysis.rsc1_figures import RSC1_FIGURES, rsc1_ettr
from mcsim.analysis.validation import PUBLISHED
from mcsim.engine.simulate import simulate


def test_the_scenario_carries_the_papers_numbers():
    cfg = mcsim.load_scenario("rsc1-8k").base
    (node,) = cfg.failures
    # sec. IV: r_f = 6.50 failures per 1,000 node-days on RSC-1; u0 = 5 min; Observation 10: 8,000 GPUs,
    # a queue time of 1 minute after each failure, 30-minute checkpoints
    assert node.scope == "node" and node.mtbf_hours == pytest.approx(24.0 * 1000 / 6.50, rel=1e-4)
    assert node.recovery_minutes == 5.0 and node.requeue_share == 1.0  # every restart queues
    assert cfg.parallelism.gpus == 8000 and cfg.hardware.gpus_per_node == 8
    assert cfg.scheduler.queue_wait_minutes == 1.0 and cfg.scheduler.time_limit_hours == 0.0
    assert cfg.checkpoint.interval.kind == "minutes" and cfg.checkpoint.interval.value == 30.0
    assert cfg.stragglers.sigma == 0.0 and cfg.hardware.spare_nodes is None


def test_the_rows_score_the_published_figures():
    rows = [f for f in PUBLISHED if f.scenario == "rsc1-8k.toml"]
    assert len(rows) == len(RSC1_FIGURES) == 4
    # the model's figures (v1 Observation 10; sec. IV's 16,000-GPU job) scored in the 90 % interval
    assert [(f.low, f.criterion) for f in rows[:3]] == [(0.9, "interval"), (0.7, "interval"), (0.93, "interval")]
    assert all("model against model" in f.source for f in rows[:3])
    assert dict(rows[1].overrides)["parallelism.gpus"] == 16000 == dict(rows[2].overrides)["parallelism.gpus"]
    assert dict(rows[1].overrides)["checkpoint.interval"] == {"minutes": 60}
    assert dict(rows[2].overrides)["checkpoint.interval"] == {"minutes": 5}
    # "2048-4096 GPU job runs on RSC-1 show an average ETTR of over 0.9 at a one-hour assumed checkpoint interval"
    assert (rows[3].kind, rows[3].low, rows[3].high, rows[3].criterion) == ("bound", 0.9, 1.0, "mean")
    assert dict(rows[3].overrides)["parallelism.gpus"] == 4096


def test_ettr_is_the_papers_ratio_with_the_queue_in_the_wall_time():
    # ETTR = productive runtime / wall time, W = Q + R + U: U the catch-up since the last checkpoint and the
    # restart overhead (and the checkpoint overhead), Q the time waiting in the queue
    scenario = mcsim.load_scenario("rsc1-8k", runs=100, seed=3, mode="fast")
    ds = simulate(scenario, progress=False)
    wall = ds["wall_time"].values
    assert (ds["queue_wait_time"].values > 0).all() and (ds["queue_wait_time"] <= ds["recovery_time"]).all()
    unproductive = ds["lost_time"] + ds["recovery_time"] + ds["checkpoint_time"] + ds["straggler_time"]
    iteration_h = float(ds["iteration_time"]) / 3600.0  # at most a partial iteration at the end
    paper = 1.0 - unproductive.values / wall
    assert np.abs(rsc1_ettr(ds, scenario.base) - paper).max() < 2 * iteration_h / wall.min()


@pytest.mark.parametrize("queue_minutes", [1.0, 30.0])
def test_mean_ettr_agrees_with_the_renewal_closed_form(queue_minutes):
    """Failures strike at rate 1/M while training (M = node MTBF / nodes); a run from a checkpoint lasts
    T ~ Exp(M) and keeps T - (T mod D) of progress (D the checkpoint interval), so a cycle keeps
    E = D e^{-D/M} / (1 - e^{-D/M}) on average; then the restart overhead u0, which a failure during it starts
    again (Daly: M (e^{u0/M} - 1) in all), and the queue q (no failure strikes a job without nodes):
    ETTR = E / (M e^{u0/M} + q). To first order 1 - (q + u0 + D/2) / M: 0.905 for q = 1 min (the paper's 0.9)."""
    overrides = {"model.tokens": 1.7e14, "scheduler.queue_wait_minutes": queue_minutes}  # ~70 days: ~490 failures
    scenario = mcsim.load_scenario("rsc1-8k", overrides=overrides, runs=200, seed=5, mode="fast")
    ettr = rsc1_ettr(simulate(scenario, progress=False), scenario.base)
    m = 24.0 * 60.0 * 1000 / 6.50 / 1000  # job MTBF in minutes: 1,000 nodes
    d, u0 = 30.0, 5.0
    kept = d * math.exp(-d / m) / (1.0 - math.exp(-d / m))
    expected = kept / (m * math.exp(u0 / m) + queue_minutes)
    z = (ettr.mean() - expected) / (ettr.std(ddof=1) / math.sqrt(len(ettr)))
    assert abs(z) < 4, (ettr.mean(), expected, z)
