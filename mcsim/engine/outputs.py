"""Stage 6 of :func:`mcsim.simulate`: the sweep's output arrays, filled as each configuration completes.

The outputs of one configuration are derived by :mod:`mcsim.model.run_outputs` (the one place);
this module holds them for the whole sweep (or for the configurations one part of a sharded sweep
holds), allocated once, and fills them as each configuration's last task comes in from the execution.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from mcsim.io.pages import ordinary_pages
from mcsim.io.variables import PER_CONFIG, PER_RUN
from mcsim.kernels import interface as kernel
from mcsim.model.preparation import Prepared
from mcsim.model.run_outputs import account_runs_into, configuration_outputs

# Per-configuration variables that are not float64.
_CONFIG_DTYPES = {"feasible": bool, "iterations": np.int64, "infeasible_reason": object}


class OutputArrays:
    """Every registered variable as an array of the sweep (or of a part's share), filled one configuration at a time.

    The arrays are allocated once, in their final dtype, by flat configuration index (C
    order); :meth:`add` turns a configuration's kernel rows into its outputs as soon as its
    last task is in, so the kernel rows of the whole sweep are never held beside the outputs
    (a 480-configuration sweep's peak memory above the baseline fell from 2.1 to 1.2 times its
    dataset when they stopped being held). Configurations not simulated (infeasible) are added
    with NaN runs. One part of a sharded sweep (``held``) has rows for the configurations it holds
    only, in increasing flat index; the others are never added.

    Parameters
    ----------
    prepared : Prepared
        The configurations, their workloads and kernel inputs (optimised intervals fixed).
    interval_ci_s : mapping
        Flat index -> 95 % interval of its optimised checkpoint interval, s.
    runs : int
        Runs per configuration.
    held : list of bool, optional
        By flat index: whether the part of the sweep simulated holds the configuration
        (``held`` of :class:`mcsim.scenario.draws.DrawPlan`); default every one.
    """

    def __init__(
        self,
        prepared: Prepared,
        interval_ci_s: Mapping[int, tuple[float, float]],
        runs: int,
        held: Sequence[bool] | None = None,
    ) -> None:
        mine = np.ones(len(prepared.configs), dtype=bool) if held is None else np.asarray(held, dtype=bool)
        n = int(mine.sum())
        self._row = np.where(mine, np.cumsum(mine) - 1, -1)  # flat index -> row of the arrays (-1: not held)
        self.prepared, self.interval_ci_s, self.runs = prepared, interval_ci_s, runs
        with ordinary_pages():  # written once, in order: huge pages would only cost compaction
            # Each variable an array of its own (one kept alone keeps only itself alive).
            self.per_run = {name: np.empty((n, runs), dtype=bool if name == "completed" else float) for name in PER_RUN}
            self._accounted = [self.per_run[name] for name in kernel.ACCOUNTED]  # the kernel's row order
            self.per_config = {name: np.empty(n, dtype=_CONFIG_DTYPES.get(name, float)) for name in PER_CONFIG}
            self._buffer = np.empty((kernel.N_ACCOUNTED, runs))  # one configuration's, see add()
        assert {*kernel.ACCOUNTED, "completed"} == set(PER_RUN), "every per-run variable is accounted once"
        self._added = np.zeros(n, dtype=bool)

    def add(self, flat: int, rows: np.ndarray) -> None:
        """Configuration ``flat``'s outputs from its kernel rows ``(runs, N_OUT)`` (NaN: not simulated)."""
        row = int(self._row[flat])
        assert row >= 0, "only the configurations held are added"
        prepared = self.prepared
        cfg, wl, inputs = prepared.configs[flat], prepared.workloads[flat], prepared.inputs[flat]
        plan = inputs.plan if inputs is not None and wl.feasible else None
        rows = np.ascontiguousarray(rows, dtype=np.float64)
        for name, value in configuration_outputs(cfg, wl, plan).items():
            self.per_config[name][row] = value
        if plan is None:  # infeasible: NaN everywhere, not completed
            self._buffer.fill(np.nan)
            self.per_run["completed"][row] = False
        else:
            # Into a small buffer, then copied row by row: written in place, a run's 35 stores would
            # lie a variable's size apart (a multiple of 2 KiB for 1,000 runs) and share two L1 cache
            # sets, 2.6 times slower than the copies (measured on a 480-configuration sweep).
            account_runs_into(cfg, wl, plan, rows, self._buffer)
            self.per_run["completed"][row] = rows[:, kernel.OUT_COMPLETED] == 1.0
        for values, kernel_row in zip(self._accounted, self._buffer, strict=True):
            values[row] = kernel_row
        low, high = self.interval_ci_s.get(flat, (math.nan, math.nan))
        self.per_config["checkpoint_interval_ci_low"][row] = low
        self.per_config["checkpoint_interval_ci_high"][row] = high
        self._added[row] = True

    def arrays(self, shape: tuple[int, ...]) -> dict[str, np.ndarray]:
        """The arrays in ``shape`` (the sweep's, or a part's ``(held configurations,)``; with draws, plus
        ``draw``; per run: plus ``runs``), once every configuration held is added (those not simulated
        as NaN runs: :func:`mcsim.engine.execution.completed_configurations` yields them)."""
        assert self._added.all(), "every configuration is added before the arrays are read"
        return {
            **{k: v.reshape(shape + (self.runs,)) for k, v in self.per_run.items()},
            **{k: v.reshape(shape) for k, v in self.per_config.items()},
        }
