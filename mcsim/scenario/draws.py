"""Stage 1 of :func:`mcsim.simulate`: the configurations with the draws of the ``[uncertain]`` inputs.

With ``run.draws = D`` every configuration of a sweep is simulated with each of the D
parameter sets of :func:`mcsim.scenario.uncertain.draw_values`. Run r of draw d uses the
kernel streams of global run ``draw_offset(d) + r`` (:func:`mcsim.scenario.uncertain.draw_offset`),
so a draw has the same parameter values and the same streams in every configuration.

Two ways to get there, with bit-identical results:

* **Draw tables** (:class:`mcsim.model.preparation.DrawTable`, prepared in stage 2; whenever every uncertain key is in
  :data:`TABLE_KEYS` and no interval is optimised): one configuration's D draws are
  evaluated together. The workload model (:func:`mcsim.model.workload.workload_arrays`) and
  the checkpoint transfers, strategy timings, job MTBF and interval
  (:mod:`mcsim.model.checkpointing`) take arrays over the draws; the kernel's parameters
  become one :class:`~mcsim.kernels.interface.RunParams` of arrays (a
  :func:`~mcsim.kernels.interface.params_table`) and the failure classes a 2-D table,
  and a task is a range of the configuration's ``D x runs`` rows (draw-major: row
  ``q`` is run ``q % runs`` of draw ``q // runs``) that
  :func:`~mcsim.kernels.interface.simulate_runs_table` runs in one call, whatever
  draws it spans. Per draw in Python are only what holds scalars by design: the
  straggler law's quadrature (:func:`mcsim.model.stragglers.factor_law`, cached per sigma),
  the failure-class rows, and the light configuration each draw's energy, cost and
  CO2 outputs are computed from (:func:`with_values`: the sweep configuration with
  the drawn values set, not validated again; the values lie inside the keys' bounds
  by construction; made here, with the configuration of arrays over the draws).
* **Per-draw configurations** (any other case): each (configuration, draw) is a
  configuration of its own (:func:`mcsim.scenario.config.config_with_values`, validated again)
  with its own tasks, as for a key whose value changes what the workload model is
  built from (model size and tokens, GPU overrides, the core clock) or an optimised
  interval (every draw has its own optimum).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from mcsim.scenario.config import Config, Scenario, config_with_values, in_fleet
from mcsim.scenario.limits import TimeEstimate, check_time
from mcsim.scenario.shard import Shard
from mcsim.scenario.uncertain import draw_offset, draw_values

# Preparation of one (configuration, draw), s: 11.9 ms measured on 2 loaded cores for
# capacity-planning-uncertain with 16,384 draws (stragglers.sigma drawn: the slowest, its factor
# law is integrated per draw); an upper bound for the estimate printed and checked first.
PREPARE_SECONDS_PER_DRAW = 0.012
# ... plus, in fast mode, the law of a short checkpoint interval's block (mcsim.model.block_law), once
# per distinct (G, sigma, K): 34-39 ms measured for the largest blocks (K = 64) on this 2-core
# machine, 1-8 ms for K <= 32. An upper bound: most pairs share a law or need none.
PREPARE_SECONDS_PER_SHORT_BLOCK_LAW = 0.045

# Uncertain keys a draw table evaluates: "section.field", or "failures.*.field" for every class.
# The others (model.*, hardware.*, compute.freq_mhz) change what the workload model is built
# from and take the per-draw configurations.
TABLE_KEYS = frozenset(
    {
        "compute.efficiency",
        "compute.freq_scaling_share",
        "parallelism.overlap_dp",
        "parallelism.overlap_tp",
        "network.intra_gbps",
        "network.inter_gbps",
        "network.latency_us",
        "network.intra_pj_per_bit",
        "network.inter_pj_per_bit",
        "stragglers.sigma",
        "stragglers.job_sigma",
        "stragglers.episode_rate_per_node_day",
        "stragglers.episode_hours",
        "stragglers.episode_slowdown",
        "failures.*.shape",
        "failures.*.mtbf_hours",
        "failures.*.recovery_minutes",
        "failures.*.repair_hours",
        "checkpoint.bytes_per_param",
        "checkpoint.write_gbps_per_node",
        "checkpoint.read_gbps_per_node",
        "checkpoint.storage_gbps",
        "checkpoint.async_overhead_s",
        "checkpoint.gockpt_stall_fraction",
        *(
            f"energy.{name}"
            for name in (
                "pue",
                "node_overhead_w",
                "busy_utilization",
                "wait_power_fraction",
                "power_freq_exponent",
                "storage_pj_per_bit",
            )
        ),
        *(
            f"cost.{name}"
            for name in (
                "gpu_hour_usd",
                "electricity_usd_per_kwh",
                "gpu_capex_usd",
                "node_capex_usd",
                "amortization_years",
            )
        ),
        *(f"carbon.{name}" for name in ("grid_g_per_kwh", "embodied_kg_per_gpu", "lifetime_years")),
    }
)


def preparation_estimate(scenario: Scenario) -> TimeEstimate:
    """The preparation of every (configuration, draw), estimated and checked against the time limit.

    Each (configuration, draw) gets its kernel parameters before any run, and its estimate with
    them; with 100,000 draws that took minutes before anything was printed, so the estimate is
    checked first (:func:`mcsim.scenario.limits.check_time`, key ``run.draws``).
    """
    simulated = len(scenario.configs) * scenario.run.draws
    per_pair = PREPARE_SECONDS_PER_DRAW + (PREPARE_SECONDS_PER_SHORT_BLOCK_LAW if scenario.run.mode == "fast" else 0.0)
    estimate = TimeEstimate(simulated * per_pair, 1, 0.0)
    check_time(estimate, scenario.source, "run.draws")
    return estimate


def table_key(key: str) -> bool:
    """Whether a draw table evaluates the uncertain key ``key`` (see :data:`TABLE_KEYS`)."""
    parts = key.split(".")
    return (f"failures.*.{parts[-1]}" if parts[0] == "failures" else key) in TABLE_KEYS


def tabled_draws(scenario: Scenario) -> bool:
    """Whether a scenario's draws are simulated as draw tables: every uncertain key is one a table evaluates
    (:data:`TABLE_KEYS`) and no configuration's interval is optimised (every draw has its own optimum)."""
    keys = [entry.key for entry in scenario.uncertain]
    return all(table_key(k) for k in keys) and not any(
        cfg.checkpoint.interval.kind == "optimize" for cfg in scenario.configs
    )


