"""The batch system's keys (docs/model.md §3 "The batch system"): from ``[scheduler]`` to the kernel's fields,
the queue laws and their overrides, the refusals, and a scenario's outputs with it."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
from builders import SMALL_SCENARIO

import mcsim
from mcsim.errors import ScenarioError
from mcsim.model.checkpointing import checkpoint_plan
from mcsim.model.preparation import run_params
from mcsim.model.restart import scheduler_params
from mcsim.model.workload import workload
from mcsim.scenario.config import scenario_from_dict
from mcsim.scenario.interruptions import SchedulerSection


def _raw(**scheduler) -> dict:
    raw = copy.deepcopy(SMALL_SCENARIO)
    raw["run"]["runs"] = 100
    if scheduler:
        raw["scheduler"] = scheduler
    return raw


def _params(raw: dict):
    cfg = scenario_from_dict(raw, "t.toml").base
    wl = workload(cfg)
    return run_params(cfg, wl, checkpoint_plan(cfg, wl), "exact")


def test_no_scheduler_is_no_limit_no_queue_no_release():
    p = _params(_raw())
    assert p.time_limit_s == math.inf
    assert (p.queue_s, p.queue_sigma, p.release_share, p.release_s, p.release_sigma) == (0.0, 0.0, 0.0, 0.0, 0.0)


def test_keys_reach_the_kernel_in_seconds():
    p = _params(_raw(time_limit_hours=20.0, queue="shared", release_share=0.25, release_hours=2.0, release_sigma=0.3))
    assert p.time_limit_s == 72_000.0
    assert (p.queue_s, p.queue_sigma) == (3600.0, 1.5)  # the shared centre's law, mean 60 min (an assumption)
    assert (p.release_share, p.release_s, p.release_sigma) == (0.25, 7200.0, 0.3)


@pytest.mark.parametrize(
    "keys,law",
    [
        (dict(queue="reservation"), (60.0, 0.5)),  # the scheduler's next pass: 1 min (Slurm, Kokolis Obs. 10)
        (dict(queue="reservation", queue_wait_minutes=5.0), (300.0, 0.5)),
        (dict(queue="shared", queue_wait_sigma=0.0), (3600.0, 0.0)),
        (dict(queue="shared", queue_wait_minutes=0.0), (0.0, 1.5)),
    ],
)
def test_queue_laws_and_their_overrides(keys, law):
    params = scheduler_params(SchedulerSection(**keys))
    assert (params["queue_s"], params["queue_sigma"]) == law


@pytest.mark.parametrize(
    "keys,key",
    [
        (dict(time_limit_hours=0.5), "scheduler.time_limit_hours"),  # the 50-iteration interval is in iterations:
        (dict(release_share=1.2, release_hours=1.0), "scheduler.release_share"),
        (dict(queue="shared", queue_wait_minutes=-1.0), "scheduler.queue_wait_minutes"),
        (dict(queue_wait_sigma=0.5), "scheduler.queue_wait_sigma"),
        (dict(release_share=0.2), "scheduler.release_hours"),
        (dict(release_sigma=0.5), "scheduler.release_share"),
    ],
)
def test_refusals_name_the_key(keys, key):
    raw = _raw(**keys)
    if key == "scheduler.time_limit_hours":
        raw["checkpoint"]["interval"] = {"minutes": 45}  # a cycle of 45 min and its write: longer than 30 min
    with pytest.raises(ScenarioError, match=key.replace(".", r"\.")):
        scenario_from_dict(raw, "t.toml")


def test_a_limit_longer_than_the_interval_in_minutes_is_accepted():
    raw = _raw(time_limit_hours=1.0)
    raw["checkpoint"]["interval"] = {"minutes": 45}
    assert scenario_from_dict(raw, "t.toml").base.scheduler.time_limit_hours == 1.0


def test_scenario_outputs_and_the_accounting_identity():
    # The small scenario in parts of 0.25 h with a reservation's queue: one or two stops a run,
    # the queue and release waits inside the recovery time, none of them without the table.
    raw = _raw(time_limit_hours=0.25, queue="reservation", release_share=0.5, release_hours=0.1)
    ds = mcsim.simulate(scenario_from_dict(raw, "t.toml"), progress=False)
    stops, queue, release, recovery = (
        ds[v].values for v in ("time_limit_stops", "queue_wait_time", "release_wait_time", "recovery_time")
    )
    assert ds["queue_wait_time"].attrs["units"] == "h" and ds["time_limit_stops"].attrs["units"] == "1"
    assert (stops >= 1).all()
    assert (queue > 0).all() and (queue + release + ds["restart_time"].values <= recovery + 1e-12).all()
    identity = (
        ds["wall_time"].values
        - recovery
        - ds["lost_time"].values
        - ds["checkpoint_time"].values
        - ds["straggler_time"].values
    )
    assert np.ptp(identity[ds["completed"].values == 1]) < 1e-9  # the iterations' ideal time, every run
    none = mcsim.simulate(scenario_from_dict(_raw(), "t.toml"), progress=False)
    for name in ("time_limit_stops", "queue_wait_time", "release_wait_time"):
        assert float(none[name].max()) == 0.0
