"""Fast mode's whole stretches of checkpoint cycles against exact mode, in distribution.

Fast mode advances the checkpoint cycles between two events (failure, restart,
episode change) as one normal draw of their factor sums (docs/model.md §4
"Execution modes"); exact mode draws every iteration. Given the per-block normal
law, whose error the W1 rule bounds (1e-4 of a block's mean, far below what
2,000 runs resolve), the two modes must agree in distribution: for every output
below, the means within 4 standard errors of their difference and a two-sample
Kolmogorov-Smirnov p-value above 0.001. The runs of the two modes use different
seeds (independent samples). The scenarios cover every strategy and regime of a
stretch: hundreds of checkpoints between failures; async writes shorter than the
interval, longer than it (every checkpoint waits), and about as long (cycles
walked); in_memory persisting regularly and skipping persists; episodes cutting
stretches; job factor, spares, censoring, Weibull shapes, stationary start.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from builders import factor_fields, failure_classes, kernel_params, short_block_fields
from naive_run import OUTPUT_NAMES
from scipy import stats

from mcsim.kernels import interface as mc
from mcsim.model.stragglers import factor_law

# 1 s iterations (kernel_params' 0.9 s compute, 0.1 s exposed communication) on 64 ranks, sigma 0.05,
# 20,000 iterations, a checkpoint every 10: 2,000 checkpoints per run.
BASE = dict(iterations=20_000, n_ranks=64.0, sigma=0.05, checkpoint_every=10, checkpoint_stall_s=2.0, load_s=30.0)
# The scenarios' async and in_memory checkpoints: their stalls, and in_memory's load from memory.
ASYNC = dict(strategy=mc.STRATEGY_ASYNC, checkpoint_stall_s=0.5)
IN_MEMORY = dict(strategy=mc.STRATEGY_IN_MEMORY, checkpoint_stall_s=0.3, load_memory_s=2.0)


def _gpu(mtbf_s: float, shape: float = 1.0, start: str = "new", recovery_s: float = 60.0) -> tuple:
    """64 GPU units whose system MTBF is ``mtbf_s`` (a failure takes one node; memory survives)."""
    scale = 64 * mtbf_s / math.gamma(1.0 + 1.0 / shape)
    return (64, shape, scale, recovery_s, 1, 1, 600.0, start)


def _domain(mtbf_s: float) -> tuple:
    """4 domains of 2 nodes (an event destroys a snapshot and its replica)."""
    return (4, 1.0, 4 * mtbf_s, 90.0, 2, 0, 900.0, "new")


SCENARIOS = {
    # A checkpoint every 3 iterations and a failure every ~10 minutes: the cycles walked before each
    # failure are short blocks drawn from their own law (docs/model.md §4 "Short blocks").
    "short_interval_law": (dict(checkpoint_every=3, iterations=6000), [_gpu(600.0)]),
    # ~300 checkpoints between failures, blocking writes.
    "sync_hundreds": (dict(), [_gpu(3000.0)]),
    # async, write (4 s) shorter than the interval (10 s): no waits.
    "async_light": (dict(ASYNC, checkpoint_write_s=4.0), [_gpu(3000.0)]),
    # async, write (25 s) slower than the interval: every checkpoint waits for the previous.
    "async_slower_than_interval": (dict(ASYNC, checkpoint_write_s=25.0), [_gpu(3000.0, shape=0.7, start="stationary")]),
    # gockpt-like: write as long as the mean block (sigma 0.3): waits half the time, cycles walked.
    "async_write_equals_block": (
        dict(
            strategy=mc.STRATEGY_ASYNC,
            checkpoint_stall_s=0.2,
            checkpoint_write_s=10 * (0.9 * factor_law(64, 0.3).mean + 0.1),
            sigma=0.3,
        ),
        [_gpu(2000.0)],
    ),
    # in_memory persisting every 8th snapshot regularly; domain failures fall back to storage.
    "in_memory_regular": (
        dict(IN_MEMORY, replicate_s=1.0, checkpoint_write_s=30.0, persist_every=8),
        [_gpu(3000.0), _domain(6000.0)],
    ),
    # in_memory whose storage write (150 s) outlasts persist_every cycles: persists skipped.
    "in_memory_slow_storage": (
        dict(IN_MEMORY, replicate_s=1.0, checkpoint_write_s=150.0, persist_every=4),
        [_gpu(2500.0), _domain(5000.0)],
    ),
    # in_memory whose replica (15 s) is slower than the interval: every snapshot waits.
    "in_memory_slow_replica": (
        dict(IN_MEMORY, replicate_s=15.0, checkpoint_write_s=40.0, persist_every=3),
        [_gpu(3000.0)],
    ),
    # Slow-node episodes cut stretches; job factor redrawn at restarts.
    "sync_episodes_job": (
        dict(episode_rate_per_s=1 / 1500.0, episode_mean_s=400.0, episode_slowdown=1.5, job_sigma=0.1),
        [_gpu(4000.0)],
    ),
    # async with spares, a wear-out class and censoring at the wall-clock limit.
    "async_spares_censored": (
        dict(ASYNC, checkpoint_write_s=6.0, spare_nodes=1, max_wall_s=21_000.0, job_sigma=0.05),
        [_gpu(2500.0), _gpu(8000.0, shape=3.0, start="stationary")],
    ),
    # Every kind of interruption (docs/model.md §3): lognormal recoveries, a share needing a
    # person; hangs; instabilities rolling back 3 checkpoints more; planned stops (fast mode keeps
    # the whole iterations of the block a stop interrupts); a restart's parts of 40 s.
    "sync_kinds": (
        dict(restart_s=40.0),
        [
            _gpu(6000.0) + (dict(recovery_sigma=1.0, manual_share=0.2, manual_s=300.0),),
            (1, 1.0, 5000.0, 30.0, 0, 1, 0.0, "new", dict(kind=mc.KIND_HANG, detect_s=120.0)),
            (1, 1.0, 7000.0, 60.0, 0, 1, 0.0, "new", dict(kind=mc.KIND_INSTABILITY, rollback_checkpoints=3)),
            (1, 1.0, 4000.0, 200.0, 0, 1, 0.0, "new", dict(kind=mc.KIND_PLANNED)),
        ],
    ),
}

# The kernel's output columns, in order (the slow twin names them).
COLUMNS = OUTPUT_NAMES
RUNS = 1000


def _params(overrides: dict, fast: bool) -> mc.RunParams:
    values = dict(BASE, **overrides)
    values.update(fast=fast, **factor_fields(values))
    if fast:
        values.update(short_block_fields(values))
    return kernel_params(**values)


def _run(name: str, fast: bool, seed: int) -> np.ndarray:
    overrides, classes = SCENARIOS[name]
    out = np.zeros((RUNS, mc.N_OUT))
    mc.simulate_runs(_params(overrides, fast), failure_classes(classes), mc.no_phases(), seed, 0, out)
    return out


def test_columns_are_the_kernels():
    assert COLUMNS == tuple(name for name, _ in mc.OUTPUT_COLUMNS)


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_fast_and_exact_agree_in_distribution(name):
    exact = _run(name, fast=False, seed=11)
    fast = _run(name, fast=True, seed=12)  # independent seeds: a two-sample comparison
    assert exact[:, mc.OUT_FAILURES].mean() > 2  # failures happen
    bad = []
    rounding = 1e-9 * exact[:, mc.OUT_WALL_S].mean()  # sums of seconds agree to this at best
    for col, column in enumerate(COLUMNS):
        # Sums of many stalls differ in their last digits between the modes (added one by one or
        # as n * stall); on the grid `rounding` they are the same atoms of the distribution.
        a, b = np.round(exact[:, col] / rounding) * rounding, np.round(fast[:, col] / rounding) * rounding
        if max(np.abs(a).max(), np.abs(b).max()) == 0.0:
            continue  # zero up to rounding (e.g. persistent stragglers without J or episodes)
        se = math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
        if se == 0.0:
            if a.mean() != b.mean():
                bad.append(f"{column}: constant {a.mean()} vs {b.mean()}")
            continue
        z = (b.mean() - a.mean()) / se
        ks = stats.ks_2samp(a, b).pvalue
        if abs(z) >= 4.0 or ks <= 1e-3:
            bad.append(f"{column}: exact {a.mean():.6g} fast {b.mean():.6g} z {z:.2f} KS p {ks:.2g}")
    assert not bad, "fast and exact differ:\n" + "\n".join(bad)


def test_scenarios_have_hundreds_of_checkpoints_between_failures():
    # The stretches this file is about: long runs of checkpoints between two failures.
    for name in ("sync_hundreds", "async_light", "async_slower_than_interval", "in_memory_regular"):
        out = _run(name, fast=True, seed=12)
        per_failure = out[:, mc.OUT_CHECKPOINTS].sum() / max(1.0, out[:, mc.OUT_FAILURES].sum())
        assert per_failure > 100, name
