"""Parameter draws of the ``[uncertain]`` inputs: evaluated per configuration, simulated as one table.

With ``run.draws = D`` every configuration of a sweep is simulated with each of the D
parameter sets of :func:`mcsim.uncertain.draw_values`. Run r of draw d uses the
kernel streams of global run ``draw_offset(d) + r`` (:func:`mcsim.uncertain.draw_offset`),
so a draw has the same parameter values and the same streams in every configuration.

Two ways to get there, with bit-identical results:

* **Draw tables** (:class:`DrawTables`, whenever every uncertain key is in
  :data:`TABLE_KEYS` and no interval is optimised): one configuration's D draws are
  evaluated together. The workload model (:func:`mcsim.workload.workload_arrays`) and
  the checkpoint transfers, strategy timings, job MTBF and interval
  (:mod:`mcsim.checkpointing`) take arrays over the draws; the kernel's parameters
  become one :class:`~mcsim.kernels.montecarlo.RunParams` of arrays (a
  :func:`~mcsim.kernels.montecarlo.params_table`) and the failure classes a 2-D table,
  and a task is a range of the configuration's ``D x runs`` rows (draw-major: row
  ``q`` is run ``q % runs`` of draw ``q // runs``) that
  :func:`~mcsim.kernels.montecarlo.simulate_runs_table` runs in one call, whatever
  draws it spans. Per draw in Python are only what holds scalars by design: the
  straggler law's quadrature (:func:`mcsim.stragglers.factor_law`, cached per sigma),
  the failure-class rows, and the light configuration each draw's energy, cost and
  CO2 outputs are computed from (:func:`with_values`: the sweep configuration with
  the drawn values set, not validated again; the values lie inside the keys' bounds
  by construction).
* **Per-draw configurations** (any other case): each (configuration, draw) is a
  configuration of its own (:func:`mcsim.scenario.config_with_values`, validated again)
  with its own tasks, as for a key whose value changes what the workload model is
  built from (model size and tokens, GPU overrides, the core clock) or an optimised
  interval (every draw has its own optimum).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence

import numpy as np
import xarray as xr

from mcsim.engine.tasks import KernelInputs, PreparedConfigs, Task, estimate_run, run_params
from mcsim.kernels import types as kernel
from mcsim.model.checkpointing import (
    CheckpointPlan,
    checkpoint_every,
    checkpoint_transfers,
    failure_classes,
    system_mtbf_s,
)
from mcsim.model.strategies import STRATEGIES
from mcsim.model.workload import (
    FEASIBLE,
    Layouts,
    Workload,
    configuration_problem,
    layouts_of,
    workload,
    workload_arrays,
)
from mcsim.scenario.config import Config, Scenario, config_with_values
from mcsim.scenario.uncertain import draw_offset, draw_values, input_variable_attrs

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


def table_key(key: str) -> bool:
    """Whether a draw table evaluates the uncertain key ``key`` (see :data:`TABLE_KEYS`)."""
    parts = key.split(".")
    return (f"failures.*.{parts[-1]}" if parts[0] == "failures" else key) in TABLE_KEYS


def with_values(cfg: Config, values: dict[str, object]) -> Config:
    """``cfg`` with the scenario keys ``values`` set (scalars or arrays over draws), not validated again.

    For the keys of :data:`TABLE_KEYS` only: none of them enters a derived field of a
    :class:`Config` or a check across fields.
    """
    sections: dict[str, object] = {}
    failures = list(cfg.failures)
    for key, value in values.items():
        parts = key.split(".")
        if parts[0] == "failures":
            i = next(i for i, f in enumerate(failures) if f.name == parts[1])
            failures[i] = dataclasses.replace(failures[i], **{parts[2]: value})
        else:
            section = sections.get(parts[0], getattr(cfg, parts[0]))
            sections[parts[0]] = dataclasses.replace(section, **{parts[1]: value})
    return dataclasses.replace(cfg, failures=tuple(failures), **sections)


def _repeated(lay: Layouts, count: int) -> Layouts:
    """``lay`` (one layout) repeated ``count`` times."""
    return Layouts(*(np.repeat(getattr(lay, f.name), count) for f in dataclasses.fields(Layouts)))


def _column(values, count: int) -> np.ndarray:
    return np.broadcast_to(np.asarray(values), (count,))


class DrawTable:
    """The D draws of one configuration evaluated together (see the module docstring).

    Parameters
    ----------
    cfg : Config
        The sweep configuration.
    keys : sequence of str
        The uncertain keys (all :func:`table_key`).
    values : ndarray, shape (D, len(keys))
        The drawn values.
    mode : {"fast", "exact"}
        Execution mode.
    """

    def __init__(self, cfg: Config, keys: Sequence[str], values: np.ndarray, mode: str) -> None:
        count = values.shape[0]
        self.configs = [with_values(cfg, {k: float(v) for k, v in zip(keys, row, strict=False)}) for row in values]
        arrays = with_values(cfg, {k: np.array(values[:, i], dtype=np.float64) for i, k in enumerate(keys)})
        wa = workload_arrays(arrays, _repeated(layouts_of([cfg]), count))
        structural = configuration_problem(cfg) is not None
        self.workloads = [
            workload(self.configs[d]) if structural or wa.code[d] != FEASIBLE else _workload_at(wa, d)
            for d in range(count)
        ]
        self.inputs: list[KernelInputs | None] = [None] * count
        plans = _checkpoint_plans(arrays, self.configs, wa, count)
        for d, wl in enumerate(self.workloads):
            if wl.feasible:
                self.inputs[d] = KernelInputs(run_params(self.configs[d], wl, plans[d], mode), wl, plans[d])

    @property
    def feasible(self) -> list[int]:
        """The feasible draws."""
        return [d for d, inputs in enumerate(self.inputs) if inputs is not None]


_WORKLOAD_FLOATS = (
    "model_flops",
    "hardware_flops",
    "t_comp_s",
    "bubble_s",
    "tp_comm_s",
    "pp_comm_s",
    "dp_comm_s",
    "memory_per_gpu_gb",
    "mfu_ideal",
    "intra_bytes_per_gpu",
    "inter_bytes_per_gpu",
)


def _workload_at(wa, d: int) -> Workload:
    """The :class:`Workload` of feasible draw ``d`` of ``wa`` (as :func:`mcsim.workload.workload` makes it)."""
    return Workload(
        True,
        "",
        "",
        int(wa.iterations[d]),
        int(wa.dp[d]),
        int(wa.microbatches[d]),
        *(float(getattr(wa, name)[d]) for name in _WORKLOAD_FLOATS),
    )


def _checkpoint_plans(arrays: Config, configs: list[Config], wa, count: int) -> list[CheckpointPlan]:
    """:func:`mcsim.checkpointing.checkpoint_plan` of every draw, the equations on arrays over the draws.

    ``arrays``: the configuration with the drawn keys as arrays; ``configs``: each draw's.
    Values of infeasible draws are meaningless (never used).
    """
    ck, gpus = arrays.checkpoint, arrays.parallelism.gpus
    size = arrays.model.params * ck.bytes_per_param
    write_gbps, read_gbps, transfers = checkpoint_transfers(arrays, gpus)
    timings = STRATEGIES[ck.strategy].timings(arrays, wa.iteration_time_s, transfers)
    stall, background, replicate, load_memory = (_column(x, count) for x in timings)
    with np.errstate(divide="ignore", invalid="ignore"):
        load = size / (read_gbps * 1e9)
        mtbf = _column(system_mtbf_s(arrays.failures, gpus, arrays.hardware.gpus_per_node), count)
        every = _column(checkpoint_every(ck.interval, stall, mtbf, wa.iteration_time_s, wa.iterations), count)
    size, write_gbps, read_gbps, load = (_column(x, count) for x in (size, write_gbps, read_gbps, load))
    return [
        CheckpointPlan(
            float(size[d]),
            float(write_gbps[d]),
            float(read_gbps[d]),
            stall[d],
            background[d],
            replicate[d],
            float(load[d]),
            load_memory[d],
            int(every[d]),
            float(mtbf[d]),
            failure_classes(configs[d]),
        )
        for d in range(count)
    ]


@dataclasses.dataclass(frozen=True)
class TableInputs:
    """What the kernel needs for any rows of one configuration's ``draws x runs`` (picklable).

    Row ``q`` is run ``q % runs`` of draw ``q // runs``, on the streams of global run
    ``first_run[q // runs] + q % runs``. ``params``/``classes``/``system_mtbf_s`` are those
    of the draw with the longest estimated run (for sizing kernel calls).
    """

    table: kernel.RunParams
    classes_table: kernel.FailureClasses
    first_run: np.ndarray
    runs: int
    params: kernel.RunParams
    classes: kernel.FailureClasses
    system_mtbf_s: float

    def simulate_rows(self, seed: int, start: int, stop: int, out: np.ndarray) -> None:
        """Kernel output of rows ``start .. stop - 1`` into ``out``."""
        rows = np.arange(start, stop, dtype=np.int64)
        draw = rows // self.runs
        kernel.simulate_runs_table(
            self.table, self.classes_table, draw, self.first_run[draw] + rows % self.runs, seed, out
        )


def table_inputs(table: DrawTable, first_run: np.ndarray, runs: int) -> TableInputs:
    """The kernel inputs of ``table`` (infeasible draws: those of a feasible one, never run)."""
    filler = table.inputs[table.feasible[0]]
    inputs = [filler if i is None else i for i in table.inputs]
    longest = max(inputs, key=lambda i: estimate_run(i).seconds)
    return TableInputs(
        kernel.params_table([i.params for i in inputs]),
        kernel.classes_table([i.classes for i in inputs]),
        np.asarray(first_run, dtype=np.int64),
        runs,
        longest.params,
        longest.classes,
        longest.system_mtbf_s,
    )


class DrawPrepared(PreparedConfigs):
    """:class:`mcsim.tasks.PreparedConfigs` of the simulated (configuration, draw) pairs from draw tables.

    Entry ``flat * D + d`` holds the workload and kernel inputs of draw d of sweep
    configuration ``flat``; a reported task names a sweep configuration and a range of its
    ``D x runs`` rows, and :meth:`of_task` gives it the configuration's :class:`TableInputs`.
    """

    def __init__(self, tables: list[DrawTable], first_run: np.ndarray, runs: int, mode: str) -> None:
        super().__init__([cfg for table in tables for cfg in table.configs], mode)
        count = len(first_run)
        self.tables = tables
        self._table_inputs: dict[int, TableInputs] = {}
        for flat, table in enumerate(tables):
            for d, cfg in enumerate(table.configs):
                self._workloads[flat * count + d] = (cfg, table.workloads[d])
                if table.inputs[d] is not None:
                    self._inputs[(flat * count + d, None)] = (cfg, table.inputs[d])
            if table.feasible:
                self._table_inputs[flat] = table_inputs(table, first_run, runs)

    def of_task(self, task: Task) -> TableInputs:
        """The draw table inputs of the sweep configuration ``task.config``."""
        return self._table_inputs[task.config]


class DrawPlan:
    """The parameter draws of a scenario's ``[uncertain]`` inputs (none when ``run.draws`` is 0).

    Configuration ``flat`` of the sweep with draw ``d`` is the simulated configuration
    ``flat * draws + d`` (C order of dims (sweep..., draw)).
    """

    def __init__(self, scenario: Scenario) -> None:
        run = scenario.run
        self.scenario, self.count, self.runs = scenario, run.draws, run.runs
        self.values = draw_values(scenario.uncertain, run.draws, run.design, run.seed)
        self.keys = [entry.key for entry in scenario.uncertain]
        self.first_runs = np.array(
            [draw_offset(d, self.runs, run.design, len(self.keys)) for d in range(self.count)], dtype=np.int64
        )
        self.tabled = (
            bool(self.count)
            and all(table_key(k) for k in self.keys)
            and not any(cfg.checkpoint.interval.kind == "optimize" for cfg in scenario.configs)
        )

    def configs(self) -> list[Config]:
        """Every (configuration, draw) pair as a configuration with the drawn values set (validated)."""
        return [
            config_with_values(self.scenario, flat, dict(zip(self.keys, self.values[d], strict=False)), f"draw {d}")
            for flat in range(len(self.scenario.configs))
            for d in range(self.count)
        ]

    def prepared(self, mode: str) -> DrawPrepared:
        """The draw tables of every sweep configuration (:attr:`tabled` scenarios)."""
        tables = [DrawTable(cfg, self.keys, self.values, mode) for cfg in self.scenario.configs]
        return DrawPrepared(tables, self.first_runs, self.runs, mode)

    def tasks(self, feasible: list[int], chunk_runs: int) -> list[Task]:
        """Tasks over the feasible simulated configurations ``feasible`` (``flat * draws + d``).

        Tabled: tasks over each sweep configuration's rows, ``chunk_runs // runs`` whole
        feasible draws at a time (consecutive ones), or, when ``chunk_runs < runs``, pieces
        of ``chunk_runs`` runs of one draw. Otherwise: the runs of every (configuration, draw)
        in chunks, on their draw's global runs.
        """
        if chunk_runs < 1:
            raise ValueError(f"chunk_runs must be >= 1, got {chunk_runs}")
        runs = self.runs
        if not self.tabled:
            first = [int(f) for f in self.first_runs]
            return [
                Task(c, first[c % self.count] + s, first[c % self.count] + min(runs, s + chunk_runs))
                for c in feasible
                for s in range(0, runs, chunk_runs)
            ]
        per_task = max(1, chunk_runs // runs)
        tasks: list[Task] = []
        groups: dict[int, list[list[int]]] = {}
        for c in feasible:
            flat, d = divmod(c, self.count)
            spans = groups.setdefault(flat, [])
            if spans and spans[-1][-1] == d - 1 and len(spans[-1]) < per_task:
                spans[-1].append(d)
            else:
                spans.append([d])
        for flat, spans in groups.items():
            for span in spans:
                if chunk_runs >= runs:
                    tasks.append(Task(flat, span[0] * runs, (span[-1] + 1) * runs))
                else:
                    tasks += [
                        Task(flat, span[0] * runs + s, span[0] * runs + min(runs, s + chunk_runs))
                        for s in range(0, runs, chunk_runs)
                    ]
        return tasks

    def pieces(self, task: Task) -> Iterator[tuple[int, int, int, int, int]]:
        """Where a task's rows go: ``(simulated configuration, first run, stop run, first row, stop row)``."""
        if not self.count:
            yield task.config, task.start, task.stop, 0, task.runs
            return
        if not self.tabled:
            first = int(self.first_runs[task.config % self.count])
            yield task.config, task.start - first, task.stop - first, 0, task.runs
            return
        runs = self.runs
        q = task.start
        while q < task.stop:
            d, r = divmod(q, runs)
            stop = min(task.stop, (d + 1) * runs)
            yield task.config * self.count + d, r, r + stop - q, q - task.start, stop - task.start
            q = stop

    def annotate(self, ds: xr.Dataset) -> xr.Dataset:
        """``ds`` with each input's drawn values as a variable along ``draw`` (named by its key)."""
        for i, entry in enumerate(self.scenario.uncertain):
            ds[entry.key] = xr.Variable(("draw",), self.values[:, i], input_variable_attrs(entry))
        if self.count:
            ds["draw"].attrs.update(long_name="parameter draw of the uncertain inputs", units="1")
            ds.attrs.update(
                draws=self.count,
                design=self.scenario.run.design,
                uncertain_inputs=" ".join(entry.key for entry in self.scenario.uncertain),
            )
        return ds