def with_values(cfg: Config, values: Mapping[str, Any]) -> Config:
    """``cfg`` with the scenario keys ``values`` set (scalars or arrays over draws), not validated again.

    For the keys of :data:`TABLE_KEYS` only: none of them enters a derived field of a
    :class:`Config` or a check across fields.
    """
    sections: dict[str, Any] = {}
    failures = list(cfg.failures)
    for key, value in values.items():
        parts = key.split(".")
        if parts[0] == "failures":
            i = next(i for i, f in enumerate(failures) if f.name == parts[1])
            if parts[2] == "mtbf_hours":  # the drawn value is the class's; the fleet's factor applies to it
                failures[i] = in_fleet(failures[i], cfg.hardware.failure_rate_factor, value)
            else:
                failures[i] = dataclasses.replace(failures[i], **{parts[2]: value})
        else:
            section = sections.get(parts[0], getattr(cfg, parts[0]))
            sections[parts[0]] = dataclasses.replace(section, **{parts[1]: value})
    return dataclasses.replace(cfg, failures=tuple(failures), **sections)


class DrawPlan:
    """Stage 1: the simulated configurations, with the parameter draws of the ``[uncertain]`` inputs.

    Configuration ``flat`` of the sweep with draw ``d`` is the simulated configuration
    ``flat * draws + d`` (C order of dims (sweep..., draw)); without draws (``run.draws`` 0)
    the simulated configurations are the sweep's.

    Parameters
    ----------
    scenario : Scenario
        The scenario.
    shard : Shard, optional
        Simulate only the sweep configurations of this part (:meth:`holds`).

    Attributes
    ----------
    scenario : Scenario
        The scenario.
    shard : Shard or None
        The part of the sweep simulated (None: all of it).
    held : list of bool or None
        By simulated configuration: whether :attr:`shard` holds it (None: no part, every one).
    count, runs : int
        Draws (0 without) and runs per (configuration, draw).
    values : ndarray, shape (count, len(keys))
        The drawn values; ``keys`` the uncertain keys.
    first_runs : ndarray of int
        Global run of each draw's run 0.
    tabled : bool
        Whether the draws are simulated as draw tables.
    configs : list of Config
        The simulated configurations: the sweep's without draws, else every (configuration, draw)
        pair with the drawn values set (validated again; tabled: :func:`with_values`, not validated).
    arrays : list of Config
        Tabled: each sweep configuration with the drawn keys as arrays over the draws; else empty.
    """

    def __init__(self, scenario: Scenario, shard: Shard | None = None) -> None:
        run = scenario.run
        self.scenario, self.shard, self.count, self.runs = scenario, shard, run.draws, run.runs
        self.values = draw_values(scenario.uncertain, run.draws, run.design, run.seed)
        self.keys = [entry.key for entry in scenario.uncertain]
        self.first_runs = np.array(
            [draw_offset(d, self.runs, run.design, len(self.keys)) for d in range(self.count)], dtype=np.int64
        )
        self.tabled = bool(self.count) and tabled_draws(scenario)
        self.arrays: list[Config] = []
        if not self.count:
            self.configs = list(scenario.configs)
        elif self.tabled:
            self.configs, self.arrays = self._tabled_configs()
        else:
            self.configs = [
                config_with_values(scenario, flat, dict(zip(self.keys, self.values[d], strict=False)), f"draw {d}")
                for flat in range(len(scenario.configs))
                for d in range(self.count)
            ]
        self.held = None if shard is None else [shard.holds(c // max(self.count, 1)) for c in range(len(self.configs))]

    def held_configs(self) -> list[int]:
        """The simulated configurations the part of the sweep holds (:attr:`held`; every one without a part)."""
        held = self.held
        return [c for c in range(len(self.configs)) if held is None or held[c]]

    def _tabled_configs(self) -> tuple[list[Config], list[Config]]:
        """Draw tables: every (configuration, draw) with its drawn values set, and each sweep configuration
        with the drawn keys as arrays over the draws (:func:`with_values`, not validated again)."""
        sweep = self.scenario.configs
        rows = [dict(zip(self.keys, map(float, row), strict=False)) for row in self.values]
        columns = {k: np.array(self.values[:, i], dtype=np.float64) for i, k in enumerate(self.keys)}
        return [with_values(cfg, values) for cfg in sweep for values in rows], [
            with_values(cfg, columns) for cfg in sweep
        ]
