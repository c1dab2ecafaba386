"""Builders shared by the tests (not a test module): the small scenario, kernel parameters and failure
classes given as tuples, one kernel call, and TOML files."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mcsim.kernels import interface as mc
from mcsim.kernels.renewal import START_AGED, START_NEW, START_STATIONARY
from mcsim.model.block_law import short_block_law
from mcsim.model.stragglers import factor_law
from mcsim.scenario.config import dumps_toml

# A small, valid scenario: 64 GPUs, short training, one exponential GPU failure class.
SMALL_SCENARIO = {
    "name": "small",
    "model": {
        "params": 1.3e9,
        "layers": 24,
        "hidden": 2048,
        "seq_len": 2048,
        "tokens": 2e9,
        "global_batch": 512,
        "recompute": "selective",
    },
    "hardware": {"gpu": "A100-80GB", "gpus_per_node": 8},
    "parallelism": {"gpus": 64, "tp": 2, "pp": 2, "microbatch": 1},
    # §2's aggregate model: the closed forms the tests hold it to (the operator model, the default, has its own)
    "compute": {"efficiency": 0.5, "step_model": "aggregate"},
    "stragglers": {"sigma": 0.05},
    "failures": [{"name": "gpu", "scope": "gpu", "shape": 1.0, "mtbf_hours": 2000.0, "recovery_minutes": 10.0}],
    "checkpoint": {"strategy": "sync", "interval": {"iterations": 50}},
    "run": {"runs": 200, "seed": 7, "mode": "exact", "max_wall_days": 365.0},
}


# RunParams of a simple configuration, by subject.
KERNEL_DEFAULTS = {
    # 1 s iterations (0.9 s compute, 0.1 s exposed communication) on one rank, no stragglers
    **dict(iterations=1000, compute_time_s=0.9, comm_time_s=0.1, n_ranks=1.0, sigma=0.0, job_sigma=0.0),
    # a sync checkpoint every 100 iterations (10 s stall), 5 s loads from storage, no memory tier
    **dict(strategy=mc.STRATEGY_SYNC, checkpoint_every=100, checkpoint_stall_s=10.0, checkpoint_write_s=0.0),
    **dict(replicate_s=0.0, persist_every=1, load_s=5.0, load_memory_s=0.0),
    # no slow-node episodes; no spare pool (-1), limits far away
    **dict(episode_rate_per_s=0.0, episode_mean_s=1.0, episode_slowdown=1.0),
    **dict(spare_nodes=-1, max_wall_s=1e9, max_failures=10**6),
    # exact mode; fast mode's factor laws out of and in episodes: every iteration's factor 1
    **dict(fast=False, fast_min_block=1, factor_mean=1.0, factor_std=0.0),
    **dict(fast_min_block_episode=1, factor_mean_episode=1.0, factor_std_episode=0.0),
    # no restart parts, no throughput degradation
    **dict(restart_s=0.0, degradation_per_s=0.0, degradation_step_s=3600.0, degradation_max=1.0),
}


def kernel_params(**overrides) -> mc.RunParams:
    """RunParams of :data:`KERNEL_DEFAULTS` (1 s iterations, sync checkpoints), with overrides."""
    values = dict(KERNEL_DEFAULTS)
    if overrides.pop("is_async", False):
        values["strategy"] = mc.STRATEGY_ASYNC
    values.update(overrides)
    return mc.RunParams(**values)


def factor_fields(values: dict, min_block: int | None = None, min_block_episode: int | None = None) -> dict:
    """Fast mode's fields of RunParams for the ranks, sigma and episode slowdown in ``values``, as
    mcsim.model.preparation sets them: the iteration factor's law out of and in episodes and the block
    thresholds (the W1 rule's unless given)."""
    law = factor_law(values["n_ranks"], values["sigma"])
    episode = factor_law(values["n_ranks"], values["sigma"], floor=values.get("episode_slowdown", 1.0))
    return dict(
        fast_min_block=law.fast_min_block() if min_block is None else min_block,
        factor_mean=law.mean,
        factor_std=law.std,
        fast_min_block_episode=episode.fast_min_block() if min_block_episode is None else min_block_episode,
        factor_mean_episode=episode.mean,
        factor_std_episode=episode.std,
    )


def short_block_fields(values: dict) -> dict:
    """RunParams' short-block law for the ranks, sigma and checkpoint interval in ``values`` (as
    mcsim.model.preparation sets it: the interval's own law where it is below the threshold), or {}."""
    short = short_block_law(values["n_ranks"], values["sigma"], values["checkpoint_every"])
    if short is None:
        return {}
    return dict(short_block=short.block, **{f"short_block_c{j}": c for j, c in enumerate(short.coefficients)})


# The FailureClasses fields of the kinds of interruption and the recovery law, at their defaults.
KIND_DEFAULTS = {
    # fail-stop: no detection delay, no rollback beyond the last checkpoint
    **dict(kind=mc.KIND_FAIL_STOP, detect_s=0.0, rollback_checkpoints=0),
    # fixed recoveries needing no person, no bad replacements, fixed repairs
    **dict(recovery_sigma=0.0, manual_share=0.0, manual_s=0.0, bad_share=0.0, bad_mean_s=3600.0, repair_sigma=0.0),
    # every restart a full requeue (RunParams.restart_s)
    **dict(requeue_share=1.0),
    # no staffing calendar (team none); the others' defaults: 9-17 Monday to Friday from a Monday 00:00,
    # no response time, no on call (30 minutes when set); staff_holidays_s: a list of (from, until) pairs
    **dict(staff_team=mc.STAFF_NONE, staff_offset_s=0.0, staff_begin_s=9 * 3600.0, staff_end_s=17 * 3600.0),
    **dict(staff_days=0b11111, staff_response_s=0.0, staff_on_call=0, staff_on_call_s=1800.0),
    **dict(staff_on_call_sigma=0.0),
}


def failure_classes(classes: list[tuple]) -> mc.FailureClasses:
    """FailureClasses from tuples (units, shape, scale_s, recovery_s[, nodes_taken, memory_ok, repair_s[, start]]).

    ``start`` is "new" (the default here, all units new at t = 0), "stationary", or a fixed
    age of every unit in seconds. A ninth item, a dict, sets the fields of the kinds of
    interruption and the recovery law (``kind``, ``detect_s``, ``rollback_checkpoints``,
    ``recovery_sigma``, ``manual_share``, ``manual_s``, ``bad_share``, ``bad_mean_s``,
    ``repair_sigma``, ``requeue_share``, the ``staff_*`` calendar; default: fail-stop, fixed recovery, requeues,
    no staffing) and ``durations_s``, a list of measured recoveries in seconds (default none), and
    ``staff_holidays_s``, a list of ``(from, until)`` pairs in seconds (default none).
    """
    full = [tuple(c[:8]) + (1, 1, 0.0, "new")[min(len(c), 8) - 4 :] for c in classes]
    extras = [dict(KIND_DEFAULTS, **(c[8] if len(c) > 8 else {})) for c in classes]
    measured = [list(e.pop("durations_s", ())) for e in extras]
    holidays = [[s for pair in e.pop("staff_holidays_s", ()) for s in pair] for e in extras]
    holiday_width = max([2] + [len(h) for h in holidays])
    width = max([1] + [len(m) for m in measured])
    column = lambda k, dtype: np.array([c[k] for c in full], dtype=dtype)  # noqa: E731
    starts = {"new": START_NEW, "stationary": START_STATIONARY}
    return mc.FailureClasses(
        units=column(0, np.int64),
        shape=column(1, float),
        scale_s=column(2, float),
        recovery_s=column(3, float),
        nodes_taken=column(4, np.int64),
        memory_ok=column(5, np.int64),
        repair_s=column(6, float),
        start=np.array(
            [starts.get(c[7], START_AGED) if isinstance(c[7], str) else START_AGED for c in full], dtype=np.int64
        ),
        age_s=np.array([0.0 if isinstance(c[7], str) else c[7] for c in full], dtype=float),
        **{name: np.array([e[name] for e in extras], dtype=type(default)) for name, default in KIND_DEFAULTS.items()},
        durations_s=np.array([m + [0.0] * (width - len(m)) for m in measured], dtype=float).reshape(-1, width),
        durations_count=np.array([len(m) for m in measured], dtype=np.int64),
        staff_holidays_s=np.array([h + [np.inf] * (holiday_width - len(h)) for h in holidays], dtype=float).reshape(
            -1, holiday_width
        ),
    )


def run_kernel(
    params: mc.RunParams, classes: list[tuple], runs: int, seed: int = 0, first_run: int = 0, phases=None
) -> np.ndarray:
    """Kernel output for failure classes given as tuples (see :func:`failure_classes`).

    ``phases``: rows ``(first iteration, compute s, comm s)`` of the training phases (None: one phase)."""
    out = np.zeros((runs, mc.N_OUT))
    table = mc.no_phases() if phases is None else np.asarray(phases, dtype=float).reshape(-1, mc.N_PH)
    mc.simulate_runs(params, failure_classes(classes), table, seed, first_run, out)
    return out


def write_toml(raw: dict, path: Path) -> Path:
    """Write scenario tables to ``path`` as TOML."""
    path.write_text(dumps_toml(raw))
    return path
